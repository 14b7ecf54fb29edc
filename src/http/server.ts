/**
 * The front end: one route table served by uWebSockets.js. Each route names its method, path, auth,
 * schemas and handler; this file turns requests into handler calls and results into the one envelope.
 */
import type { Readable } from 'node:stream';
import type { TemplatedApp } from 'uWebSockets.js';
import { AppError, errorBody, isAppError, type ErrorCode } from '../errors.js';
import { requestId } from '../ids.js';
import type { Logger } from '../log.js';
import { exchange, readBody, send, uws, type Exchange, type HttpRequest } from './uws.js';
import { abortSignal, sendWeb } from './web.js';
import type { Links } from './links.js';
import { bodyStream, sendStream } from './stream.js';
import { validate, validateQuery, type Validator } from '../validation.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'del';
/** public: no key; optional: a key if given; key: any valid key; admin: an admin identity's key */
export type AuthMode = 'public' | 'optional' | 'key' | 'admin';

export interface Request<P = any> {
  requestId: string;
  params: Record<string, string>;
  query: any;
  body: any;
  headers: Record<string, string>;
  principal: P;
  /** stream routes: the raw request body, read with back-pressure, capped at uploadLimit */
  stream?: Readable;
  /** the body as received, for routes with `raw: true` (protocols that parse their own bodies) */
  raw?: Buffer;
  /** aborted when the client goes away: long answers (streams) stop on it */
  signal?: AbortSignal;
}

export interface Reply {
  data: unknown;
  status?: number;
  meta?: Record<string, unknown>;
  headers?: Record<string, string>;
  /** a non-JSON body streamed as is (downloads); `data` is ignored then */
  raw?: { stream: Readable; size: number };
  /** a web Response sent as it is (status, headers, streamed body) instead of the envelope */
  web?: globalThis.Response;
  /** a non-JSON answer (the invite skill's Markdown): sent as is, without the envelope */
  text?: { contentType: string; body: string };
}

export interface Route<P = any> {
  method: Method;
  path: string;
  auth: AuthMode;
  body?: Validator;
  query?: Validator;
  /** the route's own validation code where the interface names one */
  invalid?: ErrorCode;
  /** hand the handler the body as a stream (uploads) instead of reading it whole as JSON */
  stream?: boolean;
  /** hand the unparsed body to the handler as `raw` */
  raw?: boolean;
  handler(req: Request<P>): Promise<Reply> | Reply;
}

export interface FrontEndOptions<P> {
  bodyLimit: number;
  uploadLimit: number;
  links: Links;
  log: Logger;
  /** resolves an Authorization header to a principal, or throws AUTH_KEY_* (or RATE_LIMIT_EXCEEDED) */
  authenticate(header: string | undefined, admin: boolean, requestId: string): Promise<P>;
  /** headers every answer to an authenticated request carries (RateLimit-*) */
  principalHeaders?(principal: P): Record<string, string>;
}

const JSON_HEADERS = { 'content-type': 'application/json' };

export class FrontEnd<P> {
  readonly app: TemplatedApp = uws.App();
  private listenSocket: unknown;

  constructor(private opts: FrontEndOptions<P>) {}

  routes(routes: Route<P>[]): void {
    for (const r of routes) this.add(r);
  }

  /** Must be called after every route: the catch-all answers NOT_FOUND. */
  finish(): void {
    this.app.any('/*', (res) => {
      const x = exchange(res);
      this.fail(x, requestId(), new AppError('NOT_FOUND'));
    });
  }

