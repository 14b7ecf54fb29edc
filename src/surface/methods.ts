/**
 * The method table /rpc and MCP share: name → params schema and one handler over the services REST calls.
 * Names accept `.` and `/` as separator (`inbox.check` = `inbox/check`).
 */
import Type, { type TSchema } from 'typebox';
import { AppError, clientError, isAppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { commaList, compile, Key, validate, type Validator } from '../validation.js';
import { Entity, IdBody, ListFilterFields, QueryBody, RelateBody, StoreBody, Tags, UpdateParams } from '../memory/schemas.js';
import type { StoreBody as StoreFields } from '../memory/service.js';
import { AckBody, ClaimBody, ClaimToken, EmitBody, HeartbeatBody, InboxQuery, ReadyQuery, THREAD_PAGE, ThreadBody } from '../signals/schemas.js';
import type { EmitBody as EmitFields } from '../signals/service.js';
import { ListSchema, Paths, RenewSchema, ReserveSchema } from '../reservations/schemas.js';
import { decodeCursor, DEFAULT_LIMIT, page } from './paging.js';
import { Workflow, type SurfaceServices } from './workflow.js';

export interface Method<T = any> {
  params: Validator<T>;
  description: string;
  /** an admin identity's key only */
  admin?: boolean;
  /** answers a new API key (`api_key`): as a route's `mints` (src/http/server.ts), the keys-minted property test sweeps these */
  mints?: boolean;
  /** units of the caller's rate-limit budget the call spends, if not one (a batch emit: one per signal) */
  units?(params: T): number;
  handler(p: Principal, params: T): Promise<unknown>;
}
export type MethodTable = Record<string, Method>;

const NonEmpty = Type.String({ minLength: 1 });
const obj = <T extends Record<string, TSchema>>(props: T) => compile(Type.Object(props));

export const SearchParams = obj({
  text: Type.Optional(Type.String()),
  tags: Type.Optional(Type.Array(Key('tag'))),
  type: Type.Optional(Key('signal_type')),
  role: Type.Optional(NonEmpty),
  ring: Type.Optional(NonEmpty),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
});
export const BatchEmitParams = obj({ signals: Type.Array(EmitBody.schema, { minItems: 1, maxItems: 100 }) });
export const NextParams = obj({
  task_types: Type.Optional(Type.Array(Key('task_type'))),
  lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
  complete_claim: Type.Optional(NonEmpty),
  release_claim: Type.Optional(NonEmpty),
  /** the claim_token of the claim complete_claim or release_claim ends */
  claim_token: ClaimToken,
  /** what the task complete_claim completes produced (docs/signals.md, Results) */
  result: Type.Optional(Type.Unknown()),
  resources: Type.Optional(Type.Array(Type.Unknown())),
});
export const HandoffParams = obj({
  to_role: Type.Optional(NonEmpty),
  to_identity: Type.Optional(NonEmpty),
  summary: NonEmpty,
  content: Type.Optional(Type.String()),
  links: Type.Optional(Type.Array(Type.Object({ kind: NonEmpty, id: NonEmpty }))),
  acceptance_criteria: Type.Optional(Type.Array(Type.String())),
  urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  task_type: Type.Optional(Key('task_type')),
  complete_claim: Type.Optional(NonEmpty),
  release_claim: Type.Optional(NonEmpty),
  /** the claim_token of the claim complete_claim or release_claim ends */
  claim_token: ClaimToken,
});
const PageParams = obj({ after: Type.Optional(NonEmpty), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) });
const MemoryListParams = obj({ ...ListFilterFields, tags: Type.Optional(Tags), after: Type.Optional(NonEmpty), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) });
const RecallParams = obj({ entity: Entity, after: Type.Optional(NonEmpty), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) });
const NoParams = compile(Type.Object({}, { additionalProperties: false }));

type Params<V> = V extends Validator<infer T> ? T : never;
const method = <V extends Validator<any>>(params: V, description: string, handler: (p: Principal, q: Params<V>) => Promise<unknown>, admin = false): Method<Params<V>> => ({ params, description, handler, admin });
const weighed = <T>(m: Method<T>, units: (params: T) => number): Method<T> => ({ ...m, units });

