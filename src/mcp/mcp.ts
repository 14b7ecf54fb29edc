/**
 * MCP over Streamable HTTP: the SDK's McpServer with its Web-standard transport, one pair per session,
 * fed a fetch `Request` built from the uWebSockets.js request; its `Response` is streamed back by the
 * front end. Tools are entries of the shared method table, so a tool does exactly what /rpc does; their
 * input schemas are the table's TypeBox schemas (TypeBox schemas are JSON Schema). Resources are the
 * surface's (src/surface/resources.ts); a session's subscriptions tail the push journal through a
 * `JournalWatch` that src/app.ts wires to the push hub, and their notifications go out on the session's
 * standalone SSE stream (GET /mcp).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ClientRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { catalogue, clientError } from '../errors.js';
import type { Request, Route } from '../http/server.js';
import type { McpProfile, Principal } from '../identity/model.js';
import type { Logger } from '../log.js';
import type { JournalEntry } from '../journal/journal.js';
import { bearerToken } from '../auth/keys.js';
import { errorOf, invoke, resolve, type MethodTable } from '../surface/methods.js';
import { TEMPLATES, type Located, type Resources, type Seen } from '../surface/resources.js';
import { validate } from '../validation.js';
import { WAIT_DESCRIPTION, Waiter, WaitParams } from './wait.js';

/** The interface's eighteen tools, the three reservation tools (issue 17), the task-planning, retry and heartbeat tools (issue 27), and the method each one is. A tool whose method is not in the table is not offered. */
export const TOOLS: Record<string, string> = {
  svc_emit_signal: 'signals.emit',
  svc_batch_emit: 'signals.batch_emit',
  svc_check_inbox: 'inbox.check',
  svc_claim_task: 'tasks.claim',
  svc_ack_signal: 'signals.ack',
  svc_search_signals: 'signals.search',
  svc_get_thread: 'thread.get',
  svc_whoami: 'identity.whoami',
  svc_list_roles: 'roles.list',
  svc_list_rings: 'rings.list',
  svc_list_identities: 'identities.list',
  svc_memory_store: 'memory.store',
  svc_memory_query: 'memory.query',
  svc_memory_recall: 'memory.recall',
  svc_memory_list: 'memory.list',
  svc_memory_update: 'memory.update',
  svc_memory_forget: 'memory.forget',
  svc_memory_relate: 'memory.relate',
  svc_reserve_paths: 'reservations.create',
  svc_release_paths: 'reservations.release',
  svc_check_reservations: 'reservations.conflicts',
  svc_ready_tasks: 'tasks.ready',
  svc_task_graph: 'tasks.graph',
  svc_retry_task: 'tasks.retry',
  svc_heartbeat_task: 'tasks.heartbeat',
};

/** Tools offered only in a profile (`?tools=`), over composite calls: not in the default list, which stays the interface's. */
const PROFILE_TOOLS: Record<string, string> = {
  svc_claim_next: 'workflow.next',
  svc_my_tasks: 'tasks.mine',
  /** not a method of the table: it holds the call open on the push hub (src/mcp/wait.ts) */
  svc_wait: 'inbox.wait',
};

const WAIT_TOOL = 'svc_wait';

const CORE = ['svc_emit_signal', 'svc_check_inbox', 'svc_ack_signal', 'svc_claim_next', 'svc_get_thread', 'svc_whoami', WAIT_TOOL];

/**
 * Tool profiles (`/mcp?tools=<profile>` on the initialize request; the session keeps it): `core` fits a
 * context window (at most 8 tools); the others add their part. No `?tools` lists TOOLS, as before.
 */
export const PROFILES: Record<McpProfile, string[]> = {
  core: CORE,
  tasks: [...CORE, 'svc_claim_task', 'svc_my_tasks', 'svc_ready_tasks', 'svc_task_graph', 'svc_heartbeat_task', 'svc_retry_task', 'svc_search_signals', 'svc_batch_emit', 'svc_list_roles', 'svc_list_rings'],
  memory: [...CORE, 'svc_memory_store', 'svc_memory_query', 'svc_memory_recall', 'svc_memory_list', 'svc_memory_update', 'svc_memory_forget', 'svc_memory_relate'],
  reservations: [...CORE, 'svc_reserve_paths', 'svc_release_paths', 'svc_check_reservations'],
  all: [...new Set([...Object.keys(TOOLS), ...Object.keys(PROFILE_TOOLS)])],
};

