/**
 * Tasks: BENCH_TASKS task signals, BENCH_WORKERS HTTP workers finding, claiming and acking them on the Redis
 * backend, against BullMQ processing as many jobs with concurrency BENCH_WORKERS on the same Redis in the
 * same run; both verified exactly-once. Load runs in bench/tasks-load.ts (its own process). NATS JetStream
 * is not compared: no NATS client library is installed (nats-server alone is not enough).
 *
 * Env: BENCH_TASKS (10000), BENCH_WORKERS (50).
 */
import { writeFileSync } from 'node:fs';
import { join as pathJoin } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { intEnv, main, scratchDir, report, runLoad, startService, stopChild } from './lib.js';
import { agents } from './push-agents.js';

const N = intEnv('BENCH_TASKS', 10_000, 1);
const WORKERS = intEnv('BENCH_WORKERS', 50, 1);

interface Result {
  tasks: number;
  tasks_per_s: number;
  exactly_once: boolean;
}

await main(async () => {
  const svc = await startService('redis');
  const root = await bootstrap(svc.url, 'bench');
  const workers = await agents(svc.url, root.key, WORKERS, 'worker');
  const file = pathJoin(await scratchDir('bench-tasks-'), 'keys.json');
  writeFileSync(file, JSON.stringify(workers.map((w) => w.key)));
  const env = { TASKS_URL: svc.url, TASKS_N: String(N), TASKS_WORKERS: String(WORKERS) };
  process.stderr.write(`tasks: producing ${N} ... `);
  await runLoad('tasks-load.ts', { ...env, TASKS_MODE: 'produce', TASKS_ADMIN_KEY: root.key });
  process.stderr.write('done\n');
  const http = await runLoad<Result>('tasks-load.ts', { ...env, TASKS_MODE: 'http', TASKS_KEYS: file });
  const bull = await runLoad<Result>('tasks-load.ts', { ...env, TASKS_MODE: 'bullmq', TASKS_REDIS: svc.redisUrl! });
  report({ bench: 'tasks', target: 'bullmq', workers: WORKERS, ...bull });
  const ratio = +(http.tasks_per_s / bull.tasks_per_s).toFixed(3);
  report({ bench: 'tasks', target: 'service (redis, HTTP claim+ack)', workers: WORKERS, ...http, ratio_to_bullmq: ratio, goal: '>= 0.5 of BullMQ, exactly once', met: ratio >= 0.5 && http.exactly_once });
  await stopChild(svc.proc);
});
