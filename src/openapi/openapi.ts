/**
 * OpenAPI 3.1 from the live route table: every route with its auth, its TypeBox request schemas (TypeBox
 * schemas are JSON Schema) and the catalogue codes it can answer. Response bodies are described by the
 * envelope only: `data` is left open because routes carry no response schemas.
 */
import { catalogue, type ErrorCode } from '../errors.js';
import type { Route } from '../http/server.js';

const METHOD = { get: 'get', post: 'post', put: 'put', patch: 'patch', del: 'delete' } as const;
const CODES = Object.keys(catalogue) as ErrorCode[];
const withPrefix = (...prefixes: string[]) => CODES.filter((c) => prefixes.some((p) => c.startsWith(p)));

/** Domain codes by the first path segment, for routes that do not list their own `errors`. */
const AREA: [RegExp, ErrorCode[]][] = [
  [/^\/(emit|claim|ack|signals|thread|inbox)\b/, [...withPrefix('SIGNAL_', 'POLICY_'), 'AUTH_SCOPE_DENIED']],
  [/^\/(roles|rings|fills|org)\b/, [...withPrefix('ORG_'), 'IDENTITY_NOT_FOUND']],
  [/^\/invite\b/, [...withPrefix('INVITE_'), 'AUTH_ADMIN_REQUIRED', 'POLICY_DENIED']],
  [/^\/(identities|admin\/api-keys)\b/, ['IDENTITY_NOT_FOUND', 'NOT_FOUND', 'AUTH_SCOPE_DENIED']],
  [/^\/reservations\b/, [...withPrefix('RESERVATION_'), 'POLICY_MEMBERSHIP_REQUIRED']],
  [/^\/admin\/webhooks\b/, withPrefix('WEBHOOK_')],
  [/^\/memory\b/, withPrefix('MEMORY_', 'GRAPH_', 'EMBEDDING_')],
  [/^\/workspace\b/, withPrefix('WORKSPACE_')],
  [/^\/artifacts\b/, withPrefix('ARTIFACT_')],
  [/^\/workstreams\b/, withPrefix('WORKSTREAM_')],
  [/^\/(auth|siwe|auth-request|auth-requests)\b/, [...withPrefix('SIWE_', 'AUTH_REQUEST_', 'IDENTITY_', 'REGISTRY_'), 'AUTH_SCOPE_DENIED', 'AUTH_WALLET_BINDING_ENDED']],
  [/^\/discovery\b/, withPrefix('DISC_')],
  [/^\/health\b/, ['HEALTH_DB_UNREACHABLE']],
  [/^\/(docs|dashboard)\b/, ['NOT_FOUND']],
];

export function routeErrors(r: Route): ErrorCode[] {
  // every route refuses a browser Origin it does not allow (src/http/origin.ts)
  const codes = new Set<ErrorCode>(['INTERNAL_SERVER_ERROR', 'ORIGIN_NOT_ALLOWED']);
  if (r.auth === 'key' || r.auth === 'admin') codes.add('AUTH_KEY_MISSING');
  if (r.auth !== 'public' && r.auth !== 'proof') for (const c of ['AUTH_KEY_INVALID', 'AUTH_KEY_REVOKED', 'AUTH_KEY_EXPIRED'] as const) codes.add(c);
  if (r.auth === 'admin') codes.add('AUTH_ADMIN_REQUIRED');
  // a key's budget, a public route's per-address one (docs/auth.md, Rate limits), or a peer's (docs/federation.md, Limits)
  if (!r.unlimited) codes.add('RATE_LIMIT_EXCEEDED');
  if (r.body) codes.add('PAYLOAD_TOO_LARGE');
  if (r.invalid) codes.add(r.invalid);
  if (r.body || r.query || r.path.includes(':')) {
    codes.add('VALIDATION_INVALID_TYPE');
    codes.add('VALIDATION_FIELD_REQUIRED');
  }
  if (r.path === '/metrics') (['AUTH_KEY_MISSING', 'AUTH_KEY_INVALID'] as const).forEach((c) => codes.add(c));
  for (const c of r.errors ?? AREA.find(([re]) => re.test(r.path))?.[1] ?? []) codes.add(c);
  return [...codes];
}

const ErrorEnvelope = (codes: ErrorCode[]) => ({
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message', 'request_id', 'details', 'docs_url'],
      properties: {
        code: { type: 'string', enum: codes },
        message: { type: 'string' },
        request_id: { type: 'string' },
        details: { type: ['object', 'null'] },
        docs_url: { type: 'string', format: 'uri' },
      },
    },
  },
});

const DataEnvelope = {
  type: 'object',
  required: ['data', 'meta'],
  additionalProperties: false,
  properties: {
    data: { description: 'the resource; its shape is documented in the interface, not (yet) as a schema here' },
    meta: { type: 'object', required: ['request_id'], properties: { request_id: { type: 'string' }, cursor: { type: ['string', 'null'] } } },
  },
};

