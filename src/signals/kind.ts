/** The signal actor kind: its machine, the indexes a signal record implies, its timers and its journal. */
import { owesAck, type ReceiptContext } from '../../actors/inbox-receipt.js';
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import type { ActorKind, ActorRecord, Runtime } from '../runtime/runtime.js';
import { JOURNAL_LOG, type EventEntry, type SignalEntry } from '../journal/journal.js';
import { RECEIPT, receiptId } from './receipt-kind.js';
import { takersOf } from './routing.js';

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
  journal: (r, prev) => {
    // the due check is the only move that sets ack_checked_at: it reports overdue recipients, or nothing
    if (prev && !prev.context.ack_checked_at && r.context.ack_checked_at) return r.context.ack_overdue?.length ? { log: JOURNAL_LOG, entry: ackOverdueEntry(r) } : undefined;
    return { log: JOURNAL_LOG, entry: signalEntry(r, prev) };
  },
  timerEvent: (id, event, rt) => (event === 'ACK_DUE' ? overdueRecipients(rt, id).then((overdue) => ({ overdue })) : Promise.resolve({})),
};

export const ACK_OVERDUE = 'signal.ack_overdue';

/** The recipients whose receipts still owe the acknowledgement; an any_one signal someone took is owed by nobody. */
async function overdueRecipients(rt: Runtime, signalId: string): Promise<string[]> {
  const signal = (await rt.load<SignalContext>(SIGNAL, signalId))?.value.context;
  const recipients = signal?.ack_recipients ?? [];
  if (!signal || (await takersOf(rt.store, [signal]))[0] !== undefined) return [];
  const receipts = await rt.loadMany<ReceiptContext>(RECEIPT, recipients.map((r) => receiptId(r, signalId)));
  return recipients.filter((_, i) => !receipts[i] || owesAck(receipts[i]!.context));
}

/** Told to the sender only: which recipients had not acknowledged when the due time came. */
function ackOverdueEntry(r: ActorRecord<SignalContext>): EventEntry {
  const c = r.context;
  return {
    type: ACK_OVERDUE,
    // not `signal`: a frame's `signal` field is a Signal everywhere else
    subject: 'ack',
    data: { signal_id: c.id, ack_due_at: c.ack_due_at, checked_at: c.ack_checked_at, overdue_recipients: c.ack_overdue, signal: signalView(r) },
    audience: { identities: [c.from_identity] },
  };
}

/** The Signal as the interface shows it: the machine's context plus its state as delivery_state (ack bookkeeping stays inside). */
export function signalView(r: ActorRecord<SignalContext>) {
  const { max_attempts: _m, to_role_id: _r, to_ring_id: _g, ack_recipients: _a, ack_checked_at: _c, ack_overdue: _o, ...fields } = r.context;
  return { ...fields, ack_required: fields.ack_required ?? false, ack_due_at: fields.ack_due_at ?? null, delivery_state: r.value };
}
export type Signal = ReturnType<typeof signalView>;

export function signalEntry(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): SignalEntry {
  const route = { role_id: r.context.to_role_id, ring_id: r.context.to_ring_id };
  return prev ? { type: 'signal.updated', signal: signalView(r), route, prev_state: prev.value } : { type: 'signal', signal: signalView(r), route };
}
