/** Signal rules: routing on emit, threads, claims and acks under key scopes, and filtered lists. */
import { encodeTime } from 'ulid';
import type { SignalContext } from '../../actors/signal.js';
import type { Config } from '../config.js';
import { AppError, isAppError } from '../errors.js';
import { iso, now } from '../clock.js';
import { newId } from '../ids.js';
import { keys as identityKeys, type Identity, type Principal } from '../identity/model.js';
import { membershipIndexes } from '../org/memberships.js';
import { sameName } from '../org/model.js';
import type { Org } from '../org/service.js';
import type { ActorRecord, Join, Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, type Claim, type IdempotencyRecords } from '../store/idempotency.js';
import type { Op, Versioned } from '../store/port.js';
import { newReceipt, type ReceiptContext } from '../../actors/inbox-receipt.js';
import { idOfStateMember, idOfThreadMember, inboundKey, inboxMember, SIGNAL, signalIndexes, signalView, stateMember, threadRootMember, type Signal } from './kind.js';
import { overdueFor, RECEIPT, receiptId, receiptIndexes, receiptView, type Receipt } from './receipt-kind.js';
import { assertFilterInScope, assertInScope, outOfScope } from './policy.js';
import { boundTaskType } from './schemas.js';
import { reaches, take, takersOf, type RoutingPolicy } from './routing.js';
import { readAll, scanDesc, type Scanned } from '../store/scan.js';
import { auditOps } from '../audit/audit.js';
import { planDependencies, taskGraph, type DependencyPlan } from './dependencies.js';

export const CANONICAL_TYPES = ['pulse', 'sense', 'task', 'query', 'alert', 'artifact', 'proposal', 'shift'];

export interface EmitBody {
  signal_type: string;
  content: string;
  from_role?: string;
  from_identity?: string;
  to_role?: string;
  to_ring?: string;
  to_identity?: string;
  /** a peer organization whose role, ring or identity the targets name */
  to_peer?: string;
  parent_id?: string;
  urgency?: number;
  tags?: string[];
  target_capabilities?: string[];
  routing_policy?: RoutingPolicy;
  metadata?: Record<string, unknown>;
  payload?: Record<string, unknown>;
  resources?: unknown[];
  attachments?: unknown[];
  ack_required?: boolean;
  ack_due_in_s?: number;
  /** task signals this task waits for: it is claimable once all of them completed */
  depends_on?: string[];
  priority?: number;
  /** date-time: the task is not claimable before it */
  not_before?: string;
  /** date-time: an unfinished task ends then as `expired` */
  deadline?: string;
  /** back-off after a failed attempt (×2 each further one, capped by retry_backoff_max_ms) and failed attempts before dead_letter */
  retry_backoff_ms?: number;
  retry_backoff_max_ms?: number;
  max_attempts?: number;
  /** a lease of this task ends this long after its holder's last heartbeat (or claim) */
  heartbeat_timeout_ms?: number;
  /** tasks of one key are leased at most concurrency_limit (default 1) at once: a serial queue per key */
  concurrency_key?: string;
  concurrency_limit?: number;
  /** a retry with this key (per identity, IDEMPOTENCY_TTL_MS) answers the first signal instead of a second one */
  idempotency_key?: string;
}

/** The emit fields only a task signal takes (and none sent to a peer: its schedule would be ours, its copy the peer's). */
const TASK_ONLY = ['depends_on', 'not_before', 'deadline', 'retry_backoff_ms', 'retry_backoff_max_ms', 'max_attempts', 'heartbeat_timeout_ms', 'concurrency_key', 'concurrency_limit'] as const;

/** the key space of an emit's `idempotency_key` in the one idempotency store (the header's is its own) */
const EMIT_SCOPE = 'emit';
const keyReused = () => new AppError('IDEMPOTENCY_KEY_REUSED', 'idempotency_key was used with a different request', { field: 'idempotency_key' });

/** An acknowledgement-required signal makes a receipt per recipient in its emit commit: this many at most. */
export const ACK_MAX_RECIPIENTS = 1000;

export interface ListFilter {
  types?: string[];
  from_identity?: string;
  to_role?: string;
  to_ring?: string;
  task_status?: string;
  delivery_state?: string;
  tag?: string;
  since?: number;
}

const threadSeqKey = (rootId: string) => `thread-seq:${rootId}`;

/** Checks emit's `resources` (and legacy `attachments`) exist and are visible to the emitter; answers the canonical list. */
export interface ResourceCheck {
  check(p: Principal, resources: unknown[] | undefined, attachments: unknown[] | undefined): Promise<{ resources: unknown[] }>;
}

/** The sending side of federation (src/federation/outbound.ts), as the signal rules use it. */
export interface FederationLink {
  /** refuses with the interface's FED_ code unless the peer is active, trusted and allows the type */
  outboundPeer(peerId: string, signalType: string): Promise<unknown>;
  /** ops creating a durable, retried call to the peer, committed with the change that causes it */
  deliveryOps(peerId: string, call: 'deliver' | 'ack' | 'cancel', signalId: string, body: Record<string, unknown>): Op[];
  deliverBody(c: SignalContext): Record<string, unknown>;
  /** asks the origin of an inbound task for the claim (or renewal) with this lease; its refusal is raised wrapped in a federation code */
  forwardClaim(c: SignalContext, agent: string, leaseMs: number): Promise<void>;
  /** tells the origin of an inbound task its holder's heartbeat (lease, progress, note); its refusal is raised as a claim's */
  forwardHeartbeat(c: SignalContext, agent: string, beat: { lease_ms: number; progress?: number; note?: string }): Promise<void>;
}

