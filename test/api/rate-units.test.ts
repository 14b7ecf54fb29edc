/**
 * A key's budget counts work, not requests: each call of a /rpc batch and each message of an /mcp POST
 * spends a unit, a batch emit one per signal (on /rpc and as the MCP tool); /rpc, /mcp and /a2a answers
 * carry RateLimit-* as REST answers do, and a refusal 429 with Retry-After. Opening /signals/stream or the
 * /ws upgrade spends a unit and answers the headers; a memory import spends one per line.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { limited } from '../helpers/limits.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { expectOk, waitFor } from './support.js';

async function post(url: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(url + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) });
  const text = await r.text();
  const h = (n: string) => r.headers.get(n);
  return { status: r.status, body: text ? JSON.parse(text) : null, limit: h('ratelimit-limit'), remaining: h('ratelimit-remaining'), retryAfter: h('retry-after'), session: h('mcp-session-id') };
}

/** Opens /signals/stream and ends it once its head is in: the status and rate-limit headers. */
async function openStream(url: string, key: string) {
  const ac = new AbortController();
  const r = await fetch(`${url}/signals/stream?token=${encodeURIComponent(key)}`, { signal: ac.signal });
  const out = { status: r.status, limit: r.headers.get('ratelimit-limit'), remaining: r.headers.get('ratelimit-remaining'), retryAfter: r.headers.get('retry-after'), code: r.status === 200 ? null : ((await r.json()) as any).error.code };
  ac.abort();
  return out;
}

/** Upgrades /ws and closes the socket: the answer's status and rate-limit headers (a 101 or the refusal). */
function upgrade(url: string, key: string): Promise<{ status: number; limit?: string; remaining?: string; retryAfter?: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws', { headers: { authorization: `Bearer ${key}` } });
    const of = (status: number, h: Record<string, string | string[] | undefined>) => ({ status, limit: h['ratelimit-limit'] as string, remaining: h['ratelimit-remaining'] as string, retryAfter: h['retry-after'] as string });
    ws.once('upgrade', (res) => {
      resolve(of(101, res.headers));
      ws.close();
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(of(res.statusCode ?? 0, res.headers));
      res.resume();
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

const call = (method: string, params: unknown = {}, id: number | string = 1) => ({ jsonrpc: '2.0', id, method, params });
const notes = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ signal_type: 'note', content: `${tag} ${i}` }));

