/**
 * CPU cost per request: the service's own user+system CPU time (from /proc) over a fixed number of requests,
 * against the bare uWebSockets.js server's for the same route. CPU time per request barely moves with other
 * load on the machine (unlike req/s), so this is the figure to compare before and after a change on a busy
 * machine; bare µs / service µs is the throughput ratio a CPU-bound machine would reach.
 *
 *   npm run bench:cpu                                # embedded and redis, 3000 emits each
 *   BENCH_CPU_PROF=/tmp/prof npm run bench:cpu       # also writes a V8 CPU profile of each service
 *
 * Env: BENCH_REQUESTS (3000), BENCH_CONNECTIONS (50), BENCH_BACKENDS (embedded,redis), BENCH_CPU_PROF (dir),
 * BENCH_CPU_ROUTES (health,emit; one route alone gives a profile of that route for bench/profile-stages.ts).
 * Prints one JSON line per (route, target).
 */
import { execFileSync } from 'node:child_process';
import { bootstrap } from '../test/helpers/client.js';
import { cpuMs, intEnv, main, report, runLoad, startBare, startService, stopChild, type Backend, type Service } from './lib.js';

const N = intEnv('BENCH_REQUESTS', 3000, 100);
const C = intEnv('BENCH_CONNECTIONS', 50, 1);
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'embedded,redis').split(',') as Backend[];
const PROF = process.env.BENCH_CPU_PROF;
const ROUTES = (process.env.BENCH_CPU_ROUTES ?? 'health,emit').split(',') as ('health' | 'emit')[];
const EMIT_BODY = JSON.stringify({ signal_type: 'pulse', content: 'bench' });

interface Load {
  requests: number;
  non2xx: number;
  rps: number;
  p50: number;
  p99: number;
}

/** Redis commands served so far, by name (INFO commandstats): the round trips and script calls a request costs. */
function redisCalls(url: string | undefined): Record<string, number> {
  if (!url) return {};
  const out = execFileSync('redis-cli', ['-u', url, 'INFO', 'commandstats'], { encoding: 'utf8' });
  return Object.fromEntries([...out.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map((m) => [m[1], Number(m[2])]));
}

async function cpuPer(s: Service & { redisUrl?: string }, path: string, key?: string): Promise<{ us: number; load: Load; redis: Record<string, unknown> }> {
  const env = { LOAD_URL: s.url + path, LOAD_CONNECTIONS: String(C), ...(path === '/emit' ? { LOAD_METHOD: 'POST', LOAD_BODY: EMIT_BODY, LOAD_KEY: key! } : {}) };
  await runLoad<Load>('http-load.ts', { ...env, LOAD_REQUESTS: String(Math.ceil(N / 5)) }); // warm-up (JIT)
  const calls = redisCalls(s.redisUrl);
  const before = cpuMs(s.proc.pid!);
  const load = await runLoad<Load>('http-load.ts', { ...env, LOAD_REQUESTS: String(N) });
  const us = ((cpuMs(s.proc.pid!) - before) * 1000) / N;
  if (load.non2xx) throw new Error(`${path}: ${load.non2xx} non-2xx answers`);
  const after = redisCalls(s.redisUrl);
  const per = (c: string) => +(((after[c] ?? 0) - (calls[c] ?? 0)) / N).toFixed(3);
  const byCmd = Object.fromEntries(Object.keys(after).map((c) => [c, per(c)]).filter(([, v]) => (v as number) >= 0.05));
  const redis: Record<string, unknown> = s.redisUrl ? { redis_by_cmd: byCmd, redis_cmds_per_req: +((Object.values(after).reduce((a, b) => a + b, 0) - Object.values(calls).reduce((a, b) => a + b, 0)) / N).toFixed(2), redis_evalsha_per_req: per('evalsha') } : {};
  return { us, load, redis };
}

await main(async () => {
  const bare = await startBare();
  const base = { health: await cpuPer(bare, '/health'), emit: await cpuPer(bare, '/emit', 'x') };
  for (const [route, b] of Object.entries(base)) report({ bench: 'cpu', route, target: 'bare', requests: N, cpu_us_per_req: +b.us.toFixed(1), rps: Math.round(b.load.rps) });
  await stopChild(bare.proc);
  for (const backend of BACKENDS) {
    // one dir per backend: the main thread's profile is the largest file in it (tsx's loader thread writes one too)
    const args = PROF ? ['--cpu-prof', `--cpu-prof-dir=${PROF}/${backend}`] : [];
    const svc = await startService(backend, {}, args);
    const { key } = await bootstrap(svc.url, 'bench');
    for (const route of ROUTES) {
      const r = await cpuPer(svc, '/' + route, key);
      const b = base[route];
      report({ bench: 'cpu', route, target: backend, requests: N, cpu_us_per_req: +r.us.toFixed(1), bare_cpu_us_per_req: +b.us.toFixed(1), ratio: +(b.us / r.us).toFixed(3), rps: Math.round(r.load.rps), p50_ms: +r.load.p50.toFixed(2), p99_ms: +r.load.p99.toFixed(2), ...r.redis });
    }
    await stopChild(svc.proc);
  }
});
