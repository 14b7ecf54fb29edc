/**
 * Prompt answers while Redis is away. The test runs its own redis-server (append-only file, fsync always, so
 * a restart keeps the data) and a service with DB_CONNECT_TIMEOUT_MS / DB_QUERY_TIMEOUT_MS set:
 * - Redis killed: REST requests, a WebSocket op and an SSE connect answer 503 DB_CONNECT_FAILED within the
 *   connect timeout (plus a margin for a loaded machine), nothing answers 500, and once a redis-server is
 *   back on the same port the same service answers again;
 * - Redis paused (SIGSTOP): 504 DB_QUERY_TIMEOUT within the query timeout, and after SIGCONT it answers again;
 * - a commit that timed out is applied whole or not at all, and is not retried.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startService, type Service } from '../../src/app.js';
import { readConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { openRedisStore } from '../../src/store/redis.js';
import type { Store } from '../../src/store/port.js';
import { bootstrap, Client, join, type Member, type Res } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { OwnRedis } from '../helpers/redis.js';
import { expectError, expectOk, waitFor } from '../api/support.js';

const CONNECT_MS = 1000;
const QUERY_MS = 1500;
/** scheduling slack on a loaded 2-core machine; an answer that hung on Redis would take far longer */
const MARGIN_MS = 1500;

async function timed<T>(f: () => Promise<T>): Promise<{ r: T; ms: number }> {
  const t = Date.now();
  const r = await f();
  return { r, ms: Date.now() - t };
}

