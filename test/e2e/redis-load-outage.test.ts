/**
 * Redis killed under mixed load. A service on a redis-server this test owns (append-only file, fsync always)
 * carries REST emits and claim/ack rounds, WebSocket ops, two watcher sockets and an SSE stream, with lease
 * and snooze timers coming due during the outage. While Redis is down every answer is a success that was
 * already under way or 503 DB_CONNECT_FAILED within the connect timeout (plus slack), never a 500; the sockets
 * stay open or close with a resumable code. Once Redis is back on the same port and data: every emit answered
 * 2xx is stored, every claim/ack answered 200 holds, each socket and the stream (resumed from its last cursor
 * where it ended) has every answered emit meant for it once, and the timers that came due meanwhile fire.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member, type Res } from '../helpers/client.js';
import { expectExactlyOnce, PushSocket, SseStream } from '../helpers/push.js';
import { OwnRedis } from '../helpers/redis.js';
import { startServer } from '../helpers/server.js';
import { findSignal, listAll, waitFor } from '../api/support.js';

const CONNECT_MS = 1000;
/** scheduling slack on a loaded 2-core machine; an answer that hung on Redis would take far longer */
const MARGIN_MS = 2500;
const OUTAGE_MS = 6000;
/** close codes after which a client reconnects and resumes from its last cursor */
const RESUMABLE = [1011, 4008];

/** a refused client waits a moment before its next try, as a real one would */
const pause = () => new Promise((r) => setTimeout(r, 50));

interface Answer {
  what: string;
  ok: boolean;
  /** HTTP status (REST) */
  status?: number;
  code?: string;
  ms: number;
  /** when the request was sent, relative to the kill (negative: before) */
  sentAt: number;
}

