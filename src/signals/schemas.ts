/** Request schemas of the signal operations, shared by every transport that offers them (REST, WebSocket, /rpc, MCP). */
import Type from 'typebox';
import type { ErrorCode } from '../errors.js';
import { boundKey, compile, Key } from '../validation.js';
import { ROUTING_POLICIES } from './routing.js';
import { PRIORITY_MAX } from './kind.js';
import { RETRY_BACKOFF_LIMIT_MS } from '../config.js';

const Str = Type.String();
/** bounds of `ack_due_in_s`: one second to 30 days */
export const ACK_DUE_MIN_S = 1;
export const ACK_DUE_MAX_S = 30 * 86_400;
const NonEmpty = Type.String({ minLength: 1 });
/** dependencies one task may name */
export const DEPENDS_ON_MAX = 100;
/** the most failed attempts a task may be given (MAX_DELIVERY_ATTEMPTS's own bound) */
export const MAX_ATTEMPTS_LIMIT = 1000;
/** the most tasks of one concurrency_key a task may let be leased at once (the key's record lists them) */
export const CONCURRENCY_LIMIT_MAX = 100;

export const EmitBody = compile(
  Type.Object({
    signal_type: Key('signal_type'),
    content: Type.String(),
    from_role: Type.Optional(Str),
    from_identity: Type.Optional(Str),
    to_role: Type.Optional(Key('role_name')),
    to_ring: Type.Optional(Key('ring_name')),
    to_identity: Type.Optional(Key('identity_name')),
    to_peer: Type.Optional(NonEmpty),
    parent_id: Type.Optional(NonEmpty),
    urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    tags: Type.Optional(Type.Array(Key('tag'))),
    target_capabilities: Type.Optional(Type.Array(Key('capability'))),
    routing_policy: Type.Optional(Type.Union(ROUTING_POLICIES.map((p) => Type.Literal(p)))),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    payload: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    resources: Type.Optional(Type.Array(Type.Unknown())),
    attachments: Type.Optional(Type.Array(Type.Unknown())),
    ack_required: Type.Optional(Type.Boolean()),
    ack_due_in_s: Type.Optional(Type.Integer({ minimum: ACK_DUE_MIN_S, maximum: ACK_DUE_MAX_S })),
    /** task signals this task waits for (docs/signals.md, Dependencies) */
    depends_on: Type.Optional(Type.Array(NonEmpty, { maxItems: DEPENDS_ON_MAX })),
    /** orders ready tasks before urgency, higher first */
    priority: Type.Optional(Type.Integer({ minimum: -PRIORITY_MAX, maximum: PRIORITY_MAX })),
    not_before: Type.Optional(Type.String({ format: 'date-time' })),
    deadline: Type.Optional(Type.String({ format: 'date-time' })),
    /** back-off after a failed attempt, doubling, capped (docs/signals.md, Retries); default TASK_RETRY_BACKOFF_MS / _MAX_MS */
    retry_backoff_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: RETRY_BACKOFF_LIMIT_MS })),
    retry_backoff_max_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: RETRY_BACKOFF_LIMIT_MS })),
    /** failed attempts before dead_letter; default MAX_DELIVERY_ATTEMPTS */
    max_attempts: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ATTEMPTS_LIMIT })),
    /** a lease ends this long after the holder's last heartbeat (or claim); tasks only */
    heartbeat_timeout_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
    /** at most concurrency_limit tasks of one concurrency_key are leased at once (docs/signals.md, Fair concurrency); tasks only */
    concurrency_key: Type.Optional(Key('concurrency_key')),
    concurrency_limit: Type.Optional(Type.Integer({ minimum: 1, maximum: CONCURRENCY_LIMIT_MAX })),
    /** a retry with this key answers the first signal (per identity, IDEMPOTENCY_TTL_MS; docs/reliability.md) */
    idempotency_key: Type.Optional(Key('idempotency_key')),
  }),
);
/** payload is free-form, but a string payload.task_type names an open-task index (signalIndexes.openTasksOfType): a key field. */
export function boundTaskType(payload: Record<string, unknown> | undefined, field: string, code?: ErrorCode): void {
  const t = payload?.task_type;
  if (typeof t === 'string' && t !== '') boundKey(t, field, 'task_type', code);
}
const SignalRef = { signal_id: NonEmpty };
/** the fencing token a claim answered: a renewal or ack naming an older grant's is refused (docs/signals.md, Fencing) */
export const ClaimToken = Type.Optional(Type.Integer({ minimum: 1 }));
export const ClaimBody = compile(Type.Object({ ...SignalRef, lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })), claim_token: ClaimToken }));
export const AckBody = compile(
  Type.Object({
    ...SignalRef,
    outcome: Type.Optional(Type.Union([Type.Literal('completed'), Type.Literal('failed')])),
    claim_token: ClaimToken,
    /** what a completed task produced: free JSON, bounded by BODY_LIMIT_BYTES and MAX_JSON_DEPTH */
    result: Type.Optional(Type.Unknown()),
    /** artifacts and workspace items it produced, as emit's resources */
    resources: Type.Optional(Type.Array(Type.Unknown())),
  }),
);
/** A holder's heartbeat: extends its lease by lease_ms and records progress (docs/signals.md, Heartbeats and progress). */
const HeartbeatTerms = {
  lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
  claim_token: ClaimToken,
  progress: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  note: Type.Optional(Type.String({ maxLength: 4096 })),
};
export const HeartbeatBody = compile(Type.Object({ ...SignalRef, ...HeartbeatTerms }));
/** the REST route names the task in its path */
export const HeartbeatFields = compile(Type.Object(HeartbeatTerms));
export const ReceiptBody = compile(Type.Object(SignalRef));
/** A thread is paged in thread order; the default page is the largest, so most threads come whole in one. */
export const THREAD_PAGE = 100;
const ThreadPaging = { after: Type.Optional(Type.String({ minLength: 1 })), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: THREAD_PAGE })) };
export const ThreadQuery = compile(Type.Object(ThreadPaging));
export const ThreadBody = compile(Type.Object({ ...SignalRef, ...ThreadPaging }));
export const SnoozeBody = compile(Type.Object({ ...SignalRef, until: Type.String({ format: 'date-time' }) }));

