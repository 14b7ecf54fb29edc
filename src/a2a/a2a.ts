/**
 * A2A over JSON-RPC, built on @a2a-js/sdk's server pieces: DefaultRequestHandler over a TaskStore that is
 * the signal actors (an A2A task *is* a signal: same id), and the SDK's JSON-RPC transport handlers (v1.0,
 * and v0.3 for the slash method names) fed from the uWebSockets.js route. A message becomes a signal
 * through Signals.emit; a cancel is Signals.cancel; a stream follows the signal through the push hub.
 */
import { A2A_VERSION_HEADER, AGENT_CARD_PATH, AgentCard, formatSSEEvent, TaskState, type Message, type SendMessageRequest, type StreamResponse, type Task } from '@a2a-js/sdk';
import { RequestMalformedError, TaskNotCancelableError, TaskNotFoundError, type A2AError } from '@a2a-js/sdk/errors';
import { AgentEvent, DefaultRequestHandler, JsonRpcTransportHandler, ServerCallContext, type AgentExecutor, type ExecutionEventBus, type RequestContext, type TaskStore, type User } from '@a2a-js/sdk/server';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { AppError, clientError, isAppError, type ErrorCode } from '../errors.js';
import type { Links } from '../http/links.js';
import type { Request, Route } from '../http/server.js';
import { bearerToken } from '../auth/keys.js';
import type { Principal } from '../identity/model.js';
import type { Logger } from '../log.js';
import type { Org } from '../org/service.js';
import { signalView, type Signal } from '../signals/kind.js';
import { outOfScope } from '../signals/policy.js';
import { EmitBody } from '../signals/schemas.js';
import type { Signals } from '../signals/service.js';
import { decodeCursor, DEFAULT_LIMIT, encodeCursor } from '../surface/paging.js';
import { boundDepth, MAX_DOCUMENT_DEPTH, validate } from '../validation.js';

/** Changes of one signal as they commit; the push hub provides it (wired in src/app.ts). */
export interface SignalWatch {
  /** `holder`: the stream's key, re-checked as a socket's; `ended` once it no longer authenticates */
  subscribe(signalId: string, onChange: (s: Signal) => void, holder: { principal: Principal; key: string; ended: () => void }): () => void;
}

const STREAM = 'svc.stream';
const FAILURE = 'svc.error';
const ABORT = 'svc.abort';

class SignalUser implements User {
  constructor(
    readonly principal: Principal,
    readonly key: string,
  ) {}
  get isAuthenticated() {
    return true;
  }
  get userName() {
    return this.principal.identity.id;
  }
}

const principalOf = (ctx: ServerCallContext): Principal => {
  const u = ctx.user;
  if (!(u instanceof SignalUser)) throw new AppError('AUTH_KEY_MISSING');
  return u.principal;
};

/** Our task state as an A2A state: open → submitted, leased → working, completed, cancelled → canceled, dead_letter → failed. */
export function a2aState(s: Pick<Signal, 'signal_type' | 'task_status' | 'delivery_state'>): TaskState {
  if (s.task_status === 'cancelled') return TaskState.TASK_STATE_CANCELED;
  if (s.delivery_state === 'dead_letter') return TaskState.TASK_STATE_FAILED;
  if (s.task_status === 'completed' || (s.signal_type !== 'task' && s.delivery_state === 'acked')) return TaskState.TASK_STATE_COMPLETED;
  if (s.delivery_state === 'leased') return TaskState.TASK_STATE_WORKING;
  return TaskState.TASK_STATE_SUBMITTED;
}
const TERMINAL = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED]);

const contextOf = (s: Signal) => ((s.metadata?.a2a as { context_id?: string } | undefined)?.context_id ?? s.thread_id) as string;

function toTask(s: Signal): Task {
  return {
    id: s.id,
    contextId: contextOf(s),
    status: { state: a2aState(s), message: undefined, timestamp: s.updated_at },
    artifacts: [],
    history: [],
    metadata: { signal_type: s.signal_type, task_status: s.task_status, delivery_state: s.delivery_state, claimed_by: s.claimed_by },
  };
}

/** Tasks are signals: load reads the actor under the caller's key scope; the SDK's own writes are not kept. */
class SignalTaskStore implements TaskStore {
  constructor(private signals: Signals) {}

