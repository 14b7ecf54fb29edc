/**
 * Signal delivery and task lease. Pure: time arrives on every event as `now` (ms since epoch).
 * Refusals are explicit `refuse` actions carrying the interface's error code; the runtime turns them
 * into errors and commits nothing. Time-based moves are durable timers derived from the state by
 * `signalTimers`, never XState `after` delays (those are not in a persisted snapshot).
 */
import { assign, raise, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type DeliveryState = 'waiting' | 'pending' | 'delivered' | 'leased' | 'acked' | 'blocked' | 'dead_letter';

/** How a dependency ended without completing: its dependants are blocked with it as the reason. */
export type DependencyEnd = 'cancelled' | 'dead_letter' | 'expired' | 'blocked';

/** How a signal crossed to or from a peer organization (docs/federation.md). */
export interface SignalFederation {
  /** the trust's peer id (one id names the relationship on both sides) */
  peer_id: string;
  /** the other org's id of the same signal: on an inbound copy, the origin's id */
  remote_id: string | null;
  direction: 'inbound' | 'outbound';
  hops: number;
  /** FED_DELIVERY_FAILED once a call to the peer (deliver, ack, cancel) ran out of its retry budget */
  error?: string | null;
  /** the last ack or cancel one org refused because its copy had moved to another outcome (FED_STATE_CONFLICT) */
  conflict?: FederationConflict | null;
}

/** A call between the two orgs refused with FED_STATE_CONFLICT, as each side records it (docs/federation.md, Conflicts). */
export interface FederationConflict {
  call: 'ack' | 'cancel';
  /** what the refused call asked for */
  outcome: 'completed' | 'failed' | 'cancelled';
  /** `peer`: the other org refused our call; `here`: we refused the other org's */
  refused_by: 'peer' | 'here';
  /** the refusing side's copy when it refused */
  task_status: string | null;
  delivery_state: string | null;
  at: string;
}

export interface SignalContext {
  id: string;
  signal_type: string;
  base_type: string;
  content: string;
  urgency: number;
  from_role: string | null;
  from_identity: string;
  to_role: string | null;
  to_identity: string | null;
  to_ring: string | null;
  /** a peer organization the targets are in (an outbound federated signal) */
  to_peer?: string | null;
  parent_id: string | null;
  /** the root of the thread (its own id for a root) */
  thread_id: string;
  sequence: number;
  /** ids of the role and ring the names resolved to at emit, for the inbox indexes */
  to_role_id: string | null;
  to_ring_id: string | null;
  tags: string[];
  target_capabilities: string[];
  routing_policy: string | null;
  metadata: Record<string, unknown>;
  payload: Record<string, unknown>;
  resources: unknown[];
  task_status: string | null;
  claimed_by: string | null;
  claimed_at: string | null;
  claim_expires_at: string | null;
  /** the fencing token of the task's lease: raised by each grant, kept by a renewal (absent before the first grant) */
  claim_token?: number;
  protocol_version: 'svc/1.0';
  delivery_count: number;
  max_attempts: number;
  /** the peer id an inbound copy came from; null for a signal emitted here */
  source_org: string | null;
  federation: SignalFederation | null;
  created_at: string;
  updated_at: string;
  /** acknowledgement tracking (absent on signals stored before it existed): the recipients snapshotted at emit owe an acknowledgement */
  ack_required?: boolean;
  ack_due_at?: string | null;
  ack_recipients?: string[];
  /** when the due time was checked (once), and the recipients found unacknowledged then */
  ack_checked_at?: string | null;
  ack_overdue?: string[];
  /** orders ready tasks before urgency, higher first (absent on signals stored before it existed: 0) */
  priority?: number;
  /** the task signals this task waits for, fixed at emit */
  depends_on?: string[];
  /** the dependencies not completed yet: while any is left (or not_before is ahead) the task is `waiting` */
  blocked_by?: string[];
  /** why a `blocked` task can never run: the dependency that ended without completing, and how it ended */
  blocked_reason?: { dependency_id: string; reason: DependencyEnd } | null;
  not_before?: string | null;
  deadline?: string | null;
  /** why the signal is in dead_letter: `max_attempts`, or `deadline` (task_status `expired`) */
  dead_letter_reason?: string | null;
  /** back-off after a failed attempt: `retry_backoff_ms × 2^(attempt-1)`, at most `retry_backoff_max_ms` (absent: 0, immediate) */
  retry_backoff_ms?: number;
  retry_backoff_max_ms?: number;
  /** when the latest failed attempt's back-off ends: the task waits until then */
  retry_at?: string | null;
  /** a lease also ends this long after the holder's last heartbeat (or its claim), when given at emit */
  heartbeat_timeout_ms?: number | null;
  /** the holder's last heartbeat, with the progress (0..1) and note it reported */
  heartbeat_at?: string | null;
  progress?: number | null;
  progress_note?: string | null;
  /** at most concurrency_limit (default 1) tasks of one concurrency_key are leased at once, across instances */
  concurrency_key?: string | null;
  concurrency_limit?: number;
  /** what the completing ack reported: free JSON and the artifacts and workspace items it produced */
  result?: unknown;
  result_resources?: unknown[];
}

export type SignalEvent =
  | { type: 'DELIVER'; now: number; /** the push's journal sequence, journaled with the mark (not kept in the state) */ pushed_at?: number }
  /** `claim_token`, when given, must be the current grant's: a renewal by the holder */
  | { type: 'CLAIM'; now: number; identity: string; lease_ms: number; claim_token?: number }
  /** `late`: a peer's completion reaching the origin after the lease lapsed, accepted while nobody holds the task */
  | { type: 'ACK'; now: number; identity: string; outcome?: 'completed' | 'failed'; claim_token?: number; late?: boolean; result?: unknown; resources?: unknown[] }
  /** the holder proves it is alive: extends its lease and records progress */
  | { type: 'HEARTBEAT'; now: number; identity: string; lease_ms: number; claim_token?: number; progress?: number; note?: string }
  /** the durable timer at the last heartbeat (or claim) + heartbeat_timeout_ms */
  | { type: 'HEARTBEAT_TIMEOUT'; now: number }
  | { type: 'LEASE_EXPIRED'; now: number }
  | { type: 'CANCEL'; now: number }
  /** an admin ends the holder's lease now: the attempt ends as an expired lease would */
  | { type: 'RELEASE'; now: number }
  /** the due-time check: `overdue` is read from the recipients' receipts before the event is sent */
  | { type: 'ACK_DUE'; now: number; overdue: string[] }
  /** a dependency completed (sent in the commit that completes it) */
  | { type: 'DEPENDENCY_COMPLETED'; now: number; dependency_id: string }
  /** a dependency ended without completing (cancelled, dead-lettered, expired or itself blocked) */
  | { type: 'DEPENDENCY_FAILED'; now: number; dependency_id: string; reason: DependencyEnd }
  /** the durable timer at not_before */
  | { type: 'NOT_BEFORE'; now: number }
  /** the durable timer at deadline */
  | { type: 'DEADLINE'; now: number }
  /** the durable timer at retry_at: a failed attempt's back-off is over */
  | { type: 'RETRY_DUE'; now: number }
  /** a dead-lettered task brought back by its emitter or an admin (who may is the service's rule) */
  | { type: 'RETRY'; now: number }
  | { type: 'FED_DELIVERED'; now: number; remote_id: string }
  | { type: 'FED_FAILED'; now: number; error: string }
  | { type: 'FED_CONFLICT'; now: number; conflict: Omit<FederationConflict, 'at'> };

const iso = (ms: number) => new Date(ms).toISOString();
const identityOf = (e: SignalEvent) => ('identity' in e ? e.identity : undefined);

/** A write (renewal, ack) from a holder of an older grant than the task's latest: its lease lapsed and moved on. */
const staleClaim = { guard: 'staleClaim' as const, actions: refuse('SIGNAL_ACK_UNAUTHORIZED', { reason: 'stale_claim' }) };

/** A claim of a pending or delivered signal. */
const claimOpen = [
  staleClaim,
  { guard: 'notTask' as const, actions: refuse('SIGNAL_CLAIM_NOT_TASK') },
  { guard: 'notOpen' as const, actions: refuse('SIGNAL_CLAIM_INVALID_STATUS') },
  { target: 'leased', actions: 'lease' as const },
];

/** Cancelling an open task ends it whoever holds it (who may cancel is the service's rule). */
const cancelOpen = [
  { guard: 'notTask' as const, actions: refuse('SIGNAL_CLAIM_NOT_TASK') },
  { guard: 'notOpen' as const, actions: refuse('SIGNAL_CLAIM_INVALID_STATUS') },
  { target: 'acked', actions: 'cancel' as const },
];

/** The acknowledgement due time is checked once, whatever the delivery state; its result is kept in the state. */
const ackDue = { guard: 'ackDue' as const, actions: 'noteOverdue' as const };

/**
 * A task not yet claimable: refused with what it waits for, so a caller can tell it from a closed one. The
 * params are a function (XState resolves it per event, from the context) that also carries its code, so the
 * state table derived from the machine still names the refusal.
 */
const refuseWaiting = {
  type: 'refuse' as const,
  params: Object.assign(({ context }: { context: SignalContext }) => ({ code: 'SIGNAL_CLAIM_INVALID_STATUS', details: { reason: 'waiting', blocked_by: context.blocked_by ?? [], not_before: context.not_before ?? null, retry_at: context.retry_at ?? null } }), { code: 'SIGNAL_CLAIM_INVALID_STATUS' }),
};
const refuseBlocked = {
  type: 'refuse' as const,
  params: Object.assign(({ context }: { context: SignalContext }) => ({ code: 'SIGNAL_CLAIM_INVALID_STATUS', details: { reason: 'blocked', blocked_by: context.blocked_reason ? [context.blocked_reason.dependency_id] : [], blocked_reason: context.blocked_reason ?? null } }), { code: 'SIGNAL_CLAIM_INVALID_STATUS' }),
};

/** A deadline that has come ends the task whatever holds it (a timer, so it fires once). */
const expire = { guard: 'deadlinePassed' as const, target: 'dead_letter', actions: 'expire' as const };

/** An ack of a signal nobody holds a lease on: a task must be claimed first. */
/** A late completion by a peer's agent (the origin's lease lapsed before its ack arrived) while nobody holds the task. */
const lateCompletion = { guard: 'lateCompletion' as const, target: 'acked', actions: ['completeLate', 'keepResult'] as const };

/** An ack of a signal nobody holds a lease on: a task must be claimed first (or be a peer's late completion). */
const ackUnleased = [
  staleClaim,
  lateCompletion,
  { guard: 'isTask' as const, actions: refuse('SIGNAL_DELIVERY_INVALID_TRANSITION') },
  { target: 'acked', actions: 'stamp' as const },
];

/** A heartbeat with no lease to extend: an older grant's token is stale; otherwise the caller holds nothing. */
const heartbeatUnleased = [staleClaim, { guard: 'isTask' as const, actions: refuse('SIGNAL_ACK_UNAUTHORIZED', { reason: 'not_claimed' }) }, { actions: refuse('SIGNAL_CLAIM_NOT_TASK') }];

/** What a task not claimable yet (waiting) or ever (blocked) answers alike: no ack, its emitter may cancel, its deadline and ack timers still run. */
const unclaimable = {
  ACK: { actions: refuse('SIGNAL_DELIVERY_INVALID_TRANSITION') },
  CANCEL: { target: 'acked', actions: 'cancel' },
  DEADLINE: expire,
  ACK_DUE: ackDue,
} as const;

export const signalMachine = setup({
  types: { context: {} as SignalContext, events: {} as SignalEvent },
  actions: {
    refuse: refuseAction,
    stamp: assign({ updated_at: ({ event }) => iso(event.now) }),
    lease: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'CLAIM' }>;
      return { claimed_by: e.identity, claimed_at: iso(e.now), claim_expires_at: iso(e.now + e.lease_ms), claim_token: (context.claim_token ?? 0) + 1, updated_at: iso(e.now) };
    }),
    renew: assign(({ event }) => {
      const e = event as Extract<SignalEvent, { type: 'CLAIM' }>;
      return { claim_expires_at: iso(e.now + e.lease_ms), updated_at: iso(e.now) };
    }),
    complete: assign({ task_status: 'completed', updated_at: ({ event }) => iso(event.now) }),
    completeLate: assign(({ event }) => ({ task_status: 'completed', claimed_by: identityOf(event) ?? null, claim_expires_at: null, updated_at: iso(event.now) })),
    keepResult: assign(({ event }) => {
      const e = event as Extract<SignalEvent, { type: 'ACK' }>;
      return e.result === undefined && e.resources === undefined ? {} : { result: e.result ?? null, result_resources: e.resources ?? [] };
    }),
    beat: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'HEARTBEAT' }>;
      return {
        claim_expires_at: iso(e.now + e.lease_ms),
        heartbeat_at: iso(e.now),
        progress: e.progress ?? context.progress ?? null,
        progress_note: e.note ?? context.progress_note ?? null,
        updated_at: iso(e.now),
      };
    }),
    cancel: assign({ task_status: 'cancelled', claimed_by: null, claimed_at: null, claim_expires_at: null, updated_at: ({ event }) => iso(event.now) }),
    noteOverdue: assign(({ event }) => {
      const e = event as Extract<SignalEvent, { type: 'ACK_DUE' }>;
      return { ack_checked_at: iso(e.now), ack_overdue: [...e.overdue] };
    }),
    federated: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'FED_DELIVERED' }>;
      return { federation: { ...context.federation!, remote_id: e.remote_id, error: null }, updated_at: iso(e.now) };
    }),
    federationFailed: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'FED_FAILED' }>;
      return { federation: { ...context.federation!, error: e.error }, updated_at: iso(e.now) };
    }),
    dependencyDone: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'DEPENDENCY_COMPLETED' }>;
      return { blocked_by: (context.blocked_by ?? []).filter((d) => d !== e.dependency_id), updated_at: iso(e.now) };
    }),
    block: assign(({ event }) => {
      const e = event as Extract<SignalEvent, { type: 'DEPENDENCY_FAILED' }>;
      return { task_status: 'blocked', blocked_reason: { dependency_id: e.dependency_id, reason: e.reason }, updated_at: iso(e.now) };
    }),
    expire: assign({ task_status: 'expired', dead_letter_reason: 'deadline', claimed_by: null, claimed_at: null, claim_expires_at: null, updated_at: ({ event }) => iso(event.now) }),
    exhaust: assign({ dead_letter_reason: 'max_attempts' }),
    federationConflict: assign(({ context, event }) => {
      const e = event as Extract<SignalEvent, { type: 'FED_CONFLICT' }>;
      return { federation: { ...context.federation!, conflict: { ...e.conflict, at: iso(e.now) } }, updated_at: iso(e.now) };
    }),
    // measured from when the attempt failed: the ack, or the lease's end however late its timer fired
    backOff: assign(({ context, event }) => {
      const failedAt = context.claim_expires_at ? Math.min(event.now, Date.parse(context.claim_expires_at)) : event.now;
      return { retry_at: iso(failedAt + backoffMs(context, context.delivery_count + 1)) };
    }),
    revive: assign({ delivery_count: 0, dead_letter_reason: null, retry_at: null, updated_at: ({ event }) => iso(event.now) }),
    release: assign(({ context, event }) => ({
      claimed_by: null,
      claimed_at: null,
      claim_expires_at: null,
      delivery_count: context.delivery_count + 1,
      updated_at: iso(event.now),
    })),
  },
  guards: {
    notTask: ({ context }) => context.signal_type !== 'task',
    isTask: ({ context }) => context.signal_type === 'task',
    staleClaim: ({ context, event }) =>
      context.signal_type === 'task' && (event.type === 'CLAIM' || event.type === 'ACK' || event.type === 'HEARTBEAT') && event.claim_token !== undefined && event.claim_token !== (context.claim_token ?? 0),
    notOpen: ({ context }) => context.task_status !== 'open',
    byClaimer: ({ context, event }) => context.claimed_by === identityOf(event),
    notByClaimer: ({ context, event }) => context.claimed_by !== identityOf(event),
    failedOutcome: ({ event }) => event.type === 'ACK' && event.outcome === 'failed',
    lateCompletion: ({ context, event }) => event.type === 'ACK' && event.late === true && event.outcome !== 'failed' && context.signal_type === 'task' && context.task_status === 'open',
    leaseRunning: ({ context, event }) => context.claim_expires_at === null || Date.parse(context.claim_expires_at) > event.now,
    leaseOver: ({ context, event }) => (context.claim_expires_at !== null && Date.parse(context.claim_expires_at) <= event.now) || heartbeatDue(context) <= event.now,
    heartbeatRunning: ({ context, event }) => heartbeatDue(context) > event.now,
    outbound: ({ context }) => context.federation?.direction === 'outbound',
    federatedSignal: ({ context }) => !!context.federation,
    attemptsLeft: ({ context }) => context.delivery_count + 1 < context.max_attempts,
    backsOff: ({ context }) => context.delivery_count + 1 < context.max_attempts && backoffMs(context, context.delivery_count + 1) > 0,
    expired: ({ context }) => context.task_status === 'expired',
    awaited: ({ context, event }) => 'dependency_id' in event && (context.blocked_by ?? []).includes(event.dependency_id),
    lastDependency: ({ context, event }) =>
      event.type === 'DEPENDENCY_COMPLETED' && (context.blocked_by ?? []).every((d) => d === event.dependency_id) && (context.blocked_by ?? []).includes(event.dependency_id) && notBeforePassed(context, event.now),
    ready: ({ context, event }) => !(context.blocked_by ?? []).length && notBeforePassed(context, event.now) && (!context.retry_at || Date.parse(context.retry_at) <= event.now),
    deadlinePassed: ({ context, event }) => typeof context.deadline === 'string' && Date.parse(context.deadline) <= event.now,
    ackDue: ({ context, event }) =>
      event.type === 'ACK_DUE' && Array.isArray(event.overdue) && ackCheckPending(context) && Date.parse(context.ack_due_at!) <= event.now,
  },
}).createMachine({
  id: 'signal',
  initial: 'pending',
  context: {} as SignalContext,
  // the outcome of an outbound federation delivery is recorded whatever the signal's own state
  on: {
    FED_DELIVERED: { guard: 'outbound', actions: 'federated' },
    FED_FAILED: { guard: 'federatedSignal', actions: 'federationFailed' },
    FED_CONFLICT: { guard: 'federatedSignal', actions: 'federationConflict' },
    RETRY: { actions: refuse('SIGNAL_DELIVERY_INVALID_TRANSITION') },
  },
  states: {
    pending: {
      on: {
        DELIVER: { target: 'delivered', actions: 'stamp' },
        CLAIM: claimOpen,
        ACK: ackUnleased,
        CANCEL: cancelOpen,
        DEADLINE: expire,
        ACK_DUE: ackDue,
        HEARTBEAT: heartbeatUnleased,
      },
    },
    // A task whose dependencies are not all completed, or whose not_before is ahead: not claimable, not offered.
    waiting: {
      on: {
        DEPENDENCY_COMPLETED: [
          { guard: 'lastDependency', target: 'pending', actions: 'dependencyDone' },
          { guard: 'awaited', actions: 'dependencyDone' },
        ],
        DEPENDENCY_FAILED: { guard: 'awaited', target: 'blocked', actions: 'block' },
        NOT_BEFORE: { guard: 'ready', target: 'pending', actions: 'stamp' },
        RETRY_DUE: { guard: 'ready', target: 'pending', actions: 'stamp' },
        CLAIM: [staleClaim, { actions: refuseWaiting }],
        ...unclaimable,
      },
    },
    // A dependency ended without completing: the task can never run; its emitter may cancel it.
    blocked: {
      on: {
        CLAIM: [staleClaim, { actions: refuseBlocked }],
        ...unclaimable,
      },
    },
    delivered: {
      on: {
        CLAIM: claimOpen,
        ACK: ackUnleased,
        CANCEL: cancelOpen,
        DEADLINE: expire,
        ACK_DUE: ackDue,
        HEARTBEAT: heartbeatUnleased,
      },
    },
    leased: {
      // A lease that ended before its timer fired is released first; the event then meets the released state.
      on: {
        CLAIM: [
          { guard: 'leaseOver', target: 'released', actions: raise(({ event }) => event) },
          staleClaim,
          { guard: 'byClaimer', target: 'leased', reenter: true, actions: 'renew' },
          { actions: refuse('SIGNAL_CLAIM_CONFLICT') },
        ],
        ACK: [
          { guard: 'leaseOver', target: 'released', actions: raise(({ event }) => event) },
          staleClaim,
          { guard: 'notByClaimer', actions: refuse('SIGNAL_ACK_UNAUTHORIZED') },
          { guard: { type: 'failedOutcome' }, target: 'released' },
          { target: 'acked', actions: ['complete', 'keepResult'] },
        ],
        HEARTBEAT: [
          { guard: 'leaseOver', target: 'released', actions: raise(({ event }) => event) },
          staleClaim,
          { guard: 'notByClaimer', actions: refuse('SIGNAL_ACK_UNAUTHORIZED') },
          { target: 'leased', reenter: true, actions: 'beat' },
        ],
        HEARTBEAT_TIMEOUT: [{ guard: 'heartbeatRunning' }, { target: 'released' }],
        LEASE_EXPIRED: [{ guard: 'leaseRunning' }, { target: 'released' }],
        RELEASE: { target: 'released' },
        CANCEL: { target: 'acked', actions: 'cancel' },
        DEADLINE: expire,
        ACK_DUE: ackDue,
      },
    },
    // Transient: a failed attempt waits out its back-off, goes back to pending, or to dead_letter once attempts run out.
    released: {
      always: [
        { guard: 'backsOff', target: 'waiting', actions: ['backOff', 'release'] },
        { guard: 'attemptsLeft', target: 'pending', actions: 'release' },
        { target: 'dead_letter', actions: ['release', 'exhaust'] },
      ],
    },
    acked: {
      on: {
        ACK: [staleClaim, { actions: refuse('SIGNAL_DELIVERY_INVALID_TRANSITION') }],
        HEARTBEAT: heartbeatUnleased,
        CLAIM: [
          staleClaim,
          { guard: 'notTask', actions: refuse('SIGNAL_CLAIM_NOT_TASK') },
          { actions: refuse('SIGNAL_CLAIM_INVALID_STATUS') },
        ],
        CANCEL: cancelOpen,
        ACK_DUE: ackDue,
      },
    },
    dead_letter: {
      on: {
        ACK: [lateCompletion, { actions: refuse('SIGNAL_DEAD_LETTER') }],
        CLAIM: { actions: refuse('SIGNAL_DEAD_LETTER') },
        HEARTBEAT: { actions: refuse('SIGNAL_DEAD_LETTER') },
        CANCEL: { actions: refuse('SIGNAL_DEAD_LETTER') },
        // a task its deadline ended stays ended: its deadline would end it again at once
        RETRY: [
          { guard: 'expired', actions: refuse('SIGNAL_DELIVERY_INVALID_TRANSITION') },
          { target: 'pending', actions: 'revive' },
        ],
        ACK_DUE: ackDue,
      },
    },
  },
});

