/**
 * A browser's Origin, on both backends: a page of another origin (a DNS-rebinding page, a cross-site form)
 * is refused 403 ORIGIN_NOT_ALLOWED on every surface before its key is even read (REST, public routes,
 * /rpc, /mcp, /a2a, the WebSocket upgrade, the SSE stream), and writes nothing; the service's own origin,
 * ALLOWED_ORIGINS and requests without an Origin (agents, servers) are served. The MCP conformance suite's
 * `dns-rebinding-protection` scenario runs against /mcp behind a local proxy that adds the API key (the
 * scenario sends none) and is BASE_URL, as a reverse proxy in front of the service is.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { createRequire } from 'node:module';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { bootstrap, join, type Member, type Res } from '../helpers/client.js';
import { wsUrl } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

const EVIL = 'http://evil.example';
const FRIEND = 'https://dashboard.example.org';

async function req(url: string, method: string, path: string, o: { key?: string; origin?: string; body?: unknown } = {}): Promise<Res> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.origin !== undefined) headers.origin = o.origin;
  const r = await fetch(url + path, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) });
  const text = await r.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: r.status, body };
}

/** The WebSocket upgrade's answer: 101 (then closed) or the refusal's status and body. */
function upgrade(url: string, key: string, origin?: string): Promise<{ status: number; body?: any }> {
  const ws = new WebSocket(wsUrl(url), { headers: { authorization: `Bearer ${key}`, ...(origin ? { origin } : {}) } });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.close();
      resolve({ status: 101 });
    });
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
  });
}

/** The SSE stream's first answer: its status and, on a refusal, its body (the open stream is cancelled). */
async function stream(url: string, key: string, origin?: string): Promise<{ status: number; body?: any }> {
  const ac = new AbortController();
  const r = await fetch(`${url}/signals/stream?token=${key}`, { headers: origin ? { origin } : {}, signal: ac.signal });
  if (r.status === 200) {
    ac.abort();
    return { status: 200 };
  }
  return { status: r.status, body: await r.json() };
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'origin-test', version: '1.0.0' } } };

