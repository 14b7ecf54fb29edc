/**
 * One outbound HTTP call on its way (a webhook event to an endpoint, a federation call to a peer). Pure: a due
 * attempt is `queued` (waiting in a sender's in-memory queue for a slot); the sender that gets a slot moves it
 * to `sending` with `START` (a compare-and-set: one sender wins, a stale queue entry finds nothing to start) and
 * only then writes the POST; its outcome comes back as `RESULT`. Due times are durable timers derived by
 * `deliveryTimers`: `SEND` when an attempt is due, `REQUEUE` when a queued attempt was not started (its
 * process may be gone; waiting is no failure), `SEND_TIMEOUT` when a started send produced no result (the
 * process died mid-send), so every attempt ends in a recorded outcome. Retries back off exponentially until
 * `deadline_at`, which time spent queued moves later.
 */
import { assign, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type DeliveryStatus = 'scheduled' | 'queued' | 'sending' | 'delivered' | 'failed';

export interface Attempt {
  attempt: number;
  at: string;
  status: 'succeeded' | 'failed';
  response_code: number | null;
  latency_ms: number | null;
  error: string | null;
}

/** What every outbound delivery holds about its attempts; each kind adds what it sends and to whom. */
export interface AttemptsContext {
  id: string;
  attempt_count: number;
  attempts: Attempt[];
  next_attempt_at: number | null;
  /** when the attempt waiting for a sending slot was queued; null unless `queued` */
  queued_since: number | null;
  /** when a queued attempt nobody started is queued again (on whichever instance claims the timer) */
  requeue_at: number | null;
  /** when the attempt in flight left the queue, just before its request was written */
  sending_since: number | null;
  /** retrying stops after this (ms); a replay moves it, and so does time spent queued */
  deadline_at: number;
  retry_window_ms: number;
  backoff_base_ms: number;
  /** how long a started send may stay without result before it counts as failed; also how long a queued attempt waits before it is queued again */
  send_hold_ms: number;
  created_at: string;
  updated_at: string;
  delivered_at: string | null;
  failed_at: string | null;
}

export type DeliveryEvent =
  | { type: 'SEND'; now: number }
  | { type: 'START'; now: number }
  | { type: 'REQUEUE'; now: number }
  | { type: 'SEND_TIMEOUT'; now: number }
  | { type: 'RESULT'; now: number; attempt: number; ok: boolean; response_code: number | null; latency_ms: number | null; error: string | null; give_up?: boolean }
  | { type: 'REPLAY'; now: number };

export const MAX_ATTEMPTS_KEPT = 20;
const BACKOFF_CAP_MS = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** Exponential back-off after the n-th failed attempt (n >= 1). */
export const retryDelayMs = (base: number, n: number) => Math.min(BACKOFF_CAP_MS, base * 2 ** (n - 1));

type Result = Extract<DeliveryEvent, { type: 'RESULT' }>;
const current = (c: AttemptsContext, e: DeliveryEvent) => e.type === 'RESULT' && e.attempt === c.attempt_count;
const retryFits = (c: AttemptsContext, now: number) => now + retryDelayMs(c.backoff_base_ms, c.attempt_count) <= c.deadline_at;
const push = (c: AttemptsContext, a: Attempt) => [...c.attempts, a].slice(-MAX_ATTEMPTS_KEPT);

function outcome(c: AttemptsContext, e: DeliveryEvent): Attempt {
  if (e.type === 'RESULT') return { attempt: e.attempt, at: iso(e.now), status: e.ok ? 'succeeded' : 'failed', response_code: e.response_code, latency_ms: e.latency_ms, error: e.error };
  return { attempt: c.attempt_count, at: iso(e.now), status: 'failed', response_code: null, latency_ms: null, error: 'no result: the sender stopped mid-attempt' };
}

export const deliveryMachine = setup({
  types: { context: {} as AttemptsContext, events: {} as DeliveryEvent },
  actions: {
    refuse: refuseAction,
    queue: assign(({ context, event }) => ({ queued_since: event.now, requeue_at: event.now + context.send_hold_ms, next_attempt_at: null, updated_at: iso(event.now) })),
    requeue: assign(({ context, event }) => ({ requeue_at: event.now + context.send_hold_ms, updated_at: iso(event.now) })),
    // the wait for a slot is not the endpoint's fault: the retry window is moved by it
    start: assign(({ context, event }) => ({
      attempt_count: context.attempt_count + 1,
      sending_since: event.now,
      deadline_at: context.deadline_at + Math.max(0, event.now - (context.queued_since ?? event.now)),
      queued_since: null,
      requeue_at: null,
      next_attempt_at: null,
      updated_at: iso(event.now),
    })),
    succeed: assign(({ context, event }) => ({ attempts: push(context, outcome(context, event)), sending_since: null, delivered_at: iso(event.now), updated_at: iso(event.now) })),
    retry: assign(({ context, event }) => ({
      attempts: push(context, outcome(context, event)),
      sending_since: null,
      next_attempt_at: event.now + retryDelayMs(context.backoff_base_ms, context.attempt_count),
      updated_at: iso(event.now),
    })),
    fail: assign(({ context, event }) => ({ attempts: push(context, outcome(context, event)), sending_since: null, failed_at: iso(event.now), updated_at: iso(event.now) })),
    replay: assign(({ context, event }) => ({ next_attempt_at: event.now, deadline_at: event.now + context.retry_window_ms, delivered_at: null, failed_at: null, updated_at: iso(event.now) })),
  },
  guards: {
    due: ({ context, event }) => context.next_attempt_at !== null && context.next_attempt_at <= event.now,
    requeueDue: ({ context, event }) => context.requeue_at != null && context.requeue_at <= event.now,
    succeeded: ({ context, event }) => current(context, event) && (event as Result).ok,
    retryable: ({ context, event }) => current(context, event) && !(event as Result).give_up && retryFits(context, event.now),
    isCurrent: ({ context, event }) => current(context, event),
    sendOverdueRetryable: ({ context, event }) => context.sending_since !== null && context.sending_since + context.send_hold_ms <= event.now && retryFits(context, event.now),
    sendOverdue: ({ context, event }) => context.sending_since !== null && context.sending_since + context.send_hold_ms <= event.now,
  },
}).createMachine({
  id: 'outboundDelivery',
  initial: 'scheduled',
  context: {} as AttemptsContext,
  states: {
    scheduled: {
      on: {
        SEND: [{ guard: 'due', target: 'queued', actions: 'queue' }],
        REPLAY: { target: 'scheduled', actions: 'replay' },
      },
    },
    queued: {
      on: {
        START: { target: 'sending', actions: 'start' },
        REQUEUE: [{ guard: 'requeueDue', target: 'queued', actions: 'requeue' }],
        REPLAY: { actions: refuse('WEBHOOK_DELIVERY_IN_PROGRESS') },
      },
    },
    sending: {
      on: {
        RESULT: [
          { guard: 'succeeded', target: 'delivered', actions: 'succeed' },
          { guard: 'retryable', target: 'scheduled', actions: 'retry' },
          { guard: 'isCurrent', target: 'failed', actions: 'fail' },
        ],
        SEND_TIMEOUT: [
          { guard: 'sendOverdueRetryable', target: 'scheduled', actions: 'retry' },
          { guard: 'sendOverdue', target: 'failed', actions: 'fail' },
        ],
        REPLAY: { actions: refuse('WEBHOOK_DELIVERY_IN_PROGRESS') },
      },
    },
    delivered: { on: { REPLAY: { target: 'scheduled', actions: 'replay' } } },
    failed: { on: { REPLAY: { target: 'scheduled', actions: 'replay' } } },
  },
});

export function deliveryTimers(value: string, c: AttemptsContext): { event: DeliveryEvent['type']; at: number }[] {
  if (value === 'scheduled' && c.next_attempt_at !== null) return [{ event: 'SEND', at: c.next_attempt_at }];
  if (value === 'queued' && c.requeue_at != null) return [{ event: 'REQUEUE', at: c.requeue_at }];
  if (value === 'sending' && c.sending_since !== null) return [{ event: 'SEND_TIMEOUT', at: c.sending_since + c.send_hold_ms }];
  return [];
}

export interface NewAttempts {
  id: string;
  now: number;
  retry_window_ms: number;
  backoff_base_ms: number;
  send_hold_ms: number;
}

/** The attempt fields of a delivery due at once. */
export const newAttempts = (d: NewAttempts): AttemptsContext => ({
  id: d.id,
  attempt_count: 0,
  attempts: [],
  next_attempt_at: d.now,
  queued_since: null,
  requeue_at: null,
  sending_since: null,
  deadline_at: d.now + d.retry_window_ms,
  retry_window_ms: d.retry_window_ms,
  backoff_base_ms: d.backoff_base_ms,
  send_hold_ms: d.send_hold_ms,
  created_at: iso(d.now),
  updated_at: iso(d.now),
  delivered_at: null,
  failed_at: null,
});
