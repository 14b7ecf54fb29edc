/**
 * Shares grant read access to a namespace to a role, a ring, an identity, or a peer org, optionally until
 * an expiry. They are few and read on every ACL decision that the caller's own places do not settle.
 */
import { iso, now } from '../clock.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import { canonicalNamespace, type Grants, type Places } from './acl.js';
import { memoryIndexes, memoryKeys } from './model.js';

const MAX_SHARES = 10_000;

export interface Share {
  id: string;
  namespace: string;
  grantee_type: 'role' | 'ring' | 'identity' | 'org';
  /** role or ring name (lower-cased), identity id, or peer org id */
  grantee: string;
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
  constructor(private rt: Runtime) {}

  async create(p: Principal, b: ShareBody): Promise<Share> {
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
    await this.rt.store.commit([
      { op: 'put', key: memoryKeys.share(share.id), value: share, expect: 0 },
      { op: 'index', index: memoryIndexes.shares, member: share.id },
    ]);
    return share;
  }

  async list(): Promise<Share[]> {
    const ids = await this.rt.store.range(memoryIndexes.shares, { limit: MAX_SHARES });
    return (await this.rt.store.getMany<Share>(ids.map(memoryKeys.share))).filter((r) => r).map((r) => r!.value);
  }

  async remove(id: string): Promise<Share> {
    const cur = await this.rt.store.get<Share>(memoryKeys.share(id));
    if (!cur) throw new AppError('MEMORY_SHARE_NOT_FOUND', `No share ${id}`, { id });
    const r = await this.rt.store.commit([
      { op: 'del', key: memoryKeys.share(id), expect: cur.version },
      { op: 'index', index: memoryIndexes.shares, member: id, remove: true },
    ]);
    if (!r.ok) throw new AppError('MEMORY_SHARE_NOT_FOUND', `No share ${id}`, { id });
    return cur.value;
  }

  async granteesOf(ns: string): Promise<{ identities: string[]; roles: string[]; rings: string[] }> {
    const t = now();
    const live = (await this.list()).filter((s) => s.namespace === ns && (s.expires_at === null || Date.parse(s.expires_at) > t));
    const of = (type: Share['grantee_type']) => live.filter((s) => s.grantee_type === type).map((s) => s.grantee);
    return { identities: of('identity'), roles: of('role'), rings: of('ring') };
  }

  async sharedWith(p: Principal, places: Places): Promise<string[]> {
    const t = now();
    return (await this.list())
      .filter((s) => s.expires_at === null || Date.parse(s.expires_at) > t)
      .filter((s) =>
        s.grantee_type === 'identity' ? s.grantee === p.identity.id : s.grantee_type === 'role' ? places.roles.has(s.grantee) : s.grantee_type === 'ring' ? places.rings.has(s.grantee) : s.grantee === p.peer,
      )
      .map((s) => s.namespace);
  }
}