/** the method a tool name stands for, in a profile or the default list */
const methodOf = (tool: string, profile: string | undefined): string | undefined =>
  profile ? (PROFILES[profile as McpProfile].includes(tool) ? (TOOLS[tool] ?? PROFILE_TOOLS[tool]) : undefined) : Object.hasOwn(TOOLS, tool) ? TOOLS[tool] : undefined;

/** Committed journal entries for one principal, as they happen; the push hub provides it (wired in src/app.ts). */
export interface JournalWatch {
  /** `key`: the plain key the watch re-checks on every auth change; `onEnded` once it no longer authenticates */
  watch(p: Principal, key: string, onEntry: (e: JournalEntry, seen: Seen) => void, onEnded: () => void): () => void;
}

/** MCP's code for an unknown resource (the specification's -32002). */
const RESOURCE_NOT_FOUND = -32002;
/** a refusal of a read: its catalogue code in data.code, as /rpc's domain errors */
const DOMAIN_ERROR = -32000;

/**
 * Every client request's schema by method. A request whose params fail it is answered -32602 here: the SDK
 * would answer -32603 (internal error) with the validator's own text.
 */
const REQUESTS = new Map<string, (typeof ClientRequestSchema.options)[number]>(ClientRequestSchema.options.map((o) => [o.shape.method.value, o]));

/** -32602 for a request whose params its schema refuses; undefined for anything else (the SDK answers it). */
function invalidParams(m: unknown): Record<string, unknown> | undefined {
  if (!isObject(m) || typeof m.method !== 'string' || !('id' in m) || !REQUESTS.has(m.method)) return undefined;
  const checked = REQUESTS.get(m.method)!.safeParse({ method: m.method, ...(m.params === undefined ? {} : { params: m.params }) });
  if (checked.success) return undefined;
  const field = checked.error.issues[0]?.path.map(String).join('.') || 'params';
  return { jsonrpc: '2.0', id: m.id, error: { code: ErrorCode.InvalidParams, message: `Invalid params: ${field}`, data: { code: 'RPC_INVALID_PARAMS', message: catalogue.RPC_INVALID_PARAMS[1], details: { field } } } };
}

/** URIs one session may watch at once */
export const MAX_SUBSCRIPTIONS = 100;

/** Open sessions held at most; the least recently used one is closed to make room. */
export const MAX_SESSIONS = 1000;
/** Open sessions one identity holds at most, so no member can evict everyone's: its own least recently used one is closed. */
export const MAX_SESSIONS_PER_IDENTITY = 10;

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  owner: string;
  /** the tool profile named at initialize; undefined = TOOLS */
  profile?: string;
  subs: Subscriptions;
  waiter: Waiter;
}

/** One session's subscribed URIs and the journal tail that serves them (attached while any is subscribed). */
class Subscriptions {
  private uris = new Map<string, (e: JournalEntry, seen: Seen) => boolean>();
  private stop: (() => void) | undefined;

  constructor(
    private watch: JournalWatch,
    private notify: (uri: string) => void,
    private log: Logger,
    /** the session's key no longer authenticates: the session ends (its GET stream with it) */
    private ended: () => void,
  ) {}

  add(p: Principal, key: string, uri: string, changed: (e: JournalEntry, seen: Seen) => boolean): void {
    if (!this.uris.has(uri) && this.uris.size >= MAX_SUBSCRIPTIONS) throw new McpError(ErrorCode.InvalidRequest, `A session watches at most ${MAX_SUBSCRIPTIONS} resources`);
    this.uris.set(uri, changed);
    this.stop ??= this.watch.watch(
      p,
      key,
      (e, seen) => {
        // the hub's fan-out must not fail on one session's filter
        try {
          for (const [u, f] of this.uris) if (f(e, seen)) this.notify(u);
        } catch (err) {
          this.log.warn({ err }, 'mcp subscription filter failed');
        }
      },
      () => {
        this.stop = undefined;
        this.close();
        this.ended();
      },
    );
  }

