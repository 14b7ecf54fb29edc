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
}

export type ReceiptEvent =
  | { type: 'ACKNOWLEDGE'; now: number }
  | { type: 'RESOLVE'; now: number }
  | { type: 'SNOOZE'; now: number; until: number }
  | { type: 'UNSNOOZE'; now: number }
  | { type: 'SNOOZE_ENDED'; now: number };

const iso = (ms: number) => new Date(ms).toISOString();

/** A snooze must end in the future. */
const snooze = [{ guard: 'untilInFuture' as const, target: 'snoozed', actions: 'snooze' as const }, { actions: refuse('VALIDATION_INVALID_TYPE') }];

export const receiptMachine = setup({
  types: { context: {} as ReceiptContext, events: {} as ReceiptEvent },
  actions: {
    refuse: refuseAction,
    acknowledge: assign(({ event }) => ({ acknowledged_at: iso(event.now), resume_state: 'acknowledged' as const, snoozed_until: null, updated_at: iso(event.now) })),
    resolve: assign(({ event }) => ({ resolved_at: iso(event.now), snoozed_until: null, updated_at: iso(event.now) })),
    snooze: assign(({ event }) => ({ snoozed_until: iso((event as Extract<ReceiptEvent, { type: 'SNOOZE' }>).until), updated_at: iso(event.now) })),
    wake: assign(({ event }) => ({ snoozed_until: null, updated_at: iso(event.now) })),
  },
  guards: {
    untilInFuture: ({ event }) => event.type === 'SNOOZE' && event.until > event.now,
    snoozeOver: ({ context, event }) => context.snoozed_until !== null && Date.parse(context.snoozed_until) <= event.now,
    resumesAcknowledged: ({ context }) => context.resume_state === 'acknowledged',
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

export function receiptTimers(value: string, context: ReceiptContext): { event: ReceiptEvent['type']; at: number }[] {
  return value === 'snoozed' && context.snoozed_until ? [{ event: 'SNOOZE_ENDED', at: Date.parse(context.snoozed_until) }] : [];
}

export const newReceipt = (identity_id: string, signal_id: string, now: number): { value: ReceiptState; context: ReceiptContext } => ({
  value: 'unread',
  context: { identity_id, signal_id, resume_state: 'unread', snoozed_until: null, acknowledged_at: null, resolved_at: null, updated_at: iso(now) },
});