/** What a completing ack reports of a task. */
export interface TaskResult {
  result?: unknown;
  resources?: unknown[];
}

/** Ops counting a new signal against a quota, committed with it; throws to refuse it. */
export type Charge = (rec: ActorRecord<SignalContext>) => Promise<Op[]>;

/** codes of a claim another caller won meanwhile (or a key's limit, a dead letter, a narrowed key): the walk moves on */
const LOST_RACE = new Set(['SIGNAL_CLAIM_CONFLICT', 'SIGNAL_CLAIM_INVALID_STATUS', 'SIGNAL_DEAD_LETTER', 'AUTH_SCOPE_DENIED']);

/** A refusal of `claimRead` that means "taken or not takeable now": the caller picks another task. */
export function lostRace(e: unknown): e is AppError {
  return isAppError(e) && (LOST_RACE.has(e.code) || (e.code === 'SIGNAL_ACK_UNAUTHORIZED' && (e.details as { reason?: string } | null)?.reason === 'stale_claim'));
}

export class Signals {
  constructor(
    private rt: Runtime,
    private org: Org,
    private config: Pick<Config, 'taskLeaseMs' | 'maxDeliveryAttempts' | 'strictSignalTypes' | 'taskRetryBackoffMs' | 'taskRetryBackoffMaxMs' | 'bodyLimitBytes'>,
    private resources: ResourceCheck,
    private federation: FederationLink,
    private idempotency: IdempotencyRecords,
  ) {}

