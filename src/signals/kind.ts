/** The signal actor kind: its machine, the indexes a signal record implies, its timers and its journal. */
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const SIGNAL = 'signal';
export const SIGNAL_LOG = 'signals';

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
  const out: string[] = [];
  if (c.to_role_id) out.push(signalIndexes.roleInbox(c.to_role_id));
  if (c.to_ring_id) out.push(signalIndexes.ringInbox(c.to_ring_id));
  if (c.to_identity) out.push(signalIndexes.identityInbox(c.to_identity));
  if (!out.length) out.push(signalIndexes.broadcast);
  return out;
}

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
  journal: (r, prev) => ({ log: SIGNAL_LOG, entry: { type: prev ? 'signal.updated' : 'signal', signal: signalView(r), from: prev?.value ?? null, route: { role_id: r.context.to_role_id, ring_id: r.context.to_ring_id } } }),
};

/** The Signal as the interface shows it: the machine's context plus its state as delivery_state. */
export function signalView(r: ActorRecord<SignalContext>) {
  const { max_attempts: _m, to_role_id: _r, to_ring_id: _g, ...fields } = r.context;
  return { ...fields, delivery_state: r.value };
}
export type Signal = ReturnType<typeof signalView>;

export interface JournalEntry {
  type: 'signal' | 'signal.updated';
  signal: Signal;
  /** the delivery state before this change (null for a new signal; absent in entries older than this field) */
  from?: string | null;
  route: { role_id: string | null; ring_id: string | null };
}
