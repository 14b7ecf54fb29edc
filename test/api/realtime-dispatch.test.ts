/**
 * Task dispatch over the socket with credits (docs/realtime.md, Task dispatch), on both backends and across two
 * instances on Redis: 600 tasks completed exactly once by several working sockets (and two sockets of one
 * identity on two instances never given the same task), none ever holding more than
 * its capacity; a closing socket's tasks released at once and given to another worker; a stale claim_token
 * refused; a dependant handed over as a task frame once its dependency completes; a quiet worker spared the
 * ordinary pushes of the tasks it works.
 */
import { EventSource } from 'eventsource';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { pool, PushSocket, waitFor, type Frame } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectOk } from './support.js';

const TASKS = 600;
const CAPACITY = 8;

/** A worker loop over one socket: answers each task frame with done; counts what it holds against its capacity. */
class Worker {
  held = 0;
  most = 0;
  done = new Map<string, number>();
  errors: Frame[] = [];
  private seen = 0;
  constructor(
    readonly socket: PushSocket,
    private capacity: number,
    private type: string,
    /** false: take tasks and keep them (no answers) */
    private answering = true,
  ) {
    socket.ws.on('message', () => queueMicrotask(() => this.pump()));
  }

  start(): Promise<any> {
    return this.socket.ok('work', { capacity: this.capacity, task_types: [this.type], quiet: true });
  }

  tasks(): Frame[] {
    return this.socket.frames.filter((f) => f.type === 'task');
  }

  private pump(): void {
    const frames = this.socket.frames;
    for (; this.seen < frames.length; this.seen++) {
      const f = frames[this.seen] as Frame & { claim_token?: number };
      if (f.type === 'error') this.errors.push(f);
      if (f.type !== 'task') continue;
      this.held++;
      this.most = Math.max(this.most, this.held);
      // the work takes a turn, so tasks given meanwhile pile up against the capacity
      if (this.answering) setImmediate(() => this.finish(f.signal.id, f.claim_token));
    }
  }

  private finish(id: string, token: number | undefined): void {
    this.done.set(id, (this.done.get(id) ?? 0) + 1);
    // the credit is ours again once the answer is sent: a next task frame may come only after it
    this.held--;
    this.socket.send(JSON.stringify({ op: 'done', id: `d-${id}`, signal_id: id, claim_token: token, result: { ok: true } }));
  }
}

