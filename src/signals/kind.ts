/** The signal actor kind: its machine, the indexes a signal record implies, its timers and its journal. */
import { owesAck, type ReceiptContext } from '../../actors/inbox-receipt.js';
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import { actorStateIndex, type ActorKind, type ActorRecord, type Runtime } from '../runtime/runtime.js';
import { JOURNAL_LOG, sameSignalEvent, type EventEntry, type SignalEntry } from '../journal/journal.js';
import { RECEIPT, receiptId } from './receipt-kind.js';
import { takersOf } from './routing.js';
import { dependantOps } from './dependencies.js';
import { concurrencyOps } from './concurrency.js';

export const SIGNAL = 'signal';

/** Inbox members sort by urgency, then id (time): read in reverse for most urgent, newest first. */
export const inboxMember = (c: Pick<SignalContext, 'urgency' | 'id'>) => String(Math.round(c.urgency * 1000)).padStart(4, '0') + c.id;
export const idOfInboxMember = (m: string) => m.slice(4);
/** Ready (open-task) members sort by priority, then as the inbox does: read in reverse for highest priority, then most urgent. */
export const PRIORITY_MAX = 1_000_000;
const PRIORITY_WIDTH = 7;
export const readyMember = (c: Pick<SignalContext, 'priority' | 'urgency' | 'id'>) => String(PRIORITY_MAX + (c.priority ?? 0)).padStart(PRIORITY_WIDTH, '0') + inboxMember(c);
export const idOfReadyMember = (m: string) => m.slice(PRIORITY_WIDTH + 4);
/** the part of a ready member that orders it: members equal in it are ties */
export const readyRank = (m: string) => m.slice(0, PRIORITY_WIDTH + 4);
export const threadMember = (c: Pick<SignalContext, 'sequence' | 'id'>) => String(c.sequence).padStart(10, '0') + c.id;
export const idOfThreadMember = (m: string) => m.slice(10);
/** A thread's root is never written to its thread index (most signals start a thread no one answers): readers add it. */
export const threadRootMember = (rootId: string) => threadMember({ sequence: 0, id: rootId });
/** Members of `byState`: the runtime's state index of the signal kind (`kind:id`), so a signal is in one state index, not two. */
export const idOfStateMember = (m: string) => m.slice(SIGNAL.length + 1);
export const stateMember = (id: string) => `${SIGNAL}:${id}`;

export const signalIndexes = {
  all: 'signals',
  /** the runtime's own state index of the signal kind (members `stateMember`); `signals:state:*` of older builds is no longer written */
  byState: (state: string) => actorStateIndex(SIGNAL, state),
  byType: (type: string) => `signals:type:${type}`,
  roleInbox: (roleId: string) => `inbox:role:${roleId}`,
  ringInbox: (ringId: string) => `inbox:ring:${ringId}`,
  identityInbox: (identityId: string) => `inbox:identity:${identityId}`,
  /** signals with no target: every member's inbox */
  broadcast: 'inbox:all',
  thread: (rootId: string) => `thread:${rootId}`,
  /** an inbox's task signals claimable now (open, pending or delivered), by priority then urgency: what workflow.next and the ready list take from */
  openTasks: (inbox: string) => `${inbox}:ready-tasks`,
  /** the same, of one payload.task_type: workflow.next with task_types reads only these */
  openTasksOfType: (inbox: string, taskType: string) => `${inbox}:ready-tasks:type:${taskType}`,
  /** the open-task indexes of builds before priority (members `inboxMember`), emptied by the startup migration */
  legacyOpenTasks: (inbox: string) => `${inbox}:open-tasks`,
  legacyOpenTasksOfType: (inbox: string, taskType: string) => `${inbox}:open-tasks:type:${taskType}`,
};

/** The open-task indexes a signal belongs to: its inboxes', and per inbox its task type's when it has one. */
export function openTaskIndexes(c: SignalContext, all = signalIndexes.openTasks, ofType = signalIndexes.openTasksOfType): string[] {
  const type = c.payload?.task_type;
  return inboxesOf(c).flatMap((i) => (typeof type === 'string' ? [all(i), ofType(i, type)] : [all(i)]));
}

