/**
 * Two organizations, two service processes with separate data (org A embedded, org B on its own
 * redis-server), talking over real HTTP with proofs: trust set up both ways through the routes; a task A
 * emits to B's role arrives, is pushed to B's agent over SSE, claimed and acked there, and A sees it claimed
 * and completed with the federation events; a claim race between an agent of A and agents of B has exactly
 * one winner and B's copy agrees with it; hand-crafted calls to B with the real trust's secret for every
 * proof failure (replay, tampered body, wrong secret, skewed clock, scope, second hop, expired trust);
 * cancel both ways; and a delivery retried across a restart of B.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { SseStream } from '../helpers/push.js';
import { freePort, startRedis, tempDir, type RedisServer } from '../helpers/redis.js';
import { spawnServer, type ChildServer } from '../helpers/server.js';
import { signedPost } from '../helpers/federation.js';
import { emitOk, expectError, expectOk, waitFor } from '../api/support.js';
import { rm } from 'node:fs/promises';
import { ulid } from 'ulid';

const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 30_000) => waitFor(what, probe, (v) => !!v, timeoutMs, 50);
const COMMON = { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '200', FEDERATION_TIMEOUT_MS: '3000', TASK_LEASE_MS: '60000' };

/** The signal as its thread shows it (outbound signals and inbound copies are roots). */
const signalOf = async (c: Client, id: string) => (expectOk(await c.get(`/thread/${id}`)).signals as any[]).find((x) => x.id === id);
/** B's copy of A's signal, once it arrived. */
const copyOf = async (c: Client, originId: string) => (expectOk(await c.get('/signals/list?type=task&limit=100')).signals as any[]).find((x) => x.federation?.remote_id === originId);
const a2aCancel = (c: Client, id: string) =>
  fetch(`${c.url}/a2a`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id } }) });

