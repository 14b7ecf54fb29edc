/**
 * The service as its own process on a real Redis Cluster (3 masters + 3 replicas, REDIS_CLUSTER_NODES):
 * the core scenarios pass on it, and a failover of the master that owns the namespace's slot in the middle of
 * 200 concurrent emits — first a manual `CLUSTER FAILOVER` on its replica, then a SIGKILL of the new
 * master — loses no answered write: every emit answered 201 is readable and pushed afterwards, and every
 * other answer is a 503/504 catalogue error, never a 500.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member, type Res } from '../helpers/client.js';
import { expectExactlyOnce, PushSocket, SseStream } from '../helpers/push.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { spawnServer, type ChildServer } from '../helpers/server.js';
import { expectError, findSignal, listAll, waitFor } from '../api/support.js';

const PREFIX = 't' + randomBytes(6).toString('hex');
/** a key in the namespace's slot: every key of the store carries this hash tag */
const SLOT_KEY = `${PREFIX}:{main}:x`;
const OUTAGE_CODES: Record<number, string[]> = { 503: ['DB_CONNECT_FAILED'], 504: ['DB_QUERY_TIMEOUT'] };

describe('the service on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let svc: ChildServer;
  let root: Member;

  beforeAll(async () => {
    cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
    // the limiter on (it keeps its counters in the cluster too); a failover waits up to 5 s before 503
    svc = await spawnServer({ REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: PREFIX, RATE_LIMIT_DEFAULT: '1000000', DB_CONNECT_TIMEOUT_MS: '5000' });
    root = await bootstrap(svc.url);
  }, 120_000);

  afterAll(async () => {
    await svc?.stop('SIGKILL');
    await cluster?.stop();
  });

  it('bootstrap, join, emit and inbox, 20 concurrent claims with one winner, ack, lease expiry and redelivery, WebSocket push and resume, SSE', async () => {
    expect((await root.client.get('/health/detailed')).body.data).toMatchObject({ backend: 'redis' });
    const alice = await join(root.client, 'alice');
    const watcher = await PushSocket.open(svc.url, alice.key, { label: 'alice on /ws' });
    const sse = await SseStream.open(svc.url, { token: alice.key }, 'alice on SSE');

    const note = await root.client.post('/emit', { signal_type: 'note', content: 'hello cluster', to_identity: alice.id });
    expect(note.status, JSON.stringify(note.body)).toBe(201);
    const inbox = await alice.client.get(`/inbox/identity/${alice.id}`);
    expect(inbox.body.data.signals.map((s: { id: string }) => s.id)).toContain(note.body.data.id);
    await watcher.waitSignals([note.body.data.id], 15_000);
    await sse.waitSignals([note.body.data.id], 15_000);

    const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => join(root.client, `racer-${i}`)));
    const task = (await root.client.post('/emit', { signal_type: 'task', content: 'race' })).body.data;
    const claims = await Promise.all(racers.map((m) => m.client.post('/claim', { signal_id: task.id })));
    const winners = claims.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    for (const r of claims.filter((x) => x.status !== 200)) expectError(r, 409, 'SIGNAL_CLAIM_CONFLICT');
    const winner = racers[claims.indexOf(winners[0])];
    const ack = await winner.client.post('/ack', { signal_id: task.id });
    expect(ack.status, JSON.stringify(ack.body)).toBe(200);
    expect(await findSignal(root.client, task.id)).toMatchObject({ delivery_state: 'acked' });

    // a short lease ends by a durable timer in the cluster: back to pending, then claimed again
    const leased = (await root.client.post('/emit', { signal_type: 'task', content: 'lease me' })).body.data;
    const claim = await alice.client.post('/claim', { signal_id: leased.id, lease_ms: 300 });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);
    const back = await waitFor('the lease to expire', () => findSignal(root.client, leased.id), (s) => s?.delivery_state === 'pending', 20_000);
    expect(back).toMatchObject({ delivery_count: 1, claimed_by: null });
    expect((await racers[0].client.post('/claim', { signal_id: leased.id })).status).toBe(200);

    // resume: what was sent while the socket was away arrives once, after the last cursor it had
    const cursor = watcher.lastCursor()!;
    await watcher.close();
    const away: string[] = [];
    for (let i = 0; i < 5; i++) away.push((await root.client.post('/emit', { signal_type: 'note', content: `away ${i}`, to_identity: alice.id })).body.data.id);
    const resumed = await PushSocket.open(svc.url, alice.key, { after: cursor, label: 'alice resumed' });
    await resumed.waitSignals(away, 15_000);
    expectExactlyOnce(resumed.signalIds(), away, 'resumed on the cluster');
    await sse.waitSignals(away, 15_000);
    await resumed.close();
    sse.close();
  }, 120_000);

  /** 200 emits at once; `fault` runs once `trigger` of them are answered. Every answer is 201 or a 503/504 catalogue error. */
  async function burst(by: Client, to: string, label: string, fault: () => Promise<void>, trigger = 20): Promise<string[]> {
    const answers: Res[] = [];
    let fired: Promise<void> | undefined;
    const fire = () => (fired ??= fault());
    await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const r = await by.post('/emit', { signal_type: 'pulse', content: `${label} ${i}`, to_identity: to });
        answers.push(r);
        if (answers.length === trigger) void fire();
      }),
    );
    await fire();
    for (const r of answers) {
      if (r.status === 201) continue;
      expect(OUTAGE_CODES[r.status], `${label}: ${r.status} ${JSON.stringify(r.body)}`).toBeDefined();
      expect(OUTAGE_CODES[r.status]).toContain(r.body.error.code);
    }
    return answers.filter((r) => r.status === 201).map((r) => r.body.data.id);
  }

  it('a failover of the namespace master during 200 concurrent emits loses no answered write and answers no 500', async () => {
    const bob = await join(root.client, 'bob');
    const watcher = await PushSocket.open(svc.url, bob.key, { label: 'bob on /ws' });
    const answered: string[] = [];

    // 1. manual failover: the replica takes over in step with its master
    const first = await cluster.owners(SLOT_KEY);
    answered.push(
      ...(await burst(root.client, bob.id, 'manual', async () => {
        await cluster.cli(first.replicas[0].port, 'CLUSTER', 'FAILOVER');
      })),
    );
    await cluster.settle(30_000, async () => (await cluster.owners(SLOT_KEY)).master.port === first.replicas[0].port && (await cluster.replicasInSync()));

    // 2. the new master dies: its replica (the old master) is elected after the node timeout
    const second = await cluster.owners(SLOT_KEY);
    answered.push(
      ...(await burst(root.client, bob.id, 'kill', async () => {
        second.master.proc.kill('SIGKILL');
      })),
    );
    await cluster.settle(30_000, async () => (await cluster.owners(SLOT_KEY)).master.port !== second.master.port);

    expect(answered.length).toBeGreaterThan(0);
    const after = await root.client.post('/emit', { signal_type: 'pulse', content: 'after the failovers', to_identity: bob.id });
    expect(after.status, JSON.stringify(after.body)).toBe(201);
    const present = new Set((await listAll(root.client)).map((s) => s.id));
    expect(answered.filter((id) => !present.has(id))).toEqual([]);
    // the push hub found its way to the new masters: every answered emit reaches the socket opened before
    await watcher.waitSignals([...answered, after.body.data.id], 30_000);
    await watcher.close();
  }, 180_000);
});