  remove(uri: string): void {
    this.uris.delete(uri);
    if (!this.uris.size) this.close();
  }

  close(): void {
    this.uris.clear();
    this.stop?.();
    this.stop = undefined;
  }
}

/** a profile's tools take `view`: the compact answer by default, the whole one on request */
const VIEW = { type: 'string', enum: ['compact', 'full'], description: 'compact (default): ids, senders, first lines, counts' };

const isSignal = (v: unknown): v is Record<string, any> => isObject(v) && typeof v.id === 'string' && typeof v.signal_type === 'string' && typeof v.content === 'string';
const firstLine = (t: string) => {
  const line = t.split('\n', 1)[0];
  return line.length > 200 ? line.slice(0, 199) + '…' : line;
};

/** Signals anywhere in a result reduced to what identifies them and their first line; lists get a count. */
export function compactView(v: unknown): unknown {
  if (isSignal(v)) {
    const keep = ['id', 'signal_type', 'from_identity', 'to_identity', 'to_role', 'to_ring', 'parent_id', 'urgency', 'delivery_state', 'task_status', 'claimed_by', 'claim_expires_at', 'claim_token', 'receipt_state', 'created_at'];
    return { ...Object.fromEntries(keep.filter((k) => v[k] !== undefined && v[k] !== null).map((k) => [k, v[k]])), content: firstLine(v.content) };
  }
  if (Array.isArray(v)) return v.map(compactView);
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, compactView(x)]));
  const list = Object.values(v).find(Array.isArray);
  if (list && !('count' in v)) out.count = list.length;
  return out;
}

const jsonSchema = (s: unknown) => JSON.parse(JSON.stringify(s)) as { type: 'object'; properties?: Record<string, object>; required?: string[] };

export class Mcp {
  private sessions = new Map<string, Session>();

  constructor(
    private table: MethodTable,
    private resources: Resources,
    private watch: JournalWatch,
    private log: Logger,
    private version: string,
  ) {}

  private tools(profile: string | undefined) {
    return (profile ? PROFILES[profile as McpProfile] : Object.keys(TOOLS))
      .map((name) => [name, methodOf(name, profile)!] as const)
      .filter(([name, method]) => name === WAIT_TOOL || method in this.table)
      .map(([name, method]) => {
        if (name === WAIT_TOOL) return { name, description: WAIT_DESCRIPTION, inputSchema: { ...jsonSchema(WaitParams.schema), properties: { ...jsonSchema(WaitParams.schema).properties, view: VIEW } } };
        const inputSchema = jsonSchema(this.table[method].params.schema);
        if (profile) inputSchema.properties = { ...inputSchema.properties, view: VIEW };
        return { name, description: this.table[method].description, inputSchema };
      });
  }

