/**
 * Public routes spend a per-client-address budget (RATE_LIMIT_PUBLIC a minute, the limiter keys use): 429
 * RATE_LIMIT_EXCEEDED with Retry-After past it. The client is the socket's peer, or the nearest
 * X-Forwarded-For hop when the peer is one of TRUSTED_PROXIES; IPv6 clients count per /64. Every keyless
 * route is limited unless it says `unlimited`, and those are named here.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

/** A call from `address` (through the trusted proxy the test server is told 127.0.0.1 is). */
async function from(url: string, address: string | undefined, method: string, path: string, body?: unknown, key?: string) {
  const headers: Record<string, string> = {};
  if (address !== undefined) headers['x-forwarded-for'] = address;
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (key) headers.authorization = `Bearer ${key}`;
  const r = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  const h = (n: string) => r.headers.get(n);
  return { status: r.status, body: text.startsWith('{') ? JSON.parse(text) : text, limit: h('ratelimit-limit'), remaining: h('ratelimit-remaining'), retryAfter: h('retry-after') };
}

/** The keyless routes no address budget applies to: probes, documents, the agent card, signed share links. */
const UNLIMITED = [
  'GET /.well-known/agent-card.json',
  'GET /artifacts/:id/shared',
  'GET /dashboard',
  'GET /dashboard/:dir/:file',
  'GET /dashboard/:file',
  'GET /dashboard/vendor/diff/:dir/:file',
  'GET /dashboard/vendor/diff/:file',
  'GET /docs/errors/:code',
  'GET /health',
  'GET /health/detailed',
  'GET /metrics',
  'GET /openapi.json',
];

const METHOD: Record<string, string> = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' };

