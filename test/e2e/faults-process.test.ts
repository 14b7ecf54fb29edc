/**
 * Process faults. (1) On both backends, SIGKILL of the service in the middle of a burst of concurrent emits:
 * after a restart on the same data every emit that was answered 201 is there. (2) Two instances on one Redis,
 * one SIGKILLed while it holds a worker's lease and a watcher's socket: the lease expires on the survivor
 * (its durable timer fires there) and the task is claimed again through it; the watcher reconnects to the
 * survivor from its last cursor and gets every signal sent meanwhile exactly once.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join } from '../helpers/client.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { expectExactlyOnce, PushSocket } from '../helpers/push.js';
import { findSignal, listAll, waitFor } from '../api/support.js';

const kill = async (s: ChildServer) => {
  const exited = new Promise<NodeJS.Signals | null>((resolve) => s.proc.once('exit', (_c, signal) => resolve(signal)));
  s.proc.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
};

for (const backend of BACKENDS) {
  describe(`SIGKILL in a write burst on ${backend}`, () => {
    const servers = serversOn(backend);
    const children: ChildServer[] = [];
    afterAll(async () => {
      await Promise.all(children.map((c) => c.stop('SIGKILL')));
    });

    it('every emit answered before the kill is present after the restart', async () => {
      const env = await servers.env();
      const first = await spawnServer(env);
      children.push(first);
      const root = await bootstrap(first.url);
      const answered: string[] = [];
      let stop = false;
      const loop = async (n: number) => {
        for (let i = 0; !stop; i++) {
          try {
            const r = await root.client.post('/emit', { signal_type: 'pulse', content: `burst ${n}.${i}` });
            if (r.status === 201) answered.push(r.body.data.id);
          } catch {
            return; // the connection died with the process: this request has no answer
          }
        }
      };
      const loops = Array.from({ length: 6 }, (_, n) => loop(n));
      await waitFor('writes under way', async () => answered.length, (n) => n >= 60, 30_000);
      await kill(first);
      stop = true;
      await Promise.all(loops);
      expect(answered.length).toBeGreaterThanOrEqual(60);

      const second = await spawnServer(env);
      children.push(second);
      const after = new Client(second.url, root.key);
      const present = new Set((await listAll(after)).map((s) => s.id));
      expect(answered.filter((id) => !present.has(id))).toEqual([]);
    }, 120_000);
  });
}

describe('an instance on Redis SIGKILLed while holding a lease and a socket', () => {
  const servers = serversOn('redis');
  const children: ChildServer[] = [];
  afterAll(async () => {
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
  });

  it('the lease expires and is claimed again on the survivor; the socket resumes there with nothing lost', async () => {
    const env = await servers.env();
    const [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    children.push(a, b);
    const root = await bootstrap(a.url);
    const worker = await join(root.client, 'worker');
    const other = await join(root.client, 'other');
    const watcher = await join(root.client, 'watcher');

    const task = (await root.client.post('/emit', { signal_type: 'task', content: 'held by the dying instance' })).body.data;
    const claim = await new Client(a.url, worker.key).post('/claim', { signal_id: task.id, lease_ms: 3000 });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);

    const onA = await PushSocket.open(a.url, watcher.key, { label: 'watcher on A' });
    const before = (await new Client(b.url, root.key).post('/emit', { signal_type: 'pulse', content: 'before', to_identity: watcher.id })).body.data;
    await onA.waitSignals([before.id]);
    const cursor = onA.lastCursor()!;

    await kill(a);
    const viaB = new Client(b.url, root.key);
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await viaB.post('/emit', { signal_type: 'pulse', content: `while away ${i}`, to_identity: watcher.id });
      expect(r.status).toBe(201);
      sent.push(r.body.data.id);
    }

    // the dead instance's lease timer fires on B
    const released = await waitFor('the lease to expire on the survivor', () => findSignal(viaB, task.id), (s) => s?.delivery_state === 'pending', 15_000);
    expect(released).toMatchObject({ delivery_state: 'pending', delivery_count: 1, claimed_by: null });
    const again = await new Client(b.url, other.key).post('/claim', { signal_id: task.id });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.data.claimed_by).toBe(other.id);

    // the watcher reconnects to B from its last cursor: every signal sent while it was away, exactly once
    const onB = await PushSocket.open(b.url, watcher.key, { after: cursor, label: 'watcher on B' });
    await onB.waitSignals(sent);
    expectExactlyOnce(onB.signalIds(), sent, 'resumed on B');
    await onB.close();
  }, 120_000);
});
