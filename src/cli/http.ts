/** One HTTP call of `svc`: the service's envelope in, its `data` or its catalogue error out. */
import type { ErrorCode } from '../errors.js';

/** A failure `svc` reports as one line, `CODE: message`; `exit` is the process's exit code. */
export class CliError extends Error {
  constructor(
    readonly code: ErrorCode | string,
    message: string,
    readonly exit = 1,
    readonly details: unknown = null,
  ) {
    super(message);
  }
}

export const usage = (message: string, code: ErrorCode = 'VALIDATION_FIELD_REQUIRED') => new CliError(code, message, 2);

export interface Target {
  url: string;
  key?: string;
  /** the whole call's limit: a hook must answer within its agent's timeout */
  timeoutMs?: number;
}

/** Answers `data`; throws the error envelope as a CliError, or SERVICE_UNREACHABLE when no answer came. */
export async function call<T = any>(t: Target, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (t.key) headers.authorization = `Bearer ${t.key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let text: string;
  let status: number;
  try {
    const r = await fetch(t.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(t.timeoutMs ?? 30_000),
    });
    status = r.status;
    text = await r.text();
  } catch (e) {
    throw new CliError('SERVICE_UNREACHABLE', `${t.url}: ${(e as Error).cause instanceof Error ? ((e as Error).cause as Error).message : (e as Error).message}`);
  }
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (status >= 400 || json === undefined) {
    const err = json?.error;
    throw new CliError(err?.code ?? 'INTERNAL_HTTP_ERROR', err?.message ?? `${method} ${path} answered ${status}`, 1, err?.details ?? null);
  }
  return (path === '/rpc' ? json : json.data) as T;
}

/** One /rpc method call (the composite workflow calls live only there); a JSON-RPC error becomes its catalogue code. */
export async function rpc<T = any>(t: Target, method: string, params: unknown = {}): Promise<T> {
  const out = await call<any>(t, 'POST', '/rpc', { jsonrpc: '2.0', id: 1, method, params });
  if (out.error) throw new CliError(out.error.data?.code ?? 'RPC_INTERNAL_ERROR', out.error.message, 1, out.error.data?.details ?? null);
  return out.result as T;
}
