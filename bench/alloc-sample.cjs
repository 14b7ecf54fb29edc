/**
 * Preload for a service a bench starts: samples every allocation (the ones GC has collected since too, which
 * `--heap-prof` leaves out) over a window, and writes BENCH_ALLOC_DIR/alloc-<pid>.heapprofile.
 * `bench/profile-alloc.ts` summarises it. The window is, by default, BENCH_ALLOC_START_S to BENCH_ALLOC_STOP_S
 * seconds after start; with BENCH_ALLOC_ON=signal it is from one SIGUSR2 to the next, and the file written is
 * announced on stdout as `{"msg":"alloc written"}` (`bench/alloc.ts`). BENCH_ALLOC_INTERVAL: bytes between
 * samples (8192).
 *   BENCH_NODE_ARGS="--require ./bench/alloc-sample.cjs" BENCH_BACKENDS=embedded BENCH_RATES=1000 npx tsx bench/push.ts
 */
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { tmpdir } = require('node:os');

const session = new Session();
session.connect();
const seconds = (name, fallback) => Number(process.env[name] ?? fallback) * 1000;
const sampling = { samplingInterval: Number(process.env.BENCH_ALLOC_INTERVAL ?? 8192), includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
const start = () => session.post('HeapProfiler.enable', () => session.post('HeapProfiler.startSampling', sampling));
const stop = (written) =>
  session.post('HeapProfiler.stopSampling', (err, r) => {
    if (err) return console.error('allocation sampling failed', err);
    writeFileSync(join(process.env.BENCH_ALLOC_DIR ?? tmpdir(), `alloc-${process.pid}.heapprofile`), JSON.stringify(r.profile));
    written?.();
  });

if (process.env.BENCH_ALLOC_ON === 'signal') {
  let on = false;
  process.on('SIGUSR2', () => {
    if (on) return stop(() => process.stdout.write('{"msg":"alloc written"}\n'));
    on = true;
    start();
  });
} else {
  setTimeout(start, seconds('BENCH_ALLOC_START_S', 12)).unref();
  setTimeout(stop, seconds('BENCH_ALLOC_STOP_S', 22)).unref();
}