const DeliveryState = Type.Union(['waiting', 'blocked', 'pending', 'delivered', 'leased', 'acked', 'failed', 'dead_letter'].map((s) => Type.Literal(s)));
/** An identity's inbox filter (REST query, /rpc inbox.check, MCP svc_check_inbox); `type` is a comma list. */
export const InboxQuery = compile(
  Type.Object({
    after: Type.Optional(NonEmpty),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    type: Type.Optional(NonEmpty),
    ring: Type.Optional(Key('ring_name')),
    tag: Type.Optional(Key('tag')),
    delivery_state: Type.Optional(DeliveryState),
    min_urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    view: Type.Optional(Type.Union([Type.Literal('full'), Type.Literal('summary')])),
    project_tag: Type.Optional(Key('tag')),
    receipt_state: Type.Optional(Type.Union(['unread', 'acknowledged', 'resolved', 'snoozed'].map((s) => Type.Literal(s)))),
    include_resolved: Type.Optional(Type.Boolean()),
    include_snoozed: Type.Optional(Type.Boolean()),
    /** true: only signals whose acknowledgement the reader owes past its due time (read from its own index); false: all but those */
    ack_overdue: Type.Optional(Type.Boolean()),
    /** how a signal was addressed: a comma list of direct, role, ring, broadcast */
    scope: Type.Optional(Type.String({ pattern: '^\\s*(direct|role|ring|broadcast)\\s*(,\\s*(direct|role|ring|broadcast)\\s*)*$' })),
  }),
);

/** What the caller may claim now (GET /tasks/ready, /rpc tasks.ready, MCP svc_ready_tasks); `task_types` is a comma list. */
export const ReadyQuery = compile(
  Type.Object({
    task_types: Type.Optional(NonEmpty),
    after: Type.Optional(NonEmpty),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  }),
);
