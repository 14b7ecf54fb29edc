/**
 * Webhooks over real HTTP on both backends: the admin routes and their codes, Standard Webhooks signatures
 * checked by the independent `standardwebhooks` package at a real local receiver that fails the first two
 * attempts, every event exactly once after deduplicating by webhook-id, retries across a restart, replay,
 * the deliveries list walked page by page, POST /emit unaffected by a hanging endpoint, no more requests
 * open at a hanging endpoint than WEBHOOK_MAX_IN_FLIGHT, a slow endpoint with more events than slots (each
 * POSTed once, no attempt failed for waiting; on Redis also with two instances queueing the same deliveries),
 * and the SSRF refusal.
 */
import { lookup } from 'node:dns/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isPrivateAddress } from '../../src/webhooks/address.js';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectError, expectOk, ULID, waitFor } from './support.js';

/** Waits until `probe` answers something truthy and returns it. */
const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 10_000) => waitFor(what, probe, (v) => !!v, timeoutMs, 25);

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const FAST = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
const ALL_EVENTS = ['signal.emitted', 'signal.claimed', 'signal.acked', 'signal.dead_lettered', 'task.completed', 'identity.joined', 'membership.changed'];

describe.each(BACKENDS)('webhooks on %s', (backend) => {
  const servers = serversOn(backend);
  const receivers: Receiver[] = [];
  const receiver = async (respond?: Parameters<typeof startReceiver>[0]) => {
    const r = await startReceiver(respond);
    receivers.push(r);
    return r;
  };
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  async function hook(root: Member, rx: Receiver, events = ALL_EVENTS, extra: Record<string, unknown> = {}) {
    const w = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events, ...extra }), 201);
    rx.secret = w.secret;
    return w;
  }
  const deliveriesOf = async (root: Member, id: string) => expectOk(await root.client.get(`/admin/webhooks/${id}/deliveries?limit=100`)).deliveries;
  /** The webhook's one delivery, once a server (at `url`) has recorded it delivered. */
  const recorded = (url: string, root: Member, id: string) =>
    until('the delivery recorded delivered', async () => {
      const [d] = expectOk(await new Client(url, root.key).get(`/admin/webhooks/${id}/deliveries`)).deliveries;
      return d?.status === 'delivered' ? d : undefined;
    });

  describe('routes', () => {
    let svc: Service;
    let root: Member;
    let alice: Member;
    beforeAll(async () => {
      svc = await servers.start(FAST);
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice');
    });

    it('create shows the secret once; list, show, update, delete; codes', async () => {
      const w = expectOk(await root.client.post('/admin/webhooks', { url: 'https://hooks.example/in', events: ['signal.emitted'], description: 'ci' }), 201);
      expect(w).toMatchObject({ url: 'https://hooks.example/in', events: ['signal.emitted'], description: 'ci', active: true });
      expect(w.id).toMatch(ULID);
      expect(w.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      const shown = expectOk(await root.client.get(`/admin/webhooks/${w.id}`));
      expect(shown).not.toHaveProperty('secret');
      const { secret: _s, ...rest } = w;
      expect(shown).toEqual(rest);
      expect(expectOk(await root.client.get('/admin/webhooks')).map((x: any) => x.id)).toContain(w.id);
      for (const x of expectOk(await root.client.get('/admin/webhooks'))) expect(x).not.toHaveProperty('secret');

      const given = 'whsec_' + Buffer.alloc(24, 7).toString('base64');
      const w2 = expectOk(await root.client.post('/admin/webhooks', { url: 'https://hooks.example/2', events: ['task.completed'], secret: given }), 201);
      expect(w2.secret).toBe(given);

      const upd = expectOk(await root.client.patch(`/admin/webhooks/${w.id}`, { events: ['signal.acked', 'signal.claimed'], active: false }));
      expect(upd).toMatchObject({ id: w.id, events: ['signal.acked', 'signal.claimed'], active: false, url: w.url });
      expect(expectOk(await root.client.get(`/admin/webhooks/${w.id}`))).toEqual(upd);

      expectError(await root.client.post('/admin/webhooks', { url: 'nope', events: ['signal.emitted'] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'url');
      expectError(await root.client.post('/admin/webhooks', { url: 'ftp://x.example', events: ['signal.emitted'] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'url');
      expectError(await root.client.post('/admin/webhooks', { url: 'https://x.example', events: ['signal.exploded'] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'events');
      expectError(await root.client.post('/admin/webhooks', { url: 'https://x.example', events: [] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'events');
      expectError(await root.client.post('/admin/webhooks', { url: 'https://x.example', events: ['signal.emitted'], secret: 'plain' }), 400, 'WEBHOOK_VALIDATION_FAILED', 'secret');
      expectError(await root.client.post('/admin/webhooks', { events: ['signal.emitted'] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'url');
      expectError(await root.client.patch(`/admin/webhooks/${w.id}`, {}), 400, 'WEBHOOK_VALIDATION_FAILED');
      expectError(await root.client.patch(`/admin/webhooks/${w.id}`, { url: 'bad' }), 400, 'WEBHOOK_VALIDATION_FAILED', 'url');

      expectError(await root.client.get(`/admin/webhooks/${UNKNOWN}`), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await root.client.patch(`/admin/webhooks/${UNKNOWN}`, { active: true }), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await root.client.del(`/admin/webhooks/${UNKNOWN}`), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await root.client.get(`/admin/webhooks/${UNKNOWN}/deliveries`), 404, 'WEBHOOK_NOT_FOUND');
      expectError(await root.client.post(`/admin/webhooks/deliveries/whd_${UNKNOWN}_signals_1_signal.emitted/replay`), 404, 'WEBHOOK_DELIVERY_NOT_FOUND');

      expect(expectOk(await root.client.del(`/admin/webhooks/${w.id}`)).id).toBe(w.id);
      expectError(await root.client.get(`/admin/webhooks/${w.id}`), 404, 'WEBHOOK_NOT_FOUND');

      expectError(await alice.client.post('/admin/webhooks', { url: 'https://x.example', events: ['signal.emitted'] }), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await alice.client.get('/admin/webhooks'), 403, 'AUTH_ADMIN_REQUIRED');
    });

    it('a receiver failing the first two attempts sees every event exactly once, signed, after deduplicating by webhook-id', async () => {
      const rx = await receiver((r) => (r.try <= 2 ? 500 : 204));
      const w = await hook(root, rx);
      const bob = await join(root.client, 'bob');
      const note = await emitOk(root, { signal_type: 'pulse', content: 'hello' });
      const task = await emitOk(root, { signal_type: 'task', content: 'do it' });
      expectOk(await bob.client.post('/claim', { signal_id: task.id }));
      expectOk(await bob.client.post('/ack', { signal_id: task.id }));
      const ms = expectOk(await root.client.get('/org/company/memberships?limit=100')).memberships.find((m: any) => m.identity_id === bob.id);
      expectOk(await root.client.patch(`/org/company/memberships/${ms.id}/claw-type`, { claw_type: 'worker' }));

      const expected = [
        ['membership.changed', bob.id],
        ['identity.joined', bob.id],
        ['signal.emitted', note.id],
        ['signal.emitted', task.id],
        ['signal.claimed', task.id],
        ['signal.acked', task.id],
        ['task.completed', task.id],
      ];
      await until('every event once', () => rx.unique().size >= expected.length, 20_000);
      const got = [...rx.unique().values()].map((r) => [r.body.type, r.body.data.signal?.id ?? r.body.data.identity?.id ?? r.body.data.membership?.identity_id]);
      expect(got.sort()).toEqual(expected.sort());
      // every request verified; each id was tried three times; nothing arrived that was not expected
      expect(rx.requests.every((r) => r.verified), JSON.stringify(rx.requests.find((r) => !r.verified))).toBe(true);
      for (const id of rx.unique().keys()) expect(rx.requests.filter((r) => r.id === id).map((r) => r.try)).toEqual([1, 2, 3]);

      await until('every delivery delivered', async () => (await deliveriesOf(root, w.id)).every((d: any) => d.status === 'delivered'));
      const ds = await deliveriesOf(root, w.id);
      expect(ds).toHaveLength(expected.length);
      for (const d of ds) {
        expect(d.attempt_count).toBe(3);
        expect(d.attempts.map((a: any) => [a.status, a.response_code])).toEqual([['failed', 500], ['failed', 500], ['succeeded', 204]]);
        for (const a of d.attempts) expect(a.latency_ms).toBeGreaterThanOrEqual(0);
        expect(d.attempts[0].error).toBe('HTTP 500');
      }
    });

    it('a dead-lettered signal is an event', async () => {
      const strict = await servers.start({ ...FAST, MAX_DELIVERY_ATTEMPTS: '1' });
      const admin = await bootstrap(strict.url);
      const rx = await receiver();
      await hook(admin, rx, ['signal.dead_lettered']);
      const t = await emitOk(admin, { signal_type: 'task', content: 'doomed' });
      expectOk(await admin.client.post('/claim', { signal_id: t.id }));
      expectOk(await admin.client.post('/ack', { signal_id: t.id, outcome: 'failed' }));
      await until('the dead-letter event', () => rx.unique().size === 1);
      const [r] = [...rx.unique().values()];
      expect(r.body).toMatchObject({ type: 'signal.dead_lettered', data: { signal: { id: t.id, delivery_state: 'dead_letter' } } });
      expect(rx.requests).toHaveLength(1);
    });

    it('replay sends a delivered event again with the same webhook-id', async () => {
      const rx = await receiver();
      const w = await hook(root, rx, ['signal.emitted']);
      const s = await emitOk(root, { signal_type: 'pulse', content: 'again' });
      await until('the first request', () => rx.requests.length === 1);
      const [d] = await until('the delivery delivered', async () => {
        const ds = await deliveriesOf(root, w.id);
        return ds.length === 1 && ds[0].status === 'delivered' ? ds : undefined;
      });
      expect(d.payload.data.signal.id).toBe(s.id);
      const replayed = expectOk(await root.client.post(`/admin/webhooks/deliveries/${d.id}/replay`), 202);
      expect(replayed).toMatchObject({ id: d.id, status: 'scheduled' });
      await until('the replayed request', () => rx.requests.length === 2);
      expect(rx.requests[1].id).toBe(rx.requests[0].id);
      expect(rx.requests[1].verified).toBe(true);
      await until('the replay recorded', async () => { const [x] = await deliveriesOf(root, w.id); return x.attempt_count === 2 && x.status === 'delivered'; });
    });

    it('deliveries page newest first by cursor and has_more: walked to the end, nothing twice, nothing missed', async () => {
      const rx = await receiver();
      const w = await hook(root, rx, ['signal.emitted']);
      const sent: string[] = [];
      for (let i = 0; i < 7; i++) sent.push((await emitOk(root, { signal_type: 'pulse', content: `paged ${i}` })).id);
      await until('seven deliveries', async () => (await deliveriesOf(root, w.id)).length === 7);
      const whole = (await deliveriesOf(root, w.id)).map((d: any) => d.id);
      const walked: any[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const res = await root.client.get(`/admin/webhooks/${w.id}/deliveries?limit=2${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        const d: any = expectOk(res);
        expect(d.deliveries.length).toBeGreaterThan(0);
        expect(d.deliveries.length).toBeLessThanOrEqual(2);
        expect(d.has_more).toBe(d.cursor !== null);
        expect(res.body.meta.cursor).toBe(d.cursor);
        walked.push(...d.deliveries);
        after = d.cursor;
        pages++;
      } while (after);
      expect(pages).toBe(4);
      expect(walked.map((d) => d.id)).toEqual(whole);
      expect(new Set(whole).size).toBe(7);
      expect(walked.map((d) => d.payload.data.signal.id).sort()).toEqual([...sent].sort());
      expectError(await root.client.get(`/admin/webhooks/${w.id}/deliveries?after=%21%21`), 400, 'VALIDATION_INVALID_TYPE', 'after');
    });

    it('a hanging endpoint: attempts time out and are recorded, replay mid-send is refused, and POST /emit latency is unchanged', async () => {
      const emitMs = async (n: number) => {
        const t: number[] = [];
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          await emitOk(root, { signal_type: 'pulse', content: `timing ${i}` });
          t.push(performance.now() - t0);
        }
        return Math.max(...t);
      };
      const rx = await receiver(() => 'hang');
      const w = await hook(root, rx, ['signal.emitted']);
      const slowest = await emitMs(20);
      await until('hanging attempts', () => rx.requests.length >= 5);
      const sending = await until('a delivery mid-send', async () => (await deliveriesOf(root, w.id)).find((x: any) => x.status === 'sending'));
      expectError(await root.client.post(`/admin/webhooks/deliveries/${sending.id}/replay`), 409, 'WEBHOOK_DELIVERY_IN_PROGRESS');
      // an emit that waited on its delivery would take the whole attempt timeout (2000 ms) the endpoint hangs for
      expect(slowest).toBeLessThan(2000);
      expect(rx.requests.length).toBeGreaterThanOrEqual(5);
      const d = await until('a timed-out attempt', async () => (await deliveriesOf(root, w.id)).find((x: any) => x.attempts.length > 0));
      expect(d.attempts[0]).toMatchObject({ status: 'failed', response_code: null });
      expect(d.attempts[0].error).toMatch(/no answer within 2000 ms/);
      expectOk(await root.client.patch(`/admin/webhooks/${w.id}`, { active: false }));
    });
  });

  it('a hanging endpoint never has more than WEBHOOK_MAX_IN_FLIGHT requests open at once', async () => {
    const rx = await receiver(() => 'hang');
    const svc = await servers.start({ ...FAST, WEBHOOK_MAX_IN_FLIGHT: '2', WEBHOOK_TIMEOUT_MS: '30000' });
    const root = await bootstrap(svc.url);
    await hook(root, rx, ['signal.emitted']);
    for (let i = 0; i < 5; i++) await emitOk(root, { signal_type: 'pulse', content: `held ${i}` });
    // the endpoint holds what it gets; each time two are open, a moment passes with no third, then they are answered
    while (rx.unique().size < 5) {
      await until('the next requests open', () => rx.open >= Math.min(2, 5 - rx.unique().size));
      await new Promise((r) => setTimeout(r, 200));
      expect(rx.open).toBeLessThanOrEqual(2);
      rx.release(200);
    }
    expect(rx.maxOpen).toBe(2);
    expect(rx.requests).toHaveLength(5);
  });

  it('a slow receiver with more events than sending slots: each event POSTed once, and waiting for a slot is no failed attempt', async () => {
    // 2 slots, answers in 800 ms, 1500 ms per attempt: the last of 14 events waits about 5 s for a slot,
    // longer than an attempt may go without a result (2 x 1500 ms + 1 s) once its request is written
    const slow = () => new Promise<number>((r) => setTimeout(() => r(200), 800));
    const rx = await receiver(slow);
    const svc = await servers.start({ ...FAST, WEBHOOK_MAX_IN_FLIGHT: '2', WEBHOOK_TIMEOUT_MS: '1500' });
    const root = await bootstrap(svc.url);
    const w = await hook(root, rx, ['signal.emitted']);
    const sent: string[] = [];
    for (let i = 0; i < 14; i++) sent.push((await emitOk(root, { signal_type: 'pulse', content: `queued ${i}` })).id);
    const ds = await waitFor('every delivery delivered', () => deliveriesOf(root, w.id), (x: any[]) => x.length === 14 && x.every((d) => d.status === 'delivered'), 40_000, 200);
    for (const d of ds) expect(d.attempts.map((a: any) => [a.attempt, a.status, a.response_code]), d.id).toEqual([[1, 'succeeded', 200]]);
    expect(rx.requests.every((r) => r.verified)).toBe(true);
    expect(rx.requests.map((r) => r.body.data.signal.id).sort()).toEqual([...sent].sort());
    expect(rx.maxOpen).toBeLessThanOrEqual(2);
    // the last ones waited past their hold and were queued again: still one attempt each, counted from START
    const requeued = await Promise.all(ds.map(async (d: any) => expectOk(await root.client.get(`/admin/actors/webhook-delivery/${d.id}`)).transitions.some((t: any) => t.event === 'REQUEUE')));
    expect(requeued.some(Boolean)).toBe(true);
  });

  it('retries survive a restart on the same data', async () => {
    let up = false;
    const rx = await receiver(() => (up ? 200 : 503));
    const env = await servers.env({ ...FAST, WEBHOOK_BACKOFF_BASE_MS: '300' });
    const first = await startServer(env);
    const root = await bootstrap(first.url);
    const w = await hook(root, rx, ['signal.emitted']);
    const s = await emitOk(root, { signal_type: 'pulse', content: 'survive' });
    await until('a first failed attempt recorded', async () => (await deliveriesOf(root, w.id))[0]?.attempts.length >= 1);
    await first.close();
    const triedBefore = rx.requests.length;
    up = true;
    const second = await startServer(env);
    try {
      await until('the delivery after restart', () => rx.unique().size === 1, 20_000);
      const [r] = [...rx.unique().values()];
      expect(r.body.data.signal.id).toBe(s.id);
      expect(r.try).toBeGreaterThan(triedBefore);
      // the receiver answered before the process recorded the result: wait for the record
      const d = await recorded(second.url, root, w.id);
      expect(d.attempts.at(-1)).toMatchObject({ status: 'succeeded', response_code: 200 });
      // every earlier attempt failed: answered 503, or (under load) abandoned in flight by the closing process
      const earlier = d.attempts.slice(0, -1);
      expect(earlier.every((a: any) => a.status === 'failed' && (a.response_code === 503 || /no result/.test(a.error))), JSON.stringify(earlier)).toBe(true);
      expect(earlier.some((a: any) => a.response_code === 503)).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('a process stopping mid-send: the next one retries the attempt once its sending timer runs out', async () => {
    const rx = await receiver((r) => (r.try === 1 ? 'hang' : 200));
    const env = await servers.env({ ...FAST, WEBHOOK_TIMEOUT_MS: '500' });
    const first = await startServer(env);
    const root = await bootstrap(first.url);
    const w = await hook(root, rx, ['signal.emitted']);
    await emitOk(root, { signal_type: 'pulse', content: 'mid-send' });
    await until('the attempt in flight', () => rx.requests.length === 1);
    await first.close();
    const second = await startServer(env);
    try {
      await until('the retried delivery', () => rx.unique().size === 1);
      const d = await recorded(second.url, root, w.id);
      expect(d.attempts.map((a: any) => a.status)).toEqual(['failed', 'succeeded']);
      expect(d.attempts[0].error).toMatch(/no result/);
      expect(rx.requests.map((r) => r.id)).toEqual([d.id, d.id]);
    } finally {
      await second.close();
    }
  });

  it('a delivery still failing when its retry window ends is failed, each attempt recorded; replay sends it again', async () => {
    let up = false;
    const rx = await receiver(() => (up ? 200 : 500));
    const svc = await servers.start({ ...FAST, WEBHOOK_RETRY_WINDOW_MS: '1000', WEBHOOK_BACKOFF_BASE_MS: '200' });
    const root = await bootstrap(svc.url);
    const w = await hook(root, rx, ['signal.emitted']);
    await emitOk(root, { signal_type: 'pulse', content: 'unlucky' });
    const d = await until('the delivery failed', async () => (await deliveriesOf(root, w.id)).find((x: any) => x.status === 'failed'));
    // attempts about 0, 200, 600 ms in (later on a loaded machine): each retry waited its back-off and fit
    // the window; the one after the last would have fallen after it
    const codes = d.attempts.map((a: any) => a.response_code);
    expect(codes.length).toBeGreaterThanOrEqual(2);
    expect(codes.every((c: number) => c === 500), JSON.stringify(codes)).toBe(true);
    // the window ends 1000 ms after creation, moved later by the (short) time each attempt waited queued
    const deadline = expectOk(await root.client.get(`/admin/actors/webhook-delivery/${d.id}`)).context.deadline_at;
    expect(deadline).toBeGreaterThanOrEqual(Date.parse(d.created_at) + 1000);
    const at = d.attempts.map((a: any) => Date.parse(a.at));
    const backoff = (i: number) => 200 * 2 ** i;
    for (let i = 0; i + 1 < at.length; i++) {
      expect(at[i] + backoff(i)).toBeLessThanOrEqual(deadline);
      expect(at[i + 1]).toBeGreaterThanOrEqual(at[i] + backoff(i));
    }
    expect(at.at(-1) + backoff(at.length - 1)).toBeGreaterThan(deadline);
    expect(d.failed_at).not.toBeNull();
    up = true;
    expectOk(await root.client.post(`/admin/webhooks/deliveries/${d.id}/replay`), 202);
    await until('the replay delivered', () => rx.unique().size === 1);
    expect(rx.requests).toHaveLength(codes.length + 1);
  });

  it('a receiver answering slowly with a 1 GB body is cut at the 64 KiB response cap, long before the attempt timeout', async () => {
    // declares 1 GB and streams one 16 KiB chunk every 10 ms (the same buffer: nothing near 1 GB is allocated)
    const chunk = Buffer.alloc(16 * 1024, 'x');
    let written = 0;
    let cutAfterMs: number | undefined;
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const t0 = performance.now();
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(2 ** 30) });
        const timer = setInterval(() => {
          res.write(chunk);
          written += chunk.length;
        }, 10);
        res.on('close', () => {
          clearInterval(timer);
          cutAfterMs ??= performance.now() - t0;
        });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const svc = await servers.start({ ...FAST, WEBHOOK_TIMEOUT_MS: '30000' });
      const root = await bootstrap(svc.url);
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
      const w = expectOk(await root.client.post('/admin/webhooks', { url, events: ['signal.emitted'] }), 201);
      await emitOk(root, { signal_type: 'pulse', content: 'big answer' });
      await until('the sender cut the answer', () => cutAfterMs !== undefined, 20_000);
      // cut at the cap: a few chunks past 64 KiB at most (what was in flight), nowhere near the 30 s timeout
      expect(written).toBeLessThan(1024 * 1024);
      expect(cutAfterMs!).toBeLessThan(30_000);
      const d = await until('the attempt recorded', async () => (await deliveriesOf(root, w.id)).find((x: any) => x.attempts.length > 0));
      expect(d.attempts[0]).toMatchObject({ response_code: 200 });
      expect(d.status).toBe('delivered');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('SSRF: without ALLOW_PRIVATE_NETWORK, private addresses are refused at creation and at send time', async () => {
    const svc = await servers.start({ WEBHOOK_BACKOFF_BASE_MS: '100' });
    const root = await bootstrap(svc.url);
    const rx = await receiver();
    for (const url of [rx.url, 'http://10.1.2.3/x', 'http://[::1]:9/x', 'http://169.254.169.254/latest', 'http://localhost:9/x'])
      expectError(await root.client.post('/admin/webhooks', { url, events: ['signal.emitted'] }), 400, 'WEBHOOK_VALIDATION_FAILED', 'url');
    // a host name is resolved at send time: every address it resolves to is checked
    // (this machine's own host name resolves to a loopback or private address)
    const addrs = await lookup(hostname(), { all: true });
    expect(addrs.length).toBeGreaterThan(0);
    for (const a of addrs) expect(isPrivateAddress(a.address)).toBe(true);
    const w = expectOk(await root.client.post('/admin/webhooks', { url: rx.url.replace('127.0.0.1', hostname()), events: ['signal.emitted'] }), 201);
    await emitOk(root, { signal_type: 'pulse', content: 'never leaves' });
    const d = await until('a refused attempt', async () => (await deliveriesOf(root, w.id)).find((x: any) => x.attempts.length > 0));
    expect(d.attempts[0]).toMatchObject({ status: 'failed', response_code: null });
    expect(d.attempts[0].error).toMatch(/private, loopback or link-local/);
    expect(rx.requests).toHaveLength(0);
  });
});

// several instances share a store only on Redis: there a delivery can be queued on two of them at once
describe('webhooks on two instances of one Redis', () => {
  const servers = serversOn('redis');
  it('a slow receiver: deliveries queued again on the other instance are still POSTed once each, one attempt each', async () => {
    const rx = await startReceiver(() => new Promise<number>((r) => setTimeout(() => r(200), 500)));
    // one slot each, answers in 500 ms: 24 events take about 6 s, past the 3.4 s hold (2 x 1200 ms + 1 s), so
    // the last ones are queued again by whichever instance claims their REQUEUE timer
    const env = await servers.env({ ...FAST, WEBHOOK_MAX_IN_FLIGHT: '1', WEBHOOK_TIMEOUT_MS: '1200' });
    const [a, b] = await Promise.all([startServer(env), startServer(env)]);
    try {
      const root = await bootstrap(a.url);
      const w = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.emitted'] }), 201);
      rx.secret = w.secret;
      const onB = new Client(b.url, root.key);
      const sent: string[] = [];
      for (let i = 0; i < 24; i++) sent.push((await emitOk(i % 2 ? onB : root.client, { signal_type: 'pulse', content: `two ${i}` })).id);
      const deliveries = async () => expectOk(await root.client.get(`/admin/webhooks/${w.id}/deliveries?limit=100`)).deliveries;
      const ds = await waitFor('every delivery delivered', deliveries, (x: any[]) => x.length === 24 && x.every((d) => d.status === 'delivered'), 40_000, 200);
      for (const d of ds) expect(d.attempts.map((x: any) => [x.attempt, x.status, x.response_code]), d.id).toEqual([[1, 'succeeded', 200]]);
      expect(rx.requests.every((r) => r.verified)).toBe(true);
      expect(rx.requests.map((r) => r.body.data.signal.id).sort()).toEqual([...sent].sort());
      expect(rx.maxOpen).toBeLessThanOrEqual(2);
      const requeued = await Promise.all(ds.map(async (d: any) => expectOk(await root.client.get(`/admin/actors/webhook-delivery/${d.id}`)).transitions.filter((t: any) => t.event === 'REQUEUE').length));
      expect(requeued.some(Boolean)).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await rx.close();
    }
  });
});