  async load(taskId: string, ctx: ServerCallContext): Promise<Task | undefined> {
    const s = await noted(ctx, this.read(taskId, principalOf(ctx)));
    return s && toTask(s);
  }

  async read(id: string, p: Principal): Promise<Signal | undefined> {
    const r = await this.signals.load(id).catch((e) => {
      if (isAppError(e) && e.code === 'SIGNAL_NOT_FOUND') return undefined;
      throw e;
    });
    return r && !outOfScope(p.key, r.context) ? signalView(r) : undefined;
  }

  /** Task state is derived from the signal: history and status writes of the SDK change nothing. */
  async save(): Promise<void> {}

  /**
   * The caller's own tasks (signals it sent), newest first. A status filter applies within each page, so a
   * page may hold fewer; totalSize is the size of this page (the total is not counted).
   */
  async list(params: { pageSize?: number; pageToken: string; status?: TaskState }, ctx: ServerCallContext) {
    const p = principalOf(ctx);
    const size = params.pageSize ?? DEFAULT_LIMIT;
    const res = await noted(ctx, this.signals.list(p, { from_identity: p.identity.id }, decodeCursor(params.pageToken || undefined), size));
    const tasks = res.items.map(toTask).filter((t) => !params.status || t.status?.state === params.status);
    return { tasks, nextPageToken: res.cursor === null ? '' : encodeCursor(res.cursor), pageSize: size, totalSize: tasks.length };
  }
}

/** Publishes the task, and on a stream every state change until a final state or the client leaves. */
class SignalExecutor implements AgentExecutor {
  constructor(
    private store: SignalTaskStore,
    private watch: SignalWatch,
  ) {}

  async execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const p = principalOf(rc.context);
    const first = await noted(rc.context, this.store.read(rc.taskId, p));
    if (!first) throw new TaskNotFoundError({ message: `Task not found: ${rc.taskId}` });
    bus.publish(AgentEvent.task(toTask(first)));
    if (rc.context.state.get(STREAM) !== true || TERMINAL.has(a2aState(first))) return;
    const abort = rc.context.state.get(ABORT) as AbortSignal | undefined;
    await new Promise<void>((resolve) => {
      let last = a2aState(first);
      const publish = (s: Signal) => {
        const state = a2aState(s);
        if (state === last) return;
        last = state;
        bus.publish(AgentEvent.statusUpdate({ taskId: s.id, contextId: contextOf(s), status: { state, message: undefined, timestamp: s.updated_at }, metadata: { delivery_state: s.delivery_state, claimed_by: s.claimed_by } }));
        if (TERMINAL.has(state)) done();
      };
      // a stream whose key stops authenticating ends (docs/realtime.md, Rights follow the key)
      const unsubscribe = this.watch.subscribe(rc.taskId, publish, { principal: p, key: (rc.context.user as SignalUser).key, ended: () => done() });
      const done = () => {
        unsubscribe();
        abort?.removeEventListener('abort', done);
        resolve();
      };
      abort?.addEventListener('abort', done, { once: true });
      if (abort?.aborted) return done();
      // a change committed between the first read and the subscription
      void this.store.read(rc.taskId, p).then((s) => s && publish(s), done);
    });
  }

  /** Never reached: SignalRequestHandler.cancelTask cancels the signal itself, and a watching stream publishes the canceled state. */
  async cancelTask(): Promise<void> {}
}

/** Refusals of a cancel as the interface names them. */
const CANCEL_CODES: Partial<Record<ErrorCode, ErrorCode>> = {
  SIGNAL_CLAIM_INVALID_STATUS: 'A2A_CANCEL_FAILED',
  SIGNAL_CLAIM_NOT_TASK: 'A2A_CANCEL_FAILED',
  SIGNAL_DEAD_LETTER: 'A2A_CANCEL_FAILED',
  POLICY_DENIED: 'A2A_TASK_UNAUTHORIZED',
  AUTH_SCOPE_DENIED: 'A2A_TASK_UNAUTHORIZED',
};

/** Records the catalogue error for the route (which answers with its status and code) and throws the SDK's kind of it. */
function fail(ctx: ServerCallContext, e: AppError, as: A2AError): never {
  ctx.state.set(FAILURE, e);
  throw as;
}

