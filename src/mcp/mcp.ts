/**
 * MCP over Streamable HTTP: the SDK's McpServer with its Web-standard transport, one pair per session,
 * fed a fetch `Request` built from the uWebSockets.js request; its `Response` is streamed back by the
 * front end. Tools are entries of the shared method table, so a tool does exactly what /rpc does; their
 * input schemas are the table's TypeBox schemas (TypeBox schemas are JSON Schema).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { isAppError } from '../errors.js';
import type { Request, Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import type { Logger } from '../log.js';
import { errorOf, invoke, resolve, type MethodTable } from '../surface/methods.js';

/** The interface's eighteen tools and the method each one is. A tool whose method is not in the table is not offered. */
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
};

/** Open sessions held at most; the least recently used one is closed to make room. */
export const MAX_SESSIONS = 1000;

interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  owner: string;
}

const jsonSchema = (s: unknown) => JSON.parse(JSON.stringify(s)) as { type: 'object'; properties?: Record<string, object>; required?: string[] };

export class Mcp {
  private sessions = new Map<string, Session>();

  constructor(
    private table: MethodTable,
    private log: Logger,
    private version: string,
  ) {}

  private tools() {
    return Object.entries(TOOLS)
      .filter(([, method]) => method in this.table)
      .map(([name, method]) => ({ name, description: this.table[method].description, inputSchema: jsonSchema(this.table[method].params.schema) }));
  }

  private server(): McpServer {
    const mcp = new McpServer({ name: 'agent-coordination-service', version: this.version }, { capabilities: { tools: {} } });
    mcp.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: this.tools() }));
    mcp.server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const method = Object.hasOwn(TOOLS, req.params.name) ? TOOLS[req.params.name] : undefined;
      if (!method || !(method in this.table)) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${req.params.name}`);
      const principal = (extra.authInfo?.extra as { principal?: Principal } | undefined)?.principal;
      if (!principal) throw new McpError(ErrorCode.InternalError, 'No identity on this request');
      return this.call(method, principal, req.params.arguments ?? {});
    });
    return mcp;
  }

  private async call(method: string, p: Principal, args: unknown): Promise<CallToolResult> {
    try {
      const result = await invoke(resolve(this.table, method, args)!, p);
      return { content: [{ type: 'text', text: JSON.stringify(result) }], ...(isObject(result) ? { structuredContent: result } : {}) };
    } catch (e) {
      if (!isAppError(e)) this.log.error({ err: e, method }, 'mcp tool failed');
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
    let session = sid ? this.sessions.get(sid) : undefined;
    if (sid && (!session || session.owner !== r.principal.identity.id)) return rpcError(404, -32001, 'Session not found');
    if (!session) {
      if (!isInitialize(body)) return rpcError(400, -32000, 'Bad Request: no valid session id; send initialize first');
      session = await this.open(r.principal.identity.id);
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
    return session.transport.handleRequest(req, { parsedBody: body, authInfo: { token: '', clientId: r.principal.identity.id, scopes: [], extra: { principal: r.principal } } });
  }

  private async open(owner: string): Promise<Session> {
    let session!: Session;
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        this.sessions.set(id, session);
        this.evict();
      },
      onsessionclosed: (id) => void this.sessions.delete(id),
    });
    session = { transport, owner };
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await this.server().connect(transport);
    return session;
  }

  private evict(): void {
    for (const [id, s] of this.sessions) {
      if (this.sessions.size <= MAX_SESSIONS) return;
      this.sessions.delete(id);
      void s.transport.close().catch(() => {});
    }
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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isInitialize = (b: unknown) => (Array.isArray(b) ? b : [b]).some((m) => isObject(m) && m.method === 'initialize');

function rpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), { status, headers: { 'content-type': 'application/json' } });
}