/** Non-envelope bodies of the operator routes. */
const RAW: Record<string, Record<string, { schema: object }>> = {
  '/metrics': { 'text/plain': { schema: { type: 'string' } } },
  '/openapi.json': { 'application/json': { schema: { type: 'object', required: ['openapi', 'paths'] } } },
  '/dashboard': { 'text/html': { schema: { type: 'string' } } },
  '/dashboard/:file': { 'text/javascript': { schema: { type: 'string' } }, 'text/css': { schema: { type: 'string' } } },
};

/** JSON Schema only: drop TypeBox's symbol keys and compile-time extras by a JSON round trip. */
const jsonSchema = (s: unknown) => JSON.parse(JSON.stringify(s));

function queryParameters(r: Route) {
  const schema = r.query ? jsonSchema(r.query.schema) : undefined;
  const required = new Set<string>(schema?.required ?? []);
  return Object.entries<object>(schema?.properties ?? {}).map(([name, s]) => ({ name, in: 'query', required: required.has(name), schema: s }));
}

function operation(r: Route) {
  const codes = routeErrors(r);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of codes) byStatus.set(catalogue[c][0], [...(byStatus.get(catalogue[c][0]) ?? []), c]);
  const responses: Record<string, unknown> = {
    // 200, or 201 where the route creates something
    '2XX': { description: 'success', content: RAW[r.path] ?? { 'application/json': { schema: DataEnvelope } } },
  };
  if (r.path === '/') responses[302] = { description: 'a browser (Accept prefers text/html to application/json) is sent to the dashboard', headers: { Location: { schema: { type: 'string', const: '/dashboard' } } } };
  for (const [status, cs] of [...byStatus].sort((a, b) => a[0] - b[0])) responses[status] = { description: cs.join(', '), content: { 'application/json': { schema: ErrorEnvelope(cs) } } };
  const names = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]);
  return {
    operationId: `${METHOD[r.method]}${r.path.replace(/[/:.-]+(\w)?/g, (_, c: string | undefined) => (c ?? '').toUpperCase())}`,
    security: r.auth === 'public' ? (r.path === '/metrics' ? [{}, { metricsToken: [] }] : []) : r.auth === 'optional' ? [{}, { apiKey: [] }] : r.auth === 'proof' ? [{ federationPeer: [], federationProof: [] }] : [{ apiKey: [] }],
    ...(r.auth === 'admin' ? { 'x-auth': 'admin' } : { 'x-auth': r.auth }),
    parameters: [...names.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })), ...queryParameters(r)],
    ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(r.body.schema) } } } } : {}),
    responses,
    'x-error-codes': codes,
  };
}

export const openApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');

export function openApi(table: Route[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of table) (paths[openApiPath(r.path)] ??= {})[METHOD[r.method]] = operation(r);
  paths['/signals/stream'] = {
    get: {
      operationId: 'getSignalsStream',
      description: 'Server-sent events of signals (docs/realtime.md); the API key comes in the token query parameter',
      security: [{ tokenQuery: [] }],
      parameters: ['token', 'type', 'ring', 'last_event_id'].map((name) => ({ name, in: 'query', required: name === 'token', schema: { type: 'string' } })),
      responses: {
        200: { description: 'the event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
        // opening a stream spends a unit of the key's budget (docs/auth.md, Rate limits)
        429: { description: 'RATE_LIMIT_EXCEEDED', content: { 'application/json': { schema: ErrorEnvelope(['RATE_LIMIT_EXCEEDED']) } } },
      },
      'x-error-codes': ['RATE_LIMIT_EXCEEDED'],
    },
  };
  paths['/tasks/stream'] = {
    get: {
      operationId: 'getTasksStream',
      description: 'The signal stream that also takes tasks by credits: `task` events, answered by POST /ack and /tasks/{id}/heartbeat (docs/realtime.md, Task dispatch)',
      security: [{ tokenQuery: [] }],
      parameters: ['token', 'capacity', 'task_types', 'lease_ms', 'quiet', 'type', 'ring', 'last_event_id'].map((name) => ({ name, in: 'query', required: name === 'token', schema: { type: 'string' } })),
      responses: {
        200: { description: 'the event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
        400: { description: 'VALIDATION_INVALID_TYPE', content: { 'application/json': { schema: ErrorEnvelope(['VALIDATION_INVALID_TYPE']) } } },
        429: { description: 'RATE_LIMIT_EXCEEDED', content: { 'application/json': { schema: ErrorEnvelope(['RATE_LIMIT_EXCEEDED']) } } },
      },
      'x-error-codes': ['VALIDATION_INVALID_TYPE', 'RATE_LIMIT_EXCEEDED'],
    },
  };
  return {
    openapi: '3.1.0',
    info: { title: 'Agent coordination service', version: '0.1.0', description: 'Every route of the live route table. Errors answer the one error envelope with a catalogue code (GET /docs/errors/{code}).' },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'an API key (svc_...)' },
        metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, when the operator set one' },
        tokenQuery: { type: 'apiKey', in: 'query', name: 'token' },
        federationPeer: { type: 'apiKey', in: 'header', name: 'X-Federation-Peer-Id', description: "the trust's peer_id (docs/federation.md)" },
        federationProof: { type: 'apiKey', in: 'header', name: 'X-Federation-Proof', description: 'the HMAC proof {ts, nonce, body_sha256, signature} as JSON (docs/federation.md)' },
      },
    },
    paths,
  };
}
