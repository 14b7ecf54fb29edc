/**
 * The disk's flush latency where DATA_DIR would live: BENCH_FSYNCS (2000) 4 KiB writes, each followed by
 * fdatasync, as LMDB's commits are; p50/p99/p99.9/max. The embedded push tail waits for one or two of these.
 *   npx tsx bench/fsync.ts          (TMPDIR picks the file system)
 */
import { closeSync, fdatasyncSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { intEnv, main, report, scratchDir } from './lib.js';

const N = intEnv('BENCH_FSYNCS', 2000, 10);

await main(async () => {
  const fd = openSync(join(await scratchDir('bench-fsync-'), 'probe'), 'w');
  const page = Buffer.alloc(4096, 1);
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    writeSync(fd, page, 0, page.length, (i % 256) * 4096);
    const t = performance.now();
    fdatasyncSync(fd);
    ms.push(performance.now() - t);
  }
  closeSync(fd);
  ms.sort((a, b) => a - b);
  const q = (p: number) => +ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(3);
  report({ bench: 'fsync', dir: process.env.TMPDIR ?? '/tmp', fsyncs: N, p50_ms: q(0.5), p99_ms: q(0.99), p999_ms: q(0.999), max_ms: q(1) });
});
