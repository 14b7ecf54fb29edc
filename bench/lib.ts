/**
 * Shared plumbing of the bench scripts: child processes that are always stopped (also on error and Ctrl-C),
 * the service started exactly as `npm start` runs it, a private redis-server, CPU time of a process read
 * from /proc, percentiles, and the one JSON line each scenario prints.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startRedis, tempDir, waitExit } from '../test/helpers/redis.js';
import { Socket } from 'node:net';
import WebSocket from 'ws';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export function intEnv(name: string, fallback: number, min = 0): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return n;
}

const children = new Set<ChildProcess>();
const cleanups: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | undefined;

export function track(proc: ChildProcess): ChildProcess {
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

export const onCleanup = (fn: () => Promise<void>) => void cleanups.push(fn);

export async function stopChild(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill('SIGTERM');
  if (!(await waitExit(proc, 5000))) {
    proc.kill('SIGKILL');
    await waitExit(proc, 2000);
  }
}

export function cleanupAll(): Promise<void> {
  return (cleaning ??= (async () => {
    await Promise.all([...children].map(stopChild));
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(`cleanup: ${(e as Error).message}`));
  })());
}

process.on('exit', () => {
  for (const p of children) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => void cleanupAll().finally(() => process.exit(130)));
}

/** Spawns a node process that prints a JSON line with "port" and `msg` when ready. */
export async function spawnListening(label: string, args: string[], env: Record<string, string>, msg: string): Promise<{ port: number; proc: ChildProcess }> {
  const proc = track(spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
  let stderr = '';
  proc.stderr!.on('data', (d) => {
    if (stderr.length < 64_000) stderr += d;
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    let found = false;
    const timer = setTimeout(() => reject(new Error(`${label} did not start in 60 s:\n${buf}${stderr}`)), 60_000);
    const copy = process.env.BENCH_SERVICE_STDOUT;
    proc.stdout!.on('data', (d) => {
      if (copy) appendFileSync(copy, d);
      if (found) return;
      buf += d;
      const m = buf.split('\n').find((l) => l.includes(`"msg":"${msg}"`) && /"port":\d+/.test(l));
      if (!m) return;
      found = true;
      clearTimeout(timer);
      resolve(Number(/"port":(\d+)/.exec(m)![1]));
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (!found) reject(new Error(`${label} exited (code ${code}, signal ${signal}) before listening:\n${buf}${stderr}`));
    });
  });
  return { port, proc };
}

export type Backend = 'embedded' | 'redis';

export interface Service {
  url: string;
  proc: ChildProcess;
}

/** The service as `npm start` runs it, on a new data dir (and a private redis-server for `redis`). */
export async function startService(backend: Backend, env: Record<string, string> = {}, nodeArgs: string[] = [], redisUrl?: string): Promise<Service & { redisUrl?: string }> {
  const dataDir = await tempDir('bench-data-');
  onCleanup(() => rm(dataDir, { recursive: true, force: true }));
  const extra: Record<string, string> = { DATA_DIR: dataDir };
  if (backend === 'redis') {
    if (!redisUrl) {
      const redis = await startRedis();
      onCleanup(() => redis.stop());
      redisUrl = redis.url;
    }
    extra.REDIS_URL = redisUrl;
    extra.REDIS_PREFIX ??= 'bench' + randomBytes(4).toString('hex');
  }
  const extraArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const { port, proc } = await spawnListening(`service (${backend})`, [...extraArgs, ...nodeArgs, '--import', 'tsx', 'src/main.ts'], { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', RATE_LIMIT_DEFAULT: '0', RATE_LIMIT_PUBLIC: '0', ...extra, ...env }, 'service listening');
  return { url: `http://127.0.0.1:${port}`, proc, redisUrl };
}

/** A temporary directory removed when the bench ends. */
export async function scratchDir(prefix: string): Promise<string> {
  const dir = await tempDir(prefix);
  onCleanup(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A private nats-server with JetStream (never the shared one on 4222), its store in a scratch dir. */
export async function startNats(): Promise<{ url: string; proc: ChildProcess }> {
  const dir = await scratchDir('bench-nats-');
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    if (port === 4222) continue;
    const proc = track(spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: ['ignore', 'ignore', 'pipe'] }));
    let out = '';
    proc.stderr!.on('data', (d) => (out += d));
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && proc.exitCode === null) {
      if (await canConnect(port)) return { url: `nats://127.0.0.1:${port}`, proc };
      await new Promise((r) => setTimeout(r, 100));
    }
    await stopChild(proc);
    if (!/address already in use/i.test(out)) throw new Error(`nats-server did not start:\n${out}`);
  }
  throw new Error('nats-server: no free port after 5 attempts');
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = new Socket();
    s.setTimeout(500, () => (s.destroy(), resolve(false)));
    s.once('error', () => resolve(false));
    s.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
  });
}