  private server(session: () => Session, profile: string | undefined): McpServer {
    const subs = () => session().subs;
    const mcp = new McpServer({ name: 'agent-coordination-service', version: this.version }, { capabilities: { tools: {}, resources: { subscribe: true } } });
    mcp.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.tools(profile) }));
    mcp.server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const name = req.params.name;
      const method = methodOf(name, profile);
      if (!method || (name !== WAIT_TOOL && !(method in this.table))) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${name}`);
      if (!profile) return this.call(method, principalOf(extra), req.params.arguments ?? {});
      // a profile answers the compact view unless the call asks for the full one
      const { view, ...args } = (isObject(req.params.arguments) ? req.params.arguments : {}) as Record<string, unknown>;
      const shape = view === 'full' ? undefined : compactView;
      if (name === WAIT_TOOL) return this.answer(() => session().waiter.wait(principalOf(extra), extra.authInfo?.token ?? '', validate(WaitParams, args), extra.signal), name, shape);
      return this.call(method, principalOf(extra), args, shape);
    });
    mcp.server.setRequestHandler(ListResourcesRequestSchema, (_req, extra) => ({ resources: this.resources.list(principalOf(extra)) }));
    mcp.server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: TEMPLATES }));
    mcp.server.setRequestHandler(ReadResourceRequestSchema, async (req, extra) => {
      const uri = req.params.uri;
      const data = await this.read(this.locate(uri), principalOf(extra));
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(data) }] };
    });
    // a subscription is granted only to a caller that may read the resource now
    mcp.server.setRequestHandler(SubscribeRequestSchema, async (req, extra) => {
      const p = principalOf(extra);
      const found = this.locate(req.params.uri);
      subs().add(p, extra.authInfo?.token ?? '', req.params.uri, found.changedBy(p, await this.read(found, p)));
      return {};
    });
    mcp.server.setRequestHandler(UnsubscribeRequestSchema, (req) => {
      subs().remove(req.params.uri);
      return {};
    });
    return mcp;
  }

  private locate(uri: string): Located {
    const found = this.resources.locate(uri);
    if (!found) throw new McpError(RESOURCE_NOT_FOUND, 'Resource not found', { uri });
    return found;
  }

  /** A refused read is a protocol error carrying the catalogue error, as /rpc's domain errors do. */
  private async read(found: Located, p: Principal): Promise<unknown> {
    try {
      return await found.read(p);
    } catch (e) {
      if (clientError(e).hidden) this.log.error({ err: e }, 'mcp resource read failed');
      const error = errorOf(e);
      throw new McpError(error.code.endsWith('_NOT_FOUND') ? RESOURCE_NOT_FOUND : DOMAIN_ERROR, error.message, error);
    }
  }

  private call(method: string, p: Principal, args: unknown, view?: (v: unknown) => unknown): Promise<CallToolResult> {
    return this.answer(() => invoke(resolve(this.table, method, args)!, p), method, view);
  }

  private async answer(run: () => Promise<unknown>, method: string, view?: (v: unknown) => unknown): Promise<CallToolResult> {
    try {
      const out = await run();
      const result = view ? view(out) : out;
      return { content: [{ type: 'text', text: JSON.stringify(result) }], ...(isObject(result) ? { structuredContent: result } : {}) };
    } catch (e) {
      if (clientError(e).hidden) this.log.error({ err: e, method }, 'mcp tool failed');
      const error = errorOf(e);
      return { isError: true, content: [{ type: 'text', text: `${error.code}: ${error.message}` }], structuredContent: { error } };
    }
  }

  /** POST, GET and DELETE /mcp: the session's transport answers; a session belongs to the identity that opened it. */
  async handle(verb: 'POST' | 'GET' | 'DELETE', r: Request<Principal>): Promise<Response> {
    const sid = r.headers['mcp-session-id'];
    let body: unknown;
    if (verb === 'POST') {
      try {
        body = JSON.parse(r.raw!.toString('utf8'));
      } catch {
        return rpcError(400, -32700, 'Parse error: body is not valid JSON');
      }
    }
    // each message of a POST spends a unit (the request's own pays for the first)
    if (verb === 'POST') await r.principal.spend?.(Array.isArray(body) ? Math.max(1, body.length) : 1);
    let session = sid ? this.sessions.get(sid) : undefined;
    if (sid && (!session || session.owner !== r.principal.identity.id)) return rpcError(404, -32001, 'Session not found');
    if (!session && !isInitialize(body)) return rpcError(400, -32000, 'Bad Request: no valid session id; send initialize first');
    // the request's ?tools= first, else the key's default profile
    const profile = typeof r.query?.tools === 'string' ? r.query.tools : r.principal.key.mcp_profile;
    if (profile !== undefined && !Object.hasOwn(PROFILES, profile)) return rpcError(400, ErrorCode.InvalidParams, `Invalid params: tools must be one of ${Object.keys(PROFILES).join(', ')}`);
    const invalid = invalidParams(body);
    if (invalid) return new Response(JSON.stringify(invalid), { status: 200, headers: { 'content-type': 'application/json' } });
    if (!session) {
      session = await this.open(r.principal.identity.id, profile);
    } else {
      // least recently used last
      this.sessions.delete(sid!);
      this.sessions.set(sid!, session);
    }
    // a fixed origin: the Host header is the client's text, and the transport reads only method, headers and body
    const req = new globalThis.Request('http://localhost/mcp', {
      method: verb,
      headers: r.headers,
      body: verb === 'POST' ? new Uint8Array(r.raw!) : undefined,
      signal: r.signal,
    });
    const res = await session.transport.handleRequest(req, { parsedBody: body, authInfo: { token: bearerToken(r.headers.authorization) ?? '', clientId: r.principal.identity.id, scopes: [], extra: { principal: r.principal } } });
    return this.withoutInternals(res, r.requestId);
  }

  /**
   * An internal error the SDK answered itself (-32603, its message whatever was thrown) says only the
   * catalogue's words (`clientError`); the text goes to the log. JSON answers only: streams pass as they are.
   */
  private async withoutInternals(res: Response, rid: string): Promise<Response> {
    if (!res.headers.get('content-type')?.includes('application/json')) return res;
    const text = await res.text();
    const headers = new Headers(res.headers);
    headers.delete('content-length');
    let out: unknown;
    try {
      out = JSON.parse(text);
    } catch {
      return new Response(text, { status: res.status, headers });
    }
    let changed = false;
    const clean = (m: unknown) => {
      if (!isObject(m) || !isObject(m.error) || m.error.code !== ErrorCode.InternalError) return m;
      changed = true;
      this.log.error({ mcp_error: m.error, request_id: rid }, 'mcp internal error');
      const c = clientError(undefined);
      return { ...m, error: { code: ErrorCode.InternalError, message: c.message, data: { code: c.code, message: c.message, details: null } } };
    };
    const cleaned = Array.isArray(out) ? out.map(clean) : clean(out);
    return new Response(changed ? JSON.stringify(cleaned) : text, { status: res.status, headers });
  }

  private async open(owner: string, profile: string | undefined): Promise<Session> {
    let session!: Session;
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        this.sessions.set(id, session);
        this.evict(owner);
      },
      onsessionclosed: (id) => void this.sessions.delete(id),
    });
    const server = this.server(() => session, profile);
    const subs = new Subscriptions(this.watch, (uri) => {
      server.server.sendResourceUpdated({ uri }).catch((err: unknown) => this.log.warn({ err, uri }, 'mcp resource update not sent'));
    }, this.log, () => void transport.close().catch(() => {}));
    session = { transport, owner, profile, subs, waiter: new Waiter(this.table, (p, key, onEntry, onEnded) => this.watch.watch(p, key, onEntry, onEnded)) };
    transport.onclose = () => {
      subs.close();
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return session;
  }

  /** Least recently used first: the owner's sessions over its bound, then anyone's over the global one. */
  private evict(owner: string): void {
    const own = [...this.sessions].filter(([, s]) => s.owner === owner);
    for (const [id] of own.slice(0, Math.max(0, own.length - MAX_SESSIONS_PER_IDENTITY))) this.drop(id);
    for (const [id] of this.sessions) {
      if (this.sessions.size <= MAX_SESSIONS) return;
      this.drop(id);
    }
  }

  private drop(id: string): void {
    const s = this.sessions.get(id);
    this.sessions.delete(id);
    void s?.transport.close().catch(() => {});
  }

  get openSessions(): number {
    return this.sessions.size;
  }

  async close(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(all.map((s) => s.transport.close()));
  }
}

export function mcpRoutes(mcp: Mcp): Route<Principal>[] {
  const handler = (verb: 'POST' | 'GET' | 'DELETE') => async (r: Request<Principal>) => ({ data: null, web: await mcp.handle(verb, r) });
  return [
    { method: 'post', path: '/mcp', auth: 'key', raw: true, handler: handler('POST') },
    { method: 'get', path: '/mcp', auth: 'key', raw: true, handler: handler('GET') },
    { method: 'del', path: '/mcp', auth: 'key', raw: true, handler: handler('DELETE') },
  ];
}

function principalOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): Principal {
  const p = (extra.authInfo?.extra as { principal?: Principal } | undefined)?.principal;
  if (!p) throw new McpError(ErrorCode.InternalError, 'No identity on this request');
  return p;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInitialize = (b: unknown) => (Array.isArray(b) ? b : [b]).some((m) => isObject(m) && m.method === 'initialize');

function rpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), { status, headers: { 'content-type': 'application/json' } });
}
