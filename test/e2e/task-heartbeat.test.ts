/**
 * Heartbeats and results on two instances sharing one Redis: a task claimed on one instance is kept alive by
 * heartbeats sent to the other (its emitter, connected to the first, is pushed each `task.progress`); once
 * they stop, its heartbeat timeout fires once between the two and the task is granted again, the old token
 * refused. A result reported on one instance is read by the dependant's graph on the other.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from '../api/support.js';

describe('heartbeats and results on two instances sharing one Redis', () => {
  const servers = serversOn('redis');
  let a: ChildServer | undefined;
  let b: ChildServer | undefined;
  let socket: PushSocket | undefined;
  afterAll(async () => {
    await socket?.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('heartbeats on either instance keep the lease; the timeout fires once; a result crosses to the dependant', async () => {
    const env = await servers.env({});
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    const root = await bootstrap(a.url);
    const boss = await join(root.client, 'boss');
    const worker = await join(root.client, 'worker');
    const other = await join(root.client, 'other');
    const on = (url: string, key: string) => new Client(url, key);
    socket = await PushSocket.open(a.url, boss.key, { label: 'boss on a' });

    const t = await emitOk(boss, { signal_type: 'task', content: 'long job', heartbeat_timeout_ms: 1500 });
    const claimed = expectOk(await on(a.url, worker.key).post('/claim', { signal_id: t.id, lease_ms: 60_000 }));
    for (const [i, url] of [a.url, b.url, a.url, b.url].entries()) {
      expectOk(await on(url, worker.key).post(`/tasks/${t.id}/heartbeat`, { claim_token: 1, progress: (i + 1) / 10, note: `step ${i}` }));
    }
    await waitFor('four task.progress pushes on a', () => socket!.frames.filter((f: any) => f.type === 'task.progress' && f.progress.signal_id === t.id).length, (k) => k === 4, 15_000);
    const admin = on(b.url, root.key);
    const state = async () => expectOk(await admin.get(`/admin/actors/signal/${t.id}`));
    await waitFor('the heartbeat timeout released the task', state, (s) => s.state === 'pending' || s.state === 'delivered', 20_000);
    expect(Date.now()).toBeLessThan(Date.parse(claimed.claim_expires_at));
    expect((await state()).transitions.filter((x: any) => x.event === 'HEARTBEAT_TIMEOUT' && x.to !== x.from)).toHaveLength(1);
    expect(expectOk(await on(b.url, other.key).post('/claim', { signal_id: t.id }))).toMatchObject({ claimed_by: other.id, claim_token: 2, progress: 0.4 });
    const stale = await on(a.url, worker.key).post(`/tasks/${t.id}/heartbeat`, { claim_token: 1 });
    expectError(stale, 403, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(stale.body.error.details).toEqual({ reason: 'stale_claim' });

    const sink = await emitOk(boss, { signal_type: 'task', content: 'uses the result', depends_on: [t.id] });
    expectOk(await on(b.url, other.key).post('/ack', { signal_id: t.id, claim_token: 2, result: { out: 'ok' } }));
    await waitFor('task.completed pushed on a', () => socket!.frames.filter((f: any) => f.type === 'task.completed' && f.signal.id === t.id).length, (k) => k === 1, 15_000);
    const graph = expectOk(await on(a.url, worker.key).get(`/tasks/${sink.id}/graph`));
    expect(graph.upstream).toEqual([expect.objectContaining({ id: t.id, result: { out: 'ok' } })]);
  }, 120_000);
});