/** The back-off before the next attempt after failed attempt `attempt` (1-based): doubling, capped. */
export function backoffMs(c: Pick<SignalContext, 'retry_backoff_ms' | 'retry_backoff_max_ms'>, attempt: number): number {
  const base = c.retry_backoff_ms ?? 0;
  if (base <= 0) return 0;
  return Math.min(base * 2 ** (attempt - 1), c.retry_backoff_max_ms ?? Infinity);
}
/** When a lease with a heartbeat timeout ends for want of heartbeats: the last one (or the claim) plus the timeout. */
export const heartbeatDue = (c: SignalContext): number => {
  if (!c.heartbeat_timeout_ms || !c.claimed_at) return Infinity;
  const last = Math.max(Date.parse(c.claimed_at), c.heartbeat_at ? Date.parse(c.heartbeat_at) : 0);
  return last + c.heartbeat_timeout_ms;
};

const notBeforePassed = (c: SignalContext, now: number) => !c.not_before || Date.parse(c.not_before) <= now;

/** States a deadline still ends: the task is unfinished. */
const UNFINISHED = new Set(['waiting', 'blocked', 'pending', 'delivered', 'leased']);

/** Whether the acknowledgement due time is still to be checked. */
export const ackCheckPending = (c: SignalContext) => c.ack_required === true && typeof c.ack_due_at === 'string' && !c.ack_checked_at;

