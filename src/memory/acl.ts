/**
 * Namespace ACL. `agent:{id}`: only that identity; `role:{name}`: the role's fillers; `ring:{name}`: the
 * ring's members; `org`: every member. A share adds read access for its grantee. A key's
 * `permissions.memory_scopes` (exact names or `prefix:*`) narrows all of it further. A federation peer
 * (peerPrincipal) is no member: it owns no namespace and reads only what a live share to its org grants.
 */
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { memoryScopeCovers, type EventAudience } from '../journal/journal.js';
import type { Org } from '../org/service.js';

export type Namespace = { kind: 'org' } | { kind: 'agent' | 'role' | 'ring'; name: string };

export function parseNamespace(ns: string): Namespace | undefined {
  if (ns === 'org') return { kind: 'org' };
  const m = /^(agent|role|ring):(.+)$/.exec(ns);
  return m ? { kind: m[1] as 'agent' | 'role' | 'ring', name: m[2] } : undefined;
}

/** Role and ring names are case-insensitive: their namespaces are stored lower-cased. */
export function canonicalNamespace(ns: string): string {
  const n = parseNamespace(ns);
  if (!n) throw new AppError('MEMORY_VALIDATION_FAILED', 'namespace must be org, agent:{id}, role:{name} or ring:{name}', { field: 'namespace', reason: 'format' });
  return n.kind === 'role' || n.kind === 'ring' ? `${n.kind}:${n.name.toLowerCase()}` : ns;
}

/** memory_scopes cover a namespace: the journal's rule, so a read and a push of the same memory agree */
export const inScopes = memoryScopeCovers;

/** The principal a peer org's signed read acts as: `peer:<peer_id>`, no membership, no key scopes. */
export function peerPrincipal(peerId: string): Principal {
  const id = `peer:${peerId}`;
  const at = new Date(0).toISOString();
  return {
    identity: { id, name: id, type: 'peer', wallet_address: null, agent_8004_id: null, capabilities: [], tags: [], is_admin: false, reputation: { score: 0, feedback_count: 0, fetched_at: null }, created_at: at, updated_at: at, last_seen: null },
    key: { id, owner: id, permissions: { signal_types: [], rings: [], task_types: [], memory_scopes: [] }, ring_scopes: [], created_at: at, expires_at: null, revoked: false, rate_limit: null, hash: '' },
    membership: undefined,
    peer: peerId,
  };
}

/** A peer is refused a namespace as a cross-org read; a member by the namespace ACL. */
const deniedCode = (p: Principal) => (p.peer !== undefined ? 'MEMORY_ORG_DENIED' : 'MEMORY_NAMESPACE_DENIED');

export interface Grants {
  /** namespaces shared with this principal (read only) */
  sharedWith(p: Principal, places: Places): Promise<string[]>;
  /** the live grantees of a namespace's shares: identity ids, role and ring names (lower-cased) */
  granteesOf(ns: string): Promise<{ identities: string[]; roles: string[]; rings: string[] }>;
}

export interface Places {
  roleIds: string[];
  ringIds: string[];
  /** lower-cased names */
  roles: Set<string>;
  rings: Set<string>;
  /** `role:{name}` / `ring:{name}` → the id of the role or ring the principal holds under that name */
  ids: Map<string, string>;
}

export class Acl {
  constructor(
    private org: Org,
    private grants?: Grants,
    /** the owner id recorded on a namespace holding memories (`NamespaceCount.owner_id`) */
    private owner?: (ns: string) => Promise<string | undefined>,
  ) {}

  async places(p: Principal): Promise<Places> {
    if (p.peer !== undefined) return { roleIds: [], ringIds: [], roles: new Set(), rings: new Set(), ids: new Map() };
    const { roles, rings } = await this.org.placesOf(p.identity.id);
    const [r, g] = await Promise.all([
      Promise.all(roles.map((id) => this.org.role(id).then((x) => x.name.toLowerCase(), () => undefined))),
      Promise.all(rings.map((id) => this.org.ring(id).then((x) => x.name.toLowerCase(), () => undefined))),
    ]);
    const ids = new Map<string, string>();
    r.forEach((name, i) => name && ids.set(`role:${name}`, roles[i]));
    g.forEach((name, i) => name && ids.set(`ring:${name}`, rings[i]));
    return { roleIds: roles, ringIds: rings, roles: new Set(r.filter((x): x is string => !!x)), rings: new Set(g.filter((x): x is string => !!x)), ids };
  }

