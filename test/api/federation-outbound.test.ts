/**
 * The sending side of federation over real HTTP on both backends, against a stand-in peer (a local HTTP
 * server checking every proof from the documented formula): emit with to_peer and its refusals, the outbound
 * delivery retried until the peer answers (the copy's id recorded as federation.remote_id), FED_DELIVERY_FAILED
 * after the retry budget, the federation events on the push stream and in webhooks (delivered, claimed and
 * completed by the peer's signed calls, failed), GET /admin/peers counts, a slow peer with more deliveries
 * than slots (each sent once, no attempt failed for waiting), and a delivery that survives a restart of the
 * sending process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { bootstrap, Client, type Member } from '../helpers/client.js';
import { signedPost } from '../helpers/federation.js';
import { startPeerReceiver, type PeerReceiver } from '../helpers/peer-receiver.js';
import { SseStream } from '../helpers/push.js';
import { BACKENDS, serversOn, spawnServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 20_000) => waitFor(what, probe, (v) => !!v, timeoutMs, 25);
const FAST = { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_TIMEOUT_MS: '2000', WEBHOOK_BACKOFF_BASE_MS: '100' };

/** Trust with the stand-in peer through the route; the receiver learns the secret to check proofs with. */
async function trustPeer(root: Member, rx: PeerReceiver, scopes = ['task', 'alert']): Promise<string> {
  const t = expectOk(await root.client.post('/federation/trust', { name: 'org-b', endpoint: rx.url, allowed_scopes: scopes, expires_in: 3600 }), 201);
  rx.secret = t.shared_secret;
  return t.peer_id;
}

/** The signal as its thread shows it (a root: the thread's first entry). */
const signalOf = async (c: Client, id: string) => (expectOk(await c.get(`/thread/${id}`)).signals as any[]).find((x) => x.id === id);
const peerRow = async (c: Client, id: string) => (expectOk(await c.get('/admin/peers')) as any[]).find((p) => p.id === id);

