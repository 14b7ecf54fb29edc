/**
 * The suite's watchdogs (test/watchdog.ts, test/deadline-reporter.ts) on files that hold their worker: a loop
 * of awaits that never yields and a synchronous wait. Each is stopped within its limit, named, and shown with
 * what it runs, and killed with what it started; the run exits 1 instead of waiting for them.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';

/** Whether a process runs: one killed may stay a zombie until init reaps it, and that one is dead. */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] !== 'Z';
  } catch {
    return false;
  }
}

function vitest(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/watchdog/vitest.config.ts'], {
    env: { ...process.env, ...env, FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b));
  child.stderr.on('data', (b: Buffer) => (out += b));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

// limits of 8 s: a loaded machine may take seconds to start a worker and load a file, and the file must be
// holding by then for its samples to show it
it('a file that holds its worker is stopped, named and shown; the run fails', async () => {
  const { code, out } = await vitest({ TEST_FILE_LIMIT_S: '8' });
  expect(code).toBe(1);
  expect(out).toContain('[watchdog] test/fixtures/watchdog/spin.hold.ts still running after 8 s');
  expect(out).toMatch(/samples of one second:\n(.*\n)*? +\d+ +spinForever \(.*spin\.hold\.ts:\d+\)/);
  expect(out).toContain('[watchdog] test/fixtures/watchdog/sync.hold.ts still running after 8 s');
  expect(out).toContain('waits in native code');
  const sleeper = /its processes: .*\n(?:.*\n)*? +(\d+) \d+ \S+ \S+ \S+ sleep 30/.exec(out);
  expect(sleeper, out).not.toBeNull();
  // what the held file started is killed with its worker
  expect(alive(Number(sleeper![1]))).toBe(false);
}, 60_000);

it('a run past its deadline names the files still running and exits 1', async () => {
  const { code, out } = await vitest({ TEST_FILE_LIMIT_S: '60', TEST_RUN_LIMIT_S: '8' });
  expect(code).toBe(1);
  expect(out).toContain('[deadline] the run has not ended after 8 s; files still running:');
  expect(out).toMatch(/test\/fixtures\/watchdog\/(spin|sync)\.hold\.ts \(\d+ s\)/);
}, 60_000);