/** A task anyone reached may still claim: the open-task indexes hold exactly these. */
export const isOpenTask = (value: string, c: Pick<SignalContext, 'signal_type' | 'task_status'>) =>
  c.signal_type === 'task' && c.task_status === 'open' && (value === 'pending' || value === 'delivered');

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
    [signalIndexes.byType(r.context.signal_type), r.context.id],
    ...(r.context.sequence > 0 ? [[signalIndexes.thread(r.context.thread_id), threadMember(r.context)] as [string, string]] : []),
    ...inboxesOf(r.context).map((i): [string, string] => [i, inboxMember(r.context)]),
    ...(isOpenTask(r.value, r.context) ? openTaskIndexes(r.context).map((i): [string, string] => [i, readyMember(r.context)]) : []),
  ],
  timers: (r) => signalTimers(r.value, r.context),
  uniques: (r) => (r.context.federation?.direction === 'inbound' ? [{ key: inboundKey(r.context.federation.peer_id, r.context.federation.remote_id ?? r.context.id), code: 'SIGNAL_CLAIM_CONFLICT' }] : []),
  journal: (r, prev, event) => {
    // the due check is the only move that sets ack_checked_at: it reports overdue recipients, or nothing
    if (prev && !prev.context.ack_checked_at && r.context.ack_checked_at) return r.context.ack_overdue?.length ? { log: JOURNAL_LOG, entry: ackOverdueEntry(r) } : undefined;
    // the events carrying this Signal follow its entry, stored without it (`same_signal`, src/journal/journal.ts)
    return [signalEntry(r, prev, event?.type === 'DELIVER' ? (event.pushed_at as number | undefined) : undefined), ...federationEvents(r, prev), ...expiredEvents(r, prev), ...taskEvents(r, prev)].map((entry) => ({ log: JOURNAL_LOG, entry }));
  },
  // a dependency's end moves its dependants in the same commit: the last one completed makes the task claimable there
  // and a move into or out of a lease writes its concurrency_key's record there, so the key's limit holds across instances
  alongside: async (id, rec, prev, rt, requestId) => [...(await concurrencyOps(rt, id, rec, prev)), ...(await dependantOps(rt, id, rec, prev, requestId))],
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

/** context fields no view shows */
type Unshown = 'max_attempts' | 'to_role_id' | 'to_ring_id' | 'ack_recipients' | 'ack_checked_at' | 'ack_overdue';

export type Signal = Omit<SignalContext, Unshown | 'claim_token' | 'concurrency_limit'> & { ack_required: boolean; ack_due_at: string | null; claim_token: number | null; delivery_state: string } & Required<Pick<SignalContext, 'priority' | 'depends_on' | 'blocked_by' | 'blocked_reason' | 'not_before' | 'deadline' | 'dead_letter_reason' | 'heartbeat_timeout_ms' | 'heartbeat_at' | 'progress' | 'progress_note' | 'result_resources' | 'retry_backoff_ms' | 'retry_at'>> & { result: unknown; concurrency_key: string | null; concurrency_limit: number | null };

/**
 * The Signal as the interface shows it: the machine's context plus its state as delivery_state (ack bookkeeping stays inside).
 * One literal with every field in a fixed order, so every view shares one hidden class: a copy made key by key
 * (`v[k] = c[k]`) turns into a dictionary past 16 fields, ~4 KB a view, and is slower to encode as JSON or
 * msgpack; an object rest with excluded keys runs through V8's generic runtime path.
 */