for (const backend of BACKENDS) {
  describe(`public routes' per-address limit on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let url: string;
    let root: Member;
    let code: string;

    beforeAll(async () => {
      svc = await servers.start({ RATE_LIMIT_PUBLIC: '3', TRUSTED_PROXIES: '127.0.0.1', AUTH_REQUEST_ENABLED: 'true' });
      url = svc.url;
      root = await bootstrap(url);
      code = expectOk(await root.client.post('/invite/create', { name: 'guessed', type: 'agent' }), 201).code;
    });

    it('three calls counting down, then 429 with Retry-After on every public route from that address; other addresses, keys and probes are untouched', async () => {
      const a = '203.0.113.1';
      for (const left of ['2', '1', '0']) {
        const r = await from(url, a, 'GET', '/auth/nonce');
        expect(r).toMatchObject({ status: 200, limit: '3', remaining: left });
      }
      const over = await from(url, a, 'GET', '/auth/nonce');
      expectError(over, 429, 'RATE_LIMIT_EXCEEDED');
      expect(over.body.error.details).toMatchObject({ limit: 3 });
      expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(over.retryAfter)).toBeLessThanOrEqual(60);
      expect(over.remaining).toBe('0');
      // one budget for the address over every public route
      expectError(await from(url, a, 'POST', '/invite', { code, name: 'x', type: 'agent' }), 429, 'RATE_LIMIT_EXCEEDED');
      expectError(await from(url, a, 'GET', `/invite/${code}/skill`), 429, 'RATE_LIMIT_EXCEEDED');
      expectError(await from(url, a, 'POST', '/auth-request', {}), 429, 'RATE_LIMIT_EXCEEDED');
      expectError(await from(url, a, 'POST', '/auth/siwe-login', {}), 429, 'RATE_LIMIT_EXCEEDED');
      // another address has its own budget; a probe and a keyed call from the spent one still pass
      expect(await from(url, '203.0.113.2', 'GET', '/auth/nonce')).toMatchObject({ status: 200, remaining: '2' });
      const probe = await from(url, a, 'GET', '/health');
      expect(probe).toMatchObject({ status: 200, limit: null });
      expect((await from(url, a, 'GET', '/roles', undefined, root.key)).status).toBe(200);
      // the invite was never redeemed by the refused call
      expect((await from(url, '203.0.113.3', 'GET', `/invite/${code}/skill`)).status).toBe(200);
    });

    it('guessing invite codes is limited: refusals spend the budget too and carry its headers', async () => {
      const a = '203.0.113.10';
      for (const left of ['2', '1']) expect(await from(url, a, 'POST', '/invite', { code: `inv_guess${left}`, name: 'g', type: 'agent' })).toMatchObject({ status: 404, remaining: left });
      expect(await from(url, a, 'GET', '/invite/inv_guess/skill')).toMatchObject({ status: 404, remaining: '0' });
      expectError(await from(url, a, 'GET', `/invite/${code}/skill`), 429, 'RATE_LIMIT_EXCEEDED');
    });

    it('every keyless route is limited unless it says unlimited, and the unlimited ones are these', async () => {
      const keyless = svc.routes.filter((r) => r.auth === 'public' || r.auth === 'optional');
      expect(keyless.filter((r) => r.unlimited).map((r) => `${METHOD[r.method]} ${r.path}`).sort()).toEqual(UNLIMITED);
      const limited = keyless.filter((r) => !r.unlimited);
      expect(limited.length).toBeGreaterThanOrEqual(7);
      let n = 0;
      for (const r of limited) {
        const address = `198.51.100.${++n}`;
        const path = r.path.replace(/:[A-Za-z_]+/g, 'x');
        const body = r.method === 'get' || r.method === 'del' ? undefined : {};
        for (let i = 0; i < 3; i++) expect((await from(url, address, METHOD[r.method], path, body)).status, `${r.method} ${r.path}`).not.toBe(429);
        expectError(await from(url, address, METHOD[r.method], path, body), 429, 'RATE_LIMIT_EXCEEDED');
      }
    });

    it('X-Forwarded-For from a trusted proxy: the rightmost hop that is not a proxy is the client; hops a client wrote before it gain nothing', async () => {
      for (let i = 0; i < 3; i++) expect((await from(url, `10.9.9.${i}, 192.0.2.50`, 'GET', '/auth/nonce')).status).toBe(200);
      expectError(await from(url, '10.9.9.99, 192.0.2.50', 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
      // a chain through a second trusted proxy still finds the client before it
      expectError(await from(url, '192.0.2.50, 127.0.0.1', 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
      // IPv6 clients count per /64: new addresses in one block share its budget
      for (let i = 1; i <= 3; i++) expect((await from(url, `2001:db8:0:7::${i}`, 'GET', '/auth/nonce')).status).toBe(200);
      expectError(await from(url, '[2001:db8:0:7:ffff::1]', 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
      expect((await from(url, '2001:db8:0:8::1', 'GET', '/auth/nonce')).status).toBe(200);
      // an IPv4-mapped address is its IPv4 client
      expectError(await from(url, '::ffff:192.0.2.50', 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
    });

    it('without TRUSTED_PROXIES the socket peer is the client: X-Forwarded-For is ignored', async () => {
      const plain = await servers.start({ RATE_LIMIT_PUBLIC: '2' });
      for (let i = 0; i < 2; i++) expect((await from(plain.url, `192.0.2.${100 + i}`, 'GET', '/auth/nonce')).status).toBe(200);
      expectError(await from(plain.url, '192.0.2.200', 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
      expectError(await from(plain.url, undefined, 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
    });

    // two instances share a store on Redis only
    if (backend === 'redis') it('two instances on one Redis spend one budget per address', async () => {
      const other = await startServer(svc.env);
      try {
        const a = '203.0.113.77';
        expect(await from(url, a, 'GET', '/auth/nonce')).toMatchObject({ status: 200, remaining: '2' });
        expect(await from(other.url, a, 'GET', '/auth/nonce')).toMatchObject({ status: 200, remaining: '1' });
        expect(await from(url, a, 'GET', '/auth/nonce')).toMatchObject({ status: 200, remaining: '0' });
        expectError(await from(other.url, a, 'GET', '/auth/nonce'), 429, 'RATE_LIMIT_EXCEEDED');
      } finally {
        await other.close();
      }
    });
  });
}
