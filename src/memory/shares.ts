/**
 * Shares grant read access to a namespace to a role, a ring, an identity, or a peer org, optionally until
 * an expiry. Each is indexed by its grantee and by its namespace in the same commit, so an ACL decision
 * reads only the shares made to the caller's own places, and an event's audience only its namespace's.
 */
import { iso, now } from '../clock.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Org } from '../org/service.js';
import type { Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { canonicalNamespace, type Grants, type Places } from './acl.js';
import { forEachPage, loadAll, readAll } from '../store/scan.js';
import type { Op, Store } from '../store/port.js';
import { memoryIndexes, memoryKeys } from './model.js';

const INDEXED = 'migration:memory-shares-v1';

export interface Share {
  id: string;
  namespace: string;
  grantee_type: 'role' | 'ring' | 'identity' | 'org';
  /** role or ring name (lower-cased), identity id, or peer org id */
  grantee: string;
  /** a role or ring grantee's id when shared: a role made again under the name is not granted */
  grantee_id?: string;
  expires_at: string | null;
  created_by: string;
  created_at: string;
}

export interface ShareBody {
  namespace: string;
  grantee_type: Share['grantee_type'];
  grantee: string;
  expires_at?: string;
}

export class Shares implements Grants {
  constructor(
    private rt: Runtime,
    private org: Pick<Org, 'roleByName' | 'ringByName'>,
  ) {}

  async create(p: Principal, b: ShareBody): Promise<Share> {
    const done = committedEffect<Share>(p);
    if (done) return done;
    if (b.expires_at !== undefined && Date.parse(b.expires_at) <= now()) throw new AppError('MEMORY_VALIDATION_FAILED', 'expires_at must be in the future', { field: 'expires_at', reason: 'past' });
    const share: Share = {
      id: newId(),
      namespace: canonicalNamespace(b.namespace),
      grantee_type: b.grantee_type,
      grantee: b.grantee_type === 'role' || b.grantee_type === 'ring' ? b.grantee.toLowerCase() : b.grantee,
      expires_at: b.expires_at ? iso(Date.parse(b.expires_at)) : null,
      created_by: p.identity.id,
      created_at: iso(),
    };
    const place = b.grantee_type === 'role' ? await this.org.roleByName(share.grantee) : b.grantee_type === 'ring' ? await this.org.ringByName(share.grantee) : undefined;
    if (place) share.grantee_id = place.id;
    const res = await this.rt.store.commit([{ op: 'put', key: memoryKeys.share(share.id), value: share, expect: 0 }, { op: 'index', index: memoryIndexes.shares, member: share.id }, ...shareIndexOps(share), ...effectOps(p, share)]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'share id collision');
    return share;
  }

  /** Every share, read from the index in pages to its end. */
  list(): Promise<Share[]> {
    return loadAll<Share>(this.rt.store, memoryIndexes.shares, memoryKeys.share);
  }

  async remove(id: string): Promise<Share> {
    const cur = await this.rt.store.get<Share>(memoryKeys.share(id));
    if (!cur) throw new AppError('MEMORY_SHARE_NOT_FOUND', `No share ${id}`, { id });
    const r = await this.rt.store.commit([
      { op: 'del', key: memoryKeys.share(id), expect: cur.version },
      { op: 'index', index: memoryIndexes.shares, member: id, remove: true },
      ...shareIndexOps(cur.value, true),
    ]);
    if (!r.ok) throw new AppError('MEMORY_SHARE_NOT_FOUND', `No share ${id}`, { id });
    return cur.value;
  }

  async granteesOf(ns: string): Promise<{ identities: string[]; roles: string[]; rings: string[] }> {
    const live = await this.live([memoryIndexes.sharesOf(ns)]);
    const of = (type: Share['grantee_type']) => live.filter((s) => s.grantee_type === type).map((s) => s.grantee);
    return { identities: of('identity'), roles: of('role'), rings: of('ring') };
  }

  async sharedWith(p: Principal, places: Places): Promise<string[]> {
    const to = (type: Share['grantee_type'], grantee: string) => memoryIndexes.sharesTo(type, grantee);
    const indexes =
      p.peer !== undefined ? [to('org', p.peer)] : [to('identity', p.identity.id), ...[...places.roles].map((r) => to('role', r)), ...[...places.rings].map((r) => to('ring', r))];
    const held = (s: Share) => s.grantee_id === undefined || (s.grantee_type !== 'role' && s.grantee_type !== 'ring') || places.ids.get(`${s.grantee_type}:${s.grantee}`) === s.grantee_id;
    return (await this.live(indexes)).filter(held).map((s) => s.namespace);
  }

  /** The unexpired shares of some share indexes. */
  private async live(indexes: string[]): Promise<Share[]> {
    const t = now();
    const ids = [...new Set((await Promise.all(indexes.map((i) => readAll(this.rt.store, i)))).flat())];
    const rows = await this.rt.store.getMany<Share>(ids.map(memoryKeys.share));
    return rows.filter((r) => r !== undefined && (r.value.expires_at === null || Date.parse(r.value.expires_at) > t)).map((r) => r!.value);
  }
}

const shareIndexOps = (s: Share, remove?: boolean): Op[] => [
  { op: 'index', index: memoryIndexes.sharesTo(s.grantee_type, s.grantee), member: s.id, remove },
  { op: 'index', index: memoryIndexes.sharesOf(s.namespace), member: s.id, remove },
];

/** A data dir from before the grantee and namespace indexes: its shares are indexed once at startup. */
export async function indexSharesOnce(store: Store): Promise<void> {
  if (await store.get(INDEXED)) return;
  await forEachPage(store, memoryIndexes.shares, async (ids) => {
    const rows = await store.getMany<Share>(ids.map(memoryKeys.share));
    const ops = rows.flatMap((r) => (r ? shareIndexOps(r.value) : []));
    if (ops.length) await store.commit(ops);
  });
  await store.commit([{ op: 'put', key: INDEXED, value: { at: new Date().toISOString() } }]);
}