  private add(r: Route<P>): void {
    const names = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]);
    const hasBody = r.method !== 'get' && r.method !== 'del';
    this.app[r.method](r.path, (res, req: HttpRequest) => {
      const x = exchange(res);
      const rid = requestId();
      const headers: Record<string, string> = {};
      req.forEach((k, v) => (headers[k] = v));
      const rawQuery = Object.fromEntries(new URLSearchParams(req.getQuery() ?? ''));
      const stream = r.stream ? bodyStream(x, this.opts.uploadLimit, contentLength(headers)) : undefined;
      const body = hasBody && !stream ? readBody(x, this.opts.bodyLimit) : Promise.resolve(undefined);
      let params: Record<string, string>;
      try {
        params = Object.fromEntries(names.map((n, i) => [n, decodePathParam(n, req.getParameter(i) ?? '')]));
      } catch (e) {
        // an exception escaping a uWS handler ends the process: answer it here
        return this.fail(x, rid, e);
      }
      void this.run(x, rid, r, params, headers, rawQuery, body, stream);
    });
  }

  private async run(x: Exchange, rid: string, r: Route<P>, params: Record<string, string>, headers: Record<string, string>, rawQuery: Record<string, string>, bodyP: Promise<Buffer | 'too_large' | undefined>, stream?: Readable): Promise<void> {
    try {
      const principal = r.auth === 'public' ? (undefined as P) : r.auth === 'optional' && !headers.authorization ? (undefined as P) : await this.opts.authenticate(headers.authorization, r.auth === 'admin', rid);
      if (stream?.errored) throw stream.errored;
      const raw = await bodyP;
      if (raw === 'too_large') throw new AppError('PAYLOAD_TOO_LARGE', `Body exceeds ${this.opts.bodyLimit} bytes`, { limit: this.opts.bodyLimit });
      const body = r.body ? validate(r.body, parseJson(raw), r.invalid) : undefined;
      const query = r.query ? validateQuery(r.query, rawQuery) : rawQuery;
      if (x.aborted) return;
      const out = await r.handler({ requestId: rid, params, query, body, headers, principal, stream, ...(r.raw ? { raw: raw ?? Buffer.alloc(0), signal: abortSignal(x) } : {}) });
      // an upload the handler did not read to its end is dropped, not left paused
      stream?.destroy();
      const extra = { ...out.headers, ...(principal && this.opts.principalHeaders ? this.opts.principalHeaders(principal) : {}), 'x-request-id': rid };
      if (out.web) return sendWeb(x, out.web, rid);
      if (out.raw) return void (await sendStream(x, out.status ?? 200, extra, out.raw.stream, out.raw.size));
      if (out.text) return send(x, out.status ?? 200, { 'content-type': out.text.contentType, ...extra }, out.text.body);
      send(x, out.status ?? 200, { ...JSON_HEADERS, ...extra }, JSON.stringify({ data: out.data, meta: { request_id: rid, ...out.meta } }));
    } catch (e) {
      stream?.destroy();
      this.fail(x, rid, e);
    }
  }

  fail(x: Exchange, rid: string, e: unknown): void {
    const err = isAppError(e) ? e : new AppError('INTERNAL_SERVER_ERROR');
    if (!isAppError(e)) this.opts.log.error({ err: e, request_id: rid }, 'unhandled error');
    send(x, err.status, { ...JSON_HEADERS, 'x-request-id': rid, ...err.headers }, JSON.stringify(errorBody(err, rid, this.opts.links.docsBase)));
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.app.listen(host, port, (sock) => {
        if (!sock) return reject(new Error(`cannot listen on ${host}:${port}`));
        this.listenSocket = sock;
        resolve(uws.us_socket_local_port(sock));
      });
    });
  }

  close(): void {
    if (this.listenSocket) uws.us_listen_socket_close(this.listenSocket as never);
    this.listenSocket = undefined;
    (this.app as unknown as { close?: () => void }).close?.();
  }
}

function contentLength(headers: Record<string, string>): number | undefined {
  const n = Number(headers['content-length']);
  return headers['content-length'] !== undefined && Number.isSafeInteger(n) ? n : undefined;
}

function decodePathParam(name: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new AppError('VALIDATION_INVALID_TYPE', `Path parameter ${name} is not valid percent-encoding`, { field: name, reason: 'encoding' });
  }
}

function parseJson(raw: Buffer | undefined): unknown {
  if (!raw || raw.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new AppError('VALIDATION_INVALID_TYPE', 'Body is not valid JSON', { field: 'body', reason: 'json' });
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new AppError('VALIDATION_INVALID_TYPE', 'Body must be a JSON object', { field: 'body', reason: 'object' });
  return v;
}

