/**
 * Push tail: BENCH_AGENTS WebSocket agents (each its own identity), emits to random identities at a fixed
 * rate; emit-to-receive p50/p99 and POST /emit p99, per rate, and the highest rate whose p99 stays under
 * 50 ms. The event loop's longest stall during each run comes from the service's own /metrics
 * (prom-client's monitorEventLoopDelay, reset by each scrape). Load runs in bench/push-load.ts.
 *
 * Env: BENCH_BACKENDS (embedded,redis), BENCH_AGENTS (1000), BENCH_RATES (250,500,1000,2000,4000: tried in
 * order until p99 >= 50 ms), BENCH_SECONDS (30 at the first rate, which is the target's; 10 after),
 * BENCH_CPU_PROF (dir: a V8 CPU profile of each service; `bench/profile-stalls.ts` lists its long tasks).
 */
import { writeFileSync } from 'node:fs';
import { join as pathJoin } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { intEnv, main, scratchDir, report, runLoad, startService, stopChild, type Backend } from './lib.js';
import { agents, loopLag } from './push-agents.js';

const BACKENDS = (process.env.BENCH_BACKENDS ?? 'embedded,redis').split(',') as Backend[];
const AGENTS = intEnv('BENCH_AGENTS', 1000, 1);
const RATES = (process.env.BENCH_RATES ?? '1000,250,500,2000,4000').split(',').map(Number);
const SECONDS = intEnv('BENCH_SECONDS', 30, 1);
const TARGET = { embedded: 10, redis: 20 } as const;
const PROF = process.env.BENCH_CPU_PROF;

await main(async () => {
  for (const backend of BACKENDS) {
    const svc = await startService(backend, {}, PROF ? ['--cpu-prof', `--cpu-prof-dir=${PROF}/${backend}`] : []);
    const root = await bootstrap(svc.url, 'bench');
    process.stderr.write(`push (${backend}): creating ${AGENTS} agents ... `);
    const list = (await agents(svc.url, root.key, AGENTS, 'agent')).map((a) => ({ ...a, url: svc.url }));
    process.stderr.write('done\n');
    const file = pathJoin(await scratchDir('bench-push-'), 'sockets.json');
    writeFileSync(file, JSON.stringify(list));
    let best: number | undefined;
    for (const [i, rate] of RATES.entries()) {
      const before = await loopLag(svc.url);
      const seconds = i === 0 ? SECONDS : Math.min(SECONDS, 10);
      const r = await runLoad<{ e2r_p99_ms: number; post_p99_ms: number; lost: number; sent: number }>('push-load.ts', { PUSH_SOCKETS: file, PUSH_EMIT_URL: svc.url, PUSH_ADMIN_KEY: root.key, PUSH_MODE: 'tail', PUSH_RATE: String(rate), PUSH_SECONDS: String(seconds) });
      const lag = await loopLag(svc.url);
      const met = r.e2r_p99_ms < TARGET[backend] && r.post_p99_ms < 10;
      const cpuPerEmit = Math.round(((lag.cpu_s - before.cpu_s) * 1e6) / r.sent);
      report({ bench: 'push-tail', backend, agents: AGENTS, ...r, loop_lag_max_ms: lag.max_ms, loop_lag_p99_ms: lag.p99_ms, service_cpu_us_per_emit: cpuPerEmit, target: i === 0 ? `e2r p99 < ${TARGET[backend]} ms, POST p99 < 10 ms` : undefined, met: i === 0 ? met : undefined });
      if (r.e2r_p99_ms < 50 && r.lost === 0) best = Math.max(best ?? 0, rate);
      else if (i > 0) break;
    }
    report({ bench: 'push-tail-max-rate', backend, agents: AGENTS, highest_rate_p99_under_50ms: best ?? null });
    await stopChild(svc.proc);
  }
});