describe.each(BACKENDS)('federation outbound on %s', (backend) => {
  const servers = serversOn(backend);
  const peers: PeerReceiver[] = [];
  const peer = async (respond?: PeerReceiver['respond']) => {
    const r = await startPeerReceiver(respond);
    peers.push(r);
    return r;
  };
  afterEach(async () => {
    await Promise.all(peers.splice(0).map((r) => r.close()));
  });

  it('emit to a peer is validated with the interface codes and lands in no local inbox', async () => {
    const svc = await servers.start(FAST);
    const root = await bootstrap(svc.url);
    const rx = await peer();
    const peerId = await trustPeer(root, rx, ['task']);
    expectError(await root.client.post('/emit', { signal_type: 'task', content: 'x', to_peer: '01ARZ3NDEKTSV4RRFFQ69G5FAV', to_role: 'ops' }), 403, 'FED_PEER_DENIED', 'to_peer');
    expectError(await root.client.post('/emit', { signal_type: 'alert', content: 'x', to_peer: peerId, to_role: 'ops' }), 403, 'FED_SCOPE_DENIED', 'signal_type');
    expectError(await root.client.post('/emit', { signal_type: 'task', content: 'x', to_peer: peerId }), 400, 'VALIDATION_FIELD_REQUIRED', 'to_role');
    const pending = expectOk(await root.client.post('/org/company/peers', { name: 'no-trust', endpoint: 'http://127.0.0.1:9/none', allowed_scopes: ['task'] }), 201);
    expectOk(await root.client.patch(`/org/company/peers/${pending.id}/status`, { status: 'active' }));
    expectError(await root.client.post('/emit', { signal_type: 'task', content: 'x', to_peer: pending.id, to_role: 'ops' }), 403, 'FED_TRUST_NOT_ESTABLISHED', 'to_peer');
    expectOk(await root.client.patch(`/org/company/peers/${peerId}/status`, { status: 'suspended' }));
    expectError(await root.client.post('/emit', { signal_type: 'task', content: 'x', to_peer: peerId, to_role: 'ops' }), 403, 'FED_PEER_DENIED', 'to_peer');
    expectOk(await root.client.patch(`/org/company/peers/${peerId}/status`, { status: 'active' }));

    const s = await emitOk(root, { signal_type: 'task', content: 'for b', to_peer: peerId, to_role: 'ops' });
    expect(s).toMatchObject({ to_peer: peerId, to_role: 'ops', federation: { peer_id: peerId, direction: 'outbound', hops: 0, remote_id: null } });
    const inbox = expectOk(await root.client.get(`/inbox/identity/${root.id}`));
    expect(JSON.stringify(inbox)).not.toContain(s.id);
    await until('the copy id recorded', async () => (await signalOf(root.client, s.id)).federation.remote_id === `copy-of-${s.id}`);
    const [call] = rx.calls;
    expect(call).toMatchObject({ path: '/federation/deliver', peerId, verified: true });
    expect(call.body).toMatchObject({ hops: 0, signal: { id: s.id, signal_type: 'task', content: 'for b', to_role: 'ops', from_identity: root.id } });
  });

  it('an outbound delivery is retried until the peer answers, with the events and the per-peer counts', async () => {
    const svc = await servers.start(FAST);
    const root = await bootstrap(svc.url);
    let failures = 2;
    const rx = await peer(() => (failures-- > 0 ? 503 : 200));
    const peerId = await trustPeer(root, rx);
    const hookRx = await startReceiver();
    try {
      const w = expectOk(await root.client.post('/admin/webhooks', { url: hookRx.url, events: ['federation.delivered'] }), 201);
      hookRx.secret = w.secret;
      const sse = await SseStream.open(svc.url, { token: root.key }, 'admin stream', ['federation.delivered']);
      try {
        const s = await emitOk(root, { signal_type: 'task', content: 'retried', to_peer: peerId, to_role: 'ops' });
        await until('delivered after two failures', async () => (await signalOf(root.client, s.id)).federation.remote_id);
        expect(rx.calls.length).toBe(3);
        expect(rx.calls.every((c) => c.verified && c.body.signal.id === s.id)).toBe(true);
        // each attempt carries a fresh proof: no nonce repeats
        expect(new Set(rx.calls.map((c) => c.nonce)).size).toBe(3);
        await until('the push event', () => sse.events.some((e) => e.signal.id === s.id));
        await until('the webhook', () => [...hookRx.unique().values()].some((r) => r.body.type === 'federation.delivered' && r.body.data.signal.id === s.id));
        const row = await peerRow(root.client, peerId);
        expect(row.deliveries).toMatchObject({ delivered: 1, failed: 0, pending: 0 });
        expect(row.deliveries.last_error).toMatchObject({ call: 'deliver', signal_id: s.id, error: expect.stringContaining('HTTP 503') });
        expect(row).not.toHaveProperty('shared_secret');
      } finally {
        sse.close();
      }
    } finally {
      await hookRx.close();
    }
  });

  it("the peer's claim and ack reach the origin's webhooks as federation.claimed and federation.completed", async () => {
    const svc = await servers.start(FAST);
    const root = await bootstrap(svc.url);
    const rx = await peer();
    const peerId = await trustPeer(root, rx);
    const hookRx = await startReceiver();
    try {
      const w = expectOk(await root.client.post('/admin/webhooks', { url: hookRx.url, events: ['federation.claimed', 'federation.completed'] }), 201);
      hookRx.secret = w.secret;
      const s = await emitOk(root, { signal_type: 'task', content: 'worked by b', to_peer: peerId, to_role: 'ops' });
      await until('delivered', async () => (await signalOf(root.client, s.id)).federation.remote_id);
      // what org B's service sends when its agent claims and completes the copy: signed with the trust's secret
      const as = { peerId, secret: rx.secret! };
      expect(expectOk(await signedPost(svc.url, '/federation/claim', { signal_id: s.id, agent: 'b-agent' }, as))).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:b-agent` });
      expect(expectOk(await signedPost(svc.url, '/federation/ack', { signal_id: s.id, agent: 'b-agent' }, as))).toMatchObject({ task_status: 'completed' });
      const hooks = (await until('both webhooks', () => {
        const got = [...hookRx.unique().values()].filter((r) => r.body.data.signal?.id === s.id);
        return got.length >= 2 ? got : undefined;
      }))!;
      expect(hooks.map((r) => r.body.type).sort()).toEqual(['federation.claimed', 'federation.completed']);
      const hook = (type: string) => hooks.find((r) => r.body.type === type)!.body.data.signal;
      expect(hook('federation.claimed')).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:b-agent`, federation: { peer_id: peerId, direction: 'outbound' } });
      expect(hook('federation.completed')).toMatchObject({ delivery_state: 'acked', task_status: 'completed', claimed_by: `peer:${peerId}:b-agent` });
      // only the subscribed types: federation.delivered was not asked for
      expect(hookRx.requests.every((r) => r.verified && r.body.type !== 'federation.delivered')).toBe(true);
    } finally {
      await hookRx.close();
    }
  });

  it('a slow peer with more deliveries than sending slots: each signal delivered once, and waiting for a slot is no failed attempt', async () => {
    // 2 slots, answers in 800 ms, 1500 ms per call: the last of 14 deliveries waits about 5 s for a slot,
    // longer than an attempt may go without a result (2 x 1500 ms + 1 s) once its request is written
    const svc = await servers.start({ ...FAST, FEDERATION_MAX_IN_FLIGHT: '2', FEDERATION_TIMEOUT_MS: '1500' });
    const root = await bootstrap(svc.url);
    const rx = await peer(() => new Promise<number>((r) => setTimeout(() => r(200), 800)));
    const peerId = await trustPeer(root, rx);
    const sent: string[] = [];
    for (let i = 0; i < 14; i++) sent.push((await emitOk(root, { signal_type: 'task', content: `queued ${i}`, to_peer: peerId, to_role: 'ops' })).id);
    const row = await waitFor('every delivery delivered', () => peerRow(root.client, peerId), (p: any) => p.deliveries.delivered === 14, 40_000, 200);
    expect(row.deliveries).toMatchObject({ delivered: 14, failed: 0, pending: 0, last_error: null });
    expect(rx.calls.every((c) => c.verified && c.path === '/federation/deliver')).toBe(true);
    expect(rx.calls.map((c) => c.body.signal.id).sort()).toEqual([...sent].sort());
    const listed = expectOk(await root.client.get('/admin/actors?kind=federation-delivery&limit=100')).actors;
    expect(listed).toHaveLength(14);
    for (const a of listed) {
      const { context } = expectOk(await root.client.get(`/admin/actors/federation-delivery/${a.id}`));
      expect(context.attempts.map((x: any) => [x.attempt, x.status, x.response_code]), a.id).toEqual([[1, 'succeeded', 200]]);
    }
  });

  it('SSRF: without ALLOW_PRIVATE_NETWORK a peer on a loopback address is never called and the delivery fails', async () => {
    const svc = await servers.start({ ...FAST, ALLOW_PRIVATE_NETWORK: 'false', FEDERATION_RETRY_WINDOW_MS: '1000', FEDERATION_BACKOFF_BASE_MS: '200' });
    const root = await bootstrap(svc.url);
    const rx = await peer();
    const peerId = await trustPeer(root, rx);
    const s = await emitOk(root, { signal_type: 'task', content: 'to loopback', to_peer: peerId, to_role: 'ops' });
    await until('the failure recorded', async () => (await signalOf(root.client, s.id)).federation.error === 'FED_DELIVERY_FAILED');
    expect(rx.calls).toHaveLength(0);
    const row = await peerRow(root.client, peerId);
    expect(row.deliveries).toMatchObject({ delivered: 0, failed: 1 });
    expect(row.deliveries.last_error.error).toMatch(/private|loopback|refus/i);
  });

  it('after the retry budget the signal records FED_DELIVERY_FAILED and federation.failed fires', async () => {
    const svc = await servers.start({ ...FAST, FEDERATION_RETRY_WINDOW_MS: '1000', FEDERATION_BACKOFF_BASE_MS: '200' });
    const root = await bootstrap(svc.url);
    const rx = await peer(() => 503);
    const peerId = await trustPeer(root, rx);
    const sse = await SseStream.open(svc.url, { token: root.key }, 'admin stream', ['federation.failed']);
    const hookRx = await startReceiver();
    try {
      hookRx.secret = expectOk(await root.client.post('/admin/webhooks', { url: hookRx.url, events: ['federation.failed'] }), 201).secret;
      const s = await emitOk(root, { signal_type: 'task', content: 'doomed', to_peer: peerId, to_role: 'ops' });
      const failed = await until('the failure recorded', async () => {
        const x = await signalOf(root.client, s.id);
        return x.federation.error ? x : undefined;
      });
      expect(failed.federation).toMatchObject({ error: 'FED_DELIVERY_FAILED', remote_id: null });
      expect(rx.calls.length).toBeGreaterThanOrEqual(2);
      await until('federation.failed pushed', () => sse.events.some((e) => e.signal.id === s.id && e.signal.federation.error === 'FED_DELIVERY_FAILED'));
      await until('federation.failed webhook', () => [...hookRx.unique().values()].some((r) => r.body.type === 'federation.failed' && r.body.data.signal.id === s.id && r.body.data.signal.federation.error === 'FED_DELIVERY_FAILED'));
      const row = await peerRow(root.client, peerId);
      expect(row.deliveries).toMatchObject({ delivered: 0, failed: 1, pending: 0 });
    } finally {
      sse.close();
      await hookRx.close();
    }
  });

});