/** Records a failure of ours on its way through the SDK, which would answer its message as it is. */
function noted<T>(ctx: ServerCallContext, p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    ctx.state.set(FAILURE, e);
    throw e;
  });
}

const SDK_INTERNAL_ERROR = -32603;
const INVALID_PARAMS = -32602;

class SignalRequestHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    private store: SignalTaskStore,
    executor: SignalExecutor,
    private signals: Signals,
  ) {
    super(card, store, executor);
  }

  override async sendMessage(params: SendMessageRequest, ctx: ServerCallContext) {
    await this.open(params, ctx);
    return super.sendMessage(params, ctx);
  }

  override async *sendMessageStream(params: SendMessageRequest, ctx: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    await this.open(params, ctx);
    ctx.state.set(STREAM, true);
    yield* super.sendMessageStream(params, ctx);
  }

  /** A new message becomes a signal (through Signals.emit) whose id is the task id; a message naming a task continues it. */
  private async open(params: SendMessageRequest, ctx: ServerCallContext): Promise<void> {
    const m = params.message;
    if (!m || m.taskId) return;
    const meta = { ...(params.metadata ?? {}), ...(m.metadata ?? {}) } as Record<string, unknown>;
    if (typeof meta.signal_type !== 'string' || meta.signal_type === '') {
      fail(ctx, new AppError('A2A_SIGNAL_TYPE_REQUIRED', 'metadata.signal_type names the signal this message becomes', { field: 'metadata.signal_type' }), new RequestMalformedError({ message: 'metadata.signal_type is required' }));
    }
    const body = {
      signal_type: meta.signal_type,
      content: textOf(m),
      ...pick(meta, ['to_role', 'to_ring', 'to_identity', 'urgency', 'tags', 'target_capabilities', 'parent_id']),
      payload: { ...(isObject(meta.payload) ? meta.payload : {}), ...dataOf(m) },
      metadata: { a2a: { message_id: m.messageId, ...(m.contextId ? { context_id: m.contextId } : {}) } },
    };
    try {
      const signal = await this.signals.emit(principalOf(ctx), validate(EmitBody, body, 'SIGNAL_EMIT_VALIDATION_FAILED') as never);
      m.taskId = signal.id;
    } catch (e) {
      if (!isAppError(e)) throw e;
      fail(ctx, e, e.status === 404 ? new TaskNotFoundError({ message: e.message }) : new RequestMalformedError({ message: e.message }));
    }
  }

  override async getTask(params: { id: string; historyLength?: number }, ctx: ServerCallContext) {
    const task = await this.store.load(params.id, ctx);
    if (!task) fail(ctx, new AppError('SIGNAL_NOT_FOUND', `No task ${params.id}`), new TaskNotFoundError({ message: `Task not found: ${params.id}` }));
    return task;
  }

  override async cancelTask(params: { id: string }, ctx: ServerCallContext) {
    try {
      await this.signals.cancel(principalOf(ctx), params.id);
    } catch (e) {
      if (!isAppError(e)) throw e;
      const code = CANCEL_CODES[e.code];
      if (e.code === 'SIGNAL_NOT_FOUND') fail(ctx, e, new TaskNotFoundError({ message: `Task not found: ${params.id}` }));
      const mapped = new AppError(code ?? e.code, code ? undefined : e.message, { reason: e.code });
      fail(ctx, mapped, code === 'A2A_TASK_UNAUTHORIZED' ? new RequestMalformedError({ message: mapped.message }) : new TaskNotCancelableError({ message: mapped.message }));
    }
    return super.cancelTask(params as never, ctx);
  }
}

export interface A2ADeps {
  signals: Signals;
  org: Org;
  watch: SignalWatch;
  links: Links;
  log: Logger;
  version: string;
}

export class A2A {
  private handler: SignalRequestHandler;
  private v1: JsonRpcTransportHandler;
  private legacy: LegacyJsonRpcTransportHandler;

  constructor(private d: A2ADeps) {
    const store = new SignalTaskStore(d.signals);
    this.handler = new SignalRequestHandler(this.baseCard([]), store, new SignalExecutor(store, d.watch), d.signals);
    this.v1 = new JsonRpcTransportHandler(this.handler);
    this.legacy = new LegacyJsonRpcTransportHandler(this.handler);
  }

