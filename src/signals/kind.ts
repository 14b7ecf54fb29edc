/** The signal actor kind: its machine, the indexes a signal record implies, its timers and its journal. */
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';
import { JOURNAL_LOG, type EventEntry, type SignalEntry } from '../journal/journal.js';

export const SIGNAL = 'signal';

/** Inbox members sort by urgency, then id (time): read in reverse for most urgent, newest first. */
export const inboxMember = (c: Pick<SignalContext, 'urgency' | 'id'>) => String(Math.round(c.urgency * 1000)).padStart(4, '0') + c.id;
export const idOfInboxMember = (m: string) => m.slice(4);
export const threadMember = (c: Pick<SignalContext, 'sequence' | 'id'>) => String(c.sequence).padStart(10, '0') + c.id;
export const idOfThreadMember = (m: string) => m.slice(10);

export const signalIndexes = {
  all: 'signals',
  byState: (state: string) => `signals:state:${state}`,
  byType: (type: string) => `signals:type:${type}`,
  roleInbox: (roleId: string) => `inbox:role:${roleId}`,
  ringInbox: (ringId: string) => `inbox:ring:${ringId}`,
  identityInbox: (identityId: string) => `inbox:identity:${identityId}`,
  /** signals with no target: every member's inbox */
  broadcast: 'inbox:all',
  thread: (rootId: string) => `thread:${rootId}`,
};

export function inboxesOf(c: SignalContext): string[] {
  // a signal emitted to a peer's role, ring or identity lands in no inbox here
  if (c.to_peer) return [];
  const out: string[] = [];
  if (c.to_role_id) out.push(signalIndexes.roleInbox(c.to_role_id));
  if (c.to_ring_id) out.push(signalIndexes.ringInbox(c.to_ring_id));
  if (c.to_identity) out.push(signalIndexes.identityInbox(c.to_identity));
  if (!out.length) out.push(signalIndexes.broadcast);
  return out;
}

/** The unique record an inbound copy claims: one copy per (peer, origin signal id). */
export const inboundKey = (peerId: string, originId: string) => `fed-inbound:${peerId}:${originId}`;

export const signalKind: ActorKind<SignalContext> = {
  name: SIGNAL,
  machine: signalMachine,
  notFound: 'SIGNAL_NOT_FOUND',
  invalid: 'SIGNAL_DELIVERY_INVALID_TRANSITION',
  indexes: (r) => [
    [signalIndexes.all, r.context.id],
    [signalIndexes.byState(r.value), r.context.id],
    [signalIndexes.byType(r.context.signal_type), r.context.id],
    [signalIndexes.thread(r.context.thread_id), threadMember(r.context)],
    ...inboxesOf(r.context).map((i): [string, string] => [i, inboxMember(r.context)]),
  ],
  timers: (r) => signalTimers(r.value, r.context),
  uniques: (r) => (r.context.federation?.direction === 'inbound' ? [{ key: inboundKey(r.context.federation.peer_id, r.context.federation.remote_id ?? r.context.id), code: 'SIGNAL_CLAIM_CONFLICT' }] : []),
  journal: (r, prev) => [signalEntry(r, prev), ...federationEvents(r, prev)].map((entry) => ({ log: JOURNAL_LOG, entry })),
};

/** The Signal as the interface shows it: the machine's context plus its state as delivery_state. */
export function signalView(r: ActorRecord<SignalContext>) {
  const { max_attempts: _m, to_role_id: _r, to_ring_id: _g, ...fields } = r.context;
  return { ...fields, delivery_state: r.value };
}
export type Signal = ReturnType<typeof signalView>;

export function signalEntry(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): SignalEntry {
  const route = { role_id: r.context.to_role_id, ring_id: r.context.to_ring_id };
  return prev ? { type: 'signal.updated', signal: signalView(r), route, prev_state: prev.value } : { type: 'signal', signal: signalView(r), route };
}

export const FEDERATION_EVENTS = ['federation.delivered', 'federation.claimed', 'federation.completed', 'federation.failed'] as const;

/**
 * The federation events a federated signal's change stands for, journaled in the same commit: delivered (the
 * peer answered with its copy's id), failed (the retry budget ran out), claimed and completed (on either org).
 */
export function federationEvents(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): EventEntry[] {
  const f = r.context.federation;
  if (!f || !prev) return [];
  const was = prev.context.federation;
  const types: (typeof FEDERATION_EVENTS)[number][] = [];
  if (f.remote_id && !was?.remote_id && f.direction === 'outbound') types.push('federation.delivered');
  if (f.error && !was?.error) types.push('federation.failed');
  if (r.value === 'leased' && prev.value !== 'leased') types.push('federation.claimed');
  if (r.value === 'acked' && prev.value !== 'acked' && r.context.task_status === 'completed') types.push('federation.completed');
  const c = r.context;
  const audience = { identities: [c.from_identity, ...(c.claimed_by ? [c.claimed_by] : [])], roles: c.to_role_id ? [c.to_role_id] : [], rings: c.to_ring_id ? [c.to_ring_id] : [] };
  return types.map((type) => ({ type, subject: 'signal', data: signalView(r), audience }));
}
