/**
 * Request logs, on both backends: the service runs as `npm start` does and its stdout is read line by line
 * during real traffic (bootstrap, emits, key creation and rotation, SSE and WebSocket with keys, refused
 * keys, the metrics token). Every line is JSON; every answered request has one line with its request id,
 * identity, route pattern, status and latency; no API key, invite code or token appears in any line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, join, type Member } from '../helpers/client.js';
import { PushSocket, SseStream } from '../helpers/push.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from '../api/support.js';

const METRICS_TOKEN = 'metrics-token-5b1f0c';

describe.each(BACKENDS)('request logs on %s', (backend) => {
  const servers = serversOn(backend);
  let server: ChildServer | undefined;
  let out = '';
  const secrets: string[] = [METRICS_TOKEN];
  const requests: { rid: string; route: string; status: number; identity: string | null }[] = [];
  let root: Member;
  let worker: Member;

  beforeAll(async () => {
    server = await spawnServer(await servers.env({ LOG_LEVEL: 'info', METRICS_TOKEN }));
    server.proc.stdout!.on('data', (d) => (out += d));
    server.proc.stderr!.on('data', (d) => (out += d));
    const anon = new Client(server.url);
    const call = async (c: Client, method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
      const h: Record<string, string> = { ...headers };
      if (c.key) h.authorization = `Bearer ${c.key}`;
      if (body !== undefined) h['content-type'] = 'application/json';
      const r = await fetch(c.url + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
      const json = (await r.json()) as any;
      return { rid: r.headers.get('x-request-id')!, status: r.status, body: json };
    };

    const inv = await call(anon, 'POST', '/invite/create', { name: 'root', type: 'human' });
    secrets.push(inv.body.data.code);
    requests.push({ rid: inv.rid, route: '/invite/create', status: 201, identity: null });
    const red = await call(anon, 'POST', '/invite', { code: inv.body.data.code, name: 'root', type: 'human' });
    root = { id: red.body.data.identity.id, name: 'root', key: red.body.data.api_key, client: new Client(server.url, red.body.data.api_key) };
    secrets.push(root.key);
    worker = await join(root.client, 'worker');
    secrets.push(worker.key);

    const emit = await call(worker.client, 'POST', '/emit', { signal_type: 'task', content: 'log me' });
    expect(emit.status).toBe(201);
    requests.push({ rid: emit.rid, route: '/emit', status: 201, identity: worker.id });
    const thread = await call(worker.client, 'GET', `/thread/${emit.body.data.id}`);
    requests.push({ rid: thread.rid, route: '/thread/:id', status: 200, identity: worker.id });
    const refused = await call(new Client(server.url, 'svc_wrong-key-9d8e7f'), 'GET', '/roles');
    secrets.push('svc_wrong-key-9d8e7f');
    requests.push({ rid: refused.rid, route: '/roles', status: 401, identity: null });
    const denied = await call(worker.client, 'GET', '/admin/api-keys');
    requests.push({ rid: denied.rid, route: '/admin/api-keys', status: 403, identity: null });

    const made = expectOk(await root.client.post('/admin/api-keys', { owner: worker.id }), 201);
    secrets.push(made.api_key);
    const rotated = expectOk(await root.client.post(`/admin/api-keys/${made.id}/rotate`));
    secrets.push(rotated.api_key);
    expectError(await new Client(server.url).req('GET', '/metrics', undefined, { authorization: 'Bearer not-the-token' }), 401, 'AUTH_KEY_INVALID');
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(200);

    const sse = await SseStream.open(server.url, { token: worker.key }, 'logged sse');
    const ws = await PushSocket.open(server.url, root.key, { via: 'query' });
    const pushed = await emitOk(root, { signal_type: 'pulse', content: 'to the streams' });
    await sse.waitSignals([pushed.id]);
    sse.close();
    ws.close();
  });

  afterAll(async () => {
    await server?.stop();
  });

  const lines = () => out.split('\n').filter(Boolean);

  it('writes one JSON line per answered request with request id, identity, route pattern, status and latency', async () => {
    await waitFor('request lines', async () => lines().filter((l) => l.includes('"msg":"request"')).length, (n) => n >= 13);
    const parsed = lines().map((l) => JSON.parse(l));
    const byRid = new Map(parsed.filter((p) => p.msg === 'request').map((p) => [p.request_id, p]));
    for (const want of requests) {
      const line = byRid.get(want.rid);
      expect(line, want.route).toBeDefined();
      expect(line).toMatchObject({ level: 30, route: want.route, status: want.status });
      expect(typeof line.ms).toBe('number');
      expect(typeof line.time).toBe('string');
      if (want.identity) expect(line.identity_id).toBe(want.identity);
    }
    // one line per request: no request id logged twice
    const rids = parsed.filter((p) => p.msg === 'request').map((p) => p.request_id);
    expect(new Set(rids).size).toBe(rids.length);
    expect(parsed.filter((p) => p.msg === 'request' && p.route === '/metrics').map((p) => p.status).sort()).toEqual([200, 401]);
  });

  it('never logs an API key, an invite code or the metrics token', () => {
    expect(secrets.length).toBe(7);
    expect(lines().filter((l) => l.includes(`"msg":"request"`)).length).toBe(13);
    for (const s of secrets) expect(out.includes(s), `a log line holds ${s.slice(0, 6)}…`).toBe(false);
    // nor any other svc_ key the traffic carried
    expect(out).not.toMatch(/svc_[A-Za-z0-9_-]{10,}/);
  });
});
