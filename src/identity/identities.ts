/** The identity directory (admin): list, show, update, delete; identities with last_seen from presence. */
import { membershipLeaveOps } from '../org/memberships.js';
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import type { Org } from '../org/service.js';
import { agentOps, readSeen, type Presence } from '../presence/presence.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { auditOps } from '../audit/audit.js';
import { accessEndedOp } from '../journal/journal.js';
import { readAll } from '../store/scan.js';
import { restriction, standingOf } from '../auth/standing.js';
import { adminSetOps } from './create.js';
import { indexes, keys, type ApiKey, type Identity, type Principal } from './model.js';
import type { Registry } from './registry.js';

export interface IdentityUpdate {
  name?: string;
  type?: string;
  capabilities?: string[];
  tags?: string[];
  is_admin?: boolean;
  agent_8004_id?: string | null;
}

export class Identities {
  constructor(
    private rt: Runtime,
    private presence: Presence,
    private org: Org,
    private registry: Registry,
  ) {}

  private get store() {
    return this.rt.store;
  }

  private async withLastSeen(items: Identity[]): Promise<Identity[]> {
    const seen = await this.presence.lastSeen(items.map((i) => i.id));
    return items.map((i, n) => (seen[n] !== undefined ? { ...i, last_seen: iso(seen[n]) } : i));
  }

  /** Newest first, like every other paged list. */
  async list(before: string | undefined, limit: number): Promise<Scanned<Identity>> {
    const page = await scanDesc<Identity>(this.store, [indexes.identities], {
      before,
      limit,
      load: async (ids) => (await this.store.getMany<Identity>(ids.map(keys.identity))).map((r) => r?.value),
      keep: () => true,
    });
    return { ...page, items: await this.withLastSeen(page.items) };
  }

  async get(id: string): Promise<Identity> {
    const rec = await this.store.get<Identity>(keys.identity(id));
    if (!rec) throw new AppError('IDENTITY_NOT_FOUND');
    return (await this.withLastSeen([rec.value]))[0];
  }

  async update(admin: Principal, id: string, body: IdentityUpdate): Promise<Identity> {
    if (body.agent_8004_id) {
      const cur = await this.get(id);
      if (body.agent_8004_id !== cur.agent_8004_id) await this.registry.assertOwner(body.agent_8004_id, cur.wallet_address, 'IDENTITY_VALIDATION_FAILED');
    }
    return this.rt.retry(async () => {
      const cur = await this.store.get<Identity>(keys.identity(id));
      if (!cur) throw new AppError('IDENTITY_NOT_FOUND');
      const old = cur.value;
      const next: Identity = { ...old, ...definedOf(body), updated_at: iso() };
      const ops: Op[] = [{ op: 'put', key: keys.identity(id), value: next, expect: cur.version }];
      if (next.name.toLowerCase() !== old.name.toLowerCase()) {
        if (await this.store.get(keys.identityName(next.name))) throw new AppError('IDENTITY_VALIDATION_FAILED', `An identity named "${next.name}" exists`, { field: 'name', reason: 'taken' });
        ops.push({ op: 'del', key: keys.identityName(old.name) }, { op: 'put', key: keys.identityName(next.name), value: { id }, expect: 0 });
      }
      if ((next.type === 'agent') !== (old.type === 'agent')) ops.push(...agentOps(id, next.type === 'agent', await readSeen(this.store, id)));
      if (next.is_admin && !old.is_admin) assertMayMakeAdmin(admin);
      if (next.is_admin !== old.is_admin) ops.push(...(await adminSetOps(this.store, (ids) => (next.is_admin ? [...ids, id] : ids.filter((x) => x !== id)))));
      const changed = Object.keys(body).filter((k) => JSON.stringify(body[k as keyof IdentityUpdate]) !== JSON.stringify(old[k as keyof Identity]));
      ops.push(...auditOps({ actor: admin.identity.id, action: 'identity.update', target: id, requestId: admin.requestId, details: { changed } }));
      return { result: next, ops };
    });
  }

  /**
   * Deletes the identity in one commit (record, name, wallet, keys revoked, the membership's move to removed
   * through its kind's ops, admin set, audit entry, access ended), then ends its fills and ring memberships through the org service. Its signals stay.
   */
  async delete(admin: Principal, id: string): Promise<Identity> {
    const gone = await this.rt.retry(async () => {
      const cur = await this.store.get<Identity>(keys.identity(id));
      if (!cur) throw new AppError('IDENTITY_NOT_FOUND');
      const identity = cur.value;
      const keyIds = await readAll(this.store, indexes.apiKeysOf(id));
      const apiKeys = await this.store.getMany<unknown>(keyIds.map(keys.apiKey));
      const ops: Op[] = [
        { op: 'del', key: keys.identity(id), expect: cur.version },
        { op: 'del', key: keys.identityName(identity.name) },
        { op: 'index', index: indexes.identities, member: id, remove: true },
        ...apiKeys.flatMap((k): Op[] => (k && !(k.value as ApiKey).revoked ? [{ op: 'put', key: keys.apiKey((k.value as ApiKey).id), value: { ...(k.value as ApiKey), revoked: true }, expect: k.version }] : [])),
        ...auditOps({ actor: admin.identity.id, action: 'identity.delete', target: id, requestId: admin.requestId, details: { name: identity.name, keys_revoked: keyIds.length } }),
        // before the membership's own entries: the identity's sockets close as deleted (key revoked)
        accessEndedOp(id, 'deleted'),
        ...(await membershipLeaveOps(this.rt, id, admin.requestId)),
      ];
      if (identity.wallet_address) ops.push({ op: 'del', key: keys.wallet(identity.wallet_address) });
      if (identity.is_admin) ops.push(...(await adminSetOps(this.store, (ids) => ids.filter((x) => x !== id))));
      if (identity.type === 'agent') ops.push(...agentOps(id, false, await readSeen(this.store, id)));
      return { result: identity, ops };
    });
    await this.leaveOrg(id, admin);
    return gone;
  }

  private async leaveOrg(id: string, admin: Principal): Promise<void> {
    for (const fill of await this.org.listFills({ identity_id: id })) await this.org.deleteFill(fill.id, admin).catch(ignoreGone('ORG_FILL_NOT_FOUND'));
    const { rings } = await this.org.placesOf(id);
    for (const ringId of rings) {
      const ring = await this.org.ring(ringId).catch(ignoreGone('ORG_RING_NOT_FOUND'));
      if (ring) await this.org.updateRing(ringId, { members: ring.members.filter((m) => m !== id) }, admin).catch(ignoreGone('ORG_RING_NOT_FOUND'));
    }
  }
}

/** Making an admin lends admin rights to the identity's keys, whatever their scopes: only an unscoped key may. */
function assertMayMakeAdmin(admin: Principal): void {
  const scope = restriction(standingOf(admin.key));
  if (scope) throw new AppError('AUTH_SCOPE_DENIED', 'A scoped key may not make an admin: the new admin’s keys would reach beyond it', { scope });
}

/** a concurrent delete of the same fill or ring already did the work */
const ignoreGone = (code: string) => (e: unknown) => {
  if (e instanceof AppError && e.code === code) return undefined;
  throw e;
};

function definedOf<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
