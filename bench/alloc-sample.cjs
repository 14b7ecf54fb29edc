/**
 * Preload for a service a bench starts: samples every allocation (the ones GC has collected since too, which
 * `--heap-prof` leaves out) from BENCH_ALLOC_START_S to BENCH_ALLOC_STOP_S seconds after start, and writes
 * BENCH_ALLOC_DIR/alloc-<pid>.heapprofile.  `bench/profile-alloc.ts` summarises it.
 *   BENCH_NODE_ARGS="--require ./bench/alloc-sample.cjs" BENCH_BACKENDS=embedded BENCH_RATES=1000 npx tsx bench/push.ts
 */
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { tmpdir } = require('node:os');

const session = new Session();
session.connect();
const seconds = (name, fallback) => Number(process.env[name] ?? fallback) * 1000;
const sampling = { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
setTimeout(() => session.post('HeapProfiler.enable', () => session.post('HeapProfiler.startSampling', sampling)), seconds('BENCH_ALLOC_START_S', 12)).unref();
setTimeout(() => {
  session.post('HeapProfiler.stopSampling', (err, r) => {
    if (err) return console.error('allocation sampling failed', err);
    writeFileSync(join(process.env.BENCH_ALLOC_DIR ?? tmpdir(), `alloc-${process.pid}.heapprofile`), JSON.stringify(r.profile));
  });
}, seconds('BENCH_ALLOC_STOP_S', 22)).unref();