  private baseCard(skills: AgentCard['skills']): AgentCard & { url: string } {
    const url = `${this.d.links.baseUrl}/a2a`;
    return {
      name: 'agent-coordination-service',
      description: 'Typed signals, task leases and inboxes for a team of agents: a message becomes a signal, its task is the signal.',
      url,
      supportedInterfaces: [
        { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
        { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
      ],
      provider: undefined,
      version: this.d.version,
      capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
      securitySchemes: { bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'Authorization: Bearer <API key>', scheme: 'bearer', bearerFormat: 'API key' } } } },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }],
      defaultInputModes: ['text/plain', 'application/json'],
      defaultOutputModes: ['application/json'],
      skills,
      signatures: [],
    } as AgentCard & { url: string };
  }

  /** The card: the skill every identity can use here (a message becomes a signal), and one per role it can route work to. */
  async card(): Promise<AgentCard> {
    const roles = await this.d.org.listRoles();
    return this.baseCard([
      EMIT_SKILL,
      ...roles.map((r) => ({
        id: `role:${r.id}`,
        name: r.name,
        description: r.purpose ?? `Work for the ${r.name} role`,
        tags: ['role', ...r.domains, ...r.duties],
        examples: [`metadata: {"signal_type": "task", "to_role": ${JSON.stringify(r.name)}}`],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      })),
    ]);
  }

  /**
   * The card as the protocol's JSON for the version asked (`A2A-Version`; none is 0.3, as v1.0 says a
   * request without it is): v1.0's ProtoJSON, or v0.3's card. The SDK's card object is its in-memory form
   * (oneofs as `$case`), never served as it is.
   */
  async cardJson(requested: string | undefined): Promise<unknown> {
    const card = await this.card();
    return Number.parseFloat(requested || '0.3') >= 1 ? AgentCard.toJSON(card) : legacyCard(card, `${this.d.links.baseUrl}/a2a`);
  }

  async handle(r: Request<Principal>): Promise<Response> {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(r.raw!.toString('utf8'));
    } catch {
      return json(400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error', data: { code: 'RPC_PARSE_ERROR', request_id: r.requestId } } });
    }
    try {
      // the SDK converts the whole message recursively before any field of it reaches our validation
      boundDepth(body?.params, 'params', MAX_DOCUMENT_DEPTH);
    } catch (e) {
      const c = clientError(e);
      return json(c.status, { jsonrpc: '2.0', id: (body.id as never) ?? null, error: { code: INVALID_PARAMS, message: c.message, data: { code: c.code, request_id: r.requestId, details: c.details } } });
    }
    const legacy = typeof body?.method === 'string' && body.method.includes('/');
    const ctx = new ServerCallContext({ user: new SignalUser(r.principal, bearerToken(r.headers.authorization) ?? ''), requestedVersion: legacy ? '0.3' : '1.0' });
    if (r.signal) ctx.state.set(ABORT, r.signal);
    const out = await (legacy ? this.legacy : this.v1).handle(body, ctx);
    if (!isStream(out)) return this.answer(out as Answer, ctx, r.requestId);
    const it = out[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await it.next();
    } catch (e) {
      return this.answer({ jsonrpc: '2.0', id: (body.id as never) ?? null, error: JsonRpcTransportHandler.mapToJSONRPCError(e) }, ctx, r.requestId);
    }
    const stop = () => void it.return?.(undefined);
    r.signal?.addEventListener('abort', stop, { once: true });
    const enc = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        if (!first.done) c.enqueue(enc.encode(formatSSEEvent(first.value)));
      },
      async pull(c) {
        try {
          const n = await it.next();
          if (n.done) return c.close();
          c.enqueue(enc.encode(formatSSEEvent(n.value)));
        } catch {
          c.close();
        }
      },
      cancel: stop,
    });
    return new Response(stream, { status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
  }

  /**
   * The SDK's answer; a refusal of ours keeps its catalogue status and carries its code in error.data, as a
   * client may see it (`clientError`). An internal error the SDK met without our record is
   * INTERNAL_SERVER_ERROR: its message (anything thrown) is logged, never answered.
   */
  private answer(out: Answer, ctx: ServerCallContext, rid: string): Response {
    const recorded = ctx.state.has(FAILURE);
    if (!out.error || (!recorded && (out.error as { code?: unknown }).code !== SDK_INTERNAL_ERROR)) return json(200, out);
    const e: unknown = recorded ? ctx.state.get(FAILURE) : out.error;
    const c = clientError(e);
    if (c.hidden) this.d.log.error({ err: e, request_id: rid }, 'a2a call failed');
    return json(c.status, { ...out, error: { ...(out.error as object), message: c.message, data: { code: c.code, request_id: rid, details: c.details } } });
  }
}

