/**
 * One identity's receipt of one signal: created on the identity's first inbox action, so a signal routed
 * to a role of many fillers writes no receipts until someone acts (no receipt means unread). Pure; a
 * snooze ends by a durable timer derived by `receiptTimers`.
 */
import { assign, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type ReceiptState = 'unread' | 'acknowledged' | 'resolved' | 'snoozed';

export interface ReceiptContext {
  identity_id: string;
  signal_id: string;
  /** the state a snooze returns to */
  resume_state: 'unread' | 'acknowledged';
  snoozed_until: string | null;
  acknowledged_at: string | null;
  resolved_at: string | null;
  updated_at: string;
  /** acknowledgement tracking (absent on receipts made before it or by a first inbox action): this recipient owes an acknowledgement */
  ack_required?: boolean;
  ack_due_at?: string | null;
  /** set when the due time passed while the acknowledgement was owed */
  ack_overdue?: boolean;
  /** the signal's inbox position, so the overdue index sorts like the inbox */
  inbox_member?: string;
}

export type ReceiptEvent =
  | { type: 'ACKNOWLEDGE'; now: number }
  | { type: 'RESOLVE'; now: number }
  | { type: 'SNOOZE'; now: number; until: number }
  | { type: 'UNSNOOZE'; now: number }
  | { type: 'SNOOZE_ENDED'; now: number }
  | { type: 'ACK_DUE'; now: number };

const iso = (ms: number) => new Date(ms).toISOString();

/** A snooze must end in the future. */
/** The due time of an owed acknowledgement marks it overdue (acknowledging later clears what it owes). */
const ackDue = { guard: 'ackLate' as const, actions: 'markOverdue' as const };

const snooze = [{ guard: 'untilInFuture' as const, target: 'snoozed', actions: 'snooze' as const }, { actions: refuse('VALIDATION_INVALID_TYPE') }];

export const receiptMachine = setup({
  types: { context: {} as ReceiptContext, events: {} as ReceiptEvent },
  actions: {
    refuse: refuseAction,
    acknowledge: assign(({ event }) => ({ acknowledged_at: iso(event.now), resume_state: 'acknowledged' as const, snoozed_until: null, updated_at: iso(event.now) })),
    resolve: assign(({ event }) => ({ resolved_at: iso(event.now), snoozed_until: null, updated_at: iso(event.now) })),
    snooze: assign(({ event }) => ({ snoozed_until: iso((event as Extract<ReceiptEvent, { type: 'SNOOZE' }>).until), updated_at: iso(event.now) })),
    wake: assign(({ event }) => ({ snoozed_until: null, updated_at: iso(event.now) })),
    markOverdue: assign(({ event }) => ({ ack_overdue: true, updated_at: iso(event.now) })),
  },
  guards: {
    untilInFuture: ({ event }) => event.type === 'SNOOZE' && event.until > event.now,
    snoozeOver: ({ context, event }) => context.snoozed_until !== null && Date.parse(context.snoozed_until) <= event.now,
    resumesAcknowledged: ({ context }) => context.resume_state === 'acknowledged',
    ackLate: ({ context, event }) => owesAck(context) && !context.ack_overdue && Date.parse(context.ack_due_at!) <= event.now,
  },
}).createMachine({
  id: 'receipt',
  initial: 'unread',
  context: {} as ReceiptContext,
  states: {
    unread: {
      on: {
        ACKNOWLEDGE: { target: 'acknowledged', actions: 'acknowledge' },
        RESOLVE: { target: 'resolved', actions: 'resolve' },
        SNOOZE: snooze,
        ACK_DUE: ackDue,
      },
    },
    acknowledged: {
      on: {
        RESOLVE: { target: 'resolved', actions: 'resolve' },
        SNOOZE: snooze,
      },
    },
    snoozed: {
      on: {
        ACKNOWLEDGE: { target: 'acknowledged', actions: 'acknowledge' },
        RESOLVE: { target: 'resolved', actions: 'resolve' },
        SNOOZE: snooze,
        UNSNOOZE: 'waking',
        SNOOZE_ENDED: [{ guard: 'snoozeOver', target: 'waking' }],
        ACK_DUE: ackDue,
      },
    },
    // Transient: a snooze returns to the state it interrupted.
    waking: {
      always: [
        { guard: 'resumesAcknowledged', target: 'acknowledged', actions: 'wake' },
        { target: 'unread', actions: 'wake' },
      ],
    },
    resolved: {},
  },
});

/** Acknowledged means acknowledged or resolved (resolving without acknowledging first counts). */
export const acknowledgedAt = (c: ReceiptContext): string | null => c.acknowledged_at ?? c.resolved_at;

/** The recipient owes an acknowledgement with a due time and has not given it. */
export const owesAck = (c: ReceiptContext): boolean => c.ack_required === true && typeof c.ack_due_at === 'string' && acknowledgedAt(c) === null;

/** Overdue: the due time passed (marked by its timer) and the acknowledgement is still owed. */
export const isAckOverdue = (c: ReceiptContext): boolean => c.ack_overdue === true && owesAck(c);

export function receiptTimers(value: string, context: ReceiptContext): { event: ReceiptEvent['type']; at: number }[] {
  const out: { event: ReceiptEvent['type']; at: number }[] = [];
  if (value === 'snoozed' && context.snoozed_until) out.push({ event: 'SNOOZE_ENDED', at: Date.parse(context.snoozed_until) });
  if (owesAck(context) && !context.ack_overdue) out.push({ event: 'ACK_DUE', at: Date.parse(context.ack_due_at!) });
  return out;
}

export interface AckTerms {
  ack_due_at: string | null;
  inbox_member: string;
}

/** A receipt starts unread; one made at emit for an acknowledgement-required signal carries its terms. */
export const newReceipt = (identity_id: string, signal_id: string, now: number, ack?: AckTerms): { value: ReceiptState; context: ReceiptContext } => ({
  value: 'unread',
  context: {
    identity_id,
    signal_id,
    resume_state: 'unread',
    snoozed_until: null,
    acknowledged_at: null,
    resolved_at: null,
    updated_at: iso(now),
    ...(ack ? { ack_required: true, ack_due_at: ack.ack_due_at, ack_overdue: false, inbox_member: ack.inbox_member } : {}),
  },
});