describe('requests while Redis is away', () => {
  let redis: OwnRedis;
  let svc: Service;
  let admin: Member;
  let agent: Member;
  let socket: PushSocket | undefined;
  /** the service's warn and error lines */
  const logged: { msg: string; err?: { code?: string } }[] = [];

  beforeAll(async () => {
    redis = await OwnRedis.start();
    const config = readConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      TIMER_POLL_MS: '20', // a busy background loop: fails fifty times a second while Redis is away
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'outage' + randomBytes(4).toString('hex'),
      DB_CONNECT_TIMEOUT_MS: String(CONNECT_MS),
      DB_QUERY_TIMEOUT_MS: String(QUERY_MS),
    });
    svc = await startService(config, createLogger(config.logLevel, { write: (line: string) => void logged.push(JSON.parse(line)) }));
    admin = await bootstrap(svc.url);
    agent = await join(admin.client, 'worker');
  });

  // a case that failed mid-outage must not leave the next one without a Redis
  afterEach(async () => {
    if (!redis.running) await redis.up();
  });

  afterAll(async () => {
    await socket?.close();
    await svc?.close();
    await redis?.stop();
  });

  /** The REST calls of an outage: reads and writes, key-authenticated and admin. */
  const restCalls = (): Array<[string, () => Promise<Res>]> => [
    ['GET /signals/list', () => agent.client.get('/signals/list')],
    ['POST /emit', () => agent.client.post('/emit', { signal_type: 'pulse', content: 'during outage' })],
    [`GET /inbox/identity/${agent.id}`, () => agent.client.get(`/inbox/identity/${agent.id}`)],
    ['GET /roles', () => admin.client.get('/roles')],
    ['POST /invite/create', () => admin.client.post('/invite/create', { name: 'late', type: 'agent' })],
  ];

  const sseConnect = (key: string) => new Client(svc.url).get(`/signals/stream?token=${encodeURIComponent(key)}`);

  it('Redis killed: REST, a WebSocket op and an SSE connect answer 503 DB_CONNECT_FAILED within the connect timeout; back without a restart', async () => {
    socket = await PushSocket.open(svc.url, agent.key, { label: 'agent socket' });
    expect((await socket.op('emit', { signal_type: 'pulse', content: 'before' })).type).toBe('result');

    logged.length = 0;
    // taken before the kill: the service may see the connection drop (and start its connect window) before
    // the test has seen redis-server exit
    const outageStart = Date.now();
    await redis.kill();

    // the first requests wait out the connect window; a burst after it is refused at once
    for (const [what, call] of restCalls()) {
      const { r, ms } = await timed(call);
      expectError(r, 503, 'DB_CONNECT_FAILED');
      expect(ms, `${what} answered in ${ms} ms`).toBeLessThan(CONNECT_MS + MARGIN_MS);
    }
    const burst = await Promise.all(Array.from({ length: 40 }, (_, i) => timed(restCalls()[i % 5][1])));
    for (const { r, ms } of burst) {
      expect(r.status).not.toBe(500);
      expectError(r, 503, 'DB_CONNECT_FAILED');
      expect(ms).toBeLessThan(CONNECT_MS + MARGIN_MS);
    }

    const op = await timed(() => socket!.op('emit', { signal_type: 'pulse', content: 'ws during outage' }, CONNECT_MS + MARGIN_MS + 1000));
    expect(op.r.type).toBe('error');
    expect(op.r.error?.code).toBe('DB_CONNECT_FAILED');
    expect(op.ms).toBeLessThan(CONNECT_MS + MARGIN_MS);

    const sse = await timed(() => sseConnect(agent.key));
    expectError(sse.r, 503, 'DB_CONNECT_FAILED');
    expect(sse.ms).toBeLessThan(CONNECT_MS + MARGIN_MS);

    // the timer loop failed about fifty times a second meanwhile: the log holds a line per message, not per failure
    expect(Date.now() - outageStart).toBeGreaterThan(CONNECT_MS);
    expect(logged.filter((l) => l.msg === "timer poll failed").length, JSON.stringify(logged)).toBe(1);
    const msgs = logged.map((l) => l.msg);
    expect(msgs, 'each background loop logs its failure once per outage').toEqual([...new Set(msgs)]);
    expect(logged.every((l) => l.err?.code === 'DB_CONNECT_FAILED'), JSON.stringify(logged)).toBe(true);

    await redis.up();
    await waitFor('the service to answer again after Redis is back', () => agent.client.get('/signals/list'), (r) => r.status === 200, 10_000, 100);
    expectOk(await agent.client.post('/emit', { signal_type: 'pulse', content: 'after' }), 201);
    expect((await socket.op('emit', { signal_type: 'pulse', content: 'ws after' })).type).toBe('result');
    const stream = await fetch(`${svc.url}/signals/stream?token=${encodeURIComponent(agent.key)}`);
    expect(stream.status).toBe(200);
    await stream.body?.cancel();
  });

  it('Redis paused: 504 DB_QUERY_TIMEOUT within the query timeout, never 500; answers again after SIGCONT', async () => {
    redis.signal('SIGSTOP');
    try {
      const calls = restCalls();
      const answers = await Promise.all(calls.map(([, call]) => timed(call)));
      answers.push(...(await Promise.all(calls.map(([, call]) => timed(call)))));
      for (const { r, ms } of answers) {
        expect(r.status).not.toBe(500);
        expectError(r, 504, 'DB_QUERY_TIMEOUT');
        expect(ms).toBeLessThan(QUERY_MS + MARGIN_MS);
      }
      const op = await timed(() => socket!.op('emit', { signal_type: 'pulse', content: 'ws while paused' }, QUERY_MS + MARGIN_MS + 1000));
      expect(op.r.error?.code).toBe('DB_QUERY_TIMEOUT');
      expect(op.ms).toBeLessThan(QUERY_MS + MARGIN_MS);
      const sse = await timed(() => sseConnect(agent.key));
      expectError(sse.r, 504, 'DB_QUERY_TIMEOUT');
      expect(sse.ms).toBeLessThan(QUERY_MS + MARGIN_MS);
    } finally {
      redis.signal('SIGCONT');
    }
    await waitFor('the service to answer again after SIGCONT', () => agent.client.get('/signals/list'), (r) => r.status === 200, 10_000, 100);
    expectOk(await agent.client.post('/emit', { signal_type: 'pulse', content: 'after pause' }), 201);
  });

  it('a commit that timed out is applied whole or not at all, and never retried', async () => {
    const store: Store = await openRedisStore({ target: { url: redis.url }, prefix: 'atomic' + randomBytes(4).toString('hex'), connectTimeoutMs: CONNECT_MS, queryTimeoutMs: QUERY_MS });
    const commit = (n: string) =>
      store.commit([
        { op: 'put', key: `rec:${n}`, value: { n }, expect: 0 },
        { op: 'index', index: 'all', member: n },
        { op: 'timer', key: `t:${n}`, at: 1 },
        { op: 'append', log: 'L', entry: n },
      ]);
    try {
      expect(await commit('warm')).toMatchObject({ ok: true }); // loads the script: the next commit is one EVALSHA
      redis.signal('SIGSTOP');
      let sent: unknown;
      let queued: unknown;
      try {
        // written to the socket before the pause shows: Redis runs it once it resumes
        sent = await commit('sent').catch((e) => e);
        // issued while that reply is overdue: refused before it is written
        queued = await commit('queued').catch((e) => e);
      } finally {
        redis.signal('SIGCONT');
      }
      expect(sent).toMatchObject({ code: 'DB_QUERY_TIMEOUT', status: 504 });
      expect(queued).toMatchObject({ code: 'DB_QUERY_TIMEOUT', status: 504 });

      const whole = async (n: string) => {
        const parts = [
          (await store.get(`rec:${n}`)) !== undefined,
          (await store.range('all', { limit: 10 })).includes(n),
          (await store.claimTimers(10, 100, 0)).some((t) => t.key === `t:${n}`),
          (await store.readLog<string>('L', 0, 10)).some((e) => e.entry === n),
        ];
        expect(new Set(parts).size, `${n}: all of record, index, timer and journal entry, or none: ${parts}`).toBe(1);
        return parts[0];
      };
      await waitFor('Redis to answer again', () => store.ping().then(() => true, () => false), (ok) => ok, 10_000, 50);
      expect(await whole('sent')).toBe(true);
      expect(await whole('queued')).toBe(false);
      // exactly once: the journal holds one entry for the timed-out commit, and nothing was sent later
      expect((await store.readLog<string>('L', 0, 10)).map((e) => e.entry)).toEqual(['warm', 'sent']);
      expect(await commit('sent')).toEqual({ ok: false, conflict: 'rec:sent' });
    } finally {
      await store.close();
    }
  });
});