  /** Namespaces the principal owns a part of by name: it may write there when the namespace's owner is its place (`ownsNow`). */
  owns(p: Principal, places: Places, ns: string): boolean {
    const n = parseNamespace(ns);
    if (!n || p.peer !== undefined) return false;
    if (n.kind === 'org') return true;
    if (n.kind === 'agent') return n.name === p.identity.id;
    return (n.kind === 'role' ? places.roles : places.rings).has(n.name.toLowerCase());
  }

  /**
   * `owns`, and for a role or ring namespace holding memories, by the id that wrote them: a role deleted and
   * made again under its old name is another role, and does not inherit the old one's memories.
   */
  async ownsNow(p: Principal, places: Places, ns: string): Promise<boolean> {
    if (!this.owns(p, places, ns)) return false;
    if (!places.ids.has(ns)) return true;
    const owner = await this.owner?.(ns);
    return owner === undefined || owner === places.ids.get(ns);
  }

  /** The id of the role or ring that holds a role:/ring: namespace's name now. */
  async ownerOf(ns: string): Promise<string | undefined> {
    const n = parseNamespace(ns);
    if (!n || (n.kind !== 'role' && n.kind !== 'ring')) return undefined;
    return (await (n.kind === 'role' ? this.org.roleByName(n.name) : this.org.ringByName(n.name)))?.id;
  }

  async canRead(p: Principal, ns: string, places?: Places): Promise<boolean> {
    if (!inScopes(p.key.permissions.memory_scopes, ns)) return false;
    const pl = places ?? (await this.places(p));
    return (await this.ownsNow(p, pl, ns)) || (await this.grants?.sharedWith(p, pl))?.includes(ns) === true;
  }

  async canWrite(p: Principal, ns: string): Promise<boolean> {
    return inScopes(p.key.permissions.memory_scopes, ns) && this.ownsNow(p, await this.places(p), ns);
  }

  /** The canonical namespace, or MEMORY_NAMESPACE_DENIED. */
  async assertRead(p: Principal, raw: string): Promise<string> {
    const ns = canonicalNamespace(raw);
    if (!(await this.canRead(p, ns))) throw new AppError(deniedCode(p), `No read access to namespace ${ns}`, { namespace: ns });
    return ns;
  }

  async assertWrite(p: Principal, raw: string): Promise<string> {
    const ns = canonicalNamespace(raw);
    if (!(await this.canWrite(p, ns))) throw new AppError(deniedCode(p), `No write access to namespace ${ns}`, { namespace: ns });
    return ns;
  }

  /** Who a namespace's events are pushed to: its readers by the table above, share grantees included. */
  async audienceOf(ns: string): Promise<EventAudience> {
    const n = parseNamespace(ns);
    if (!n || n.kind === 'org') return { members: true };
    const g = (await this.grants?.granteesOf(ns)) ?? { identities: [], roles: [], rings: [] };
    const [roles, rings] = await Promise.all([this.ids(n.kind === 'role' ? [n.name, ...g.roles] : g.roles, 'role'), this.ids(n.kind === 'ring' ? [n.name, ...g.rings] : g.rings, 'ring')]);
    return { identities: n.kind === 'agent' ? [n.name, ...g.identities] : g.identities, roles, rings };
  }

  private async ids(names: string[], kind: 'role' | 'ring'): Promise<string[]> {
    const found = await Promise.all(names.map((name) => (kind === 'role' ? this.org.roleByName(name) : this.org.ringByName(name))));
    return found.filter((x) => x !== undefined).map((x) => x.id);
  }

  /** Every namespace the principal may read, for reads across namespaces (recall). */
  async readable(p: Principal): Promise<string[]> {
    const pl = await this.places(p);
    const places = [...[...pl.roles].map((r) => `role:${r}`), ...[...pl.rings].map((r) => `ring:${r}`)];
    const held = await Promise.all(places.map((ns) => this.ownsNow(p, pl, ns)));
    const own = p.peer !== undefined ? [] : ['org', `agent:${p.identity.id}`, ...places.filter((_, i) => held[i])];
    const shared = (await this.grants?.sharedWith(p, pl)) ?? [];
    return [...new Set([...own, ...shared])].filter((ns) => inScopes(p.key.permissions.memory_scopes, ns));
  }
}
