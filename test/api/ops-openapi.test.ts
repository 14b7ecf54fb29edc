/**
 * GET /openapi.json on both backends: an OpenAPI 3.1 document of the live route table (every route, its
 * auth as security, its TypeBox request schemas, its error codes), and real responses recorded from
 * traffic through every auth mode validate against the response schemas it declares (JSON Schema,
 * compiled with TypeBox). Success bodies are checked as the envelope only: routes carry no data schemas.
 */
import { Compile } from 'typebox/compile';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { routes, type Services } from '../../src/api/index.js';
import type { Route } from '../../src/http/server.js';
import { openApiPath } from '../../src/openapi/openapi.js';
import { bootstrap, Client, join, type Member, type Res } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectOk } from './support.js';

const table: Route[] = routes({} as Services);
const VERB = { get: 'get', post: 'post', put: 'put', patch: 'patch', del: 'delete' } as const;

interface Recorded {
  method: string;
  path: string;
  res: Res;
}

/** A client that records every exchange it makes. */
class Recording extends Client {
  constructor(url: string, key: string | undefined, readonly log: Recorded[]) {
    super(url, key);
  }
  override as(key: string | undefined): Recording {
    return new Recording(this.url, key, this.log);
  }
  override async req<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Res<T>> {
    const res = await super.req<T>(method, path, body, headers);
    this.log.push({ method: method.toLowerCase(), path: path.split('?')[0], res });
    return res;
  }
}

/** The document's path template matching a concrete path: static segments win over parameters, as in the router. */
function templateOf(doc: any, method: string, path: string): string | undefined {
  const candidates = Object.keys(doc.paths).filter((t) => doc.paths[t][method] && new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
  return candidates.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0))[0];
}

describe.each(BACKENDS)('GET /openapi.json on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let doc: any;

  beforeAll(async () => {
    svc = await servers.start();
    const r = await fetch(`${svc.url}/openapi.json`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json');
    doc = await r.json();
  });

  it('is OpenAPI 3.1 naming every route of the route table with its auth, request schemas and error codes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(table.length).toBeGreaterThan(30);
    for (const r of table) {
      const op = doc.paths[openApiPath(r.path)]?.[VERB[r.method]];
      expect(op, `${r.method} ${r.path}`).toBeDefined();
      const security = op.security.map((s: object) => Object.keys(s).join());
      if (r.auth === 'key' || r.auth === 'admin') expect(security).toEqual(['apiKey']);
      if (r.auth === 'optional') expect(security).toEqual(['', 'apiKey']);
      if (r.auth === 'public') expect(security.filter((s: string) => s === 'apiKey')).toEqual([]);
      if (r.auth === 'proof') expect(security).toEqual(['federationPeer,federationProof']);
      expect(op['x-auth']).toBe(r.auth);
      if (r.body) expect(op.requestBody.content['application/json'].schema).toEqual(JSON.parse(JSON.stringify(r.body.schema)));
      else expect(op.requestBody).toBeUndefined();
      const queryNames = Object.keys((r.query?.schema as any)?.properties ?? {});
      expect(op.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name)).toEqual(queryNames);
      const codes: string[] = op['x-error-codes'];
      expect(codes).toContain('INTERNAL_SERVER_ERROR');
      if (r.auth === 'admin') expect(codes).toEqual(expect.arrayContaining(['AUTH_KEY_MISSING', 'AUTH_ADMIN_REQUIRED']));
      if (r.invalid) expect(codes).toContain(r.invalid);
      for (const c of codes) expect(JSON.stringify(op.responses)).toContain(`"${c}"`);
    }
    const documented = Object.entries<any>(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`));
    const served = [...table.map((r) => `${VERB[r.method]} ${openApiPath(r.path)}`), 'get /signals/stream', 'get /tasks/stream'];
    expect(documented).toEqual(expect.arrayContaining(served));
    // beyond the REST table: the protocol surfaces app.ts serves (JSON-RPC, MCP, A2A), and nothing else
    const protocols = documented.filter((d) => !served.includes(d));
    expect(protocols).toEqual(expect.arrayContaining(['post /rpc', 'post /mcp', 'get /.well-known/agent-card.json']));
    for (const p of protocols) expect(p).toMatch(/^\w+ \/(rpc|mcp|a2a|\.well-known)\b/);
    expect(doc.paths['/emit'].post['x-error-codes']).toEqual(expect.arrayContaining(['SIGNAL_EMIT_VALIDATION_FAILED', 'AUTH_SCOPE_DENIED', 'PAYLOAD_TOO_LARGE']));
    // opening the stream spends a unit of the key's budget
    expect(doc.paths['/signals/stream'].get.responses[429].description).toBe('RATE_LIMIT_EXCEEDED');
  });

  it('responses recorded from real traffic validate against the declared response schemas', async () => {
    const log: Recorded[] = [];
    const anon = new Recording(svc.url, undefined, log);
    const root = await bootstrap(svc.url);
    const admin = anon.as(root.key);
    const member: Member = await join(root.client, 'worker');
    const worker = anon.as(member.key);
    const task = await emitOk(admin, { signal_type: 'task', content: 'build it', to_identity: member.id });
    expectOk(await worker.post('/claim', { signal_id: task.id }));
    await worker.post('/claim', { signal_id: task.id, lease_ms: 'x' });
    expectOk(await worker.post('/ack', { signal_id: task.id }));
    await worker.post('/ack', { signal_id: task.id });
    await admin.post('/emit', { signal_type: 'task' });
    await worker.get(`/thread/${task.id}`);
    await worker.get('/thread/01ARZ3NDEKTSV4RRFFQ69G5FAV');
    await worker.get('/signals/list?limit=1');
    await worker.get('/signals/list?limit=0');
    await worker.get(`/inbox/identity/${member.id}`);
    await worker.get('/inbox/nobody');
    await admin.post('/roles', { name: 'desk' });
    await admin.post('/roles', { name: 'desk' });
    await worker.post('/roles', { name: 'other' });
    await anon.get('/roles');
    await anon.as('svc_unknown').get('/roles');
    await admin.get('/identities');
    await admin.get('/admin/api-keys');
    await anon.post('/invite', { code: 'nope', name: 'x', type: 'agent' });
    await anon.get('/health');
    await anon.get('/docs/errors/SIGNAL_NOT_FOUND');
    await worker.get('/stats/overview');

    expect(log.length).toBe(23);
    const statuses = new Set(log.map((l) => l.res.status));
    for (const s of [200, 201, 400, 401, 403, 404, 409, 422]) expect(statuses).toContain(s);
    for (const { method, path, res } of log) {
      const template = templateOf(doc, method, path);
      expect(template, `${method} ${path} is documented`).toBeDefined();
      const responses = doc.paths[template!][method].responses;
      const declared = responses[res.status] ?? responses[`${String(res.status)[0]}XX`];
      expect(declared, `${method} ${path} → ${res.status} is declared`).toBeDefined();
      const media = Object.entries<any>(declared.content)[0];
      const check = Compile(media[1].schema);
      expect(check.Check(res.body), `${method} ${path} → ${res.status}: ${JSON.stringify(res.body)}`).toBe(true);
    }
  });
});
