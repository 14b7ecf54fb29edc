/**
 * Who a signal reaches, and `routing_policy`. `all` (the default): every recipient it reaches keeps it in its
 * inbox. `any_one`: the first recipient to acknowledge, resolve or ack it takes it, and it leaves the other
 * recipients' inboxes. The taker is a record of its own written with expect-absent, so the first wins across
 * processes; it is written right after the action that took it succeeded.
 */
import type { SignalContext } from '../../actors/signal.js';
import type { Identity } from '../identity/model.js';
import type { Store } from '../store/port.js';

export const ROUTING_POLICIES = ['all', 'any_one'] as const;
export type RoutingPolicy = (typeof ROUTING_POLICIES)[number];

export interface Taken {
  identity_id: string;
  at: number;
}

export const takenKey = (signalId: string) => `signal-taken:${signalId}`;

/** Whether a signal lands in this identity's inbox: direct, broadcast, or a role/ring it holds with the capabilities asked for. */
export function reaches(c: Pick<SignalContext, 'to_identity' | 'to_role_id' | 'to_ring_id' | 'target_capabilities' | 'to_peer'>, who: Pick<Identity, 'id' | 'capabilities'>, reach: { roles: string[]; rings: string[] }): boolean {
  // a signal emitted to a peer organization reaches nobody here
  if (c.to_peer) return false;
  if (c.to_identity === who.id) return true;
  const viaGroup = (c.to_role_id !== null && reach.roles.includes(c.to_role_id)) || (c.to_ring_id !== null && reach.rings.includes(c.to_ring_id));
  const broadcast = c.to_identity === null && c.to_role_id === null && c.to_ring_id === null;
  return (viaGroup || broadcast) && c.target_capabilities.every((cap) => who.capabilities.includes(cap));
}

/** Records the taker of an any_one signal; a signal already taken keeps its first taker. */
export async function take(store: Store, c: Pick<SignalContext, 'id' | 'routing_policy'>, identityId: string, at: number): Promise<void> {
  if (c.routing_policy !== 'any_one') return;
  await store.commit([{ op: 'put', key: takenKey(c.id), value: { identity_id: identityId, at } satisfies Taken, expect: 0 }]);
}

/** The takers of the any_one signals among these (undefined for the rest and for untaken ones). */
export async function takersOf(store: Store, signals: (Pick<SignalContext, 'id' | 'routing_policy'> | undefined)[]): Promise<(string | undefined)[]> {
  const at = signals.flatMap((s, i) => (s?.routing_policy === 'any_one' ? [i] : []));
  const out: (string | undefined)[] = signals.map(() => undefined);
  if (!at.length) return out;
  const rows = await store.getMany<Taken>(at.map((i) => takenKey(signals[i]!.id)));
  at.forEach((i, n) => (out[i] = rows[n]?.value.identity_id));
  return out;
}
