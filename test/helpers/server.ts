/**
 * Starts the real service for API tests: in-process (startService on a free port) or as a child process
 * (`tsx src/main.ts`) for restart and multi-instance tests. Every Redis-backed server gets its own prefix.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, expect } from 'vitest';
import { startService, type Service } from '../../src/app.js';
import { readConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startRedis, tempDir, type RedisOptions } from './redis.js';
import { startRedisCluster } from './redis-cluster.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';

export type Backend = 'embedded' | 'redis' | 'cluster';
export const BACKENDS: Backend[] = ['embedded', 'redis'];
/** the backends the core scenarios (skeleton, routing, inbox, push) also run on: a 3+3 Redis Cluster too */
export const CORE_BACKENDS: Backend[] = [...BACKENDS, 'cluster'];

export interface BackendEnv {
  backend: Backend;
  /** env for a server on this backend; the same env (same data dir / same Redis prefix) restarts onto the same data */
  env(extra?: Record<string, string>): Promise<Record<string, string>>;
  /** Stops the backend's redis-server, or removes every data dir `env()` handed out. */
  stop(): Promise<void>;
}

/** One per test file and backend: temp data dirs (removed by `stop()`), or a redis-server started for this file. */
export async function backendEnv(backend: Backend, redisOptions?: RedisOptions): Promise<BackendEnv> {
  if (backend === 'embedded') {
    const dirs: string[] = [];
    return {
      backend,
      env: async (extra = {}) => {
        const dir = await tempDir('svc-data-');
        dirs.push(dir);
        return { DATA_DIR: dir, ...extra };
      },
      stop: async () => {
        await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
      },
    };
  }
  if (backend === 'cluster') {
    const cluster = await startRedisCluster();
    return {
      backend,
      env: async (extra = {}) => ({ REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: 't' + randomBytes(6).toString('hex'), ...extra }),
      stop: () => cluster.stop(),
    };
  }
  const redis = await startRedis(redisOptions);
  return {
    backend,
    env: async (extra = {}) => ({ REDIS_URL: redis.url, REDIS_PREFIX: 't' + randomBytes(6).toString('hex'), ...extra }),
    stop: () => redis.stop(),
  };
}

export interface Servers {
  /** The backend env of this describe (set once its beforeAll has run). */
  readonly backend: BackendEnv;
  /** A fresh env (new data dir / Redis prefix) on this backend, for servers the test starts itself. */
  env(extra?: Record<string, string>): Promise<Record<string, string>>;
  /** An in-process server on a fresh env; closed in this describe's afterAll unless closed before (close is idempotent). */
  start(extra?: Record<string, string>): Promise<Started>;
  /** Another in-process instance on the same data as `s` (two instances on one Redis), closed like `start()`'s. */
  beside(s: Started): Promise<Started>;
}

/** A server `Servers.start()` made, with the env it runs on (for a script or a restart on the same data). */
export interface Started extends Service {
  env: Record<string, string>;
}

/**
 * The per-describe fixture of the API and e2e tests: call it in a `describe` body. Its beforeAll sets up the
 * backend; its afterAll closes every server `start()` made (also after a failed test) and then stops the
 * backend, which removes the data dirs. Hooks a describe registers after it run inside it: before hooks after
 * its beforeAll, after hooks before its afterAll.
 */
export function serversOn(backend: Backend, redisOptions?: RedisOptions): Servers {
  let be: BackendEnv | undefined;
  const started: Started[] = [];
  beforeAll(async () => {
    be = await backendEnv(backend, redisOptions);
  });
  afterAll(async () => {
    try {
      await Promise.all(started.splice(0).map((s) => s.close()));
    } finally {
      await be?.stop();
    }
  });
  const current = (): BackendEnv => {
    if (!be) throw new Error(`serversOn(${backend}): used before its beforeAll ran`);
    return be;
  };
  return {
    get backend() {
      return current();
    },
    env: (extra) => current().env(extra),
    async start(extra) {
      return track(await current().env(extra));
    },
    beside: (s) => track(s.env),
  };
  async function track(env: Record<string, string>): Promise<Started> {
    const svc = await startServer(env);
    let closing: Promise<void> | undefined;
    const once: Started = { ...svc, env, close: () => (closing ??= svc.close()) };
    started.push(once);
    return once;
  }
}