export function methodTable(s: SurfaceServices): MethodTable {
  const w = new Workflow(s);
  return {
    'signals.emit': method(EmitBody, 'Emit a signal; answers the Signal.', (p, q) => s.signals.emit(p, q as EmitFields)),
    'signals.batch_emit': weighed(
      method(BatchEmitParams, 'Emit several signals, each on its own (atomic per item); results in order, each {signal} or {error}. Spends one unit of the rate limit per signal.', async (p, q) => {
        const results: unknown[] = [];
        for (const body of q.signals) results.push(await s.signals.emit(p, body as EmitFields).then((signal) => ({ signal }), (e) => ({ error: errorOf(e) })));
        return { results };
      }),
      (q) => q.signals.length,
    ),
    'signals.search': method(SearchParams, 'Full-text search over signal content with tag, type, role and ring filters; answers an array of Signal.', (p, q) => w.search(p, q)),
    'inbox.check': method(InboxQuery, "The caller's inbox, most urgent first: {signals, cursor, has_more}.", async (p, q) =>
      page('signals', await s.inbox.identityInbox(p, p.identity.id, { ...q, types: commaList(q.type) }, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)),
    ),
    'tasks.claim': method(ClaimBody, 'Claim a task under a lease; answers the Signal.', (p, q) => s.signals.claim(p, q.signal_id, q.lease_ms, q.claim_token)),
    'signals.ack': method(AckBody, 'Acknowledge a signal; for a claimed task, complete it (with its result and resources) or release it with outcome "failed".', (p, q) => s.signals.ack(p, q.signal_id, q.outcome, q.claim_token, q)),
    'tasks.heartbeat': method(HeartbeatBody, 'Prove a claimed task is alive: extend the lease by lease_ms and record progress (0..1) and a note, pushed to the emitter as task.progress; answers the Signal.', (p, q) => s.signals.heartbeat(p, q.signal_id, q)),
    'thread.get': method(ThreadBody, 'The signals of the thread the signal is in, in thread order: {signals, cursor, has_more}.', async (p, q) =>
      page('signals', await s.signals.thread(p, q.signal_id, decodeCursor(q.after), q.limit ?? THREAD_PAGE)),
    ),
    'identity.whoami': method(NoParams, 'The caller: identity, key (without secret), membership, roles and rings.', (p) => w.whoami(p)),
    'roles.list': method(NoParams, 'Every role.', () => s.org.listRoles()),
    'rings.list': method(NoParams, 'Every ring.', () => s.org.listRings()),
    'webhooks.list': method(NoParams, 'Every webhook (admin), newest first; secrets are never listed.', () => s.webhooks.list(), true),
    'identities.list': method(PageParams, 'Identities, newest first (admin): {identities, cursor, has_more}.', async (_p, q) => page('identities', await s.identities.list(decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)), true),
    'tasks.ready': method(ReadyQuery, 'What the caller may claim now (dependencies completed, not_before passed), highest priority first, then most urgent; task_types a comma list: {tasks, cursor, has_more}.', async (p, q) =>
      page('tasks', await s.inbox.ready(p, { task_types: commaList(q.task_types) }, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)),
    ),
    'tasks.graph': method(obj({ signal_id: NonEmpty }), "A task's upstream (its dependencies, transitively) and downstream (what waits for it), each with its state: {task, upstream, downstream, truncated}.", (p, q) => s.signals.graph(p, q.signal_id)),
    'tasks.retry': method(obj({ signal_id: NonEmpty }), 'Bring a dead-lettered task back to pending, its attempts reset (its sender or an admin); answers the Signal.', (p, q) => s.signals.retry(p, q.signal_id)),
    'tasks.cancel': method(obj({ signal_id: NonEmpty }), 'End an open task (its sender or an admin); audited; answers the Signal.', (p, q) => s.signals.cancel(p, q.signal_id)),
    'tasks.release': method(obj({ signal_id: NonEmpty }), "End a leased task's lease now (admin): the attempt ends as an expired lease's would; audited; answers the Signal.", (p, q) => s.signals.release(p, q.signal_id)),
    'tasks.mine': method(NoParams, 'Tasks the caller holds: {tasks: [{signal, lease_ends_at}]}.', async (p) => ({ tasks: await w.heldTasks(p) })),
    'workflow.resume': method(NoParams, 'Everything an agent needs after a restart: identity, roles, rings, held tasks with lease ends, unread inbox count and top items.', (p) => w.resume(p)),
    'workflow.next': method(NextParams, 'Claim the open task the caller may take that is highest in priority, then most urgent (task_types match payload.task_type; a task waiting on dependencies or not_before is not offered), first completing (complete_claim) or releasing (release_claim) the caller\'s current one: {signal} or {signal: null}, with {claim} when one was ended.', (p, q) => w.next(p, q)),
    ...memoryMethods(s),
    ...reservationMethods(s),
    'handoff.create': method(HandoffParams, "Hand work on as a task signal (summary, links, acceptance criteria in payload.handoff), first completing or releasing the caller's own claim: {signal, claim}.", (p, q) => w.handoff(p, q)),
  };
}

