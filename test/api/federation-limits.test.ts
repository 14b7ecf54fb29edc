/**
 * A federation peer's limits over real HTTP on both backends (docs/federation.md, Limits): the request budget
 * on every proof route (429 RATE_LIMIT_EXCEEDED with RateLimit-* headers, spent only by a verified proof), the
 * storage quota on delivered copies (429 FED_QUOTA_EXCEEDED, a redelivery charging nothing, concurrent copies
 * adding up), per-peer overrides set at creation and by PATCH /org/company/peers/:id, another peer unaffected,
 * usage in GET /admin/peers; and two real instances where the sender retries a peer's 429 until it passes.
 */
import { ulid } from 'ulid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proofHeaders } from '../../src/federation/proof.js';
import { bootstrap, type Client, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

interface Issued {
  peer_id: string;
  shared_secret: string;
  expires_at: string;
}

interface Answer {
  status: number;
  body: any;
  headers: Record<string, string>;
}

let endpoints = 0;
const endpoint = () => `https://limits${++endpoints}.example`;
const until = <T>(what: string, probe: () => T | Promise<T>) => waitFor(what, probe, (v) => !!v, 20_000, 25);

/** A signed call (POST with a body, GET without), answering its headers too. */
async function signed(url: string, method: 'POST' | 'GET', path: string, t: Issued, body?: unknown, secret = t.shared_secret): Promise<Answer> {
  const raw = body === undefined ? '' : JSON.stringify(body);
  const headers = method === 'POST' ? { 'content-type': 'application/json', ...proofHeaders(t.peer_id, secret, method, path, raw, Date.now()) } : proofHeaders(t.peer_id, secret, method, path, '', Date.now());
  const r = await fetch(url + path, { method, headers, ...(method === 'POST' ? { body: raw } : {}) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined, headers: Object.fromEntries(r.headers) };
}

const peerRow = async (c: Client, id: string) => (expectOk(await c.get('/admin/peers')) as any[]).find((p) => p.id === id);

for (const backend of BACKENDS) {
  describe(`federation peer limits, receiving side, on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;

    const trustWith = async (body: Record<string, unknown> = {}): Promise<Issued> =>
      expectOk(await root.client.post('/federation/trust', { name: 'Peer org', endpoint: endpoint(), allowed_scopes: ['task', 'pulse'], ...body }), 201);
    const deliver = (t: Issued, signal: Record<string, unknown> = {}) =>
      signed(svc.url, 'POST', '/federation/deliver', t, { signal: { id: ulid(), signal_type: 'pulse', content: 'from the peer', to_identity: root.id, ...signal }, hops: 0 });

    beforeAll(async () => {
      svc = await servers.start({ ALLOW_PRIVATE_NETWORK: 'true' });
      root = await bootstrap(svc.url);
    });

    it('a peer over its request budget gets 429 RATE_LIMIT_EXCEEDED on every proof route; a forged proof spends nothing; another peer is unaffected', async () => {
      const limited = await trustWith({ rate_limit: 3 });
      const other = await trustWith();
      // a proof that does not verify is refused before the budget: it cannot spend the peer's requests
      expectError(await signed(svc.url, 'POST', '/federation/deliver', limited, { signal: { id: ulid(), signal_type: 'pulse', content: 'x' }, hops: 0 }, 'f'.repeat(64)), 401, 'FED_PROOF_FAILED');

      const first = await deliver(limited);
      expectOk(first);
      expect(first.headers).toMatchObject({ 'ratelimit-limit': '3', 'ratelimit-remaining': '2' });
      // a refused call of a verified peer still spends (the rule of the key limiter)
      const claim = await signed(svc.url, 'POST', '/federation/claim', limited, { signal_id: ulid(), agent: 'a' });
      expectError(claim, 404, 'SIGNAL_NOT_FOUND');
      expect(claim.headers['ratelimit-remaining']).toBe('1');
      const read = await signed(svc.url, 'GET', `/federation/memory/${ulid()}`, limited);
      expect(read.headers['ratelimit-remaining']).toBe('0');

      for (const over of [await deliver(limited), await signed(svc.url, 'POST', '/federation/ack', limited, { signal_id: ulid(), agent: 'a' }), await signed(svc.url, 'GET', '/federation/memory/recall/x', limited)]) {
        expectError(over, 429, 'RATE_LIMIT_EXCEEDED');
        expect(over.body.error.details).toMatchObject({ limit: 3, retry_after_ms: expect.any(Number) });
        expect(over.headers).toMatchObject({ 'ratelimit-limit': '3', 'ratelimit-remaining': '0', 'retry-after': expect.stringMatching(/^\d+$/) });
      }

      const fine = await deliver(other);
      expectOk(fine);
      expect(fine.headers).toMatchObject({ 'ratelimit-limit': '600', 'ratelimit-remaining': '599' });

      const row = await peerRow(root.client, limited.peer_id);
      expect(row).toMatchObject({ rate_limit: 3, limits: { rate_limit: 3, storage_quota_bytes: 100 * 1024 ** 2 }, usage: { requests: { limit: 3, used: 3, remaining: 0 }, stored_signals: 1 } });
      expect((await peerRow(root.client, other.peer_id)).usage.requests).toMatchObject({ limit: 600, used: 1, remaining: 599 });

      // raising the peer's budget lets it through at once
      expect(expectOk(await root.client.patch(`/org/company/peers/${limited.peer_id}`, { rate_limit: 0 }))).toMatchObject({ rate_limit: 0 });
      const unlimited = await deliver(limited);
      expectOk(unlimited);
      expect(unlimited.headers).not.toHaveProperty('ratelimit-limit');
      expect(await peerRow(root.client, limited.peer_id)).toMatchObject({ limits: { rate_limit: 0 }, usage: { requests: null } });
    });

    it('a peer over its storage quota gets 429 FED_QUOTA_EXCEEDED; a redelivery charges nothing; another peer is unaffected; PATCH raises it', async () => {
      const quota = 11_000;
      const small = await trustWith({ storage_quota_bytes: quota });
      const other = await trustWith();
      const big = { content: 'x'.repeat(4000) };
      const ids = [ulid(), ulid()];
      for (const id of ids) expectOk(await deliver(small, { ...big, id }));
      const used = (await peerRow(root.client, small.peer_id)).usage;
      expect(used).toMatchObject({ stored_signals: 2, stored_bytes: expect.any(Number) });
      expect(used.stored_bytes).toBeGreaterThan(8000);
      expect(used.stored_bytes).toBeLessThanOrEqual(quota);

      const refusedId = ulid();
      const refused = await deliver(small, { ...big, id: refusedId });
      expectError(refused, 429, 'FED_QUOTA_EXCEEDED');
      expect(refused.body.error.details).toMatchObject({ limit: quota, stored_bytes: used.stored_bytes, bytes: expect.any(Number) });
      // the refused copy was not stored
      expect(JSON.stringify(expectOk(await root.client.get(`/inbox/identity/${root.id}?limit=100`)))).not.toContain(refusedId);
      // a redelivery of a stored copy answers it and charges nothing
      expectOk(await deliver(small, { ...big, id: ids[0] }));
      expect((await peerRow(root.client, small.peer_id)).usage).toMatchObject({ stored_signals: 2, stored_bytes: used.stored_bytes });
      // the quota is the peer's own: another peer stores as before
      expectOk(await deliver(other, big));
      expect((await peerRow(root.client, other.peer_id)).usage).toMatchObject({ stored_signals: 1 });

      expectError(await root.client.patch(`/org/company/peers/${small.peer_id}`, {}), 400, 'DISC_VALIDATION_FAILED');
      expectError(await root.client.patch(`/org/company/peers/${small.peer_id}`, { storage_quota_bytes: -1 }), 400, 'DISC_VALIDATION_FAILED');
      expectError(await root.client.patch(`/org/company/peers/${ulid()}`, { storage_quota_bytes: 1 }), 404, 'DISC_PEER_NOT_FOUND');
      expect(expectOk(await root.client.patch(`/org/company/peers/${small.peer_id}`, { storage_quota_bytes: 100_000 }))).toMatchObject({ storage_quota_bytes: 100_000, rate_limit: null });
      expectOk(await deliver(small, big));
      expect(await peerRow(root.client, small.peer_id)).toMatchObject({ storage_quota_bytes: 100_000, limits: { storage_quota_bytes: 100_000, rate_limit: 600 }, usage: { stored_signals: 3 } });
      // null goes back to the setting's default
      expect(expectOk(await root.client.patch(`/org/company/peers/${small.peer_id}`, { storage_quota_bytes: null }))).toMatchObject({ storage_quota_bytes: null });
      expect((await peerRow(root.client, small.peer_id)).limits.storage_quota_bytes).toBe(100 * 1024 ** 2);
    });

    it('concurrent deliveries of one peer add up: the accepted ones fit the quota, the others are FED_QUOTA_EXCEEDED', async () => {
      const quota = 8000;
      const t = await trustWith({ storage_quota_bytes: quota });
      const answers = await Promise.all(Array.from({ length: 12 }, () => deliver(t, { content: 'y'.repeat(1000) })));
      const accepted = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status !== 200);
      for (const r of refused) expectError(r, 429, 'FED_QUOTA_EXCEEDED');
      expect(accepted.length).toBeGreaterThan(0);
      expect(refused.length).toBeGreaterThan(0);
      const usage = (await peerRow(root.client, t.peer_id)).usage;
      expect(usage.stored_signals).toBe(accepted.length);
      expect(usage.stored_bytes).toBeLessThanOrEqual(quota);
    });

    it('peers registered with POST /org/company/peers carry their limits; GET shows them', async () => {
      const p = expectOk(await root.client.post('/org/company/peers', { name: 'Registered', endpoint: endpoint(), allowed_scopes: ['pulse'], rate_limit: 2, storage_quota_bytes: 5000 }), 201);
      expect(p).toMatchObject({ rate_limit: 2, storage_quota_bytes: 5000 });
      expect(expectOk(await root.client.get(`/org/company/peers/${p.id}`))).toMatchObject({ rate_limit: 2, storage_quota_bytes: 5000 });
      expectError(await root.client.post('/org/company/peers', { name: 'Bad', endpoint: endpoint(), rate_limit: 1.5 }), 400, 'DISC_VALIDATION_FAILED');
      const t = expectOk(await root.client.post(`/org/company/peers/${p.id}/establish`, {}));
      expectError(await deliver(t, { content: 'z'.repeat(6000) }), 429, 'FED_QUOTA_EXCEEDED');
      expectOk(await deliver(t));
      expectError(await deliver(t), 429, 'RATE_LIMIT_EXCEEDED');
    });
  });

  describe(`federation peer limits, two instances, on ${backend}`, () => {
    const servers = serversOn(backend);
    const FAST = { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_TIMEOUT_MS: '2000' };
    let a: Started;
    let b: Started;
    let aRoot: Member;
    let bRoot: Member;
    let peerId: string;
    afterAll(async () => {
      await a?.close();
      await b?.close();
    });

    const signalAtA = async (id: string) => (expectOk(await aRoot.client.get(`/thread/${id}`)).signals as any[]).find((x) => x.id === id);
    const deliveryAtA = async () => (await peerRow(aRoot.client, peerId)).deliveries;

    beforeAll(async () => {
      [a, b] = await Promise.all([servers.start(FAST), servers.start(FAST)]);
      [aRoot, bRoot] = await Promise.all([bootstrap(a.url), bootstrap(b.url)]);
      // B lets A send tasks, within a small quota and budget; A records the same trust
      const issued = expectOk(await bRoot.client.post('/federation/trust', { name: 'Org A', endpoint: a.url, allowed_scopes: ['task'], storage_quota_bytes: 4000, rate_limit: 1 }), 201);
      expectOk(await aRoot.client.post('/federation/trust', { ...issued, name: 'Org B', endpoint: b.url, allowed_scopes: ['task'] }), 201);
      peerId = issued.peer_id;
    });

    it("the sender retries a peer's 429 (budget or quota) instead of failing the delivery, and delivers once the peer lets it", async () => {
      const first = await emitOk(aRoot, { signal_type: 'task', content: 'small', to_peer: peerId, to_identity: bRoot.id });
      await until('the first delivered', async () => (await signalAtA(first.id)).federation.remote_id);
      // B's budget of one request a minute is spent: the next delivery meets 429 RATE_LIMIT_EXCEEDED
      const second = await emitOk(aRoot, { signal_type: 'task', content: 'second', to_peer: peerId, to_identity: bRoot.id });
      await until('a 429 recorded', async () => (await deliveryAtA()).last_error?.error === 'HTTP 429 RATE_LIMIT_EXCEEDED');
      expect(await deliveryAtA()).toMatchObject({ failed: 0, pending: 1 });
      expect((await signalAtA(second.id)).federation).toMatchObject({ remote_id: null, error: null });
      expectOk(await bRoot.client.patch(`/org/company/peers/${peerId}`, { rate_limit: 0 }));
      await until('the second delivered', async () => (await signalAtA(second.id)).federation.remote_id);

      // a signal larger than what is left of B's quota: 429 FED_QUOTA_EXCEEDED, retried, delivered once B raises it
      const big = await emitOk(aRoot, { signal_type: 'task', content: 'q'.repeat(2000), to_peer: peerId, to_identity: bRoot.id });
      await until('a quota refusal recorded', async () => (await deliveryAtA()).last_error?.error === 'HTTP 429 FED_QUOTA_EXCEEDED');
      expect(await deliveryAtA()).toMatchObject({ failed: 0, pending: 1 });
      expect((await peerRow(bRoot.client, peerId)).usage).toMatchObject({ stored_signals: 2 });
      expectOk(await bRoot.client.patch(`/org/company/peers/${peerId}`, { storage_quota_bytes: 1_000_000 }));
      await until('the big one delivered', async () => (await signalAtA(big.id)).federation.remote_id);
      expect(await deliveryAtA()).toMatchObject({ delivered: 3, failed: 0, pending: 0 });
      expect((await signalAtA(big.id)).federation.error).toBeNull();
      expect((await peerRow(bRoot.client, peerId)).usage).toMatchObject({ stored_signals: 3 });
    });
  });
}
