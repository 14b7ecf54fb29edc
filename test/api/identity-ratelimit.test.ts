/**
 * Per-key rate limits: the key's rate_limit or RATE_LIMIT_DEFAULT requests a minute, 429
 * RATE_LIMIT_EXCEEDED with Retry-After and RateLimit-* headers, budgets per key, 0 turns it off.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { limited } from '../helpers/limits.js';
import { PushSocket } from '../helpers/push.js';
import { expectError, expectOk } from './support.js';

for (const backend of BACKENDS) {
  describe(`rate limits on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let root: Member;

    beforeAll(async () => {
      url = (await servers.start({ RATE_LIMIT_DEFAULT: '4' })).url;
      root = await bootstrap(url);
    });

    it('a key with rate_limit 3: three answers counting down, then 429 with Retry-After; other keys keep their budget', async () => {
      const m = await join(root.client, 'limited');
      const key = expectOk(await root.client.post('/admin/api-keys', { owner: m.id, rate_limit: 3 }), 201).api_key;
      for (const left of ['2', '1', '0']) {
        const r = await limited(url, key);
        expect(r.status).toBe(200);
        expect({ limit: r.limit, remaining: r.remaining }).toEqual({ limit: '3', remaining: left });
        expect(Number(r.reset)).toBeGreaterThanOrEqual(1);
        expect(Number(r.reset)).toBeLessThanOrEqual(60);
      }
      const over = await limited(url, key);
      expectError({ status: over.status, body: over.body }, 429, 'RATE_LIMIT_EXCEEDED');
      expect({ limit: over.limit, remaining: over.remaining }).toEqual({ limit: '3', remaining: '0' });
      expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(over.retryAfter)).toBeLessThanOrEqual(60);
      expect(over.body.error.details).toMatchObject({ limit: 3 });
      // a POST is refused the same way, before it does anything
      const post = await fetch(url + '/emit', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ signal_type: 'note', content: 'x' }) });
      expect(post.status).toBe(429);
      // the member's own key (RATE_LIMIT_DEFAULT 4) is untouched by the other key's spending
      const own = await limited(url, m.key);
      expect(own).toMatchObject({ status: 200, limit: '4', remaining: '3' });
    });

    it('the WebSocket upgrade and its ops spend from the same budget as requests: over it, an error frame and the socket stays open', async () => {
      const m = await join(root.client, 'ws-limited');
      const key = expectOk(await root.client.post('/admin/api-keys', { owner: m.id, rate_limit: 3 }), 201).api_key;
      expect((await limited(url, key)).remaining).toBe('2');
      // the upgrade spends one too
      const ws = await PushSocket.open(url, key, { label: 'ws-limited' });
      try {
        await ws.ok('subscribe', {});
        const over = await ws.op('subscribe', {});
        expect(over).toMatchObject({ type: 'error', error: { code: 'RATE_LIMIT_EXCEEDED' } });
        expect((await limited(url, key)).status).toBe(429);
        expect(ws.closeInfo).toBeUndefined();
      } finally {
        await ws.close();
      }
    });

    it('unset, RATE_LIMIT_DEFAULT is 600 a minute', async () => {
      // the test helpers turn the default off; an empty value is "unset" to the config reader
      const dflt = await servers.start({ RATE_LIMIT_DEFAULT: '' });
      const admin = await bootstrap(dflt.url);
      expect(await limited(dflt.url, admin.key)).toMatchObject({ status: 200, limit: '600', remaining: '599' });
    });

    it('unlimited public routes (probes) carry no rate-limit headers; RATE_LIMIT_DEFAULT=0 turns the default off', async () => {
      const pub = await fetch(url + '/health');
      expect(pub.headers.get('ratelimit-limit')).toBeNull();
      const off = await servers.start({ RATE_LIMIT_DEFAULT: '0' });
      const admin = await bootstrap(off.url);
      for (let i = 0; i < 10; i++) {
        const r = await limited(off.url, admin.key);
        expect(r.status).toBe(200);
        expect(r.limit).toBeNull();
      }
      // a key's own rate_limit still applies
      const own = expectOk(await admin.client.post('/admin/api-keys', { rate_limit: 1 }), 201).api_key;
      expect((await limited(off.url, own)).status).toBe(200);
      expect((await limited(off.url, own)).status).toBe(429);
    });
  });
}