// the sender as its own process (spawnServer), killed mid-retry and started again on the same data dir
describe('federation outbound across a restart of the sending process (embedded)', () => {
  const servers = serversOn('embedded');
  it('a delivery survives a restart of the sending process', async () => {
    let up = false;
    const rx = await startPeerReceiver(() => (up ? 200 : 503));
    const env = await servers.env({ ...FAST, FEDERATION_BACKOFF_BASE_MS: '300' });
    const first = await spawnServer(env);
    let second: Awaited<ReturnType<typeof spawnServer>> | undefined;
    try {
      const root = await bootstrap(first.url);
      const peerId = await trustPeer(root, rx);
      const s = await emitOk(root, { signal_type: 'task', content: 'survive', to_peer: peerId, to_role: 'ops' });
      await until('a first failed attempt', () => rx.calls.length >= 1);
      await first.stop('SIGKILL');
      const before = rx.calls.length;
      up = true;
      second = await spawnServer(env);
      const after = new Client(second.url, root.key);
      await until('delivered by the restarted sender', async () => (await signalOf(after, s.id)).federation.remote_id === `copy-of-${s.id}`);
      expect(rx.calls.length).toBeGreaterThan(before);
      // the signal's FED_DELIVERED and the delivery's result are two commits: the count follows the first
      await until('the delivery counted', async () => (await peerRow(after, peerId)).deliveries.delivered === 1);
      expect((await peerRow(after, peerId)).deliveries).toMatchObject({ delivered: 1, pending: 0 });
    } finally {
      await first.stop('SIGKILL');
      await second?.stop();
      await rx.close();
    }
  });
});
