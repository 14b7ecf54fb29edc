/**
 * Process faults. (1) On both backends, SIGKILL of the service in the middle of a burst of concurrent emits and
 * claim/ack rounds: after a restart on the same data every emit answered 201 and every ack answered 200 is
 * there, each signal actor's version counts its transitions, and the state indexes agree with the records. (2) Two instances on one Redis,
 * one SIGKILLed while it holds a worker's lease and a watcher's socket: the lease expires on the survivor
 * (its durable timer fires there) and the task is claimed again through it; the watcher reconnects to the
 * survivor from its last cursor and gets every signal sent meanwhile exactly once. (3) Three instances on one
 * Redis, one SIGKILLed holding two leases, two sockets, a snooze and a reservation: the leases are redelivered
 * and claimed on the survivors, the sockets resume there, and the snooze end and reservation expiry (timers
 * due after the kill) fire on the survivors.
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

    it('every emit and ack answered before the kill is present after the restart, and every actor record agrees with its history and state index', async () => {
      const env = await servers.env();
      const first = await spawnServer(env);
      children.push(first);
      const root = await bootstrap(first.url);
      const answered: string[] = [];
      const acked: string[] = [];
      let stop = false;
      const loop = async (n: number) => {
        for (let i = 0; !stop; i++) {
          try {
            const task = i % 3 === 2;
            const r = await root.client.post('/emit', { signal_type: task ? 'task' : 'pulse', content: `burst ${n}.${i}` });
            if (r.status === 201) answered.push(r.body.data.id);
            // a task round moves the signal actor through several versions
            if (!task || r.status !== 201) continue;
            const c = await root.client.post('/claim', { signal_id: r.body.data.id });
            if (c.status === 200 && (await root.client.post('/ack', { signal_id: r.body.data.id, outcome: 'completed' })).status === 200) acked.push(r.body.data.id);
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
      const signals = await listAll(after);
      const present = new Map(signals.map((s) => [s.id, s]));
      expect(answered.filter((id) => !present.has(id))).toEqual([]);
      expect(acked.length).toBeGreaterThan(0);
      expect(acked.filter((id) => present.get(id)?.delivery_state !== 'acked'), 'answered acks not held').toEqual([]);

      // each record's version counts its transitions and its last transition is its state ...
      for (const id of [...acked, ...answered.slice(0, 20)]) {
        const actor = (await after.get(`/admin/actors/signal/${id}`)).body.data;
        expect(actor.version, JSON.stringify(actor)).toBe(actor.transitions.length);
        expect(actor.transitions[0].to).toBe(actor.state);
        expect(actor.state).toBe(present.get(id).delivery_state);
      }
      // ... and the state indexes hold every signal once, under the state its record has
      const counts = (await after.get('/admin/actors')).body.data.counts.signal as Record<string, number>;
      const byState: Record<string, number> = {};
      for (const s of signals) byState[s.delivery_state] = (byState[s.delivery_state] ?? 0) + 1;
      expect(Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0))).toEqual(byState);
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

describe('three instances on one Redis, one SIGKILLed while holding leases, sockets and timers', () => {
  const servers = serversOn('redis');
  const children: ChildServer[] = [];
  afterAll(async () => {
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
  });

  it("its leases are redelivered and claimed on the survivors, its sockets resume on another instance, its snooze and reservation timers fire there", async () => {
    const env = await servers.env();
    const [a, b, c] = await Promise.all([spawnServer(env), spawnServer(env), spawnServer(env)]);
    children.push(a, b, c);
    const root = await bootstrap(a.url);
    const [worker, other, watcher, sleeper, holder] = await Promise.all(['worker', 'other', 'watcher', 'sleeper', 'holder'].map((n) => join(root.client, n)));
    const onA = (m: { key: string }) => new Client(a.url, m.key);
    const viaB = new Client(b.url, root.key);
    const viaC = new Client(c.url, root.key);

    const tasks = [];
    for (const n of [1, 2]) tasks.push((await root.client.post('/emit', { signal_type: 'task', content: `lease ${n} on the dying instance` })).body.data);
    const note = (await root.client.post('/emit', { signal_type: 'pulse', content: 'snooze me', to_identity: sleeper.id })).body.data;
    const sockets = await Promise.all([1, 2].map((n) => PushSocket.open(a.url, watcher.key, { label: `watcher ${n} on A` })));
    const before = (await viaB.post('/emit', { signal_type: 'pulse', content: 'before', to_identity: watcher.id })).body.data;
    await Promise.all(sockets.map((s) => s.waitSignals([before.id], 10_000)));
    const cursors = sockets.map((s) => s.lastCursor()!);

    // every timer is set through A, due a few seconds on
    const due = new Date(Date.now() + 5000).toISOString();
    const leases = await Promise.all(tasks.map((t) => onA(worker).post('/claim', { signal_id: t.id, lease_ms: 5000 })));
    for (const l of leases) expect(l.status, JSON.stringify(l.body)).toBe(200);
    const snooze = await onA(sleeper).post('/inbox/snooze', { signal_id: note.id, until: due });
    expect(snooze.status, JSON.stringify(snooze.body)).toBe(200);
    const reserved = await onA(holder).post('/reservations', { paths: ['src/**'], ttl_s: 5 });
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(200);
    const reservation = reserved.body.data.granted[0];

    await kill(a);
    const killedAt = Date.now();
    // each timer comes due after A is gone: only a survivor can fire it
    const dueTimes = [...leases.map((l) => l.body.data.claim_expires_at), snooze.body.data.snoozed_until, reservation.expires_at].map(Date.parse);
    for (const t of dueTimes) expect(t, 'a timer due after the kill').toBeGreaterThan(killedAt);

    const sent: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await (i % 2 ? viaB : viaC).post('/emit', { signal_type: 'pulse', content: `while away ${i}`, to_identity: watcher.id });
      expect(r.status).toBe(201);
      sent.push(r.body.data.id);
    }

    // the leases: back to pending, then claimed again, one through each survivor
    for (const t of tasks) {
      const released = await waitFor('the lease to expire on a survivor', () => findSignal(viaB, t.id), (s) => s?.delivery_state === 'pending', 20_000);
      expect(released).toMatchObject({ delivery_state: 'pending', delivery_count: 1, claimed_by: null });
    }
    const again = await Promise.all(tasks.map((t, i) => new Client(i ? c.url : b.url, other.key).post('/claim', { signal_id: t.id })));
    for (const r of again) expect(r.body.data?.claimed_by, JSON.stringify(r.body)).toBe(other.id);

    // the snooze ends: the item is back in the sleeper's inbox, unread
    const inbox = new Client(c.url, sleeper.key);
    const item = await waitFor(
      'the snooze to end on a survivor',
      async () => (await inbox.get(`/inbox/identity/${sleeper.id}?limit=100`)).body.data.signals.find((s: { id: string }) => s.id === note.id),
      (s) => s?.receipt_state === 'unread',
      20_000,
    );
    expect(item).toMatchObject({ receipt_state: 'unread', snoozed_until: null });

    // the reservation expires
    const expired = await waitFor('the reservation to expire on a survivor', async () => (await viaB.get(`/reservations/${reservation.id}`)).body.data, (r) => r?.state === 'expired', 20_000);
    expect(expired.id).toBe(reservation.id);

    // the sockets reconnect, one to each survivor, from their last cursors: everything sent meanwhile, once
    for (const [i, url] of [b.url, c.url].entries()) {
      const resumed = await PushSocket.open(url, watcher.key, { after: cursors[i], label: `watcher ${i + 1} resumed` });
      await resumed.waitSignals(sent, 15_000);
      expectExactlyOnce(resumed.signalIds(), sent, resumed.label);
      await resumed.close();
    }
  }, 150_000);
});
