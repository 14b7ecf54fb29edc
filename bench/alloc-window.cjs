/**
 * Preload for `bench/alloc.ts`: SIGUSR2 starts sampling every allocation (the ones collected since included),
 * the next SIGUSR2 stops it and writes BENCH_ALLOC_DIR/alloc-<pid>.heapprofile, then prints
 * `{"msg":"alloc written"}` on stdout. The window is exactly the load the bench sends between the signals.
 */
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { tmpdir } = require('node:os');

const session = new Session();
session.connect();
const sampling = { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
let on = false;
process.on('SIGUSR2', () => {
  if (!on) {
    on = true;
    return session.post('HeapProfiler.enable', () => session.post('HeapProfiler.startSampling', sampling));
  }
  session.post('HeapProfiler.stopSampling', (err, r) => {
    if (err) return console.error('allocation sampling failed', err);
    writeFileSync(join(process.env.BENCH_ALLOC_DIR ?? tmpdir(), `alloc-${process.pid}.heapprofile`), JSON.stringify(r.profile));
    process.stdout.write('{"msg":"alloc written"}\n');
  });
});
