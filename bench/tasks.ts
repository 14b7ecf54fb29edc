/**
 * Tasks (issue 15 item 4): BENCH_TASKS task signals on the Redis backend, BENCH_WORKERS HTTP workers taking
 * and acking them, against BullMQ processing as many jobs with concurrency BENCH_WORKERS on the same Redis
 * and NATS JetStream work-queue pull consumers (a private nats-server), all in the same run, each verified
 * exactly-once. Two ways for the service's workers:
 *   claim: list open tasks (GET /signals/list?delivery_state=pending), POST /claim one (lost races move on), ack;
 *   next:  JSON-RPC workflow.next over POST /rpc (the service picks and claims), then POST /ack;
 *   loop:  workflow.next with complete_claim of the previous task: one request per task.
 * Each way runs on a fresh service (its own REDIS_PREFIX) on the same private redis-server, with its own
 * BENCH_TASKS tasks. Load runs in bench/tasks-load.ts (its own process).
 *
 *   socket: WebSocket dispatch (issue 28): BENCH_SOCKETS sockets send {op:"work"} with the slots split between
 *           them and answer each task frame with {op:"done"}; "-embedded" runs a mode on the embedded backend.
 *
 * Each service mode also reports service_cpu_us_per_task (all its threads, over the run) and, on Redis,
 * redis_cpu_us_per_task: steadier than tasks/s on a shared machine.
 *
 * Env: BENCH_TASKS (10000), BENCH_WORKERS (50), BENCH_SOCKETS (5),
 *      BENCH_TASK_MODES (socket,socket-embedded,loop,loop-embedded,claim,next,bullmq,nats).
 */
import { writeFileSync } from 'node:fs';
import { join as pathJoin } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { startRedis } from '../test/helpers/redis.js';
import { createClient } from 'redis';
import { cpuMs, intEnv, main, usedCpuMs, onCleanup, scratchDir, report, runLoad, startNats, startService, stopChild } from './lib.js';
import { agents } from './push-agents.js';

const N = intEnv('BENCH_TASKS', 10_000, 1);
const WORKERS = intEnv('BENCH_WORKERS', 50, 1);
const MODES = (process.env.BENCH_TASK_MODES ?? 'socket,socket-embedded,loop,loop-embedded,claim,next,bullmq,nats').split(',').map((m) => m.trim());
const SERVICE_MODES = ['claim', 'next', 'loop', 'loop-embedded', 'socket', 'socket-embedded'];
/** sockets the WebSocket workers use; the BENCH_WORKERS slots are split between them */
const SOCKETS = intEnv('BENCH_SOCKETS', 5, 1);

/** Redis's CPU so far (INFO cpu, user + sys), in ms. */
async function redisCpuMs(url: string): Promise<number> {
  const c = createClient({ url });
  await c.connect();
  const info = await c.info('cpu');
  await c.close();
  return usedCpuMs(info);
}

interface Result {
  tasks: number;
  tasks_per_s: number;
  exactly_once: boolean;
  [k: string]: unknown;
}

await main(async () => {
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  const env = { TASKS_N: String(N), TASKS_WORKERS: String(WORKERS) };
  const service: Record<string, Result> = {};

  for (const mode of MODES.filter((m) => SERVICE_MODES.includes(m))) {
    const backend = mode.endsWith('-embedded') ? 'embedded' : 'redis';
    const svc = await startService(backend, {}, [], redis.url);
    const root = await bootstrap(svc.url, 'bench');
    const workers = await agents(svc.url, root.key, WORKERS, 'worker');
    const file = pathJoin(await scratchDir('bench-tasks-'), 'keys.json');
    writeFileSync(file, JSON.stringify(workers.map((w) => w.key)));
    process.stderr.write(`tasks (${mode}): producing ${N} ... `);
    await runLoad('tasks-load.ts', { ...env, TASKS_URL: svc.url, TASKS_MODE: 'produce', TASKS_ADMIN_KEY: root.key });
    process.stderr.write('running\n');
    // CPU per task is steadier than tasks/s on a shared 2-core machine: the service's own, and Redis's
    const [cpu0, redis0] = [cpuMs(svc.proc.pid!), backend === 'redis' ? await redisCpuMs(redis.url) : 0];
    const r = await runLoad<Result>('tasks-load.ts', { ...env, TASKS_URL: svc.url, TASKS_MODE: mode === 'claim' ? 'http' : mode.replace(/-embedded$/, ''), TASKS_KEYS: file, TASKS_SOCKETS: String(SOCKETS) });
    const perTask = (ms: number) => +((ms * 1000) / N).toFixed(1);
    service[mode] = { ...r, service_cpu_us_per_task: perTask(cpuMs(svc.proc.pid!) - cpu0), ...(backend === 'redis' && { redis_cpu_us_per_task: perTask((await redisCpuMs(redis.url)) - redis0) }) };
    await stopChild(svc.proc);
  }

  let bull: Result | undefined;
  if (MODES.includes('bullmq')) {
    process.stderr.write('tasks: bullmq\n');
    bull = await runLoad<Result>('tasks-load.ts', { ...env, TASKS_MODE: 'bullmq', TASKS_REDIS: redis.url });
    report({ bench: 'tasks', target: 'bullmq', backend: 'redis', workers: WORKERS, ...bull });
  }
  let nats: Result | undefined;
  if (MODES.includes('nats')) {
    process.stderr.write('tasks: nats jetstream\n');
    const server = await startNats();
    nats = await runLoad<Result>('tasks-load.ts', { ...env, TASKS_MODE: 'nats', TASKS_NATS: server.url });
    await stopChild(server.proc);
    report({ bench: 'tasks', target: 'nats jetstream (work queue, file storage, pull consumer)', workers: WORKERS, ...nats, ratio_to_bullmq: bull ? +(nats.tasks_per_s / bull.tasks_per_s).toFixed(3) : null });
  }

  const ratio = (r: Result, base?: Result) => (base ? +(r.tasks_per_s / base.tasks_per_s).toFixed(3) : null);
  const labels: Record<string, string> = {
    claim: 'service (redis, HTTP list+claim+ack)',
    next: 'service (redis, RPC workflow.next+ack)',
    loop: 'service (redis, RPC workflow.next with complete_claim)',
    'loop-embedded': 'service (embedded, RPC workflow.next with complete_claim)',
    socket: `service (redis, WebSocket dispatch, ${SOCKETS} sockets)`,
    'socket-embedded': `service (embedded, WebSocket dispatch, ${SOCKETS} sockets)`,
  };
  const goals: Record<string, number> = { socket: 1, 'socket-embedded': 1, loop: 0.25, 'loop-embedded': 0.25 };
  for (const [mode, r] of Object.entries(service)) {
    const toBull = ratio(r, bull);
    const goal = goals[mode] ?? 0.5;
    report({
      bench: 'tasks',
      target: labels[mode],
      workers: WORKERS,
      ...r,
      ratio_to_bullmq: toBull,
      ratio_to_nats: ratio(r, nats),
      goal: `>= ${goal} of BullMQ${mode.startsWith('socket') ? ' and of NATS' : ''}, exactly once`,
      met: toBull === null ? null : toBull >= goal && r.exactly_once && (!mode.startsWith('socket') || (ratio(r, nats) ?? 1) >= 1),
    });
  }
});
