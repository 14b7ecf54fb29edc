/**
 * A test file that outlives TEST_FILE_LIMIT_S is stopped with what it was doing. Vitest's test and hook
 * timeouts are timers on the file's own event loop, so a loop that never yields (a promise chain that resolves
 * without I/O, a synchronous wait) holds its worker, and the run, forever. A thread of its own outlives that
 * (test/watchdog-thread.cjs): it names the file, samples the main thread and pauses it through the inspector
 * for its stack, lists the processes the file started and kills them with the worker, so the run fails at once
 * with the cause in its output.
 */
import { Worker } from 'node:worker_threads';
import { afterAll } from 'vitest';

/** about ten times the slowest file (68 s in a full suite on a loaded 2-core machine) */
const LIMIT_S = Number(process.env.TEST_FILE_LIMIT_S ?? 600);

/** the file this worker runs: vitest's worker state, read when the setup file loads */
const file = (globalThis as { __vitest_worker__?: { filepath?: string } }).__vitest_worker__?.filepath ?? 'a test file';
const watch = new Worker(new URL('./watchdog-thread.cjs', import.meta.url), { workerData: { limitS: LIMIT_S, file: file.replace(process.cwd() + '/', '') } });
watch.unref();

afterAll(async () => {
  await watch.terminate();
});