describe('Redis killed under mixed load', () => {
  let redis: OwnRedis | undefined;
  let svc: Service | undefined;
  afterAll(async () => {
    await svc?.close();
    await redis?.stop();
  });

  it('prompt 503s while down, no answered write lost, every push delivered on resume, due timers fire after', async () => {
    redis = await OwnRedis.start();
    svc = await startServer({
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'load' + randomBytes(4).toString('hex'),
      DB_CONNECT_TIMEOUT_MS: String(CONNECT_MS),
      DB_QUERY_TIMEOUT_MS: '1500',
    });
    const root = await bootstrap(svc.url);
    const [watcher, worker, sleeper] = await Promise.all(['watcher', 'worker', 'sleeper'].map((n) => join(root.client, n)));

    // connections that live through the outage
    const sockets = await Promise.all([1, 2].map((n) => PushSocket.open(svc!.url, watcher.key, { label: `watcher socket ${n}` })));
    const opSocket = await PushSocket.open(svc.url, worker.key, { label: 'worker op socket' });
    const stream = await SseStream.open(svc.url, { token: watcher.key }, 'watcher stream');

    const tasks = await Promise.all([1, 2].map(async (n) => (await root.client.post('/emit', { signal_type: 'task', content: `lease ${n}` })).body.data.id as string));
    const note = (await root.client.post('/emit', { signal_type: 'pulse', content: 'snooze', to_identity: sleeper.id })).body.data;

    let killedAt = Infinity;
    const answers: Answer[] = [];
    const emitted: string[] = [];
    const acked: string[] = [];
    const call = async (what: string, f: () => Promise<Res>): Promise<Res> => {
      const t = Date.now();
      const r = await f();
      answers.push({ what, ok: r.status < 300, status: r.status, code: r.body?.error?.code, ms: Date.now() - t, sentAt: t - killedAt });
      if (r.status >= 300) await pause();
      return r;
    };
    let stop = false;
    const emitter = async (by: Member, n: number) => {
      for (let i = 0; !stop; i++) {
        const r = await call('POST /emit', () => by.client.post('/emit', { signal_type: 'pulse', content: `load ${n}.${i}`, to_identity: watcher.id }));
        if (r.status === 201) emitted.push(r.body.data.id);
      }
    };
    const claimer = async () => {
      while (!stop) {
        const t = await call('POST /emit task', () => root.client.post('/emit', { signal_type: 'task', content: 'round' }));
        if (t.status !== 201) continue;
        const c = await call('POST /claim', () => worker.client.post('/claim', { signal_id: t.body.data.id }));
        if (c.status !== 200) continue;
        const a = await call('POST /ack', () => worker.client.post('/ack', { signal_id: t.body.data.id, outcome: 'completed' }));
        if (a.status === 200) acked.push(t.body.data.id);
      }
    };
    const reader = async () => {
      while (!stop) await call('GET /inbox', () => watcher.client.get(`/inbox/identity/${watcher.id}?limit=20`));
    };
    const wsOps = async () => {
      for (let i = 0; !stop; i++) {
        const t = Date.now();
        const f = await opSocket.op('emit', { signal_type: 'pulse', content: `ws ${i}`, to_identity: watcher.id }, 20_000);
        answers.push({ what: 'ws emit', ok: f.type === 'result', code: f.error?.code, ms: Date.now() - t, sentAt: t - killedAt });
        if (f.type === 'result') emitted.push(f.data.id);
        else await pause();
      }
    };
    const load = [emitter(root, 1), emitter(worker, 2), claimer(), reader(), wsOps()];

    await waitFor('load under way', () => emitted.length + acked.length, (n) => n >= 40, 20_000);
    // timers that come due while Redis is away: two leases and a snooze
    const dueAt: number[] = [];
    for (const id of tasks) {
      const c = await worker.client.post('/claim', { signal_id: id, lease_ms: 3000 });
      expect(c.status, JSON.stringify(c.body)).toBe(200);
      dueAt.push(Date.parse(c.body.data.claim_expires_at));
    }
    const snooze = await sleeper.client.post('/inbox/snooze', { signal_id: note.id, until: new Date(Date.now() + 3000).toISOString() });
    expect(snooze.status, JSON.stringify(snooze.body)).toBe(200);
    dueAt.push(Date.parse(snooze.body.data.snoozed_until));

    await redis.kill();
    killedAt = Date.now();
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    const upAt = Date.now() - killedAt;
    for (const t of dueAt) expect(t - killedAt, 'a timer due while Redis is away').toBeGreaterThan(0);
    for (const t of dueAt) expect(t - killedAt, 'a timer due while Redis is away').toBeLessThan(upAt);
    await redis.up();
    await waitFor('the service to answer again', () => root.client.get('/signals/list?limit=1'), (r) => r.status === 200, 15_000, 100);
    const afterUp = emitted.length;
    await waitFor('writes after the restart', () => emitted.length, (n) => n >= afterUp + 20, 20_000);
    stop = true;
    await Promise.all(load);

    // while Redis was away: a success already under way, or a prompt 503 DB_CONNECT_FAILED; never a 500
    const during = answers.filter((a) => a.sentAt >= 0 && a.sentAt + a.ms < upAt);
    expect(during.length, 'requests answered during the outage').toBeGreaterThan(10);
    for (const a of answers) expect(a.ok || a.code === 'DB_CONNECT_FAILED', JSON.stringify(a)).toBe(true);
    for (const a of during) {
      expect(a, JSON.stringify(a)).toMatchObject({ ok: false, code: 'DB_CONNECT_FAILED' });
      if (a.status !== undefined) expect(a.status).toBe(503);
      expect(a.ms, JSON.stringify(a)).toBeLessThan(CONNECT_MS + MARGIN_MS);
    }

    // every emit answered 2xx is stored; every acknowledged claim round holds
    const stored = new Map((await listAll(root.client)).map((s) => [s.id, s]));
    expect(emitted.filter((id) => !stored.has(id)), 'answered emits missing').toEqual([]);
    expect(acked.filter((id) => stored.get(id)?.delivery_state !== 'acked'), 'answered acks not held').toEqual([]);

    // the timers that came due while Redis was away fire after it returns
    for (const id of tasks) {
      const s = await waitFor('an overdue lease to expire', () => findSignal(root.client, id), (x) => x?.delivery_state === 'pending', 20_000);
      expect(s).toMatchObject({ delivery_count: 1, claimed_by: null });
    }
    const item = await waitFor(
      'the overdue snooze to end',
      async () => (await sleeper.client.get(`/inbox/identity/${sleeper.id}?limit=100`)).body.data.signals.find((s: { id: string }) => s.id === note.id),
      (s) => s?.receipt_state === 'unread',
      20_000,
    );
    expect(item.snoozed_until).toBeNull();

    // every push reaches each connection: still open, or resumed from its last cursor after a resumable close
    for (const s of sockets) {
      let ids = s.signalIds();
      if (s.closeInfo) {
        expect(RESUMABLE, `${s.label} closed with ${JSON.stringify(s.closeInfo)}`).toContain(s.closeInfo.code);
        const resumed = await PushSocket.open(svc.url, watcher.key, { after: s.lastCursor(), label: `${s.label} resumed` });
        await resumed.waitSignals(emitted.filter((id) => !ids.includes(id)), 20_000);
        ids = [...ids, ...resumed.signalIds()];
        await resumed.close();
      } else {
        await s.waitSignals(emitted, 20_000);
        ids = s.signalIds();
      }
      // the pulses meant for the watcher (it also sees the members' tasks): each answered emit once; an
      // emit refused with 503 after Redis had applied it (its reply lost in the kill) may show up too
      const pulses = ids.filter((id) => stored.get(id)?.signal_type !== 'task');
      expect(pulses.filter((id) => !stored.has(id)), `${s.label}: pushes of signals not stored`).toEqual([]);
      expectExactlyOnce(pulses.filter((id) => emitted.includes(id)), emitted, s.label);
      expect(new Set(pulses).size, `${s.label}: a pulse twice`).toBe(pulses.length);
    }
    let seen = stream.signalIds();
    if (stream.es.readyState === 2) {
      const last = stream.events[stream.events.length - 1]?.id;
      const resumed = await SseStream.open(svc.url, last ? { token: watcher.key, last_event_id: last } : { token: watcher.key }, 'stream resumed');
      await resumed.waitSignals(emitted.filter((id) => !seen.includes(id)), 20_000);
      seen = [...seen, ...resumed.signalIds()];
      resumed.close();
    } else {
      await stream.waitSignals(emitted, 20_000);
      seen = stream.signalIds();
    }
    expect(emitted.filter((id) => !seen.includes(id)), 'pushes the stream never got').toEqual([]);
    stream.close();
    await Promise.all([...sockets, opSocket].map((s) => s.close()));
  }, 90_000);
});
