/**
 * POST /rpc: JSON-RPC 2.0 over the shared method table (src/surface/methods.ts). Only the edge is here:
 * envelopes, batches, and the mapping of catalogue errors to JSON-RPC errors and HTTP statuses.
 */
import { AppError, clientError, type ErrorCode } from '../errors.js';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import type { Logger } from '../log.js';
import { invoke, resolve, type MethodTable } from '../surface/methods.js';

/**
 * The standard numeric codes; a value a service refuses as malformed is -32602 too (its own code in
 * data.code); any other domain error is -32000 with its code in data.code.
 */
export const RPC_CODES: Partial<Record<ErrorCode, number>> = {
  RPC_PARSE_ERROR: -32700,
  RPC_INVALID_REQUEST: -32600,
  RPC_METHOD_NOT_FOUND: -32601,
  RPC_INVALID_PARAMS: -32602,
  RPC_INTERNAL_ERROR: -32603,
  VALIDATION_FIELD_REQUIRED: -32602,
  VALIDATION_INVALID_TYPE: -32602,
};
export const DOMAIN_ERROR = -32000;
/** calls in one batch at most: a batch runs in order on one request */
export const MAX_BATCH = 100;

type Id = string | number | null;
interface Answer {
  status: number;
  body: Record<string, unknown> | null;
  /** a refusal's own headers (Retry-After), sent when the call is the request's only one */
  headers?: Record<string, string>;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

export function rpcRoutes(table: MethodTable, log: Logger): Route<Principal>[] {
  const errorAnswer = (id: Id, e: unknown, rid: string): Answer => {
    const seen = clientError(e);
    if (seen.hidden) log.error({ err: e, request_id: rid }, 'rpc method failed');
    const err = seen.code === 'INTERNAL_SERVER_ERROR' ? clientError(new AppError('RPC_INTERNAL_ERROR')) : seen;
    const error = { code: RPC_CODES[err.code] ?? DOMAIN_ERROR, message: err.message, data: { code: err.code, request_id: rid, details: err.details } };
    return { status: err.status, body: { jsonrpc: '2.0', id, error }, headers: err.headers };
  };

  const one = async (msg: unknown, p: Principal, rid: string): Promise<Answer> => {
    const id = idOf(msg);
    try {
      // every call of a batch spends a unit (the request's own pays for the first)
      await p.spend?.(1);
      if (!isCall(msg)) throw new AppError('RPC_INVALID_REQUEST', 'A call needs jsonrpc "2.0" and a method name');
      if (msg.params !== undefined && (typeof msg.params !== 'object' || msg.params === null || Array.isArray(msg.params))) throw new AppError('RPC_INVALID_PARAMS', 'params must be an object of named parameters', { field: 'params' });
      const call = resolve(table, msg.method, msg.params);
      if (!call) throw new AppError('RPC_METHOD_NOT_FOUND', `No method ${msg.method}`, { method: msg.method });
      const result = await invoke(call, p);
      return { status: 200, body: 'id' in msg ? { jsonrpc: '2.0', id, result } : null };
    } catch (e) {
      return errorAnswer(id, e, rid);
    }
  };

  return [
    {
      method: 'post',
      path: '/rpc',
      auth: 'key',
      raw: true,
      handler: async (r) => {
        let msg: unknown;
        try {
          msg = JSON.parse(r.raw!.toString('utf8'));
        } catch {
          return reply(errorAnswer(null, new AppError('RPC_PARSE_ERROR'), r.requestId));
        }
        if (!Array.isArray(msg)) return reply(await one(msg, r.principal, r.requestId));
        if (msg.length === 0 || msg.length > MAX_BATCH) return reply(errorAnswer(null, new AppError('RPC_INVALID_REQUEST', `A batch holds 1 to ${MAX_BATCH} calls`, { calls: msg.length }), r.requestId));
        // in order, so a batch that emits then claims sees its own emit
        const answers: Answer[] = [];
        for (const m of msg) answers.push(await one(m, r.principal, r.requestId));
        const bodies = answers.map((a) => a.body).filter((b) => b !== null);
        return reply({ status: 200, body: bodies.length ? (bodies as never) : null });
      },
    },
  ];
}

function reply(a: Answer) {
  return { data: null, web: a.body === null ? new Response(null, { status: 204 }) : new Response(JSON.stringify(a.body), { status: a.status, headers: { ...JSON_HEADERS, ...a.headers } }) };
}

function idOf(msg: unknown): Id {
  const id = (msg as { id?: unknown } | null)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function isCall(msg: unknown): msg is { jsonrpc: '2.0'; method: string; params?: unknown; id?: Id } {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return false;
  const m = msg as Record<string, unknown>;
  const idOk = !('id' in m) || m.id === null || typeof m.id === 'string' || typeof m.id === 'number';
  return m.jsonrpc === '2.0' && typeof m.method === 'string' && m.method.length > 0 && idOk;
}