/** RSS of a process in KiB (/proc/<pid>/status VmRSS). */
export function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

export async function startBare(): Promise<Service> {
  const { port, proc } = await spawnListening('bare server', ['--import', 'tsx', 'bench/bare.ts'], { BARE_PORT: '0' }, 'bare listening');
  return { url: `http://127.0.0.1:${port}`, proc };
}

/** Redis's CPU so far (user + sys) in ms, from the text of `INFO cpu`. */
export function usedCpuMs(cpuInfo: string): number {
  const num = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(cpuInfo)![1]);
  return (num('used_cpu_user') + num('used_cpu_sys')) * 1000;
}

/** CPU milliseconds all threads of a process have run so far (Linux schedstat: nanoseconds, unlike stat's 10 ms ticks). */
export function cpuMs(pid: number): number {
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
  return ns / 1e6;
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs a node script as the load generator (its own process) and answers the JSON it prints last. */
export async function runLoad<T>(script: string, env: Record<string, string>): Promise<T> {
  const proc = track(spawn(process.execPath, ['--import', 'tsx', join('bench', script)], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] }));
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`${script} failed (code ${code}):\n${out}`);
  return JSON.parse(out.trim().split('\n').at(-1)!) as T;
}

export const machine = () => ({ cores: cpus().length, node: process.versions.node, load1: Number(loadavg()[0].toFixed(1)), date: new Date().toISOString() });

/** The one machine-readable line a scenario prints on stdout. */
export function report(line: Record<string, unknown>): void {
  console.log(JSON.stringify({ ...line, machine: machine() }));
}

/** Runs a bench main, always stopping its children; exits 1 on failure. */
export async function main(fn: () => Promise<void>): Promise<never> {
  let failed = false;
  try {
    await fn();
  } catch (e) {
    failed = true;
    console.error(`bench failed: ${(e as Error).stack ?? e}`);
  } finally {
    await cleanupAll();
  }
  process.exit(failed ? 1 : 0);
}

/** Sockets opened again because the service closed them before their welcome (`openWelcomed`). */
export const socketRetries = { count: 0 };

/**
 * Opens a socket on `/ws` and resolves once its welcome arrived; `onFrame` is told every later frame with the time
 * it arrived. A socket that closes before its welcome never opened (uWebSockets.js now and then closes one inside
 * an upgrade finished after an await; `docs/realtime.md`), so it is opened again, as a client does (3 tries).
 */
export function openWelcomed(httpUrl: string, key: string, label: string, onFrame: (f: any, at: number) => void, attempt = 1): Promise<WebSocket> {
  return new Promise<WebSocket>((resolve, reject) => {
    let welcomed = false;
    const ws = new WebSocket(httpUrl.replace(/^http/, 'ws') + '/ws', { headers: { authorization: `Bearer ${key}` } });
    const timer = setTimeout(() => reject(new Error(`${label} had no welcome in 60 s (state ${ws.readyState})`)), 60_000);
    ws.on('message', (data) => {
      const at = performance.now();
      const f = JSON.parse(data.toString());
      if (welcomed) return onFrame(f, at);
      if (f.type !== 'welcome') return;
      welcomed = true;
      clearTimeout(timer);
      resolve(ws);
    });
    ws.on('error', () => undefined);
    ws.on('close', (code) => {
      if (welcomed) return;
      clearTimeout(timer);
      if (attempt >= 3) return reject(new Error(`${label} closed (${code}) before its welcome, ${attempt} times`));
      socketRetries.count++;
      process.stderr.write(`${label} closed (${code}) before its welcome; opening it again\n`);
      setTimeout(() => openWelcomed(httpUrl, key, label, onFrame, attempt + 1).then(resolve, reject), 200);
    });
  });
}
