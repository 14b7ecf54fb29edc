/**
 * The front end: one route table served by uWebSockets.js. Each route names its method, path, auth,
 * schemas and handler; this file turns requests into handler calls and results into the one envelope.
 */
import type { Readable } from 'node:stream';
import type { TemplatedApp } from 'uWebSockets.js';
import { AppError, clientError, errorBody, isAppError, type ErrorCode } from '../errors.js';
import { requestId } from '../ids.js';
import type { Logger } from '../log.js';
import { exchange, readBody, send, uws, type Exchange, type HttpRequest } from './uws.js';
import { abortSignal, sendWeb } from './web.js';
import { clientAddress } from './client-address.js';
import type { Links } from './links.js';
import { bodyStream, sendStream } from './stream.js';
import { validate, validateQuery, type Validator } from '../validation.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'del';
/**
 * public: no key; optional: a key if given; key: any valid key; admin: an admin identity's key;
 * proof: a federation peer's signed request (X-Federation-Peer-Id + X-Federation-Proof over the raw body)
 */
export type AuthMode = 'public' | 'optional' | 'key' | 'admin' | 'proof';

/** What a proof route's verifier is given: the request exactly as received. */
export interface SignedCall {
  method: string;
  /** the request path without its query */
  path: string;
  headers: Record<string, string>;
  /** the raw body bytes, the ones the proof's body_sha256 covers */
  body: Buffer;
}

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
  /** proof routes: the verified calling peer */
  peer?: any;
}

export interface Reply {
  data?: unknown;
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

/** The request being served, for its report: the identity is noted once authentication has named it. */
interface RequestScope {
  requestId: string;
  identityId?: string;
}

/** What the front end reports once a request is answered (metrics, the request log). */
export interface Answered {
  requestId: string;
  method: string;
  /** the route pattern, never the raw path */
  route: string;
  status: number;
  ms: number;
  identityId: string | undefined;
}

export interface Route<P = any> {
  method: Method;
  path: string;
  auth: AuthMode;
  body?: Validator;
  query?: Validator;
  /** path parameters that become store keys (a memory entity): checked like a body, with the route's code */
  params?: Validator;
  /** the route's own validation code where the interface names one */
  invalid?: ErrorCode;
  /** the domain codes the route can answer, for the OpenAPI document (else its area's codes) */
  errors?: ErrorCode[];
  /** hand the handler the body as a stream (uploads) instead of reading it whole as JSON */
  stream?: boolean;
  /** hand the unparsed body to the handler as `raw` */
  raw?: boolean;
  /** a create route: an `Idempotency-Key` header makes a retry answer the first reply (FrontEndOptions.idempotent) */
  idempotent?: boolean;
  /** answers a new API key (`data.api_key`); any other route that tries is a 500, so none escapes the keys-minted property test */
  mints?: boolean;
  /** a public route no client address budget applies to (probes, documents, signed share links) */
  unlimited?: boolean;
  /** grants what no key scope bounds (a peer's trust, a webhook's events): a narrowed key is refused (FrontEndOptions.unscoped) */
  unscoped?: boolean;
  handler(req: Request<P>): Promise<Reply> | Reply;
}

export interface FrontEndOptions<P> {
  /** refuses a principal whose key is narrowed by any scope, on an `unscoped` route */
  unscoped?(principal: P): void;
  bodyLimit: number;
  uploadLimit: number;
  links: Links;
  log: Logger;
  /** resolves an Authorization header to a principal, or throws AUTH_KEY_* (or RATE_LIMIT_EXCEEDED) */
  authenticate(header: string | undefined, admin: boolean, requestId: string): Promise<P>;
  /** verifies a proof route's signed call, or throws FED_*; answers the calling peer */
  verifyProof?(call: SignedCall): Promise<unknown>;
  /** spends one request of a verified peer's budget, or throws RATE_LIMIT_EXCEEDED; answers the RateLimit-* headers */
  peerBudget?(peer: unknown): Promise<Record<string, string>>;
  /** refuses a browser Origin the service does not allow (ORIGIN_NOT_ALLOWED), before anything else */
  origins?: { check(origin: string | undefined): void };
  /**
   * spends one request of a client address (src/http/client-address.ts) on a keyless call of a public or
   * optional route, or throws RATE_LIMIT_EXCEEDED; answers the headers the answer carries (RateLimit-*)
   */
  publicBudget?(address: string): Promise<Record<string, string>>;
  /** proxies whose X-Forwarded-For is believed, in canonicalIp's spelling */
  trustedProxies?: ReadonlySet<string>;
  /** headers every answer to an authenticated request carries (RateLimit-*) */
  principalHeaders?(principal: P): Record<string, string>;
  answered?(a: Answered): void;
  /** the identity a principal acts for, for the request log */
  identityOf?(principal: P): string;
  /** runs an idempotent route's handler once per principal and key (`request` identifies the body) */
  idempotent?(principal: P, key: string, request: string, exec: () => Promise<Reply>): Promise<Reply>;
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const METHOD_NAME: Record<Method, string> = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' };

export class FrontEnd<P> {
  readonly app: TemplatedApp = uws.App();
  private listenSocket: unknown;
  /** every route served, in order: the live table tests sweep (authorization matrix, fuzzing) */
  readonly table: Route<P>[] = [];

