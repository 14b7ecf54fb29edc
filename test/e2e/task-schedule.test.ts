/**
 * Task schedules and dependencies across processes. On both backends a task's not_before and another's
 * deadline pass while the server is down: the restarted process fires each once (a third start never again),
 * told by the signal's transitions, the journal replayed from its start and a webhook receiver. On two
 * instances sharing one Redis: diamonds whose two sides complete at once, one side on each instance, release
 * each sink exactly once; schedule timers due at once fire once between the two. A retry back-off that ends
 * while the server is down makes its task claimable once after the restart.
 */
import { describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { PushSocket, type Frame } from '../helpers/push.js';
import { BACKENDS, childServersOn } from '../helpers/server.js';
import type { Receiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectOk, waitFor } from '../api/support.js';

const FAST = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };

async function setUp(url: string, rx: Receiver) {
  const root = await bootstrap(url);
  const boss = await join(root.client, 'boss');
  const worker = await join(root.client, 'worker');
  rx.secret = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['task.expired'] }), 201).secret;
  return { root, boss, worker };
}

/** The signal's committed transitions made by `event` (the admin actor view keeps the last ten). */
async function movesBy(admin: Client, id: string, event: string): Promise<any[]> {
  return (expectOk(await admin.get(`/admin/actors/signal/${id}`)).transitions as any[]).filter((t) => t.event === event);
}

/** Every journal frame the boss is shown, replayed from the start, up to a marker emitted now. */
async function journal(url: string, boss: Member, admin: Client): Promise<Frame[]> {
  const socket = await PushSocket.open(url, boss.key, { after: '0', label: 'boss replay' });
  try {
    const marker = await emitOk(admin, { signal_type: 'pulse', content: 'marker', to_identity: boss.id });
    await socket.waitSignals([marker.id], 20_000);
    return [...socket.frames];
  } finally {
    await socket.close();
  }
}

const expiredFrames = (frames: Frame[], id: string) => frames.filter((f: any) => f.type === 'task.expired' && f.signal?.id === id);
const hooks = (rx: Receiver, id: string) => [...rx.unique().values()].filter((x) => x.body.type === 'task.expired' && x.body.data.signal.id === id);

describe.each(BACKENDS)('not_before and deadline across a restart (%s)', (backend) => {
  const fleet = childServersOn(backend);

  it('both pass while the server is down: the restarted process fires each once, a later start never again', async () => {
    const rx = await fleet.receiver();
    const env = await fleet.env(FAST);
    const first = await fleet.start(env);
    const { root, boss, worker } = await setUp(first.url, rx);
    const at = new Date(Date.now() + 8000).toISOString();
    const later = await emitOk(boss, { signal_type: 'task', content: 'not before', to_identity: worker.id, not_before: at });
    const due = await emitOk(boss, { signal_type: 'task', content: 'due', to_identity: worker.id, deadline: at });
    const dependant = await emitOk(boss, { signal_type: 'task', content: 'after due', to_identity: worker.id, depends_on: [due.id] });
    expect(later.delivery_state).toBe('waiting');
    const second = await fleet.restartPast(first, env, Date.parse(at), 'the times');
    const admin = new Client(second.url, root.key);
    const state = async (id: string) => expectOk(await admin.get(`/admin/actors/signal/${id}`)).state;
    await waitFor('not_before fired after the restart', () => state(later.id), (s) => s === 'pending' || s === 'delivered', 20_000);
    await waitFor('deadline fired after the restart', () => state(due.id), (s) => s === 'dead_letter', 20_000);
    expect(await state(dependant.id)).toBe('blocked');
    await waitFor('the task.expired webhook', () => hooks(rx, due.id).length, (k) => k >= 1, 20_000);
    expect(expiredFrames(await journal(second.url, boss, admin), due.id)).toHaveLength(1);
    await fleet.stop(second);

    const third = await fleet.start(env);
    const admin3 = new Client(third.url, root.key);
    expect(expiredFrames(await journal(third.url, boss, admin3), due.id)).toHaveLength(1);
    expect(await movesBy(admin3, later.id, 'NOT_BEFORE')).toHaveLength(1);
    expect(await movesBy(admin3, due.id, 'DEADLINE')).toHaveLength(1);
    expect(hooks(rx, due.id)).toHaveLength(1);
  }, 240_000);
});