for (const backend of BACKENDS) {
  describe(`rate-limit units on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let url: string;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start();
      url = svc.url;
      root = await bootstrap(url);
    });

    /** a fresh key of a fresh member, with its own budget */
    const keyOf = async (name: string, rate_limit: number) => {
      const m = await join(root.client, name);
      return expectOk(await root.client.post('/admin/api-keys', { owner: m.id, rate_limit }), 201).api_key as string;
    };

    it('/rpc: each call of a batch spends a unit and a batch emit one per signal; over the budget a call is refused with its code, the rest of the batch too', async () => {
      const key = await keyOf('rpc-units', 10);
      const three = await post(url, '/rpc', key, [call('identity.whoami', {}, 1), call('identity.whoami', {}, 2), call('roles.list', {}, 3)]);
      expect(three).toMatchObject({ status: 200, limit: '10', remaining: '7' });
      const four = await post(url, '/rpc', key, call('signals.batch_emit', { signals: notes(4, 'four') }));
      expect(four).toMatchObject({ status: 200, remaining: '3' });
      expect(four.body.result.results).toHaveLength(4);
      // 1 + 2 + 1 + 1 units with 3 left: the last two calls are refused, what ran stays done
      const mixed = await post(url, '/rpc', key, [call('identity.whoami', {}, 1), call('signals.batch_emit', { signals: notes(2, 'two') }, 2), call('identity.whoami', {}, 3), call('roles.list', {}, 4)]);
      expect(mixed).toMatchObject({ status: 200, remaining: '0' });
      expect(mixed.body.map((a: any) => a.error?.data.code ?? 'ok')).toEqual(['ok', 'ok', 'RATE_LIMIT_EXCEEDED', 'RATE_LIMIT_EXCEEDED']);
      expect(mixed.body[1].result.results.map((r: any) => r.signal.content)).toEqual(['two 0', 'two 1']);
      expect((await limited(url, key)).status).toBe(429);
    });

    it('/rpc: a batch emit larger than what is left is refused whole, 429 with Retry-After, and emits nothing', async () => {
      const key = await keyOf('rpc-refused', 5);
      const big = await post(url, '/rpc', key, call('signals.batch_emit', { signals: notes(6, 'big') }));
      expect(big).toMatchObject({ status: 429, limit: '5', remaining: '0' });
      expect(big.body.error).toMatchObject({ code: -32000, data: { code: 'RATE_LIMIT_EXCEEDED' } });
      expect(Number(big.retryAfter)).toBeGreaterThanOrEqual(1);
      const found = expectOk(await root.client.post('/rpc', call('signals.search', { text: 'big' })).then((r) => ({ status: r.status, body: { data: r.body.result } })));
      expect(found).toEqual([]);
    });

    it('/mcp: each message spends a unit, svc_batch_emit one per signal, and every answer carries RateLimit-*', async () => {
      const key = await keyOf('mcp-units', 20);
      const init = await post(url, '/mcp', key, call('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'units', version: '1' } }));
      expect(init).toMatchObject({ status: 200, limit: '20', remaining: '19' });
      const session = { 'mcp-session-id': init.session!, 'mcp-protocol-version': '2025-06-18' };
      expect(await post(url, '/mcp', key, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).toMatchObject({ status: 202, remaining: '18' });
      const whoami = await post(url, '/mcp', key, call('tools/call', { name: 'svc_whoami', arguments: {} }, 2), session);
      expect(whoami).toMatchObject({ status: 200, remaining: '17' });
      const batch = await post(url, '/mcp', key, call('tools/call', { name: 'svc_batch_emit', arguments: { signals: notes(5, 'mcp') } }, 3), session);
      expect(batch).toMatchObject({ status: 200, remaining: '12' });
      expect(batch.body.result.structuredContent.results).toHaveLength(5);
      const over = await post(url, '/mcp', key, call('tools/call', { name: 'svc_batch_emit', arguments: { signals: notes(13, 'mcp-over') } }, 4), session);
      expect(over).toMatchObject({ status: 200, remaining: '0' });
      expect(over.body.result).toMatchObject({ isError: true, structuredContent: { error: { code: 'RATE_LIMIT_EXCEEDED' } } });
      const refused = await post(url, '/mcp', key, call('tools/call', { name: 'svc_whoami', arguments: {} }, 5), session);
      expect(refused).toMatchObject({ status: 429, remaining: '0' });
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    });

    it('/a2a answers carry RateLimit-* and spend the key budget', async () => {
      const key = await keyOf('a2a-units', 3);
      const get = (id: number) => post(url, '/a2a', key, call('tasks/get', { id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }, id));
      expect(await get(1)).toMatchObject({ limit: '3', remaining: '2' });
      expect(await get(2)).toMatchObject({ limit: '3', remaining: '1' });
      expect(await get(3)).toMatchObject({ limit: '3', remaining: '0' });
      const over = await get(4);
      expect(over).toMatchObject({ status: 429, remaining: '0' });
      expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(1);
    });

    it('/signals/stream and the /ws upgrade each spend a unit and answer RateLimit-*; over the budget both are 429 with Retry-After', async () => {
      const key = await keyOf('stream-units', 3);
      expect(await openStream(url, key)).toMatchObject({ status: 200, limit: '3', remaining: '2' });
      expect(await upgrade(url, key)).toMatchObject({ status: 101, limit: '3', remaining: '1' });
      expect(await limited(url, key)).toMatchObject({ status: 200, remaining: '0' });
      const stream = await openStream(url, key);
      expect(stream).toMatchObject({ status: 429, remaining: '0', code: 'RATE_LIMIT_EXCEEDED' });
      expect(Number(stream.retryAfter)).toBeGreaterThanOrEqual(1);
      const socket = await upgrade(url, key);
      expect(socket).toMatchObject({ status: 429, limit: '3', remaining: '0' });
      expect(Number(socket.retryAfter)).toBeGreaterThanOrEqual(1);
    });

    it('POST /memory/admin/import spends a unit per line: blank lines are free, an import of more lines than are left is refused whole', async () => {
      const key = expectOk(await root.client.post('/admin/api-keys', { owner: root.id, rate_limit: 10 }), 201).api_key as string;
      const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => JSON.stringify({ namespace: 'units', content: `${tag} ${i}` })).join('\n') + '\n\n';
      const four = await post(url, '/memory/admin/import', key, { ndjson: lines(4, 'four') });
      expect(four).toMatchObject({ status: 202, limit: '10', remaining: '6' });
      expect(four.body.data.progress.total).toBe(4);
      const seven = await post(url, '/memory/admin/import', key, { ndjson: lines(7, 'seven') });
      expect(seven).toMatchObject({ status: 429, remaining: '0' });
      expect(seven.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
      expect(Number(seven.retryAfter)).toBeGreaterThanOrEqual(1);
      // the first import ran, with the admin's own key (its budget unlimited)
      const job = await waitFor('the import to complete', async () => expectOk(await root.client.get(`/memory/admin/import/${four.body.data.id}`)), (j) => j.state !== 'running', 30_000);
      expect(job).toMatchObject({ state: 'completed', progress: { total: 4 } });
    });

    // two instances share a store on Redis only
    if (backend === 'redis') it('two instances on one Redis spend one budget: a batch on one leaves less on the other', async () => {
      const other = await startServer(svc.env);
      try {
        const key = await keyOf('two-instance-units', 10);
        expect(await post(url, '/rpc', key, call('signals.batch_emit', { signals: notes(6, 'shared') }))).toMatchObject({ status: 200, remaining: '4' });
        expect(await post(other.url, '/rpc', key, [call('identity.whoami', {}, 1), call('identity.whoami', {}, 2)])).toMatchObject({ status: 200, remaining: '2' });
        expect(await limited(url, key)).toMatchObject({ status: 200, remaining: '1' });
      } finally {
        await other.close();
      }
    });
  });
}
