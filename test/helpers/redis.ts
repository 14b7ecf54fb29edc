/**
 * Test helpers: a private, throwaway redis-server per caller (never the shared one on 6379), free ports and
 * temp dirs. Redis-backed tests are never skipped: a missing binary is a hard error.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, resolve } from 'node:path';

const NOT_FOUND = 'redis-server not found on PATH: install it (apt-get install redis-server); Redis-backed tests are never skipped';

export interface RedisServer {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** A TCP port that was free a moment ago (bind port 0 on 127.0.0.1, read it, close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (!addr || typeof addr === 'string') {
        srv.close();
        reject(new Error('could not determine a free port'));
        return;
      }
      const port = addr.port;
      srv.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/** A fresh directory under os.tmpdir(); the caller removes it. */
export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), prefix.endsWith('-') ? prefix : prefix + '-'));
}

function findOnPath(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, bin);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/** Sends PING over a raw socket; resolves true on +PONG. */
function pingOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = new Socket();
    let buf = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.once('error', () => done(false));
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
    sock.connect(port, '127.0.0.1', () => sock.write('PING\r\n'));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves true once the child has exited, false if it has not within `ms`. */
export function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** The RediSearch module the repository carries for Debian 12's redis-server (vendor/redis-modules/README.md). */
export const REDISEARCH_MODULE = resolve(import.meta.dirname, '../../vendor/redis-modules/redisearch.so');

const verified = new Map<string, Promise<void>>();

/** A module is loaded only when its sha256 is the one `SHA256SUMS` beside it records: a changed binary fails loudly, not oddly. */
export function verifyModule(path: string): Promise<void> {
  let v = verified.get(path);
  if (!v) verified.set(path, (v = checkSum(path)));
  return v;
}

async function checkSum(path: string): Promise<void> {
  const sums = await readFile(join(dirname(path), 'SHA256SUMS'), 'utf8');
  const line = sums.split('\n').find((l) => l.trim().endsWith(' ' + basename(path)));
  if (!line) throw new Error(`${path}: no line for it in SHA256SUMS beside it`);
  const want = line.trim().split(/\s+/)[0];
  const got = createHash('sha256').update(await readFile(path)).digest('hex');
  if (got !== want) throw new Error(`${path}: sha256 ${got}, SHA256SUMS records ${want}`);
}

/** Every `--loadmodule <path>` among redis-server's arguments, checked before the server starts. */
function verifyModules(args: string[]): Promise<unknown> {
  return Promise.all(args.flatMap((a, i) => (args[i - 1] === '--loadmodule' ? [verifyModule(a)] : [])));
}

export interface RedisOptions {
  /** extra redis-server arguments, e.g. `['--loadmodule', REDISEARCH_MODULE]` */
  args?: string[];
}

async function startOnce(bin: string, extra: string[]): Promise<RedisServer | { retry: string }> {
  const port = await freePort();
  if (port === 6379) return { retry: 'got port 6379' };
  const dir = await tempDir('redis-test');
  const child = spawn(
    bin,
    ['--save', '', '--appendonly', 'no', '--bind', '127.0.0.1', '--port', String(port), '--dir', dir, ...extra],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (d) => (output += d.toString('utf8')));
  child.stderr?.on('data', (d) => (output += d.toString('utf8')));
  let spawnError: Error | undefined;
  child.once('error', (e) => (spawnError = e));

  const cleanup = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      if (!(await waitExit(child, 5000))) {
        child.kill('SIGKILL');
        await waitExit(child, 2000);
      }
    }
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (spawnError) {
      await cleanup();
      if ((spawnError as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(NOT_FOUND);
      throw spawnError;
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      await cleanup();
      // most likely lost a race for the port; let the caller try another one
      if (/address already in use/i.test(output)) return { retry: output };
      throw new Error(`redis-server exited early (code ${child.exitCode}, signal ${child.signalCode}):\n${output}`);
    }
    if (await pingOnce(port)) {
      let stopped: Promise<void> | undefined;
      return {
        url: `redis://127.0.0.1:${port}`,
        port,
        stop: () => (stopped ??= cleanup()),
      };
    }
    await sleep(50);
  }
  await cleanup();
  throw new Error(`redis-server on port ${port} did not answer PING within 5 s:\n${output}`);
}

/** Starts a private redis-server on a free port with persistence off; `stop()` kills it and removes its dir. */
export async function startRedis(opts: RedisOptions = {}): Promise<RedisServer> {
  const bin = findOnPath('redis-server');
  if (!bin) throw new Error(NOT_FOUND);
  await verifyModules(opts.args ?? []);
  let last = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    const r = await startOnce(bin, opts.args ?? []);
    if (!('retry' in r)) return r;
    last = r.retry;
  }
  throw new Error(`could not start redis-server after 5 attempts:\n${last}`);
}

/**
 * A redis-server a fault test owns: append-only file with fsync always (a restart keeps every answered
 * write), killed, paused, resumed and started again on the same port and data.
 */
export class OwnRedis {
  private proc: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private dir: string,
  ) {}

  static async start(): Promise<OwnRedis> {
    const bin = findOnPath('redis-server');
    if (!bin) throw new Error(NOT_FOUND);
    const r = new OwnRedis(await freePort(), await tempDir('redis-own'));
    await r.up();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc !== undefined;
  }

  /** Starts redis-server on this port and data dir; resolves once it answers PING. */
  async up(): Promise<void> {
    const args = ['--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--bind', '127.0.0.1', '--port', String(this.port), '--dir', this.dir];
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    this.proc = proc;
    const deadline = Date.now() + 10_000;
    while (!(await pingOnce(this.port))) {
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not come up (exit ${proc.exitCode})`);
      await sleep(50);
    }
  }

  /** SIGKILL: no shutdown save, connections cut at once. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p) return;
    this.proc = undefined;
    p.kill('SIGCONT');
    p.kill('SIGKILL');
    await waitExit(p, 5000);
  }

  signal(sig: 'SIGSTOP' | 'SIGCONT'): void {
    this.proc?.kill(sig);
  }

  async stop(): Promise<void> {
    await this.kill();
    await rm(this.dir, { recursive: true, force: true });
  }
}