describe.each(BACKENDS)('task dispatch over the socket on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let second: Started | undefined;
  let root: Member;
  let boss: Member;
  let agents: Member[];
  const sockets: PushSocket[] = [];
  const open = async (m: Member, url = svc.url) => {
    const s = await PushSocket.open(url, m.key, { label: m.name });
    sockets.push(s);
    return s;
  };

  beforeAll(async () => {
    svc = await servers.start();
    // on Redis a second instance on the same data: workers on both race for the same tasks
    if (backend === 'redis') second = await servers.beside(svc);
    root = await bootstrap(svc.url);
    boss = await join(root.client, 'boss');
    agents = await Promise.all([1, 2, 3, 4].map((i) => join(root.client, `agent-${i}`)));
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
  });

  const task = (type: string, extra: Record<string, unknown> = {}) => emitOk(boss, { signal_type: 'task', content: type, payload: { task_type: type }, ...extra });
  const stateOf = async (id: string) => expectOk(await boss.client.get(`/tasks/${id}/graph`)).task;

  it(`${TASKS} tasks are each completed exactly once by four working sockets, none over its capacity`, async () => {
    const urls = [svc.url, second?.url ?? svc.url];
    const workers = await Promise.all(agents.map(async (a, i) => new Worker(await open(a, urls[i % 2]), CAPACITY, 'bulk')));
    // half the tasks wait before the workers start, half arrive while they work
    const early = await pool(TASKS / 2, 20, () => task('bulk'));
    for (const w of workers) expect(await w.start()).toMatchObject({ capacity: CAPACITY, task_types: ['bulk'], quiet: true });
    const quietFrom = workers.map((w) => w.socket.frames.length);
    const late = await pool(TASKS / 2, 20, () => task('bulk'));
    const ids = [...early, ...late].map((t) => t.id);
    const total = () => workers.reduce((n, w) => n + w.done.size, 0);
    await waitFor(() => total() >= TASKS, 60_000, () => `${TASKS} tasks done, have ${total()}`);
    const counts = new Map<string, number>();
    for (const w of workers) for (const [id, n] of w.done) counts.set(id, (counts.get(id) ?? 0) + n);
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
    for (const w of workers) {
      expect(w.most).toBeLessThanOrEqual(CAPACITY);
      expect(w.errors).toEqual([]);
      // every done answered: its result frame carries the completed task
      await waitFor(() => w.socket.frames.filter((f) => f.type === 'result' && String(f.id).startsWith('d-')).length === w.done.size, 10_000, 'done answers');
    }
    // the work was shared, and quiet sockets got no ordinary pushes of the tasks they worked
    expect(workers.filter((w) => w.done.size > 0).length).toBeGreaterThan(1);
    const pushed = (w: Worker, i: number) => w.socket.frames.slice(quietFrom[i]).filter((f) => (f.type === 'signal' || f.type === 'signal.updated') && f.signal.payload?.task_type === 'bulk');
    workers.forEach((w, i) => expect(pushed(w, i).map((f) => `${f.type} ${f.signal.delivery_state}`)).toEqual([]));
    const sample = await stateOf(ids[0]);
    expect(sample).toMatchObject({ task_status: 'completed', result: { ok: true } });
  }, 120_000);

  it('two sockets of one identity, on two instances on Redis, are never given the same task', async () => {
    const [solo] = agents;
    const n = 200;
    const urls = [svc.url, second?.url ?? svc.url];
    const workers = await Promise.all(urls.map(async (url) => new Worker(await open(solo, url), CAPACITY, 'solo')));
    for (const w of workers) await w.start();
    // a claim read before the other socket's claim of the same task must be refused as stale, not taken as a renewal
    const ids = (await pool(n, 20, () => task('solo'))).map((t) => t.id);
    const total = () => workers.reduce((sum, w) => sum + w.done.size, 0);
    await waitFor(() => total() >= n, 60_000, () => `${n} tasks done, have ${total()}`);
    const counts = new Map<string, number>();
    for (const w of workers) for (const [id, times] of w.done) counts.set(id, (counts.get(id) ?? 0) + times);
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    expect([...counts.entries()].filter(([, times]) => times !== 1)).toEqual([]);
    for (const w of workers) expect(w.errors).toEqual([]);
  }, 120_000);

  it('a closing socket releases its tasks at once, and another worker is given them', async () => {
    const holder = new Worker(await open(agents[0]), 3, 'close', false);
    await holder.start();
    const ids = (await pool(3, 3, () => task('close'))).map((t) => t.id);
    await waitFor(() => holder.tasks().length === 3, 10_000, 'three task frames');
    for (const f of holder.tasks()) expect(f.signal).toMatchObject({ delivery_state: 'leased', claimed_by: agents[0].id });
    await holder.socket.close();
    // a worker on the other instance (on Redis) takes them over, long before the leases would end
    const next = new Worker(await open(agents[1], second?.url ?? svc.url), 3, 'close');
    await next.start();
    await waitFor(() => next.done.size === 3, 10_000, 'the released tasks given to the next worker');
    expect([...next.done.keys()].sort()).toEqual([...ids].sort());
    for (const f of next.tasks()) expect(f.signal.delivery_count).toBe(1);
  });

  it('a stale claim_token is refused and the credit stays held', async () => {
    const w = new Worker(await open(agents[2]), 1, 'stale', false);
    await w.start();
    const t = await task('stale');
    await waitFor(() => w.tasks().length === 1, 10_000, 'a task frame');
    const f = w.tasks()[0] as Frame & { claim_token: number };
    const stale = await w.socket.op('done', { signal_id: t.id, claim_token: f.claim_token + 1 });
    expect(stale.error).toMatchObject({ code: 'SIGNAL_ACK_UNAUTHORIZED', details: { reason: 'stale_claim' } });
    const other = await task('stale');
    const ok = await w.socket.ok('done', { signal_id: t.id, claim_token: f.claim_token });
    expect(ok).toMatchObject({ id: t.id, task_status: 'completed' });
    // the freed credit takes the waiting task
    await waitFor(() => w.tasks().length === 2, 10_000, 'the next task frame');
    expect(w.tasks()[1].signal.id).toBe(other.id);
  });

  it("a done is handed the next task in its ack's own commit: the claim is the done's transition, not a later dispatch", async () => {
    // tasks for an identity with no other socket: no push marks them delivered between the walk and the commit
    const solo = await join(root.client, 'solo');
    const w = new Worker(await open(solo), 1, 'next', false);
    const ids = (await pool(2, 2, () => task('next', { to_identity: solo.id }))).map((t) => t.id);
    await w.start();
    await waitFor(() => w.tasks().length === 1, 10_000, 'the first task frame');
    const first = w.tasks()[0] as Frame & { claim_token: number };
    const [a, b] = [first.signal.id, ids.find((id) => id !== first.signal.id)!];
    const last = async (id: string) => expectOk(await root.client.get(`/admin/actors/signal/${id}`)).transitions[0];
    // the first task was claimed by the dispatch itself, on no request
    expect(await last(a)).toMatchObject({ event: 'CLAIM', request_id: null });
    expect(await w.socket.ok('done', { signal_id: a, claim_token: first.claim_token })).toMatchObject({ id: a, task_status: 'completed' });
    await waitFor(() => w.tasks().length === 2, 10_000, 'the next task frame');
    const second = w.tasks()[1] as Frame & { claim_token: number };
    expect(second.signal).toMatchObject({ id: b, delivery_state: 'leased', claimed_by: solo.id });
    const acked = await last(a);
    expect(acked).toMatchObject({ event: 'ACK', request_id: expect.stringMatching(/^req_/) });
    // one commit: b's claim is a move of the done's own request, as the ack is
    expect(await last(b)).toMatchObject({ event: 'CLAIM', request_id: acked.request_id });
    await w.socket.ok('done', { signal_id: b, claim_token: second.claim_token });
    expect((await last(b)).event).toBe('ACK');
  });

  it("a done whose next task shares its concurrency key leaves the key's slots right: both free once both are done", async () => {
    const key = { concurrency_key: `pair-${backend}`, concurrency_limit: 2 };
    const w = new Worker(await open(agents[2]), 1, 'keyed');
    const ids = (await pool(2, 2, () => task('keyed', key))).map((t) => t.id);
    await w.start();
    await waitFor(() => ids.every((id) => w.done.has(id)), 10_000, 'both keyed tasks done, one after the other');
    await w.socket.ok('work', { capacity: 0 });
    // with a slot left taken, the second of two new tasks of the key would be refused
    const more = await pool(2, 2, () => task('keyed', key));
    for (const t of more) expect(expectOk(await agents[3].client.post('/claim', { signal_id: t.id }))).toMatchObject({ delivery_state: 'leased' });
  });

  it('a dependant becomes a task frame once its dependency is done; capacity 0 stops', async () => {
    const w = new Worker(await open(agents[3]), 2, 'dep');
    await w.start();
    const first = await task('dep');
    const then = await task('dep', { depends_on: [first.id] });
    await waitFor(() => w.done.has(then.id), 10_000, 'the dependant as a task frame');
    const order = w.tasks().map((f) => f.signal.id);
    expect(order).toEqual([first.id, then.id]);
    expect(await w.socket.ok('work', { capacity: 0 })).toMatchObject({ capacity: 0 });
    const idle = await task('dep');
    expect((await stateOf(idle.id)).delivery_state).toMatch(/^(pending|delivered)$/);
    const bad = await w.socket.op('work', { capacity: 257 });
    expect(bad.error).toMatchObject({ code: 'VALIDATION_INVALID_TYPE', details: { field: 'capacity' } });
  });

  it('over SSE: /tasks/stream gives task events by credits, an HTTP ack frees one, closing releases the rest', async () => {
    const me = agents[0];
    const es = new EventSource(`${svc.url}/tasks/stream?${new URLSearchParams({ token: me.key, capacity: '2', task_types: 'sse', quiet: 'true' })}`);
    const got: { signal: any; claim_token: number }[] = [];
    es.addEventListener('task', (ev: MessageEvent) => got.push(JSON.parse(ev.data)));
    try {
      await waitFor(() => es.readyState === EventSource.OPEN, 5000, 'the task stream open');
      const ids = (await pool(3, 3, () => task('sse'))).map((t) => t.id);
      await waitFor(() => got.length === 2, 10_000, 'two task events');
      const first = got[0];
      expectOk(await me.client.post('/ack', { signal_id: first.signal.id, outcome: 'completed', claim_token: first.claim_token }));
      await waitFor(() => got.length === 3, 10_000, 'the third task once a credit was freed');
      expect(new Set(got.map((t) => t.signal.id))).toEqual(new Set(ids));
      es.close();
      const held = got.slice(1).map((t) => t.signal.id);
      await waitFor(async () => (await Promise.all(held.map(stateOf))).every((t) => t.delivery_state !== 'leased'), 10_000, 'the stream\'s tasks released on close');
    } finally {
      es.close();
    }
  });
});
