/**
 * HTTP benchmark: the service (as its own process, exactly as `npm start` runs it) against a bare
 * uWebSockets.js server (bench/bare.ts) answering the same routes with the same bytes, both driven by wrk
 * from a third process.
 *
 *   npm run bench                      # embedded (LMDB) backend, 5 s per run
 *   BENCH_SECONDS=10 npm run bench     # longer runs
 *   BENCH_REDIS=1 npm run bench        # also the Redis backend (own redis-server on a free port)
 *
 * Env: BENCH_SECONDS (default 5), BENCH_WARMUP_SECONDS (default 1; 0 = none), BENCH_THREADS (default 2),
 * BENCH_CONNECTIONS (default 50), BENCH_REDIS (1/true to add the Redis backend).
 *
 * Requires the `wrk` binary on PATH (apt-get install wrk); never installs it. Every child process it starts
 * (service, bare server, wrk, redis-server) is stopped on the way out, also on error or Ctrl-C.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { cleanupAll, intEnv, onCleanup, ROOT, spawnListening, track } from './lib.js';
import { startRedis, tempDir, type RedisServer } from '../test/helpers/redis.js';

const EMIT_LUA = join(ROOT, 'bench', 'emit.lua');
const EMIT_BODY = JSON.stringify({ signal_type: 'pulse', content: 'bench' });

const SECONDS = intEnv('BENCH_SECONDS', 5, 1);
const WARMUP = intEnv('BENCH_WARMUP_SECONDS', 1, 0);
const THREADS = intEnv('BENCH_THREADS', 2, 1);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 50, 1);
const WITH_REDIS = ['1', 'true', 'yes'].includes((process.env.BENCH_REDIS ?? '').toLowerCase());


async function startService(label: string, env: Record<string, string>): Promise<string> {
  const { port } = await spawnListening(
    label,
    ['--import', 'tsx', 'src/main.ts'],
    // the port line is logged at info; the service logs nothing per request at info
    { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', RATE_LIMIT_DEFAULT: '0', ...env },
    'service listening',
  );
  return `http://127.0.0.1:${port}`;
}

async function startBare(): Promise<string> {
  const { port } = await spawnListening('bare server', ['--import', 'tsx', 'bench/bare.ts'], { BARE_PORT: '0' }, 'bare listening');
  return `http://127.0.0.1:${port}`;
}

// ---------------------------------------------------------------------------------------------------------
// wrk

function wrkVersion(): string | undefined {
  const r = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (r.error) return undefined;
  return (r.stdout + r.stderr).split('\n')[0]?.trim() || 'wrk';
}

interface WrkResult {
  rps: number;
  p50: number; // ms
  p99: number; // ms
  requests: number;
  non2xx: number;
  socketErrors: number;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function toMs(value: string, unit: string): number {
  const f = UNIT_MS[unit];
  if (f === undefined) throw new Error(`unknown wrk time unit "${unit}"`);
  return Number(value) * f;
}

function parseWrk(out: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p50 = /^\s*50(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$/m.exec(out);
  const p99 = /^\s*99(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$/m.exec(out);
  const reqs = /(\d+) requests in/.exec(out);
  if (!rps || !p50 || !p99 || !reqs) throw new Error(`could not parse wrk output:\n${out}`);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rps: Number(rps[1]),
    p50: toMs(p50[1], p50[2]),
    p99: toMs(p99[1], p99[2]),
    requests: Number(reqs[1]),
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  };
}

function runWrk(url: string, seconds: number, opts: { script?: string; env?: Record<string, string> } = {}): Promise<string> {
  const args = [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency'];
  if (opts.script) args.push('-s', opts.script);
  args.push(url);
  const proc = track(spawn('wrk', args, { env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.once('exit', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`wrk ${args.join(' ')} failed (code ${code}, signal ${signal}):\n${out}${err}`));
    });
  });
}

interface Scenario {
  route: 'GET /health' | 'POST /emit';
  target: string; // bare | service (embedded) | service (redis)
  url: string;
  key?: string;
}

async function measure(s: Scenario): Promise<WrkResult> {
  const path = s.route === 'GET /health' ? '/health' : '/emit';
  const opts = s.route === 'POST /emit' ? { script: EMIT_LUA, env: { BENCH_API_KEY: s.key ?? '', BENCH_BODY: EMIT_BODY } } : {};
  if (WARMUP > 0) await runWrk(s.url + path, WARMUP, opts);
  process.stderr.write(`  ${s.route.padEnd(12)} ${s.target.padEnd(18)} ${SECONDS}s ... `);
  const r = parseWrk(await runWrk(s.url + path, SECONDS, opts));
  process.stderr.write(`${Math.round(r.rps)} req/s\n`);
  if (r.non2xx > 0) console.error(`  WARNING: ${r.non2xx} of ${r.requests} responses were not 2xx/3xx; the figure is not meaningful`);
  if (r.socketErrors > 0) console.error(`  WARNING: ${r.socketErrors} socket errors`);
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// table

interface Row {
  scenario: Scenario;
  result: WrkResult;
  ratio: number | undefined;
}

const fmtMs = (ms: number) => (ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`);

function printTable(rows: Row[]): void {
  const head = ['scenario', 'target', 'req/s', 'p50', 'p99', 'non-2xx', 'service/bare'];
  const body = rows.map((r) => [
    r.scenario.route,
    r.scenario.target,
    Math.round(r.result.rps).toLocaleString('en-US'),
    fmtMs(r.result.p50),
    fmtMs(r.result.p99),
    String(r.result.non2xx),
    r.ratio === undefined ? '—' : r.ratio.toFixed(2),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => '| ' + cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ') + ' |';
  console.log(line(head));
  console.log('|' + widths.map((w, i) => (i >= 2 ? '-'.repeat(w + 1) + ':' : ':' + '-'.repeat(w + 1))).join('|') + '|');
  for (const b of body) console.log(line(b));
}

// ---------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const wrk = wrkVersion();
  if (!wrk) {
    console.error('wrk not found on PATH: install wrk: apt-get install wrk');
    process.exit(1);
  }

  console.error(`${wrk}; ${THREADS} threads, ${CONNECTIONS} connections, ${SECONDS}s per run (+${WARMUP}s warm-up)`);
  console.error(`machine: ${cpus().length} cores, Node ${process.versions.node}`);

  const bare = await startBare();

  const targets: Array<{ target: string; url: string; key: string }> = [];

  const dataDir = await tempDir('bench-data-');
  onCleanup(() => rm(dataDir, { recursive: true, force: true }));
  const embedded = await startService('service (embedded)', { DATA_DIR: dataDir });
  targets.push({ target: 'service (embedded)', url: embedded, key: (await bootstrap(embedded, 'bench')).key });

  if (WITH_REDIS) {
    const redis: RedisServer = await startRedis();
    onCleanup(() => redis.stop());
    const redisDataDir = await tempDir('bench-data-');
    onCleanup(() => rm(redisDataDir, { recursive: true, force: true }));
    const url = await startService('service (redis)', {
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'bench' + randomBytes(4).toString('hex'),
      DATA_DIR: redisDataDir,
    });
    targets.push({ target: 'service (redis)', url, key: (await bootstrap(url, 'bench')).key });
  }

  // sanity: the bare server and the service answer the same routes with 2xx before anything is measured
  for (const t of targets) {
    const r = await fetch(t.url + '/emit', { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: EMIT_BODY });
    if (r.status !== 201) throw new Error(`${t.target}: POST /emit answered ${r.status}: ${await r.text()}`);
  }

  const rows: Row[] = [];
  for (const route of ['GET /health', 'POST /emit'] as const) {
    const base = await measure({ route, target: 'bare uWS', url: bare });
    rows.push({ scenario: { route, target: 'bare uWS', url: bare }, result: base, ratio: undefined });
    for (const t of targets) {
      const scenario: Scenario = { route, target: t.target, url: t.url, key: t.key };
      const result = await measure(scenario);
      rows.push({ scenario, result, ratio: result.rps / base.rps });
    }
  }

  console.log('');
  console.log(`wrk -t${THREADS} -c${CONNECTIONS} -d${SECONDS}s --latency; ${cpus().length} cores, Node ${process.versions.node}; ${new Date().toISOString().slice(0, 10)}`);
  console.log('');
  printTable(rows);
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`bench failed: ${(e as Error).stack ?? e}`);
} finally {
  await cleanupAll();
}
process.exit(failed ? 1 : 0);