describe.each(BACKENDS)('a retry back-off across a restart (%s)', (backend) => {
  const fleet = childServersOn(backend);

  it('the back-off ends while the server is down: the restarted process makes the task claimable once, a later start never again', async () => {
    const rx = await fleet.receiver();
    const env = await fleet.env(FAST);
    const first = await fleet.start(env);
    const { root, worker } = await setUp(first.url, rx);
    const boss = await join(root.client, 'retry-boss');
    const t = await emitOk(boss, { signal_type: 'task', content: 'retried later', to_identity: worker.id, retry_backoff_ms: 6000 });
    expectOk(await worker.client.post('/claim', { signal_id: t.id }));
    const failed = expectOk(await worker.client.post('/ack', { signal_id: t.id, outcome: 'failed' }));
    expect(failed.delivery_state).toBe('waiting');
    expect(Date.parse(failed.retry_at) - Date.parse(failed.updated_at)).toBe(6000);
    const second = await fleet.restartPast(first, env, Date.parse(failed.retry_at), 'retry_at');
    const admin = new Client(second.url, root.key);
    const state = async (a: Client) => expectOk(await a.get(`/admin/actors/signal/${t.id}`)).state;
    await waitFor('the back-off timer fired after the restart', () => state(admin), (s) => s === 'pending' || s === 'delivered', 20_000);
    expect(await movesBy(admin, t.id, 'RETRY_DUE')).toHaveLength(1);
    await fleet.stop(second);

    const third = await fleet.start(env);
    const admin3 = new Client(third.url, root.key);
    expect(await movesBy(admin3, t.id, 'RETRY_DUE')).toHaveLength(1);
    expect(expectOk(await new Client(third.url, worker.key).post('/claim', { signal_id: t.id })).delivery_state).toBe('leased');
  }, 240_000);
});

describe('dependencies and schedules on two instances sharing one Redis', () => {
  const fleet = childServersOn('redis');

  it('ten diamonds whose sides complete at once on different instances each release their sink once; timers due at once (schedules, retry back-offs) fire once', async () => {
    const rx = await fleet.receiver();
    const env = await fleet.env(FAST);
    const [a, b] = await Promise.all([fleet.start(env), fleet.start(env)]);
    const { root, boss, worker } = await setUp(a.url, rx);
    const on = (url: string, m: Member) => new Client(url, m.key);
    const complete = async (url: string, id: string) => {
      expectOk(await on(url, worker).post('/claim', { signal_id: id }));
      expectOk(await on(url, worker).post('/ack', { signal_id: id, outcome: 'completed' }));
    };
    const task = (extra: Record<string, unknown> = {}) => emitOk(boss, { signal_type: 'task', content: 'part', to_identity: worker.id, ...extra });

    const at = new Date(Date.now() + 8000).toISOString();
    const timed = await Promise.all(Array.from({ length: 5 }, (_, i) => task(i % 2 ? { not_before: at } : { deadline: at })));
    // failed on one instance, claimed on the other: each back-off's timer is due on both
    const backedOff: any[] = [];
    for (let i = 0; i < 4; i++) {
      const t = await task({ retry_backoff_ms: 3000 });
      expectOk(await on(a.url, worker).post('/claim', { signal_id: t.id }));
      backedOff.push(expectOk(await on(b.url, worker).post('/ack', { signal_id: t.id, outcome: 'failed' })));
    }
    expect(backedOff.map((t) => t.delivery_state)).toEqual(['waiting', 'waiting', 'waiting', 'waiting']);
    const sinks: string[] = [];
    for (let i = 0; i < 10; i++) {
      const top = await task();
      const [left, right] = [await task({ depends_on: [top.id] }), await task({ depends_on: [top.id] })];
      sinks.push((await task({ depends_on: [left.id, right.id] })).id);
      await complete(i % 2 ? a.url : b.url, top.id);
      await Promise.all([complete(a.url, left.id), complete(b.url, right.id)]);
    }
    const admin = on(b.url, root);
    for (const id of sinks) {
      const moves = await movesBy(admin, id, 'DEPENDENCY_COMPLETED');
      expect(moves.filter((t) => t.from === 'waiting' && t.to === 'pending'), id).toHaveLength(1);
      expect(moves, id).toHaveLength(2);
    }
    const frames = await journal(a.url, boss, on(a.url, root));
    for (const id of sinks) expect(frames.filter((f: any) => f.type === 'signal.updated' && f.signal.id === id && f.signal.delivery_state === 'pending'), id).toHaveLength(1);

    for (const t of timed) {
      const expired = t.deadline !== null;
      await waitFor(`${t.id} fired`, async () => expectOk(await admin.get(`/admin/actors/signal/${t.id}`)).state, (s) => (expired ? s === 'dead_letter' : s === 'pending' || s === 'delivered'), 30_000);
      if (expired) await waitFor('the task.expired webhook', () => hooks(rx, t.id).length, (k) => k >= 1, 20_000);
    }
    const after = await journal(b.url, boss, admin);
    for (const t of timed) {
      expect(await movesBy(admin, t.id, t.deadline !== null ? 'DEADLINE' : 'NOT_BEFORE'), t.id).toHaveLength(1);
      if (t.deadline !== null) {
        expect(expiredFrames(after, t.id), t.id).toHaveLength(1);
        expect(hooks(rx, t.id), t.id).toHaveLength(1);
      }
    }
    for (const t of backedOff)
      await waitFor(`${t.id} back from its back-off`, async () => expectOk(await admin.get(`/admin/actors/signal/${t.id}`)).state, (s) => s === 'pending' || s === 'delivered', 30_000);
    const pushed = await journal(a.url, boss, on(a.url, root));
    for (const t of backedOff) {
      expect(await movesBy(admin, t.id, 'RETRY_DUE'), t.id).toHaveLength(1);
      expect(pushed.filter((f: any) => f.type === 'signal.updated' && f.signal.id === t.id && f.signal.delivery_state === 'pending' && f.signal.retry_at === t.retry_at), t.id).toHaveLength(1);
    }
  }, 240_000);
});