export function signalView(r: ActorRecord<SignalContext>): Signal {
  const c = r.context;
  const v: Signal = {
    id: c.id,
    signal_type: c.signal_type,
    base_type: c.base_type,
    content: c.content,
    urgency: c.urgency,
    from_role: c.from_role,
    from_identity: c.from_identity,
    to_role: c.to_role,
    to_identity: c.to_identity,
    to_ring: c.to_ring,
    parent_id: c.parent_id,
    thread_id: c.thread_id,
    sequence: c.sequence,
    tags: c.tags,
    target_capabilities: c.target_capabilities,
    routing_policy: c.routing_policy,
    metadata: c.metadata,
    payload: c.payload,
    resources: c.resources,
    task_status: c.task_status,
    claimed_by: c.claimed_by,
    claimed_at: c.claimed_at,
    claim_expires_at: c.claim_expires_at,
    protocol_version: c.protocol_version,
    delivery_count: c.delivery_count,
    source_org: c.source_org,
    federation: c.federation,
    created_at: c.created_at,
    updated_at: c.updated_at,
    ack_required: c.ack_required ?? false,
    ack_due_at: c.ack_due_at ?? null,
    claim_token: c.claim_token ?? null,
    priority: c.priority ?? 0,
    depends_on: c.depends_on ?? [],
    blocked_by: c.blocked_by ?? [],
    blocked_reason: c.blocked_reason ?? null,
    not_before: c.not_before ?? null,
    deadline: c.deadline ?? null,
    dead_letter_reason: c.dead_letter_reason ?? null,
    retry_backoff_ms: c.retry_backoff_ms ?? 0,
    retry_at: c.retry_at ?? null,
    heartbeat_timeout_ms: c.heartbeat_timeout_ms ?? null,
    heartbeat_at: c.heartbeat_at ?? null,
    progress: c.progress ?? null,
    progress_note: c.progress_note ?? null,
    concurrency_key: c.concurrency_key ?? null,
    concurrency_limit: c.concurrency_key ? (c.concurrency_limit ?? 1) : null,
    result: c.result ?? null,
    result_resources: c.result_resources ?? [],
    delivery_state: r.value,
  };
  // the two fields a context holds only when set: named stores keep the object out of dictionary mode
  if (c.to_peer !== undefined) v.to_peer = c.to_peer;
  if (c.retry_backoff_max_ms !== undefined) v.retry_backoff_max_ms = c.retry_backoff_max_ms;
  return v;
}

export function signalEntry(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined, pushedAt?: number): SignalEntry {
  const route = { role_id: r.context.to_role_id, ring_id: r.context.to_ring_id };
  if (!prev) return { type: 'signal', signal: signalView(r), route };
  const e: SignalEntry = { type: 'signal.updated', signal: signalView(r), route, prev_state: prev.value };
  if (pushedAt !== undefined) e.pushed_at = pushedAt;
  return e;
}

export const TASK_EXPIRED = 'task.expired';

/** A task its deadline ended: told to its emitter (push and the `task.expired` webhook), in the commit that ends it. */
export function expiredEvents(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): EventEntry[] {
  if (!prev || r.context.task_status !== 'expired' || prev.context.task_status === 'expired') return [];
  return [sameSignalEvent(TASK_EXPIRED, { identities: [r.context.from_identity] })];
}

export const TASK_PROGRESS = 'task.progress';
export const TASK_COMPLETED = 'task.completed';

/**
 * Told to a task's emitter in the commit that makes them: each heartbeat (`task.progress`: the task's progress,
 * note and lease) and its completion (`task.completed`: the Signal with its result and result_resources).
 */
export function taskEvents(r: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): EventEntry[] {
  if (!prev || r.context.signal_type !== 'task') return [];
  const c = r.context;
  const audience = { identities: [c.from_identity] };
  if (c.heartbeat_at && c.heartbeat_at !== prev.context.heartbeat_at) {
    const data = { signal_id: c.id, claimed_by: c.claimed_by, claim_token: c.claim_token ?? null, progress: c.progress ?? null, note: c.progress_note ?? null, heartbeat_at: c.heartbeat_at, claim_expires_at: c.claim_expires_at };
    return [{ type: TASK_PROGRESS, subject: 'progress', data, audience }];
  }
  if (r.value === 'acked' && prev.value !== 'acked' && c.task_status === 'completed') return [sameSignalEvent(TASK_COMPLETED, audience)];
  return [];
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
  return types.map((type) => sameSignalEvent(type, audience));
}