  requireMember(p: Principal): void {
    if (!p.membership || p.membership.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
  }

  /** Resolves the targets; names come back as the role or ring spells them. */
  private async route(body: EmitBody): Promise<{ role_id: string | null; ring_id: string | null; role: string | null; ring: string | null }> {
    // the targets of a signal to a peer are names in the peer's org: the peer resolves them
    if (body.to_peer !== undefined) {
      if (body.to_role === undefined && body.to_ring === undefined && body.to_identity === undefined)
        throw new AppError('VALIDATION_FIELD_REQUIRED', 'A signal to a peer names a role, ring or identity in the peer organization', { field: 'to_role' });
      await this.federation.outboundPeer(body.to_peer, body.signal_type);
      return { role_id: null, ring_id: null, role: body.to_role ?? null, ring: body.to_ring ?? null };
    }
    const [role, ring, identity] = await Promise.all([
      body.to_role !== undefined ? this.org.roleByName(body.to_role) : undefined,
      body.to_ring !== undefined ? this.org.ringByName(body.to_ring) : undefined,
      body.to_identity !== undefined ? this.rt.store.get(identityKeys.identity(body.to_identity)) : undefined,
    ]);
    if (body.to_role !== undefined && !role) throw new AppError('SIGNAL_NOT_FOUND', `No role named "${body.to_role}"`, { field: 'to_role' });
    if (body.to_ring !== undefined && !ring) throw new AppError('SIGNAL_NOT_FOUND', `No ring named "${body.to_ring}"`, { field: 'to_ring' });
    if (body.to_identity !== undefined && !identity) throw new AppError('SIGNAL_NOT_FOUND', `No identity ${body.to_identity}`, { field: 'to_identity' });
    return { role_id: role?.id ?? null, ring_id: ring?.id ?? null, role: role?.name ?? null, ring: ring?.name ?? null };
  }

  /**
   * Emits a signal. With `idempotency_key` (every transport's emit: REST body, WebSocket op, /rpc, MCP) the
   * key is run once per identity on the one idempotency store: a retry with the same body answers the first
   * signal, kept in the commit that created it; another body is 409 IDEMPOTENCY_KEY_REUSED.
   */
  async emit(p: Principal, body: EmitBody): Promise<Signal> {
    const done = committedEffect<Signal>(p);
    if (done) return done;
    const { idempotency_key: key, ...fields } = body;
    if (key === undefined) return this.emitOnce(p, fields);
    const begun = await this.idempotency.begin<Signal>(p.identity.id, EMIT_SCOPE, key, JSON.stringify(fields), keyReused);
    if ('replay' in begun) return begun.replay;
    const claim = begun.claim;
    return this.idempotency.run(claim, () => this.emitOnce(p, fields, claim), () => undefined);
  }

  private async emitOnce(p: Principal, body: EmitBody, claim?: Claim): Promise<Signal> {
    this.requireMember(p);
    if (body.from_identity !== undefined && body.from_identity !== p.identity.id) throw new AppError('POLICY_IDENTITY_MISMATCH');
    if (!CANONICAL_TYPES.includes(body.signal_type) && this.config.strictSignalTypes) throw new AppError('SIGNAL_EMIT_INVALID_TYPE', `signal_type must be one of ${CANONICAL_TYPES.join(', ')}`, { field: 'signal_type' });
    boundTaskType(body.payload, 'payload.task_type', 'SIGNAL_EMIT_VALIDATION_FAILED');
    assertInScope(p.key, { signal_type: body.signal_type, to_ring: body.to_ring ?? null, payload: body.payload ?? {} });
    if (body.ack_due_in_s !== undefined && body.ack_required !== true)
      throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', 'ack_due_in_s needs ack_required: true', { field: 'ack_due_in_s' });
    this.checkSchedule(body);
    const [route, checked] = await Promise.all([this.route(body), this.resources.check(p, body.resources, body.attachments)]);
    const federation = body.to_peer !== undefined ? { peer_id: body.to_peer, remote_id: null, direction: 'outbound' as const, hops: 0, error: null } : null;
    return signalView(await this.write(p.identity.id, body, route, { resources: checked.resources, source_org: null, federation }, undefined, claim, p));
  }

  private checkSchedule(body: EmitBody): void {
    for (const field of TASK_ONLY) {
      if (body[field] === undefined) continue;
      if (body.signal_type !== 'task') throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${field} is for task signals`, { field });
      if (body.to_peer !== undefined) throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${field} is not offered on a signal to a peer`, { field });
    }
    for (const field of ['not_before', 'deadline'] as const)
      if (body[field] !== undefined && !Number.isFinite(Date.parse(body[field]!))) throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${field} is not a time this service can hold`, { field });
    if (body.concurrency_limit !== undefined && body.concurrency_key === undefined)
      throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', 'concurrency_limit needs a concurrency_key', { field: 'concurrency_limit' });
    if (body.retry_backoff_ms !== undefined && body.retry_backoff_max_ms !== undefined && body.retry_backoff_max_ms < body.retry_backoff_ms)
      throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', 'retry_backoff_max_ms must be at least retry_backoff_ms', { field: 'retry_backoff_max_ms' });
    if (body.deadline === undefined) return;
    const deadline = Date.parse(body.deadline);
    if (deadline <= now()) throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', 'deadline must be in the future', { field: 'deadline' });
    if (body.not_before !== undefined && deadline <= Date.parse(body.not_before)) throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', 'deadline must be after not_before', { field: 'deadline' });
  }

  /**
   * Stores a copy of a peer's signal (POST /federation/deliver) and routes it in this org like a local emit,
   * so push, inboxes and webhooks follow. Idempotent per (peer, origin id): the copy claims a unique record
   * in its creating commit, and a redelivery answers the stored copy. The origin's parent maps to our copy of it.
   * `charge`: ops for the copy's commit that count it against the peer's quota (or refuse it).
   */
  async receive(peerId: string, from: string, body: EmitBody, originId: string, hops: number, charge?: Charge, requestId?: string): Promise<Signal> {
    const stored = await this.inboundCopy(peerId, originId);
    if (stored) return signalView(stored);
    const parent = body.parent_id !== undefined ? await this.inboundCopy(peerId, body.parent_id) : undefined;
    const local: EmitBody = { ...body, parent_id: parent?.context.id, depends_on: undefined, not_before: undefined, deadline: undefined, retry_backoff_ms: undefined, retry_backoff_max_ms: undefined, max_attempts: undefined, heartbeat_timeout_ms: undefined, concurrency_key: undefined, concurrency_limit: undefined };
    const route = await this.route(local);
    const federation = { peer_id: peerId, remote_id: originId, direction: 'inbound' as const, hops };
    return signalView(await this.write(from, local, route, { resources: [], source_org: peerId, federation }, () => this.inboundCopy(peerId, originId), undefined, undefined, charge, requestId));
  }

  /** Our copy of the peer's signal `originId`, if it was delivered. */
  async inboundCopy(peerId: string, originId: string): Promise<ActorRecord<SignalContext> | undefined> {
    const u = await this.rt.store.get<{ id: string }>(inboundKey(peerId, originId));
    return u ? (await this.rt.load<SignalContext>(SIGNAL, u.value.id))?.value : undefined;
  }

  /** Builds and commits a new signal; `existing` (checked on every attempt) answers a record stored meanwhile instead. */
  private async write(
    from: string,
    body: EmitBody,
    route: { role_id: string | null; ring_id: string | null; role: string | null; ring: string | null },
    extra: Pick<SignalContext, 'resources' | 'source_org' | 'federation'>,
    existing?: () => Promise<ActorRecord<SignalContext> | undefined>,
    claim?: Claim,
    emitter?: Principal,
    charge?: Charge,
    requestId = emitter?.requestId,
  ): Promise<ActorRecord<SignalContext>> {
    const canonical = CANONICAL_TYPES.includes(body.signal_type);
    const recipients = body.ack_required ? await this.ackRecipients(body, route, from) : undefined;
    const id = newId();
    const root = await this.threadRoot(id, body.parent_id);
    // replies to one thread queue per thread in this process: only another process can move the counter under us
    const write = () => this.rt.retry(async () => {
      const found = await existing?.();
      if (found) return { result: found };
      const [thread, deps] = await Promise.all([this.threadPosition(root, body.parent_id), body.depends_on?.length && emitter ? planDependencies(this.rt, emitter, id, body.depends_on) : undefined]);
      const t = iso();
      const context: SignalContext = {
        id,
        signal_type: body.signal_type,
        base_type: canonical ? body.signal_type : 'custom',
        content: body.content,
        urgency: body.urgency ?? 0.5,
        from_role: body.from_role ?? null,
        from_identity: from,
        to_role: route.role,
        to_identity: body.to_identity ?? null,
        to_ring: route.ring,
        ...(extra.federation?.direction === 'outbound' && { to_peer: extra.federation.peer_id }),
        parent_id: body.parent_id ?? null,
        thread_id: thread.root,
        sequence: thread.sequence,
        to_role_id: route.role_id,
        to_ring_id: route.ring_id,
        tags: body.tags ?? [],
        target_capabilities: body.target_capabilities ?? [],
        routing_policy: body.routing_policy ?? 'all',
        metadata: canonical ? (body.metadata ?? {}) : { ...body.metadata, noncanonical_type: true },
        payload: body.payload ?? {},
        resources: extra.resources,
        task_status: body.signal_type === 'task' ? 'open' : null,
        claimed_by: null,
        claimed_at: null,
        claim_expires_at: null,
        protocol_version: 'svc/1.0',
        delivery_count: 0,
        max_attempts: body.max_attempts ?? this.config.maxDeliveryAttempts,
        source_org: extra.source_org,
        federation: extra.federation,
        created_at: t,
        updated_at: t,
        ...(recipients ? this.ackTerms(recipients, body.ack_due_in_s, Date.parse(t)) : {}),
        ...scheduleTerms(body, deps),
        // a copy of a peer's task retries as its origin says (the origin fences its grants)
        ...(extra.source_org ? {} : this.retryTerms(body)),
      };
      const rec: ActorRecord<SignalContext> = { value: initialState(context, Date.parse(t)), context };
      // the delivery to the peer is recorded in the signal's own commit: the outbox
      const outbound = extra.federation?.direction === 'outbound' ? this.federation.deliveryOps(extra.federation.peer_id, 'deliver', id, this.federation.deliverBody(context)) : [];
      // an idempotency_key's answer is kept in the same commit: a retry can never make a second signal
      const kept = [...(claim ? [this.idempotency.keepOp(claim, signalView(rec))] : []), ...(existing ? [] : effectOps(emitter, signalView(rec)))];
      const charged = charge ? await charge(rec) : [];
      return { result: rec, ops: [...thread.ops, ...(deps?.ops ?? []), ...this.rt.createOps(SIGNAL, id, rec, requestId), ...this.receiptOps(context, requestId), ...outbound, ...kept, ...charged] };
    });
    return body.parent_id === undefined ? write() : this.rt.serial(threadSeqKey(root), write);
  }

  /**
   * The identities an acknowledgement is asked of: everyone the signal reaches at emit (the direct identity,
   * the role's fillers, the ring's members, or every active member for a broadcast, narrowed by
   * target_capabilities like the inbox), except the sender. Later fillers or members see it but owe nothing.
   */
  private async ackRecipients(body: EmitBody, route: { role_id: string | null; ring_id: string | null }, sender: string): Promise<string[]> {
    const broadcast = !body.to_identity && !route.role_id && !route.ring_id;
    const [fillers, ring, members] = await Promise.all([
      route.role_id ? this.org.fillersOf(route.role_id) : [],
      route.ring_id ? this.org.ring(route.ring_id) : undefined,
      broadcast ? readAll(this.rt.store, membershipIndexes.byStatus('active')) : [],
    ]);
    const group = [...fillers, ...(ring?.members ?? []), ...members.map((m) => m.slice(m.indexOf('|') + 1))];
    const caps = body.target_capabilities ?? [];
    const ids = [...new Set(group)].filter((x) => x !== sender);
    const reached = caps.length ? await this.withCapabilities(ids, caps) : ids;
    const out = [...new Set([...(body.to_identity && body.to_identity !== sender ? [body.to_identity] : []), ...reached])].sort();
    if (out.length > ACK_MAX_RECIPIENTS)
      throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `ack_required reaches ${out.length} recipients; at most ${ACK_MAX_RECIPIENTS} may be asked`, { field: 'ack_required' });
    return out;
  }

  private async withCapabilities(ids: string[], caps: string[]): Promise<string[]> {
    const rows = await this.rt.store.getMany<Identity>(ids.map(identityKeys.identity));
    return ids.filter((_, i) => rows[i] && caps.every((c) => rows[i]!.value.capabilities.includes(c)));
  }

  private ackTerms(recipients: string[], dueInS: number | undefined, at: number): Partial<SignalContext> {
    return { ack_required: true, ack_due_at: dueInS === undefined ? null : iso(at + dueInS * 1000), ack_recipients: recipients, ack_checked_at: null, ack_overdue: [] };
  }

  /** One receipt per recipient, in the emit commit: each carries the due time and its own overdue timer. */
  private receiptOps(c: SignalContext, requestId: string | undefined): Op[] {
    if (!c.ack_required) return [];
    const terms = { ack_due_at: c.ack_due_at ?? null, inbox_member: inboxMember(c) };
    return (c.ack_recipients ?? []).flatMap((who) => this.rt.createOps<ReceiptContext>(RECEIPT, receiptId(who, c.id), newReceipt(who, c.id, Date.parse(c.created_at), terms), requestId));
  }

  /** Each receipt of a signal (every recipient of an acknowledgement-required one); only its sender or an admin may read them. */
  async receipts(p: Principal, signalId: string, before: string | undefined, limit: number): Promise<Scanned<Receipt>> {
    const signal = await this.load(signalId);
    assertInScope(p.key, signal.context);
    if (signal.context.from_identity !== p.identity.id && !p.identity.is_admin) throw new AppError('POLICY_DENIED', 'Only the sender of a signal or an admin may read its receipts');
    const [taker] = await takersOf(this.rt.store, [signal.context]);
    const view = (r: ActorRecord<ReceiptContext>, who: string) => ({ ...receiptView(r, who, signalId), ack_overdue: overdueFor(r.context, taker) });
    return scanDesc<Receipt>(this.rt.store, [receiptIndexes.bySignal(signalId)], {
      before,
      limit,
      load: async (ids) => (await this.rt.loadMany<ReceiptContext>(RECEIPT, ids.map((who) => receiptId(who, signalId)))).map((r, i) => (r ? view(r, ids[i]) : undefined)),
      keep: () => true,
    });
  }

  /**
   * The sequence counter of a thread moves in the same commit as the reply, so positions follow commit order.
   * A root writes none: the first reply creates the counter (expect absent).
   */
  private async threadPosition(root: string, parentId: string | undefined): Promise<{ root: string; sequence: number; ops: Op[] }> {
    if (parentId === undefined) return { root, sequence: 0, ops: [] };
    const counter = await this.rt.store.get<{ next: number }>(threadSeqKey(root));
    const sequence = counter?.value.next ?? 1;
    return { root, sequence, ops: [{ op: 'put', key: threadSeqKey(root), value: { next: sequence + 1 }, expect: counter?.version ?? 0 }] };
  }

  /** The thread a new signal joins: its own id for a root, else the parent's thread. */
  private async threadRoot(id: string, parentId: string | undefined): Promise<string> {
    if (parentId === undefined) return id;
    const parent = await this.rt.load<SignalContext>(SIGNAL, parentId);
    if (!parent) throw new AppError('SIGNAL_NOT_FOUND', `No parent signal ${parentId}`, { field: 'parent_id' });
    return parent.value.context.thread_id;
  }

  async load(id: string, notFound: 'SIGNAL_NOT_FOUND' | 'SIGNAL_ACK_NOT_FOUND' = 'SIGNAL_NOT_FOUND'): Promise<ActorRecord<SignalContext>> {
    return (await this.loadStored(id, notFound)).value;
  }

  /** The record with its stored version, for a send that starts from it. */
  private async loadStored(id: string, notFound: 'SIGNAL_NOT_FOUND' | 'SIGNAL_ACK_NOT_FOUND' = 'SIGNAL_NOT_FOUND'): Promise<Versioned<ActorRecord<SignalContext>>> {
    const r = await this.rt.load<SignalContext>(SIGNAL, id);
    if (!r) throw new AppError(notFound);
    return r;
  }

  /**
   * Claims a task a walk read as open (`workflow.next`, the socket dispatch), with the claim token it was read
   * with: a record read before someone claimed it (the caller too, from another line, socket or instance) is
   * refused as stale, never taken as a renewal of a lease the caller already holds, so no task is handed out
   * twice. A federated copy goes without the token: its origin decides and moves the token itself.
   * A refusal the walk should move on from satisfies `lostRace`.
   */
  claimRead(p: Principal, task: Versioned<ActorRecord<SignalContext>>, leaseMs?: number): Promise<Signal> {
    const c = task.value.context;
    return this.claim(p, c.id, leaseMs, c.federation?.direction === 'inbound' ? undefined : (c.claim_token ?? 0), task);
  }

  /** A grant answers the task with its new `claim_token`; a renewal that names one must name the current grant's. */
  async claim(p: Principal, signalId: string, leaseMs?: number, claimToken?: number, loaded?: Versioned<ActorRecord<SignalContext>>): Promise<Signal> {
    this.requireMember(p);
    // a walk that has just read the task hands its record over: a stale one fails the commit's version check and is read again
    const stored = loaded ?? (await this.loadStored(signalId));
    const cur = stored.value;
    assertInScope(p.key, cur.context);
    const lease = leaseMs ?? this.config.taskLeaseMs;
    // the origin of an open federated task decides who holds it, renewals included, so its lease ends with ours;
    // a copy that is no task, or no longer open, is refused here without asking
    const forwarded = cur.context.federation?.direction === 'inbound' && cur.context.task_status === 'open' && cur.value !== 'dead_letter';
    if (forwarded) await this.federation.forwardClaim(cur.context, p.identity.id, lease);
    // after a forwarded claim the record may have moved meanwhile (the origin's answer): read it again
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'CLAIM', identity: p.identity.id, lease_ms: lease, claim_token: claimToken }, { requestId: p.requestId, ...(forwarded ? {} : { loaded: stored }) });
    return signalView(c!.record);
  }

  /**
   * `claimToken`, when given, must be the task's current grant: an older one is refused (`stale_claim`).
   * `done`: what a completing ack of a task reports (its result and resources), kept on the task.
   */
  async ack(p: Principal, signalId: string, outcome?: 'completed' | 'failed', claimToken?: number, done: TaskResult = {}): Promise<Signal> {
    return (await this.ackThenClaim(p, signalId, outcome, claimToken, done)).acked;
  }

  /**
   * An ack that also claims `next`, a task the caller's walk read as open, in the ack's own commit (a worker's
   * `done` is handed its next task without a second commit). The claim is best effort: when it cannot ride
   * along (a federated copy, out of scope, taken meanwhile) the ack commits alone and `claimed` is absent.
   */
  async ackThenClaim(p: Principal, signalId: string, outcome?: 'completed' | 'failed', claimToken?: number, done: TaskResult = {}, next?: { task: Versioned<ActorRecord<SignalContext>>; leaseMs?: number }): Promise<{ acked: Signal; claimed?: Signal }> {
    this.requireMember(p);
    const stored = await this.loadStored(signalId, 'SIGNAL_ACK_NOT_FOUND');
    assertInScope(p.key, stored.value.context);
    const reported = await this.checkResult(p, stored.value.context, outcome, done);
    const join = next && this.claimToJoin(p, next.task, next.leaseMs);
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'ACK', identity: p.identity.id, outcome, claim_token: claimToken, ...reported }, { requestId: p.requestId, notFound: 'SIGNAL_ACK_NOT_FOUND', loaded: stored, join, extra: (rec, prev) => this.ackToOrigin(rec, prev, p.identity.id) });
    await this.takeIfRecipient(p, c!.record.context);
    const joined = c!.joined as ActorRecord<SignalContext> | undefined;
    return { acked: signalView(c!.record), ...(joined && { claimed: signalView(joined) }) };
  }

  /** `claimRead`'s claim as a move for another send's commit; none for a federated copy (its origin decides) or a task out of the key's scope. */
  private claimToJoin(p: Principal, task: Versioned<ActorRecord<SignalContext>>, leaseMs?: number): Join | undefined {
    const c = task.value.context;
    if (c.federation?.direction === 'inbound' || outOfScope(p.key, c)) return undefined;
    return { kind: SIGNAL, id: c.id, loaded: task as Versioned<ActorRecord>, event: { type: 'CLAIM', identity: p.identity.id, lease_ms: leaseMs ?? this.config.taskLeaseMs, claim_token: c.claim_token ?? 0 } };
  }

  /** A result is for completing a task; it is bounded like a request body, and its resources are emit's. */
  private async checkResult(p: Principal, c: SignalContext, outcome: string | undefined, done: TaskResult): Promise<TaskResult> {
    if (done.result === undefined && done.resources === undefined) return {};
    const field = done.result !== undefined ? 'result' : 'resources';
    if (c.signal_type !== 'task' || outcome === 'failed') throw new AppError('VALIDATION_INVALID_TYPE', `${field} is reported only by an ack completing a task`, { field, reason: 'completed_only' });
    if (done.result !== undefined && Buffer.byteLength(JSON.stringify(done.result)) > this.config.bodyLimitBytes)
      throw new AppError('VALIDATION_INVALID_TYPE', `result is larger than BODY_LIMIT_BYTES (${this.config.bodyLimitBytes})`, { field: 'result', reason: 'size', limit: this.config.bodyLimitBytes });
    const checked = done.resources !== undefined ? await this.resources.check(p, done.resources, undefined) : undefined;
    return { ...(done.result !== undefined && { result: done.result }), ...(checked && { resources: checked.resources }) };
  }

  /**
   * The holder's heartbeat: extends its lease by `lease_ms` from now and records `progress` and `note`, pushed
   * to the emitter as `task.progress`. Requires the claim (and its token when given), as an ack does.
   */
  async heartbeat(p: Principal, signalId: string, beat: { lease_ms?: number; claim_token?: number; progress?: number; note?: string }): Promise<Signal> {
    this.requireMember(p);
    const stored = await this.loadStored(signalId);
    assertInScope(p.key, stored.value.context);
    const event = { type: 'HEARTBEAT' as const, identity: p.identity.id, lease_ms: beat.lease_ms ?? this.config.taskLeaseMs, claim_token: beat.claim_token, progress: beat.progress, note: beat.note };
    // the origin of a federated task holds the lease that counts: the beat reaches it first, as a renewal does
    const cur = stored.value;
    const forwarded = cur.context.federation?.direction === 'inbound' && cur.value === 'leased' && cur.context.claimed_by === p.identity.id;
    if (forwarded) await this.federation.forwardHeartbeat(cur.context, p.identity.id, { lease_ms: event.lease_ms, progress: beat.progress, note: beat.note });
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, event, { requestId: p.requestId, ...(forwarded ? {} : { loaded: stored }) });
    return signalView(c!.record);
  }

  /** An any_one signal is taken by the first recipient to ack, acknowledge or resolve it. */
  async takeIfRecipient(p: Principal, c: SignalContext): Promise<void> {
    if (c.routing_policy !== 'any_one') return;
    if (reaches(c, p.identity, await this.org.placesOf(p.identity.id))) await take(this.rt.store, c, p.identity.id, now());
  }

  /** A task with its upstream (dependencies, transitively) and downstream (dependants), each with its state. */
  async graph(p: Principal, signalId: string): Promise<{ task: Signal; upstream: unknown[]; downstream: unknown[]; truncated: boolean }> {
    const r = await this.load(signalId);
    assertInScope(p.key, r.context);
    return { task: signalView(r), ...(await taskGraph(this.rt, p, r)) };
  }

  /** A task's back-off terms: written only when it backs off, so a task retried at once is stored as before. */
  private retryTerms(body: EmitBody): Partial<SignalContext> {
    if (body.signal_type !== 'task') return {};
    const base = body.retry_backoff_ms ?? this.config.taskRetryBackoffMs;
    return base > 0 ? { retry_backoff_ms: base, retry_backoff_max_ms: body.retry_backoff_max_ms ?? this.config.taskRetryBackoffMaxMs } : {};
  }

  /** Brings a dead-lettered task back to pending with its attempts reset; only its sender or an admin may. Audited. */
  async retry(p: Principal, signalId: string): Promise<Signal> {
    this.requireMember(p);
    const cur = await this.load(signalId);
    assertInScope(p.key, cur.context);
    if (cur.context.from_identity !== p.identity.id && !p.identity.is_admin) throw new AppError('POLICY_DENIED', 'Only the sender of a task or an admin may retry it');
    const details = { previous_reason: cur.context.dead_letter_reason ?? null, delivery_count: cur.context.delivery_count, by_admin: cur.context.from_identity !== p.identity.id };
    const extra = () => auditOps({ actor: p.identity.id, action: 'task.retry', target: signalId, requestId: p.requestId, details });
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'RETRY' }, { requestId: p.requestId, extra });
    return signalView(c!.record);
  }

  /** Ends an open task; only its sender or an admin may. */
  async cancel(p: Principal, signalId: string): Promise<Signal> {
    this.requireMember(p);
    const cur = await this.load(signalId);
    assertInScope(p.key, cur.context);
    if (cur.context.from_identity !== p.identity.id && !p.identity.is_admin) throw new AppError('POLICY_DENIED', 'Only the sender of a task or an admin may cancel it');
    const audit = () => auditOps({ actor: p.identity.id, action: 'task.cancel', target: signalId, requestId: p.requestId, details: { by_admin: cur.context.from_identity !== p.identity.id } });
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'CANCEL' }, { requestId: p.requestId, extra: (rec) => [...this.cancelToPeer(rec, p.identity.id), ...audit()] });
    return signalView(c!.record);
  }

  /** Ends a leased task's lease now (an admin's call on a stuck holder): the attempt ends as an expired lease's would. Audited. */
  async release(p: Principal, signalId: string): Promise<Signal> {
    if (!p.identity.is_admin) throw new AppError('POLICY_DENIED', 'Only an admin may release a lease');
    const cur = await this.load(signalId);
    const details = { holder: cur.context.claimed_by ?? null, claim_expires_at: cur.context.claim_expires_at ?? null };
    const extra = (rec: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext>) => [
      ...auditOps({ actor: p.identity.id, action: 'task.release', target: signalId, requestId: p.requestId, details }),
      ...this.ackToOrigin(rec, prev, cur.context.claimed_by ?? ''),
    ];
    const c = await this.rt.send<SignalContext>(SIGNAL, signalId, { type: 'RELEASE' }, { requestId: p.requestId, extra });
    return signalView(c!.record);
  }

  /**
   * A federated task completed (or given up by its holder) here is reported to its origin, durably: the ack
   * answers even while the origin is away, and a given-up task is free at the origin at once too.
   */
  private ackToOrigin(rec: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext>, agent: string): Op[] {
    const f = rec.context.federation;
    if (f?.direction !== 'inbound') return [];
    const completed = rec.value === 'acked' && rec.context.task_status === 'completed';
    const givenUp = prev.value === 'leased' && prev.context.claimed_by === agent && rec.value !== 'leased' && rec.value !== 'acked';
    if (!completed && !givenUp) return [];
    const reported = completed && rec.context.result_resources !== undefined ? { result: rec.context.result ?? null, resources: rec.context.result_resources } : {};
    return this.federation.deliveryOps(f.peer_id, 'ack', rec.context.id, { signal_id: f.remote_id, agent, ...(givenUp && { outcome: 'failed' }), ...reported });
  }

  /** Cancel works both ways: the origin withdraws its task from the peer, the receiver declines the origin's. */
  private cancelToPeer(rec: ActorRecord<SignalContext>, agent: string): Op[] {
    const f = rec.context.federation;
    if (!f) return [];
    // the call names the origin's signal id: ours when we are the origin, the remote one when we received it
    const originId = f.direction === 'outbound' ? rec.context.id : f.remote_id;
    return this.federation.deliveryOps(f.peer_id, 'cancel', rec.context.id, { signal_id: originId, agent });
  }

  /**
   * pending → delivered after a push to a recipient; a signal already past pending is left alone. One read for
   * all of them, then a send per signal still pending (each its own commit, joined by group commit). Each mark
   * journals the sequence of the push that caused it (`pushed_at`), so the push's live recipients skip it.
   */
  async deliver(pushes: { id: string; pushed_at: number }[]): Promise<void> {
    const rows = await this.rt.loadStoredMany<SignalContext>(SIGNAL, pushes.map((p) => p.id));
    await Promise.all(
      rows.map((r, i) =>
        r?.value.value === 'pending' ? this.rt.send<SignalContext>(SIGNAL, pushes[i].id, { type: 'DELIVER', pushed_at: pushes[i].pushed_at }, { quiet: true, loaded: r }) : undefined,
      ),
    );
  }

  /** pending → delivered on first read by a recipient; a signal already past pending is left alone. */
  async markDelivered(records: ActorRecord<SignalContext>[], requestId?: string): Promise<ActorRecord<SignalContext>[]> {
    return Promise.all(
      records.map(async (r) => {
        if (r.value !== 'pending') return r;
        // a read marks what it shows delivered; a store with no room for the mark still answers the read (the next read marks it)
        const c = await this.rt.send<SignalContext>(SIGNAL, r.context.id, { type: 'DELIVER' }, { quiet: true, requestId }).catch((e: unknown) => {
          if (isAppError(e) && e.code === 'STORE_FULL') return { record: r };
          throw e;
        });
        return c?.record ?? (await this.load(r.context.id));
      }),
    );
  }

  /**
   * One page of a thread in thread order, `limit` members examined after the cursor: a thread grows without
   * bound, so it is never read whole. Signals outside the key's scopes are left out of the page.
   */
  async thread(p: Principal, id: string, after: string | undefined, limit: number): Promise<Scanned<Signal>> {
    const r = await this.load(id);
    assertInScope(p.key, r.context);
    const root = threadRootMember(r.context.thread_id);
    const stored = await this.rt.store.range(signalIndexes.thread(r.context.thread_id), { gt: after, limit: limit + 1 });
    // data of older builds holds the root in the index too
    const members = after === undefined || root > after ? [root, ...stored.filter((m) => m !== root)].slice(0, limit + 1) : stored;
    const shown = members.slice(0, limit);
    const recs = await this.rt.loadMany<SignalContext>(SIGNAL, shown.map(idOfThreadMember));
    const items = recs.filter((x) => x && !outOfScope(p.key, x.context)).map((x) => signalView(x!));
    return { items, cursor: members.length > limit ? shown[shown.length - 1] : null };
  }

  async list(p: Principal, f: ListFilter, before: string | undefined, limit: number): Promise<Scanned<Signal>> {
    assertFilterInScope(p.key, { types: f.types, ring: f.to_ring });
    const index = f.delivery_state
      ? signalIndexes.byState(f.delivery_state)
      : f.types?.length === 1
        ? signalIndexes.byType(f.types[0])
        : signalIndexes.all;
    // a state index holds `signal:id`; the cursor stays the id whichever index a page came from
    const [member, id] = f.delivery_state ? [stateMember, idOfStateMember] : [(m: string) => m, (m: string) => m];
    const res = await scanDesc(this.rt.store, [index], {
      before: before === undefined ? undefined : member(before),
      // ULIDs start with their time; a second of slack covers the id being minted just before created_at
      after: f.since !== undefined ? member(encodeTime(Math.max(0, f.since - 1000))) : undefined,
      limit,
      load: (ids) => this.rt.loadMany<SignalContext>(SIGNAL, ids.map(id)),
      keep: (r) => !outOfScope(p.key, r.context) && matchesList(r, f),
    });
    return { items: res.items.map(signalView), cursor: res.cursor === null ? null : id(res.cursor) };
  }
}

/** The schedule fields of a new signal: written only when asked for, so a plain signal's record is as before. */
function scheduleTerms(body: EmitBody, deps: DependencyPlan | undefined): Partial<SignalContext> {
  const out: Partial<SignalContext> = {};
  if (body.priority !== undefined) out.priority = body.priority;
  if (deps) Object.assign(out, { depends_on: [...new Set(body.depends_on)], blocked_by: deps.blocked_by, blocked_reason: deps.blocked_reason });
  if (deps?.blocked_reason) out.task_status = 'blocked';
  if (body.not_before !== undefined) out.not_before = new Date(body.not_before).toISOString();
  if (body.deadline !== undefined) out.deadline = new Date(body.deadline).toISOString();
  if (body.heartbeat_timeout_ms !== undefined) out.heartbeat_timeout_ms = body.heartbeat_timeout_ms;
  if (body.concurrency_key !== undefined) Object.assign(out, { concurrency_key: body.concurrency_key, concurrency_limit: body.concurrency_limit ?? 1 });
  return out;
}

/** A task born with a dependency already failed is blocked; one with dependencies left or a not_before ahead waits. */
function initialState(c: SignalContext, at: number): string {
  if (c.task_status === 'blocked') return 'blocked';
  if (c.blocked_by?.length || (c.not_before && Date.parse(c.not_before) > at)) return 'waiting';
  return 'pending';
}

function matchesList(r: ActorRecord<SignalContext>, f: ListFilter): boolean {
  const c = r.context;
  return (
    (!f.types?.length || f.types.includes(c.signal_type)) &&
    (!f.from_identity || c.from_identity === f.from_identity) &&
    (!f.to_role || sameName(c.to_role, f.to_role)) &&
    (!f.to_ring || sameName(c.to_ring, f.to_ring)) &&
    (!f.task_status || c.task_status === f.task_status) &&
    (!f.delivery_state || r.value === f.delivery_state) &&
    (!f.tag || c.tags.includes(f.tag)) &&
    (f.since === undefined || Date.parse(c.created_at) >= f.since)
  );
}
