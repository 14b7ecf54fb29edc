import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AppError } from '../../src/errors.js';
import { createLogger, OUTAGE_LOG_WINDOW_MS } from '../../src/log.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function capture() {
  const lines: any[] = [];
  const log = createLogger('warn', { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { log, lines };
}

describe('logger during a store outage', () => {
  afterEach(() => void vi.useRealTimers());

  it('logs an outage error once per message per window, then says how many it stood for', () => {
    // the window runs on the monotonic clock (a wall clock stepped back must not silence the log for the step)
    vi.useFakeTimers({ toFake: ['performance'] });
    const { log, lines } = capture();
    for (let i = 0; i < 100; i++) log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'timer poll failed');
    for (let i = 0; i < 10; i++) log.warn({ err: new AppError('DB_QUERY_TIMEOUT') }, 'timer poll failed');
    log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'push hub catch-up failed');
    expect(lines.map((l) => [l.msg, l.err.code])).toEqual([
      ['timer poll failed', 'DB_CONNECT_FAILED'],
      ['timer poll failed', 'DB_QUERY_TIMEOUT'],
      ['push hub catch-up failed', 'DB_CONNECT_FAILED'],
    ]);
    vi.advanceTimersByTime(OUTAGE_LOG_WINDOW_MS);
    log.warn({ err: new AppError('DB_CONNECT_FAILED') }, 'timer poll failed');
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatchObject({ msg: 'timer poll failed', suppressed: 99, err: { code: 'DB_CONNECT_FAILED' } });
  });

  it('never holds back any other error', () => {
    const { log, lines } = capture();
    for (let i = 0; i < 20; i++) log.error({ err: new Error('boom') }, 'unhandled error');
    for (let i = 0; i < 20; i++) log.warn({ err: new AppError('SIGNAL_NOT_FOUND') }, 'timer event failed');
    expect(lines).toHaveLength(40);
  });
});

describe('the default destination (stdout)', () => {
  // a child process: the lines of one turn are handed to stdout together, so an exit before that turn ends must still write them
  const run = (script: string) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`exit ${code}`))));
    });
  const lines = (out: string) => out.trim().split('\n').map((l) => JSON.parse(l));

  it('writes every line, request lines and others in the order logged, when the process exits in the same turn', async () => {
    const out = await run(`
      import { createLogger, requestLogger } from './src/log.ts';
      const log = createLogger('info');
      const request = requestLogger(log);
      for (let i = 0; i < 500; i++) {
        request({ requestId: 'req_' + i, method: 'GET', route: '/health', status: 200, ms: 1 });
        log.info({ i }, 'other');
      }
      process.exit(0);
    `);
    const got = lines(out);
    expect(got).toHaveLength(1000);
    got.forEach((l, n) => expect(n % 2 === 0 ? l.request_id : l.i).toBe(n % 2 === 0 ? `req_${n / 2}` : (n - 1) / 2));
  });

  it('writes the lines of a process that ends by itself, with nothing left to do', async () => {
    const out = await run(`
      import { createLogger } from './src/log.ts';
      const log = createLogger('info');
      for (let i = 0; i < 3; i++) log.info({ i }, 'line');
    `);
    expect(lines(out).map((l) => l.i)).toEqual([0, 1, 2]);
  });

  it('hands the lines of a running process over without waiting for more or for an exit', async () => {
    // the child logs three lines, then only keeps running: they must arrive while it does
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `
      import { createLogger } from './src/log.ts';
      const log = createLogger('info');
      for (let i = 0; i < 3; i++) log.info({ i }, 'line');
      setInterval(() => {}, 60_000);
    `], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.split('\n').length > 3) resolve();
        });
        child.on('error', reject);
        child.on('close', (code) => reject(new Error(`exited (${code}) before writing its lines: ${out}`)));
      });
      expect(lines(out).map((l) => l.i)).toEqual([0, 1, 2]);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
