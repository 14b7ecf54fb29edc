/**
 * Key scopes. A key's permissions.signal_types, permissions.rings, permissions.task_types and ring_scopes
 * each limit what it may emit, claim and read; an empty list leaves that dimension unrestricted. A signal
 * is inside a ring restriction only if it was sent to one of the allowed rings.
 */
import { AppError } from '../errors.js';
import type { ApiKey } from '../identity/model.js';
import { namesInclude } from '../org/model.js';

export interface Scoped {
  signal_type: string;
  to_ring: string | null;
  payload: Record<string, unknown>;
}

const taskTypeOf = (s: Scoped) => (s.signal_type === 'task' && typeof s.payload?.task_type === 'string' ? (s.payload.task_type as string) : undefined);

/** The first scope the signal falls outside of, or undefined when the key may touch it. */
export function outOfScope(key: ApiKey, s: Scoped): string | undefined {
  const p = key.permissions;
  if (p.signal_types.length && !p.signal_types.includes(s.signal_type)) return 'signal_types';
  for (const [name, list] of [['rings', p.rings], ['ring_scopes', key.ring_scopes]] as const) {
    if (list.length && !namesInclude(list, s.to_ring)) return name;
  }
  if (p.task_types.length && s.signal_type === 'task' && !p.task_types.includes(taskTypeOf(s) ?? '')) return 'task_types';
  return undefined;
}

export function assertInScope(key: ApiKey, s: Scoped): void {
  const scope = outOfScope(key, s);
  if (scope) throw new AppError('AUTH_SCOPE_DENIED', `This key's ${scope} do not cover this signal`, { scope });
}

/** A list filter naming types or a ring the key may not read is refused rather than silently emptied. */
export function assertFilterInScope(key: ApiKey, filter: { types?: string[]; ring?: string }): void {
  const p = key.permissions;
  const deniedType = filter.types?.find((t) => p.signal_types.length && !p.signal_types.includes(t));
  if (deniedType) throw new AppError('AUTH_SCOPE_DENIED', `This key may not read signals of type ${deniedType}`, { scope: 'signal_types' });
  for (const [name, list] of [['rings', p.rings], ['ring_scopes', key.ring_scopes]] as const) {
    if (filter.ring && list.length && !namesInclude(list, filter.ring)) throw new AppError('AUTH_SCOPE_DENIED', `This key may not read ring ${filter.ring}`, { scope: name });
  }
}
