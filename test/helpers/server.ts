/**
 * Starts the real service for API tests: in-process (startService on a free port) or as a child process
 * (`tsx src/main.ts`) for restart and multi-instance tests. Every Redis-backed server gets its own prefix.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startService, type Service } from '../../src/app.js';
import { readConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startRedis, tempDir } from './redis.js';

export type Backend = 'embedded' | 'redis';
export const BACKENDS: Backend[] = ['embedded', 'redis'];

export interface BackendEnv {
  backend: Backend;
  /** env for a server on this backend; the same env (same data dir / same Redis prefix) restarts onto the same data */
  env(extra?: Record<string, string>): Promise<Record<string, string>>;
  stop(): Promise<void>;
}

/** One per test file and backend: a temp data dir, or a redis-server started for this file. */
export async function backendEnv(backend: Backend): Promise<BackendEnv> {
  if (backend === 'embedded') {
    return {
      backend,
      env: async (extra = {}) => ({ DATA_DIR: await tempDir('svc-data-'), ...extra }),
      stop: async () => {},
    };
  }
  const redis = await startRedis();
  return {
    backend,
    env: async (extra = {}) => ({ REDIS_URL: redis.url, REDIS_PREFIX: 't' + randomBytes(6).toString('hex'), ...extra }),
    stop: () => redis.stop(),
  };
}

export async function startServer(env: Record<string, string>): Promise<Service> {
  const config = readConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', TIMER_POLL_MS: '20', ...env });
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

/** The service as its own process, exactly as `npm start` runs it. */
export async function spawnServer(env: Record<string, string>): Promise<ChildServer> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: childEnv({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', TIMER_POLL_MS: '20', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`server did not start in 20 s: ${stderr}`)), 20_000);
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