/** The memory calls: the same service calls as the REST handlers of src/api/memory.ts, under the same namespace ACL. */
const memoryMethods = (s: SurfaceServices): MethodTable => ({
  'memory.store': method(StoreBody, 'Store a memory in a namespace the caller may write; answers the Memory (an existing near-duplicate with metadata.deduplicated unless allow_duplicate).', async (p, q) => (await s.memories.store(p, q as StoreFields)).memory),
  'memory.get': method(IdBody, 'One memory the caller may read.', (p, q) => s.memories.get(p, q.id)),
  'memory.list': method(MemoryListParams, 'Memories of a namespace, newest first, filtered by entity, category, memory_type and tags (all): {memories, cursor, has_more}.', async (p, q) =>
    page('memories', await s.memories.list(p, q, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)),
  ),
  'memory.query': method(QueryBody, 'Search a namespace: semantic, keyword or hybrid (default) with filters: {memories (each with score), mode}.', (p, q) => s.memories.query(p, q)),
  'memory.recall': method(RecallParams, 'Memories about an entity in every namespace the caller may read, newest first: {memories, cursor, has_more}.', async (p, q) =>
    page('memories', await s.memories.recall(p, q.entity, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)),
  ),
  'memory.update': method(UpdateParams, "Change a memory's content, tags, metadata or confidence (write access to its namespace); answers the Memory.", (p, { id, ...b }) => s.memories.update(p, id, b)),
  'memory.forget': method(IdBody, 'Forget a memory (soft delete; write access to its namespace); answers the Memory with deleted_at.', (p, q) => s.memories.forget(p, q.id)),
  'memory.relate': method(RelateBody, 'Relate two readable memories by a named edge (write access to the source namespace); answers the Edge.', (p, q) => s.graph.relate(p, q)),
});

const ReservationId = { id: NonEmpty };
const ConflictsParams = obj({ paths: Paths, project: ListSchema.properties.project, exclusive: Type.Optional(Type.Boolean()) });

/** The reservation calls: one service function each, the one the REST route of src/api/reservations.ts calls. */
const reservationMethods = ({ reservations: r }: SurfaceServices): MethodTable => ({
  'reservations.create': method(compile(ReserveSchema), 'Reserve path globs of a project (advisory, never waits): {granted, conflicts}; what does not conflict is granted.', (p, q) => r.reserve(p, q)),
  'reservations.list': method(obj({ ...ListSchema.properties, after: Type.Optional(NonEmpty), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }), 'Reservations of a project, newest first (active unless include_expired): {reservations, cursor, has_more}.', async (p, q) =>
    page('reservations', await r.list(p, q, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT)),
  ),
  'reservations.get': method(obj(ReservationId), 'One reservation.', (p, q) => r.get(p, q.id)),
  'reservations.conflicts': method(ConflictsParams, "What these paths would hit: other identities' active reservations covering one of them: {conflicts}.", async (p, q) => ({ conflicts: await r.conflicts(p, q.paths, q.project, q.exclusive) })),
  'reservations.renew': method(obj({ ...ReservationId, ...RenewSchema.properties }), "Extend one's own active reservation by ttl_s from now; answers the Reservation.", (p, q) => r.renew(p, q.id, q.ttl_s)),
  'reservations.release': method(obj(ReservationId), "Release one's own reservation; answers the Reservation.", (p, q) => r.release(p, q.id)),
  'reservations.force_release': method(obj(ReservationId), "Release another identity's reservation (an admin, or anyone once the holder has been inactive longer than its ttl; audited).", (p, q) => r.forceRelease(p, q.id)),
});

/** `inbox/check` and `inbox.check` name the same method. */
export const canonicalName = (name: string) => name.replace(/\//g, '.');

export interface ResolvedCall {
  method: Method;
  params: unknown;
}

/**
 * Finds the method and checks its params; undefined for an unknown name. A params failure is
 * RPC_INVALID_PARAMS with the field and the code REST would have answered.
 */
export function resolve(table: MethodTable, name: string, params: unknown): ResolvedCall | undefined {
  const m = Object.hasOwn(table, canonicalName(name)) ? table[canonicalName(name)] : undefined;
  if (!m) return undefined;
  try {
    return { method: m, params: validate(m.params, params === undefined ? {} : params) };
  } catch (e) {
    if (!isAppError(e)) throw e;
    throw new AppError('RPC_INVALID_PARAMS', e.message, { ...e.details, code: e.code });
  }
}

/** Runs a call; the transport has spent the call's first unit, so a heavier call spends the rest first. */
export async function invoke(call: ResolvedCall, p: Principal): Promise<unknown> {
  if (call.method.admin && !p.identity.is_admin) throw new AppError('AUTH_ADMIN_REQUIRED');
  const more = (call.method.units?.(call.params) ?? 1) - 1;
  if (more > 0) await p.spend?.(more);
  const out = await call.method.handler(p, call.params);
  if (!call.method.mints && typeof out === 'object' && out !== null && 'api_key' in out) throw new AppError('INTERNAL_SERVER_ERROR', 'A method not declared as minting keys answered one');
  return out;
}

/** A failure as a client may see it: a catalogue code, never an internal message (`clientError`). */
export function errorOf(e: unknown): { code: string; message: string; details: Record<string, unknown> | null } {
  const err = clientError(e);
  return { code: err.code, message: err.message, details: err.details };
}