for (const backend of BACKENDS) {
  describe(`browser Origin on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let own: string;
    let root: Member;
    let alice: Member;
    const count = () => svc.store.count('signals');

    beforeAll(async () => {
      svc = await servers.start({ ALLOWED_ORIGINS: `${FRIEND}, http://localhost:9999` });
      own = new URL(svc.url).origin;
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice');
    });

    it('REST: another origin (or the opaque "null") is 403 ORIGIN_NOT_ALLOWED and writes nothing; its own origin, an allowed one and no Origin are served', async () => {
      const before = await count();
      for (const origin of [EVIL, 'null', `${own}.evil.example`, 'http://localhost:1', `https://${new URL(svc.url).host}`]) {
        const r = await req(svc.url, 'POST', '/emit', { key: alice.key, origin, body: { signal_type: 'note', content: 'from a page' } });
        expectError(r, 403, 'ORIGIN_NOT_ALLOWED');
        expect(r.body.error.details.origin).toBe(origin);
      }
      // refused before the key is read: a page cannot even learn whether a key is valid
      expectError(await req(svc.url, 'GET', '/signals/list', { key: 'svc_not-a-key', origin: EVIL }), 403, 'ORIGIN_NOT_ALLOWED');
      expect(await count()).toBe(before);
      for (const origin of [own, FRIEND, 'http://localhost:9999', undefined]) {
        expectOk(await req(svc.url, 'POST', '/emit', { key: alice.key, origin, body: { signal_type: 'note', content: `from ${origin}` } }), 201);
      }
      // the service's own origin under each loopback name it answers on without BASE_URL
      const port = new URL(svc.url).port;
      for (const host of ['localhost', '127.0.0.1', '[::1]']) expectOk(await req(svc.url, 'GET', '/signals/list', { key: alice.key, origin: `http://${host}:${port}` }));
    });

    it('public routes too: a page cannot redeem or create an invite, or read health, through a rebound name', async () => {
      expectError(await req(svc.url, 'POST', '/invite/create', { origin: EVIL, body: { name: 'rebound', type: 'human' } }), 403, 'ORIGIN_NOT_ALLOWED');
      expectError(await req(svc.url, 'GET', '/health', { origin: EVIL }), 403, 'ORIGIN_NOT_ALLOWED');
      expect((await req(svc.url, 'GET', '/health')).status).toBe(200);
    });

    it('/mcp, /rpc and /a2a: a request from another origin is 403 before the protocol reads it; its own origin is served', async () => {
      for (const [path, body] of [
        ['/mcp', initialize],
        ['/rpc', { jsonrpc: '2.0', id: 1, method: 'identity.whoami' }],
        ['/a2a', { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }],
      ] as const) {
        expectError(await req(svc.url, 'POST', path, { key: alice.key, origin: EVIL, body }), 403, 'ORIGIN_NOT_ALLOWED');
      }
      expectError(await req(svc.url, 'GET', '/mcp', { key: alice.key, origin: EVIL }), 403, 'ORIGIN_NOT_ALLOWED');
      expect((await req(svc.url, 'POST', '/mcp', { key: alice.key, origin: own, body: initialize })).status).toBe(200);
      expect(JSON.stringify((await req(svc.url, 'POST', '/rpc', { key: alice.key, origin: FRIEND, body: { jsonrpc: '2.0', id: 1, method: 'identity.whoami' } })).body.result)).toContain(alice.id);
    });

    it('the WebSocket upgrade and the SSE stream refuse another origin with 403 and accept their own', async () => {
      const ws = await upgrade(svc.url, alice.key, EVIL);
      expect(ws.status).toBe(403);
      expect(ws.body.error).toMatchObject({ code: 'ORIGIN_NOT_ALLOWED', details: { origin: EVIL } });
      expect((await upgrade(svc.url, alice.key, own)).status).toBe(101);
      expect((await upgrade(svc.url, alice.key)).status).toBe(101);
      const sse = await stream(svc.url, alice.key, EVIL);
      expect(sse.status).toBe(403);
      expect(sse.body.error.code).toBe('ORIGIN_NOT_ALLOWED');
      expect((await stream(svc.url, alice.key, FRIEND)).status).toBe(200);
      expect((await stream(svc.url, alice.key)).status).toBe(200);
    });
  });

  describe(`MCP conformance dns-rebinding-protection on ${backend}`, () => {
    const servers = serversOn(backend);
    let proxy: http.Server;
    let proxyUrl: string;
    let target = '';
    let out: string;

    beforeAll(async () => {
      let key = '';
      // the front a browser sees: forwards Host and Origin untouched and adds the API key
      proxy = http.createServer((inReq, inRes) => {
        const fwd = http.request(target + inReq.url, { method: inReq.method, headers: { ...inReq.headers, authorization: `Bearer ${key}` } }, (res) => {
          inRes.writeHead(res.statusCode ?? 502, res.headers);
          res.pipe(inRes);
        });
        fwd.on('error', () => inRes.destroy());
        inReq.pipe(fwd);
      });
      await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
      proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const svc = await servers.start({ BASE_URL: proxyUrl });
      target = svc.url;
      key = (await bootstrap(svc.url)).key;
      out = await mkdtemp(joinPath(tmpdir(), 'mcp-conformance-'));
    });
    afterAll(async () => {
      await new Promise((r) => proxy.close(r));
      await rm(out, { recursive: true, force: true });
    });

    it('passes: a rebound Host/Origin is refused with a 4xx, the service\'s own is served', async () => {
      const bin = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/dist/index.js');
      const child = spawn(process.execPath, [bin, 'server', '--url', `${proxyUrl}/mcp`, '--scenario', 'dns-rebinding-protection', '-o', out], { stdio: ['ignore', 'pipe', 'pipe'] });
      let log = '';
      child.stdout.on('data', (d) => (log += d));
      child.stderr.on('data', (d) => (log += d));
      const code = await new Promise<number | null>((r) => child.on('exit', r));
      const [dir] = await readdir(out);
      const checks: { id: string; status: string }[] = JSON.parse(await readFile(joinPath(out, dir, 'checks.json'), 'utf8'));
      expect(checks.map((c) => [c.id, c.status]), log).toEqual([
        ['localhost-host-rebinding-rejected', 'SUCCESS'],
        ['localhost-host-valid-accepted', 'SUCCESS'],
      ]);
      expect(code, log).toBe(0);
    }, 60_000);
  });
}
