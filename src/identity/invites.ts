/** Invites: bootstrap while the instance has no identity, admin-only afterwards; redemption is one atomic commit. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId, secretToken } from '../ids.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { issueKey } from '../auth/keys.js';
import { ORG_LOG, type OrgLogEntry } from '../org/log.js';
import { indexes, keys, type Company, type Identity, type Invite, type Membership, type Principal } from './model.js';

export const IDENTITY_TYPES = ['human', 'agent'] as const;

export interface InviteCreate {
  name: string;
  type: string;
  is_admin?: boolean;
}

export interface InviteRedeem {
  code: string;
  name: string;
  type: string;
  capabilities?: string[];
  tags?: string[];
}

export class Invites {
  constructor(private rt: Runtime) {}

  private get store() {
    return this.rt.store;
  }

  /** Without a principal this is the bootstrap path: allowed only while no identity exists. */
  async create(principal: Principal | undefined, body: InviteCreate): Promise<Invite> {
    if (!principal) {
      const [boot, count] = await Promise.all([this.store.get(keys.bootstrap), this.store.count(indexes.identities)]);
      if (boot || count > 0) throw new AppError('AUTH_KEY_MISSING', 'The instance is bootstrapped: creating invites needs an admin key');
    } else if (!principal.identity.is_admin) throw new AppError('AUTH_ADMIN_REQUIRED');
    const invite: Invite = {
      id: newId(),
      code: secretToken('inv_', 18),
      name: body.name,
      type: body.type,
      is_admin: principal ? body.is_admin === true : true,
      created_by: principal?.identity.id ?? null,
      created_at: iso(),
      redeemed_by: null,
      redeemed_at: null,
    };
    const res = await this.store.commit([
      { op: 'put', key: keys.invite(invite.code), value: invite, expect: 0 },
      { op: 'index', index: indexes.invites, member: `${invite.id}:${invite.code}` },
    ]);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'invite code collision');
    return invite;
  }

  async redeem(body: InviteRedeem): Promise<{ identity: Identity; api_key: string }> {
    return this.rt.retry(async () => {
      const [inv, company, nameTaken, boot] = await this.store.getMany<unknown>([keys.invite(body.code), keys.company, keys.identityName(body.name), keys.bootstrap]);
      if (!inv) throw new AppError('INVITE_NOT_FOUND');
      const invite = inv.value as Invite;
      if (invite.redeemed_by) throw new AppError('INVITE_ALREADY_REDEEMED');
      // Only one bootstrap invite can ever be redeemed, however many were minted while the instance was empty.
      if (!invite.created_by && boot) throw new AppError('INVITE_ALREADY_REDEEMED', 'The instance is already bootstrapped');
      if (nameTaken) throw new AppError('INVITE_VALIDATION_FAILED', `An identity named "${body.name}" exists`, { field: 'name', reason: 'taken' });
      const now = iso();
      const identity: Identity = {
        id: newId(),
        name: body.name,
        type: body.type,
        wallet_address: null,
        agent_8004_id: null,
        capabilities: body.capabilities ?? [],
        tags: body.tags ?? [],
        is_admin: invite.is_admin,
        reputation: { score: 0, feedback_count: 0, fetched_at: null },
        created_at: now,
        updated_at: now,
        last_seen: now,
      };
      const key = issueKey(identity.id);
      const companyRec = company?.value as Company | undefined;
      const org: Company = companyRec ?? { id: newId(), name: 'default', created_at: now };
      const membership: Membership = { id: newId(), identity_id: identity.id, company_id: org.id, status: 'active', claw_type: null, created_at: now, updated_at: now };
      const ops: Op[] = [
        { op: 'put', key: keys.invite(invite.code), value: { ...invite, redeemed_by: identity.id, redeemed_at: now }, expect: inv.version },
        { op: 'put', key: keys.identity(identity.id), value: identity, expect: 0 },
        { op: 'put', key: keys.identityName(identity.name), value: { id: identity.id }, expect: 0 },
        { op: 'index', index: indexes.identities, member: identity.id },
        { op: 'put', key: keys.membership(identity.id), value: membership, expect: 0 },
        ...key.ops,
        // the outbox: webhooks hear of the join from the commit that made it
        { op: 'append', log: ORG_LOG, entry: { type: 'identity.joined', at: now, identity: { id: identity.id, name: identity.name, type: identity.type, is_admin: identity.is_admin, created_at: now } } satisfies OrgLogEntry },
      ];
      if (!companyRec) ops.push({ op: 'put', key: keys.company, value: org, expect: 0 });
      if (!invite.created_by) ops.push({ op: 'put', key: keys.bootstrap, value: { identity_id: identity.id, at: now }, expect: 0 });
      return { ops, result: { identity, api_key: key.plain } };
    });
  }
}
