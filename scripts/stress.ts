/**
 * Stress: the timing-sensitive test files (realtime, end-to-end with the dashboard, federation and the
 * fault tests) run STRESS_RUNS times in a row while a CPU hog holds one core, so a test that waits on a
 * timing instead of an event fails here rather than once in a while in CI. The hog is started first and
 * stopped on every way out (done, failure, Ctrl-C, SIGTERM).
 *
 *   npm run test:stress                                  # 5 runs of the files below
 *   STRESS_RUNS=20 npm run test:stress                   # more runs
 *   npm run test:stress -- test/e2e/dashboard.test.ts    # other files (vitest's arguments)
 *
 * Every run runs to its end; one line per run and a summary name the failed files. Exits 1 when any run
 * failed. A failure found here is fixed at its cause (docs/reliability.md, Flaky tests), never retried.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** the files: every end-to-end file, and the API files on push, federation and faults */
function stressFiles(): string[] {
  const api = readdirSync(join(ROOT, 'test/api')).filter((f) => /^(realtime-|federation|memory-federation)/.test(f) && f.endsWith('.test.ts'));
  const e2e = readdirSync(join(ROOT, 'test/e2e')).filter((f) => f.endsWith('.test.ts'));
  return [...api.map((f) => `test/api/${f}`), ...e2e.map((f) => `test/e2e/${f}`)].sort();
}

function runs(): number {
  const raw = process.env.STRESS_RUNS ?? '';
  if (raw === '') return 5;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`STRESS_RUNS must be a positive integer, got "${raw}"`);
  return n;
}

let hog: ChildProcess | undefined;
let vitest: ChildProcess | undefined;

function stopAll(): void {
  for (const c of [vitest, hog]) if (c && c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** One core busy for the whole stress run: a child spinning, at normal priority. */
function startHog(): ChildProcess {
  const c = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
  c.on('exit', (code, signal) => {
    if (hog === c) console.error(`stress: the CPU hog ended early (${code ?? signal})`);
  });
  return c;
}

/** One vitest run of `files`; resolves its exit code and the files its summary named as failed. */
function runOnce(files: string[]): Promise<{ code: number; failed: string[] }> {
  return new Promise((resolve) => {
    const failed = new Set<string>();
    vitest = spawn(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', ...files], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NO_COLOR: '1' } });
    vitest.stdout!.on('data', (d: Buffer) => {
      process.stdout.write(d);
      for (const m of d.toString('utf8').replace(/\x1b\[[0-9;]*m/g, '').matchAll(/FAIL\s+(test\/\S+\.test\.ts)/g)) failed.add(m[1]);
    });
    vitest.on('exit', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), failed: [...failed] }));
  });
}

async function main(): Promise<number> {
  const n = runs();
  const args = process.argv.slice(2);
  const files = args.length ? args : stressFiles();
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => (stopAll(), process.exit(130)));
  process.on('exit', stopAll);
  hog = startHog();
  console.log(`stress: ${n} runs of ${files.length} files with a CPU hog (pid ${hog.pid}) holding one core`);
  const results: { run: number; code: number; failed: string[]; s: number }[] = [];
  for (let run = 1; run <= n; run++) {
    const t0 = Date.now();
    const r = await runOnce(files);
    results.push({ run, ...r, s: Math.round((Date.now() - t0) / 1000) });
    console.log(`stress: run ${run}/${n} ${r.code === 0 ? 'passed' : `FAILED (${r.failed.join(', ') || `exit ${r.code}`})`} in ${results[results.length - 1].s} s`);
  }
  const bad = results.filter((r) => r.code !== 0);
  console.log(`stress: ${n - bad.length}/${n} runs passed${bad.length ? `; failed: ${bad.map((r) => `run ${r.run} (${r.failed.join(', ') || `exit ${r.code}`})`).join('; ')}` : ''}`);
  return bad.length ? 1 : 0;
}

main().then(
  (code) => {
    stopAll();
    process.exit(code);
  },
  (err) => {
    console.error(err);
    stopAll();
    process.exit(1);
  },
);