  constructor(private opts: FrontEndOptions<P>) {}

  routes(routes: Route<P>[]): void {
    for (const r of routes) this.add(r);
    this.table.push(...routes);
  }

  /** Must be called after every route: the catch-all answers NOT_FOUND. */
  finish(): void {
    this.app.any('/*', (res) => {
      const x = exchange(res);
      const rid = requestId();
      this.fail(x, rid, new AppError('NOT_FOUND'));
      this.report(x, { requestId: rid }, 'ANY', '*', performance.now());
    });
  }

  private add(r: Route<P>): void {
    const names = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]);
    const hasBody = r.method !== 'get' && r.method !== 'del';
    this.app[r.method](r.path, (res, req: HttpRequest) => {
      const x = exchange(res);
      const rid = requestId();
      const start = performance.now();
      const url = req.getUrl();
      const headers: Record<string, string> = {};
      req.forEach((k, v) => (headers[k] = v));
      // the client address, read before any await and only where a keyless call spends its budget: run spends it then
      const remote = this.spendsAddress(r, headers) ? Buffer.from(res.getRemoteAddressAsText()).toString() : undefined;
      const query = req.getQuery();
      const rawQuery = query ? Object.fromEntries(new URLSearchParams(query)) : {};
      const stream = r.stream ? bodyStream(x, this.opts.uploadLimit, contentLength(headers)) : undefined;
      const body = hasBody && !stream ? readBody(x, this.opts.bodyLimit) : Promise.resolve(undefined);
      let params: Record<string, string>;
      try {
        params = names.length ? Object.fromEntries(names.map((n, i) => [n, decodePathParam(n, req.getParameter(i) ?? '')])) : {};
      } catch (e) {
        // an exception escaping a uWS handler ends the process: answer it here
        this.fail(x, rid, e);
        return this.report(x, { requestId: rid }, r.method, r.path, start);
      }
      const scope: RequestScope = { requestId: rid };
      void this.run(x, scope, r, url, params, headers, rawQuery, body, remote, stream).finally(() => this.report(x, scope, r.method, r.path, start));
    });
  }

  private async run(x: Exchange, scope: RequestScope, r: Route<P>, url: string, params: Record<string, string>, headers: Record<string, string>, rawQuery: Record<string, string>, bodyP: Promise<Buffer | 'too_large' | undefined>, remote: string | undefined, stream?: Readable): Promise<void> {
    const rid = scope.requestId;
    let budget: Record<string, string> = {};
    try {
      this.opts.origins?.check(headers.origin);
      const keyless = isKeyless(r, headers);
      if (remote !== undefined) budget = await this.opts.publicBudget!(clientAddress(remote, headers['x-forwarded-for'], this.opts.trustedProxies ?? new Set()));
      const principal = keyless ? (undefined as P) : await this.opts.authenticate(headers.authorization, r.auth === 'admin', rid);
      if (principal) scope.identityId = this.opts.identityOf?.(principal);
      if (r.unscoped && principal) this.opts.unscoped?.(principal);
      if (stream?.errored) throw stream.errored;
      const raw = await bodyP;
      if (raw === 'too_large') throw new AppError('PAYLOAD_TOO_LARGE', `Body exceeds ${this.opts.bodyLimit} bytes`, { limit: this.opts.bodyLimit });
      const peer = r.auth === 'proof' ? await this.verified({ method: METHOD_NAME[r.method], path: url, headers, body: raw ?? Buffer.alloc(0) }) : undefined;
      // a peer's budget is spent once its proof verified: nobody else can spend it
      if (peer !== undefined && this.opts.peerBudget) budget = await this.opts.peerBudget(peer);
      const body = r.body ? validate(r.body, parseJson(raw), r.invalid) : undefined;
      const query = r.query ? validateQuery(r.query, rawQuery) : rawQuery;
      if (r.params) params = validate(r.params as Validator<Record<string, string>>, params, r.invalid);
      if (x.aborted) return;
      const exec = async () => r.handler({ requestId: rid, params, query, body, headers, principal, peer, stream, ...(r.raw ? { raw: raw ?? Buffer.alloc(0), signal: abortSignal(x) } : {}) });
      const idemKey = r.idempotent && principal ? headers['idempotency-key'] : undefined;
      // an answer is replayed only to the credential that asked (its header is in the hashed request): a minted key or an
      // invite code made by one key of an identity never reaches a narrower key of the same identity
      const request = () => `${fingerprint(r, params, body, rawQuery, headers)} ${headers.authorization}`;
      const out = idemKey !== undefined && this.opts.idempotent ? await this.opts.idempotent(principal, idemKey, request(), exec) : await exec();
      if (!r.mints) assertMintsNoKey(out.data);
      // an upload the handler did not read to its end is dropped, not left paused
      stream?.destroy();
      const extra = { ...out.headers, ...budget, ...(principal && this.opts.principalHeaders ? this.opts.principalHeaders(principal) : {}), 'x-request-id': rid };
      if (out.web) return sendWeb(x, out.web, extra);
      if (out.raw) return void (await sendStream(x, out.status ?? 200, extra, out.raw.stream, out.raw.size));
      if (out.text) return send(x, out.status ?? 200, { 'content-type': out.text.contentType, ...extra }, out.text.body);
      send(x, out.status ?? 200, { ...JSON_HEADERS, ...extra }, JSON.stringify({ data: out.data, meta: { request_id: rid, ...out.meta } }));
    } catch (e) {
      stream?.destroy();
      this.fail(x, rid, e, budget);
    }
  }