/**
 * The durable timers a persisted signal implies: a leased task expires at the end of its lease; a waiting
 * task with no dependency left becomes claimable at not_before, or a retried one at the end of its back-off; an unfinished task with a deadline expires
 * then; an acknowledgement due time not yet checked is checked when it comes.
 */
export function signalTimers(value: string, context: SignalContext): { event: SignalEvent['type']; at: number }[] {
  const out: { event: SignalEvent['type']; at: number }[] = [];
  if (value === 'leased' && context.claim_expires_at) out.push({ event: 'LEASE_EXPIRED', at: Date.parse(context.claim_expires_at) });
  if (value === 'waiting' && context.retry_at) out.push({ event: 'RETRY_DUE', at: Date.parse(context.retry_at) });
  else if (value === 'waiting' && !context.blocked_by?.length && context.not_before) out.push({ event: 'NOT_BEFORE', at: Date.parse(context.not_before) });
  if (value === 'leased' && heartbeatDue(context) < Date.parse(context.claim_expires_at ?? '')) out.push({ event: 'HEARTBEAT_TIMEOUT', at: heartbeatDue(context) });
  if (value === 'waiting' && !context.blocked_by?.length && context.not_before) out.push({ event: 'NOT_BEFORE', at: Date.parse(context.not_before) });
  if (UNFINISHED.has(value) && context.deadline) out.push({ event: 'DEADLINE', at: Date.parse(context.deadline) });
  if (ackCheckPending(context)) out.push({ event: 'ACK_DUE', at: Date.parse(context.ack_due_at!) });
  return out;
}