describe('federation between two service processes (A embedded, B on Redis)', () => {
  let redis: RedisServer;
  let dataDir: string;
  let a: ChildServer;
  let b: ChildServer | undefined;
  let envB: Record<string, string>;
  let rootA: Member;
  let rootB: Member;
  let alice: Member;
  let bob: Member;
  let carol: Member;
  let peerId: string;
  let secret: string;
  let rootBClient: () => Client;

  beforeAll(async () => {
    redis = await startRedis();
    dataDir = await tempDir('svc-fed-a-');
    // B keeps its port across its restart: A's trust names B's endpoint
    envB = { ...COMMON, REDIS_URL: redis.url, REDIS_PREFIX: 'fedb', PORT: String(await freePort()) };
    [a, b] = await Promise.all([spawnServer({ ...COMMON, DATA_DIR: dataDir }), spawnServer(envB)]);
    [rootA, rootB] = await Promise.all([bootstrap(a.url, 'root-a'), bootstrap(b.url, 'root-b')]);
    rootBClient = () => new Client(b!.url, rootB.key);
    alice = await join(rootA.client, 'alice');
    [bob, carol] = await Promise.all([join(rootB.client, 'bob'), join(rootB.client, 'carol')]);
    const ops = expectOk(await rootB.client.post('/roles', { name: 'ops' }), 201);
    for (const m of [bob, carol]) expectOk(await rootB.client.post('/fills', { identity_id: m.id, role_id: ops.id }), 201);
  }, 180_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('trust is established both ways through the routes', async () => {
    const t = expectOk(await rootA.client.post('/federation/trust', { name: 'org-b', endpoint: b!.url, allowed_scopes: ['task'], expires_in: 3600 }), 201);
    peerId = t.peer_id;
    secret = t.shared_secret;
    expectOk(await rootB.client.post('/federation/trust', { peer_id: t.peer_id, shared_secret: t.shared_secret, name: 'org-a', endpoint: a.url, allowed_scopes: ['task'], expires_at: t.expires_at }), 201);
    for (const c of [rootA.client, rootB.client]) {
      const list = expectOk(await c.get('/federation/trust'));
      expect(list.active_peers).toBe(1);
      expect(list.peers[0]).toMatchObject({ id: peerId, has_trust: true });
    }
  });

  it("a task A emits to B's role is pushed to B's agent, claimed, acked, and A sees it completed with the events", async () => {
    const events = await SseStream.open(a.url, { token: rootA.key }, 'A events', ['federation.delivered', 'federation.claimed', 'federation.completed']);
    const push = await SseStream.open(b!.url, { token: bob.key }, 'bob on B');
    try {
      const s = await emitOk(rootA, { signal_type: 'task', content: 'fix the build', to_peer: peerId, to_role: 'ops' });
      const pushed = (await until('the copy pushed to bob', () => push.events.find((e) => e.type === 'signal' && e.signal.federation?.remote_id === s.id)))!;
      expect(pushed.signal).toMatchObject({ content: 'fix the build', to_role: 'ops', source_org: peerId, federation: { peer_id: peerId, direction: 'inbound', remote_id: s.id } });
      const copy = pushed.signal;
      await until('A recorded the copy id', async () => (await signalOf(rootA.client, s.id)).federation.remote_id === copy.id);

      expect(expectOk(await bob.client.post('/claim', { signal_id: copy.id }))).toMatchObject({ delivery_state: 'leased', claimed_by: bob.id });
      expect(await signalOf(rootA.client, s.id)).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:${bob.id}` });
      expect(expectOk(await bob.client.post('/ack', { signal_id: copy.id }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
      await until('A sees it completed', async () => (await signalOf(rootA.client, s.id)).task_status === 'completed');
      for (const type of ['federation.delivered', 'federation.claimed', 'federation.completed'])
        await until(`A's ${type}`, () => events.events.some((e) => e.type === type && e.signal.id === s.id));
    } finally {
      events.close();
      push.close();
    }
  });

  it("a claim race between an agent of A and agents of B has exactly one winner, and B's copy agrees", async () => {
    for (let round = 0; round < 3; round++) {
      const s = await emitOk(rootA, { signal_type: 'task', content: `race ${round}`, to_peer: peerId, to_role: 'ops' });
      const copy = await until('the copy on B', () => copyOf(rootB.client, s.id));
      const results = await Promise.all([
        alice.client.post('/claim', { signal_id: s.id }),
        bob.client.post('/claim', { signal_id: copy.id }),
        carol.client.post('/claim', { signal_id: copy.id }),
      ]);
      const winners = results.filter((r) => r.status === 200);
      expect(winners.length, JSON.stringify(results.map((r) => r.body))).toBe(1);
      for (const r of results.filter((x) => x.status !== 200)) expect(r.body.error.code).toBe('SIGNAL_CLAIM_CONFLICT');
      const origin = await signalOf(rootA.client, s.id);
      const w = results.indexOf(winners[0]);
      const winner = [alice.id, `peer:${peerId}:${bob.id}`, `peer:${peerId}:${carol.id}`][w];
      expect(origin).toMatchObject({ delivery_state: 'leased', claimed_by: winner });
      // B's copy agrees: leased by B's winner, or, when A's agent won, leased by nobody (a refused forward leaves it as it was)
      const mirror = await signalOf(rootB.client, copy.id);
      if (w === 0) {
        expect(mirror.claimed_by).toBeNull();
        expect(mirror.delivery_state).not.toBe('leased');
      } else expect(mirror).toMatchObject({ delivery_state: 'leased', claimed_by: [bob.id, carol.id][w - 1] });
    }
  });

  it("hand-crafted calls to B signed with the real trust's secret: every proof failure has its code", async () => {
    const as = { peerId, secret };
    const deliver = (signal: Record<string, unknown> = {}, hops = 0) => ({ signal: { id: ulid(), signal_type: 'task', content: 'hand made', to_role: 'ops', ...signal }, hops });
    const post = (body: unknown, o: Partial<Parameters<typeof signedPost>[3]> = {}) => signedPost(b!.url, '/federation/deliver', body, { ...as, ...o });

    // a well-signed call passes; the same proof sent again is a replay
    const once = deliver();
    const first = await post(once);
    expect(expectOk(first)).toMatchObject({ source_org: peerId, federation: { peer_id: peerId, remote_id: once.signal.id, direction: 'inbound' } });
    expectError(await post(once, { proof: first.proof }), 403, 'FED_REPLAY_DETECTED');
    // a body changed after signing, a wrong secret, a clock off by six minutes either way
    const body = deliver();
    expectError(await post(body, { send: JSON.stringify({ ...body, signal: { ...body.signal, content: 'tampered' } }) }), 401, 'FED_PROOF_FAILED');
    expectError(await post(body, { secret: secret.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) }), 401, 'FED_PROOF_FAILED');
    for (const off of [-6 * 60_000, 6 * 60_000]) {
      const skewed = await post(body, { ts: Date.now() + off });
      expectError(skewed, 401, 'FED_PROOF_INVALID', 'ts');
      expect(skewed.body.error.details.reason).toBe('skew');
    }
    // well-signed, refused by the rules: a type outside allowed_scopes, a second hop
    expectError(await post(deliver({ signal_type: 'alert' })), 403, 'FED_SCOPE_DENIED');
    expectError(await post(deliver({}, 1)), 400, 'FED_HOP_LIMIT');
    expectError(await post(deliver({ source_org: 'org-c' })), 400, 'FED_HOP_LIMIT');
    // none of them stored anything at B
    const copies = (expectOk(await rootB.client.get('/signals/list?limit=100')).signals as any[]).filter((x) => x.content === 'hand made' || x.content === 'tampered');
    expect(copies.map((x) => x.id)).toEqual([first.body.data.id]);

    // an expired trust: A issues one for 2 s (another endpoint name for the same B), B records it, both let it run out
    const short = expectOk(await rootA.client.post('/federation/trust', { name: 'org-b-short', endpoint: `http://localhost:${b!.port}`, allowed_scopes: ['task'], expires_in: 2 }), 201);
    expectOk(await rootB.client.post('/federation/trust', { ...short, name: 'org-a-short', endpoint: `http://localhost:${a.port}`, allowed_scopes: ['task'] }), 201);
    const shortAs = { peerId: short.peer_id, secret: short.shared_secret };
    await waitFor("B's trust timer", async () => expectOk(await rootB.client.get(`/org/company/peers/${short.peer_id}`)), (p) => p.trust_expired === true, 30_000, 100);
    expectError(await signedPost(b!.url, '/federation/deliver', deliver(), shortAs), 403, 'FED_TRUST_EXPIRED');
  });

  it('cancel works both ways: A withdraws its task, B declines one', async () => {
    const withdrawn = await emitOk(rootA, { signal_type: 'task', content: 'never mind', to_peer: peerId, to_role: 'ops' });
    const copy1 = await until('the copy on B', () => copyOf(rootB.client, withdrawn.id));
    expect((await a2aCancel(rootA.client, withdrawn.id)).status).toBe(200);
    expect(await signalOf(rootA.client, withdrawn.id)).toMatchObject({ task_status: 'cancelled' });
    await until("B's copy cancelled", async () => (await signalOf(rootB.client, copy1.id)).task_status === 'cancelled');

    const declined = await emitOk(rootA, { signal_type: 'task', content: 'not for us', to_peer: peerId, to_role: 'ops' });
    const copy2 = await until('the copy on B', () => copyOf(rootB.client, declined.id));
    expect((await a2aCancel(rootB.client, copy2.id)).status).toBe(200);
    await until("A's task cancelled", async () => (await signalOf(rootA.client, declined.id)).task_status === 'cancelled');
  });

  it('an outbound delivery is retried across a restart of the receiver', async () => {
    await b!.stop();
    b = undefined;
    const s = await emitOk(rootA, { signal_type: 'task', content: 'while B is down', to_peer: peerId, to_role: 'ops' });
    await until('a failed attempt at A', async () => (expectOk(await rootA.client.get('/admin/peers')) as any[]).find((p) => p.id === peerId)?.deliveries.last_error?.signal_id === s.id);
    expect((await signalOf(rootA.client, s.id)).federation.remote_id).toBeNull();
    b = await spawnServer(envB);
    const copy = await until('the task arrived at the restarted B', () => copyOf(rootBClient(), s.id), 60_000);
    expect(copy).toMatchObject({ content: 'while B is down', to_role: 'ops' });
    await until('A recorded the copy id', async () => (await signalOf(rootA.client, s.id)).federation.remote_id === copy.id);
  });
});
