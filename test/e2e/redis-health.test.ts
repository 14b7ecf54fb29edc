/**
 * Health tells the truth about Redis: a server on a redis-server this test started answers 200; once that
 * redis-server is gone, GET /health and GET /health/detailed answer 503 HEALTH_DB_UNREACHABLE within a bounded
 * time (the service pings with a 1 s timeout); and when a redis-server is back on the same port, 200 again.
 * Probes that arrive while a ping is out share it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { createClient } from 'redis';
import { burst } from '../helpers/burst.js';
import { Client } from '../helpers/client.js';
import { startRedis, tempDir, type RedisServer } from '../helpers/redis.js';
import { startServer } from '../helpers/server.js';
import { expectError, waitFor } from '../api/support.js';

/** A redis-server on a given port (the one the first server freed), persistence off. */
async function redisOnPort(port: number): Promise<{ proc: ChildProcess; dir: string }> {
  const dir = await tempDir('redis-again');
  const proc = spawn('redis-server', ['--save', '', '--appendonly', 'no', '--bind', '127.0.0.1', '--port', String(port), '--dir', dir], { stdio: 'ignore' });
  return { proc, dir };
}

describe('health with Redis going away and coming back', () => {
  let redis: RedisServer;
  let again: { proc: ChildProcess; dir: string } | undefined;
  let svc: Service | undefined;
  let anon: Client;

  beforeAll(async () => {
    redis = await startRedis();
    svc = await startServer({ REDIS_URL: redis.url, REDIS_PREFIX: `health${process.pid}` });
    anon = new Client(svc.url);
  });
  /** Stops the redis-server the first test brought back on the old port, if it is running. */
  async function stopAgain(): Promise<void> {
    if (!again) return;
    const exited = new Promise((r) => again!.proc.once('exit', r));
    again.proc.kill('SIGTERM');
    await exited;
    await rm(again.dir, { recursive: true, force: true });
    again = undefined;
  }

  afterAll(async () => {
    await svc?.close();
    await redis?.stop();
    await stopAgain();
  });

  it('probes that arrive while a ping is out share it: a burst of 20 costs Redis one PING', async () => {
    const redisCli = createClient({ url: redis.url });
    await redisCli.connect();
    const pings = async () => Number(/cmdstat_ping:calls=(\d+)/.exec(await redisCli.info('commandstats'))?.[1] ?? 0);
    try {
      let before = 0;
      const replies = await burst(
        svc!.url,
        Array.from({ length: 20 }, () => ({ method: 'GET', path: '/health', key: '' })),
        async () => void (before = await pings()),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect((await pings()) - before).toBe(1);
      const alone = await pings();
      expect((await anon.get('/health')).status).toBe(200);
      expect((await pings()) - alone).toBe(1);
    } finally {
      await redisCli.quit();
    }
  });

  it('200 while Redis is up, 503 HEALTH_DB_UNREACHABLE once it stops, 200 when it is back', async () => {
    const up = await anon.get('/health');
    expect(up.status).toBe(200);
    expect(up.body.data.status).toBe('ok');
    const upDetailed = await anon.get('/health/detailed');
    expect(upDetailed.status).toBe(200);
    expect(upDetailed.body.data).toMatchObject({ backend: 'redis', database: { reachable: true } });

    await redis.stop();

    // each probe is bounded by the service's 1 s ping timeout; the whole wait by 5 s
    const down = await waitFor(
      'GET /health to report the database unreachable',
      async () => {
        const t = Date.now();
        const r = await anon.get('/health');
        return { r, ms: Date.now() - t };
      },
      (v) => v.r.status !== 200,
    );
    expectError(down.r, 503, 'HEALTH_DB_UNREACHABLE');
    expect(down.ms).toBeLessThan(3000); // answered, not hung
    expect(down.r.body.error.details).toMatchObject({ backend: 'redis' });

    const t = Date.now();
    const detailed = await anon.get('/health/detailed');
    expectError(detailed, 503, 'HEALTH_DB_UNREACHABLE');
    expect(Date.now() - t).toBeLessThan(3000);

    // a public route that does not need the database still answers while it is down
    expectError(await anon.get('/no/such/route'), 404, 'NOT_FOUND');

    again = await redisOnPort(redis.port);
    const back = await waitFor('GET /health to recover after Redis returns', () => anon.get('/health'), (r) => r.status === 200, 8000, 50);
    expect(back.body.data.status).toBe('ok');
  });

  it('shuts down while Redis is down instead of hanging', async () => {
    await redis.stop();
    await stopAgain();
    expectError(await waitFor('Redis to be gone', () => anon.get('/health'), (r) => r.status === 503), 503, 'HEALTH_DB_UNREACHABLE');
    const closing = svc!.close().then(() => 'closed');
    svc = undefined;
    expect(await Promise.race([closing, new Promise((r) => setTimeout(() => r('hung'), 10_000))])).toBe('closed');
  });
});
