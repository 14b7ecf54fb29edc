/**
 * A credential's standing: what it may reach (a key's permissions and ring_scopes; an empty list leaves
 * that dimension unrestricted). The one rule every path that mints a key or binds a wallet goes through:
 * no credential obtains a credential with more rights than itself (docs/auth.md, Keys minted).
 */
import { AppError } from '../errors.js';
import { sameName } from '../org/model.js';
import type { ApiKey, Permissions } from '../identity/model.js';

export interface Standing {
  permissions: Permissions;
  ring_scopes: string[];
}

export type Dimension = keyof Permissions | 'ring_scopes';

export const unrestricted = (): Standing => ({ permissions: { signal_types: [], rings: [], task_types: [], memory_scopes: [] }, ring_scopes: [] });

export const standingOf = (k: Pick<ApiKey, 'permissions' | 'ring_scopes'>): Standing => ({ permissions: { ...k.permissions }, ring_scopes: [...k.ring_scopes] });

const lists = (s: Standing): [Dimension, string[]][] => [
  ['signal_types', s.permissions.signal_types],
  ['rings', s.permissions.rings],
  ['task_types', s.permissions.task_types],
  ['memory_scopes', s.permissions.memory_scopes],
  ['ring_scopes', s.ring_scopes],
];

/** Whether one entry of a granted list is inside the grantor's: equal, or under a `prefix*` pattern (memory_scopes). */
const covers = (dim: Dimension, grantor: string[], entry: string) =>
  grantor.some((g) => (dim === 'rings' || dim === 'ring_scopes' ? sameName(g, entry) : g === entry || (dim === 'memory_scopes' && g.endsWith('*') && entry.startsWith(g.slice(0, -1)))));

/** The first dimension in which `granted` reaches beyond `grantor`, or undefined when it stays inside. */
export function exceeds(grantor: Standing, granted: Standing): Dimension | undefined {
  const theirs = new Map(lists(granted));
  for (const [dim, mine] of lists(grantor)) {
    if (!mine.length) continue;
    const asked = theirs.get(dim)!;
    // an empty list is unrestricted: more than any non-empty one
    if (!asked.length || !asked.every((e) => covers(dim, mine, e))) return dim;
  }
  return undefined;
}

export function assertWithin(grantor: Standing, granted: Standing): void {
  const dim = exceeds(grantor, granted);
  if (dim) throw new AppError('AUTH_SCOPE_DENIED', `The caller's ${dim} do not cover the ${dim} asked for: a credential cannot grant more than it holds`, { scope: dim });
}

/** The first restricted dimension of a standing, or undefined when it is unrestricted. */
export const restriction = (s: Standing): Dimension | undefined => lists(s).find(([, l]) => l.length)?.[0];

/**
 * Refuses a narrowed credential on a route that grants what no key scope bounds (a peer's trust and its
 * allowed scopes, a webhook's stream of every event): only an unrestricted credential may hand those out.
 */
export function assertUnrestricted(k: Pick<ApiKey, 'permissions' | 'ring_scopes'>): void {
  const dim = restriction(standingOf(k));
  if (dim) throw new AppError('AUTH_SCOPE_DENIED', `A key narrowed by ${dim} cannot grant what no key scope bounds (a peer's trust, a webhook's events)`, { scope: dim });
}