/** What any identity can do through A2A: a message becomes a signal (a task an agent claims, or a note). */
const EMIT_SKILL: AgentCard['skills'][number] = {
  id: 'signal',
  name: 'Send a signal or task',
  description:
    'A message becomes a signal of metadata.signal_type (task: an agent claims it under a lease and acks it; the A2A task is the signal), routed by metadata.to_role, to_ring or to_identity; text parts are its content, data parts its payload.',
  tags: ['signals', 'tasks', 'coordination'],
  examples: ['metadata: {"signal_type": "task", "to_role": "Builder"}, text: "build the release"', 'metadata: {"signal_type": "note", "to_ring": "core"}, text: "deploy finished"'],
  inputModes: ['text/plain', 'application/json'],
  outputModes: ['application/json'],
  securityRequirements: [],
};

/** The v0.3 card (specification/json/a2a.json of A2A v0.3.0): one JSON-RPC endpoint, bearer auth, the same skills. */
function legacyCard(c: AgentCard, url: string) {
  const schemes = Object.entries(c.securitySchemes).flatMap(([name, s]) => (s.scheme?.$case === 'httpAuthSecurityScheme' ? [[name, { type: 'http', ...s.scheme.value }] as const] : []));
  return {
    protocolVersion: '0.3.0',
    name: c.name,
    description: c.description,
    url,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url, transport: 'JSONRPC' }],
    version: c.version,
    capabilities: { streaming: c.capabilities?.streaming ?? false, pushNotifications: c.capabilities?.pushNotifications ?? false, stateTransitionHistory: false },
    securitySchemes: Object.fromEntries(schemes),
    security: schemes.map(([name]) => ({ [name]: [] })),
    defaultInputModes: c.defaultInputModes,
    defaultOutputModes: c.defaultOutputModes,
    skills: c.skills.map((k) => ({ id: k.id, name: k.name, description: k.description, tags: k.tags, examples: k.examples, ...(k.inputModes.length ? { inputModes: k.inputModes } : {}), ...(k.outputModes.length ? { outputModes: k.outputModes } : {}) })),
    supportsAuthenticatedExtendedCard: false,
  };
}

type Answer = { jsonrpc: string; id: string | number | null; result?: unknown; error?: unknown };

export function a2aRoutes(a2a: A2A): Route<Principal>[] {
  return [
    {
      method: 'get',
      path: `/${AGENT_CARD_PATH}`,
      auth: 'public',
      unlimited: true,
      handler: async (r) => ({ data: null, web: new Response(JSON.stringify(await a2a.cardJson(r.headers[A2A_VERSION_HEADER.toLowerCase()])), { status: 200, headers: { 'content-type': 'application/json', vary: A2A_VERSION_HEADER } }) }),
    },
    { method: 'post', path: '/a2a', auth: 'key', raw: true, handler: async (r) => ({ data: null, web: await a2a.handle(r) }) },
  ];
}

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStream = (v: unknown): v is AsyncGenerator<unknown> => typeof (v as AsyncGenerator)?.[Symbol.asyncIterator] === 'function';
const pick = (o: Record<string, unknown>, keys: string[]) => Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
const textOf = (m: Message) => m.parts.flatMap((p) => (p.content?.$case === 'text' ? [p.content.value] : [])).join('\n');
const dataOf = (m: Message): Record<string, unknown> => Object.assign({}, ...m.parts.flatMap((p) => (p.content?.$case === 'data' && isObject(p.content.value) ? [p.content.value] : [])));