  /** a keyless call of a public or optional route with a budget: it spends its client address's */
  private spendsAddress(r: Route<P>, headers: Record<string, string>): boolean {
    return r.auth !== 'proof' && !r.unlimited && this.opts.publicBudget !== undefined && isKeyless(r, headers);
  }

  private async verified(call: SignedCall): Promise<unknown> {
    if (!this.opts.verifyProof) throw new AppError('FED_PEER_DENIED', 'Federation is not served here');
    return this.opts.verifyProof(call);
  }

  private report(x: Exchange, scope: RequestScope, method: string, route: string, start: number): void {
    // a request the client abandoned before an answer counts as 499, as nginx logs it
    const status = x.status ?? 499;
    this.opts.answered?.({ requestId: scope.requestId, method: method === 'del' ? 'DELETE' : method.toUpperCase(), route, status, ms: performance.now() - start, identityId: scope.identityId });
  }

  fail(x: Exchange, rid: string, e: unknown, headers: Record<string, string> = {}): void {
    const err = clientError(e);
    if (err.hidden) this.opts.log.error({ err: e, request_id: rid, ...(isAppError(e) ? { code: e.code, details: e.details } : {}) }, 'unhandled error');
    send(x, err.status, { ...JSON_HEADERS, ...headers, 'x-request-id': rid, ...err.headers }, JSON.stringify(errorBody(e, rid, this.opts.links.docsBase)));
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

const isKeyless = <P>(r: Route<P>, headers: Record<string, string>) => r.auth === 'public' || r.auth === 'proof' || (r.auth === 'optional' && !headers.authorization);

function contentLength(headers: Record<string, string>): number | undefined {
  const n = Number(headers['content-length']);
  return headers['content-length'] !== undefined && Number.isSafeInteger(n) ? n : undefined;
}

/**
 * What identifies an idempotent request besides its key: route, path parameters and the parsed body. A
 * streamed upload's body cannot be part of it (it is read once, by the handler, and a replay does not read
 * it): its query (the raw upload's name and fields), its Content-Type without the multipart boundary (a
 * client draws a new one per attempt) and its declared Content-Length stand for it (docs/decisions.md).
 */
function fingerprint<P>(r: Route<P>, params: Record<string, string>, body: unknown, query: Record<string, string>, headers: Record<string, string>): string {
  const base = `${r.method} ${r.path} ${JSON.stringify(params)}`;
  if (!r.stream) return `${base} ${JSON.stringify(body ?? null)}`;
  const sorted = Object.fromEntries(Object.entries(query).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const type = (headers['content-type'] ?? '').replace(/;\s*boundary=("[^"]*"|[^;]*)/i, '').trim().toLowerCase();
  return `${base} stream ${JSON.stringify(sorted)} ${type} ${headers['content-length'] ?? '-'}`;
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

/** Only a route declared `mints` answers a key: the declaration is what the keys-minted property test sweeps. */
export function assertMintsNoKey(data: unknown): void {
  if (typeof data === 'object' && data !== null && 'api_key' in data) throw new AppError('INTERNAL_SERVER_ERROR', 'A route or method not declared as minting keys answered one');
}