/** Tests burst past the production defaults (600 a minute per key, 60 per address on public routes); rate-limit tests set them themselves. */
const TEST_DEFAULTS = { PORT: '0', HOST: '127.0.0.1', TIMER_POLL_MS: '20', RATE_LIMIT_DEFAULT: '0', RATE_LIMIT_PUBLIC: '0' };

export async function startServer(env: Record<string, string>): Promise<Service> {
  const config = readConfig({ ...TEST_DEFAULTS, LOG_LEVEL: 'silent', ...env });
  return startService(config, createLogger(config.logLevel));
}

/** The environment for a child process: ours, less what the test runner adds (vite sets BASE_URL="/"). */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const { BASE_URL: _b, ...rest } = process.env;
  return { ...rest, ...env };
}

export interface ChildServer {
  url: string;
  port: number;
  proc: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const START_TIMEOUT_MS = 60_000;

/** The service as its own process, exactly as `npm start` runs it (with `nodeArgs` given to node before it). */
export async function spawnServer(env: Record<string, string>, nodeArgs: string[] = []): Promise<ChildServer> {
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts'], {
    env: childEnv({ ...TEST_DEFAULTS, LOG_LEVEL: 'info', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    // generous: a loaded 2-core machine starts a tsx process slowly; a child that never came up is killed, not leaked
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start in ${START_TIMEOUT_MS / 1000} s: ${stderr}`));
    }, START_TIMEOUT_MS);
    proc.stdout!.on('data', (d) => {
      buf += d;
      const m = /"port":(\d+).*"msg":"service listening"/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}: ${stderr}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill(signal);
      }),
  };
}

export interface ChildServers {
  /** A fresh env on this describe's backend: the processes a test starts on it share their data. */
  env(extra?: Record<string, string>): Promise<Record<string, string>>;
  start(env: Record<string, string>): Promise<ChildServer>;
  /** A webhook receiver, closed after the describe. */
  receiver(): Promise<Receiver>;
  stop(s: ChildServer): Promise<void>;
  /** SIGKILL: the process ends without its own shutdown (checked). */
  kill(s: ChildServer): Promise<void>;
  /**
   * Stops `s` before `dueMs` (checked, `what` names the time), waits for the clock to pass it, and starts the
   * next process on the same env: a timer that came due while no process ran.
   */
  restartPast(s: ChildServer, env: Record<string, string>, dueMs: number, what: string): Promise<ChildServer>;
}

/**
 * The per-describe fixture of restart, crash and multi-instance tests (call it in a `describe` body): child
 * processes on one backend, every one still running stopped after the describe with `stopWith`.
 */
export function childServersOn(backend: Backend, stopWith: NodeJS.Signals = 'SIGTERM'): ChildServers {
  const servers = serversOn(backend);
  const running: ChildServer[] = [];
  const receivers: Receiver[] = [];
  afterAll(async () => {
    await Promise.all(running.splice(0).map((s) => s.stop(stopWith)));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  const forget = (s: ChildServer) => {
    if (running.includes(s)) running.splice(running.indexOf(s), 1);
  };
  const fleet: ChildServers = {
    env: (extra) => servers.env(extra),
    async start(env) {
      const s = await spawnServer(env);
      running.push(s);
      return s;
    },
    async receiver() {
      const rx = await startReceiver();
      receivers.push(rx);
      return rx;
    },
    async stop(s) {
      forget(s);
      await s.stop();
    },
    async kill(s) {
      forget(s);
      const exited = new Promise<NodeJS.Signals | null>((resolve) => s.proc.once('exit', (_c, signal) => resolve(signal)));
      s.proc.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
    },
    async restartPast(s, env, dueMs, what) {
      await fleet.stop(s);
      expect(Date.now(), `the process stopped before ${what}`).toBeLessThan(dueMs);
      // the clock must pass the due time with no process up: nothing to wait on but the time itself
      await new Promise((r) => setTimeout(r, Math.max(0, dueMs + 500 - Date.now())));
      return fleet.start(env);
    },
  };
  return fleet;
}
