/**
 * Memberships: one actor per identity (actor id = identity id, so authentication reads it in the same
 * round trip as the identity), found by its own id through a `membership-id:` record. One central claw
 * per org is a unique record the actor's state claims (`uniques`), so two concurrent claims cannot both
 * commit. Every status or claw-type change appends `membership.changed` to the push journal in its commit
 * (webhooks hear of it); leaving `active` also appends the identity's access-ended entry, on which its own
 * sockets and streams close (the one access-loss mechanism, docs/realtime.md).
 */
import { membershipMachine, MEMBERSHIP_STATUS_EVENT, type ClawType, type MembershipContext, type MembershipStatus } from '../../actors/membership.js';
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import { accessEndedEntry, JOURNAL_LOG, type EventEntry } from '../journal/journal.js';
import { actorKey, type ActorKind, type ActorRecord, type Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import type { Op, Store, Versioned } from '../store/port.js';
import { forEachPage, scanDesc, type Scanned } from '../store/scan.js';
import { indexes as identityIndexes, keys, type Company, type Identity, type Membership, type Principal } from '../identity/model.js';
import { auditOps } from '../audit/audit.js';

export const MEMBERSHIP = 'membership';
export const membershipIndexes = { all: 'memberships', byStatus: (s: string) => `memberships:status:${s}` };
const idKey = (membershipId: string) => `membership-id:${membershipId}`;
export const CENTRAL_CLAW_KEY = 'org:central-claw';

const member = (c: MembershipContext) => `${c.id}|${c.identity_id}`;
const identityOfMember = (m: string) => m.slice(m.indexOf('|') + 1);

export const membershipView = (r: ActorRecord<MembershipContext>): Membership => ({ ...r.context, status: r.value as MembershipStatus });

export const membershipKind: ActorKind<MembershipContext> = {
  name: MEMBERSHIP,
  machine: membershipMachine,
  notFound: 'ORG_MEMBERSHIP_NOT_FOUND',
  invalid: 'ORG_MEMBERSHIP_INVALID_TRANSITION',
  indexes: (r) => [
    [membershipIndexes.all, member(r.context)],
    [membershipIndexes.byStatus(r.value), member(r.context)],
  ],
  timers: () => [],
  uniques: (r) => (r.context.claw_type === 'central' && r.value !== 'removed' ? [{ key: CENTRAL_CLAW_KEY, code: 'ORG_CENTRAL_CLAW_EXISTS' }] : []),
  journal: (r, prev) => {
    if (!prev) return undefined;
    const m = membershipView(r);
    const entry: EventEntry = { type: 'membership.changed', subject: 'membership', data: { ...m, previous_status: prev.value, previous_claw_type: prev.context.claw_type }, audience: { identities: [m.identity_id] } };
    // leaving active ends the identity's access in the same commit, whoever sent the event
    const ended = prev.value === 'active' && r.value !== 'active' ? [{ log: JOURNAL_LOG, entry: accessEndedEntry(m.identity_id, r.value as 'suspended' | 'removed') }] : [];
    return [{ log: JOURNAL_LOG, entry }, ...ended];
  },
};

/**
 * The ops that end an identity's membership as `removed`, for the commit that deletes the identity (which
 * appends its own access-ended entry). With no move to make, a check that the record is still as read, so a
 * membership reinstated meanwhile fails the commit and the caller plans again.
 */
export async function membershipLeaveOps(rt: Runtime, identityId: string, requestId?: string): Promise<Op[]> {
  const cur = await rt.load<MembershipContext>(MEMBERSHIP, identityId);
  const move = cur && rt.moveOps(MEMBERSHIP, identityId, cur, { type: 'REMOVE' }, requestId);
  return move ? move.ops : [{ op: 'check', key: actorKey(MEMBERSHIP, identityId), expect: cur?.version ?? 0 }];
}

/** The ops that create an identity's membership (in the identity's own commit), without a runtime at hand. */
export function membershipCreateOps(identityId: string, company: Company, now = iso()): Op[] {
  return membershipCreate(identityId, company, now).ops;
}

function membershipCreate(identityId: string, company: Company, now = iso()) {
  const rec: ActorRecord<MembershipContext> = { value: 'active', context: { id: newId(), identity_id: identityId, company_id: company.id, claw_type: null, created_at: now, updated_at: now } };
  const ops: Op[] = [
    { op: 'put', key: actorKey(MEMBERSHIP, identityId), value: rec, expect: 0 },
    { op: 'put', key: idKey(rec.context.id), value: { identity_id: identityId }, expect: 0 },
    ...membershipKind.indexes(rec).map(([index, m]): Op => ({ op: 'index', index, member: m })),
  ];
  return { rec, ops };
}

/** A stored membership record (as authentication reads it) in the interface's shape. */
export const membershipOf = (stored: unknown): Membership | undefined => (stored ? membershipView(stored as ActorRecord<MembershipContext>) : undefined);

export async function memberCounts(store: Store) {
  const [active, suspended, removed] = await Promise.all((['active', 'suspended', 'removed'] as const).map((s) => store.count(membershipIndexes.byStatus(s))));
  return { total: active + suspended + removed, active, suspended, removed };
}

export class Memberships {
  constructor(private rt: Runtime) {}

  private get store() {
    return this.rt.store;
  }

  list(before: string | undefined, limit: number): Promise<Scanned<Membership>> {
    return scanDesc<Membership>(this.store, [membershipIndexes.all], {
      before,
      limit,
      load: async (members) => (await this.rt.loadMany<MembershipContext>(MEMBERSHIP, members.map(identityOfMember))).map((r) => (r ? membershipView(r) : undefined)),
      keep: () => true,
    });
  }

  /** For an identity that has none (one per identity). */
  async create(by: Principal, identityId: string): Promise<Membership> {
    const done = committedEffect<Membership>(by);
    if (done) return done;
    const [identity, existing, company] = await this.store.getMany<unknown>([keys.identity(identityId), actorKey(MEMBERSHIP, identityId), keys.company]);
    if (!identity) throw new AppError('IDENTITY_NOT_FOUND', undefined, { field: 'identity_id' });
    if (existing) throw new AppError('ORG_MEMBERSHIP_DUPLICATE');
    if (!company) throw new AppError('ORG_NOT_FOUND');
    const { rec, ops } = membershipCreate((identity.value as Identity).id, company.value as Company);
    const res = await this.store.commit([...ops, ...effectOps(by, membershipView(rec))]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('ORG_MEMBERSHIP_DUPLICATE');
    return membershipView(rec);
  }

  private async identityOf(membershipId: string): Promise<string> {
    const ref = await this.store.get<{ identity_id: string }>(idKey(membershipId));
    if (!ref) throw new AppError('ORG_MEMBERSHIP_NOT_FOUND');
    return ref.value.identity_id;
  }

  /** Moving to the status it already has changes nothing and answers it. */
  /** Audited with the admin who changed it: a suspension stops an agent's work. */
  async setStatus(by: Principal, membershipId: string, status: MembershipStatus): Promise<Membership> {
    const identityId = await this.identityOf(membershipId);
    const cur = await this.rt.load<MembershipContext>(MEMBERSHIP, identityId);
    if (cur?.value.value === status) return membershipView(cur.value);
    const extra = () => auditOps({ actor: by.identity.id, action: 'membership.status', target: membershipId, requestId: by.requestId, details: { identity_id: identityId, from: cur?.value.value ?? null, to: status } });
    const done = await this.rt.send<MembershipContext>(MEMBERSHIP, identityId, { type: MEMBERSHIP_STATUS_EVENT[status] }, { requestId: by.requestId, extra });
    return membershipView(done!.record);
  }

  async setClawType(by: Principal, membershipId: string, clawType: ClawType): Promise<Membership> {
    const identityId = await this.identityOf(membershipId);
    const cur = await this.rt.load<MembershipContext>(MEMBERSHIP, identityId);
    if (cur && cur.value.context.claw_type === clawType) return membershipView(cur.value);
    const done = await this.rt.send<MembershipContext>(MEMBERSHIP, identityId, { type: 'SET_CLAW_TYPE', claw_type: clawType }, { requestId: by.requestId });
    return membershipView(done!.record);
  }
}

/**
 * Before the membership actor (commit 27e63e9) a membership was a plain record `membership:<identity id>`
 * holding the Membership itself, with no index, no id record and no central-claw claim. Startup moves
 * each one an identity still has into the actor form and deletes it; a marker record skips the walk on
 * later starts. Idempotent: an actor already there wins and the old record is only dropped.
 */
const legacyKey = (identityId: string) => `membership:${identityId}`;
const LEGACY_DONE = 'migration:membership-actor';

export async function migrateLegacyMemberships(rt: Runtime): Promise<number> {
  if (await rt.store.get(LEGACY_DONE)) return 0;
  let moved = 0;
  await forEachPage(rt.store, identityIndexes.identities, async (ids) => {
    const rows = await rt.store.getMany<Membership>(ids.map(legacyKey));
    for (const [n, row] of rows.entries()) if (row && (await migrateOne(rt, ids[n], row))) moved++;
  });
  await rt.store.commit([{ op: 'put', key: LEGACY_DONE, value: { at: iso(), moved } }]);
  return moved;
}

async function migrateOne(rt: Runtime, identityId: string, row: Versioned<Membership>): Promise<boolean> {
  const drop: Op = { op: 'del', key: legacyKey(identityId), expect: row.version };
  if (await rt.load(MEMBERSHIP, identityId)) {
    await rt.store.commit([drop]);
    return false;
  }
  const { status, ...context } = row.value;
  const ops = (claw: ClawType | null): Op[] => [
    ...rt.createOps<MembershipContext>(MEMBERSHIP, identityId, { value: status, context: { ...context, claw_type: claw } }),
    { op: 'put', key: idKey(context.id), value: { identity_id: identityId }, expect: 0 },
    drop,
  ];
  const res = await rt.store.commit(ops(context.claw_type as ClawType | null));
  // a second central claw from before the rule existed keeps its membership without the claim
  if (!res.ok && res.conflict === CENTRAL_CLAW_KEY) return (await rt.store.commit(ops(null))).ok;
  return res.ok;
}

