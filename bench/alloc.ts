/**
 * Bytes allocated per request by the service (sampled by V8's allocation sampler, the objects the collector
 * has taken since included): a figure that barely moves with the machine's load, unlike CPU time, so small
 * changes to a hot path show in it on a noisy machine.
 *   npx tsx bench/alloc.ts        # embedded, GET /health and POST /emit, 20,000 each
 * Env: BENCH_REQUESTS (20000), BENCH_BACKENDS (embedded), BENCH_CPU_ROUTES (health,emit), BENCH_ALLOC_TOP (0:
 * how many of the largest allocating functions to print on stderr). Prints one JSON line per (route, backend).
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { intEnv, main, report, runLoad, scratchDir, startService, stopChild, type Backend } from './lib.js';

const N = intEnv('BENCH_REQUESTS', 20000, 100);
const TOP = intEnv('BENCH_ALLOC_TOP', 0);
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'embedded').split(',') as Backend[];
const ROUTES = (process.env.BENCH_CPU_ROUTES ?? 'health,emit').split(',') as ('health' | 'emit')[];
const EMIT_BODY = JSON.stringify({ signal_type: 'pulse', content: 'bench' });

interface Node {
  callFrame: { functionName: string; url: string };
  selfSize: number;
  children: Node[];
}

function summed(file: string): { total: number; top: [string, number][] } {
  const self = new Map<string, number>();
  let total = 0;
  (function walk(x: Node) {
    total += x.selfSize;
    const k = `${x.callFrame.functionName || '(anonymous)'} ${x.callFrame.url.replace(/.*node_modules\//, 'npm:').replace(/.*\/(src|actors)\//, '$1/')}`;
    self.set(k, (self.get(k) ?? 0) + x.selfSize);
    x.children.forEach(walk);
  })((JSON.parse(readFileSync(file, 'utf8')) as { head: Node }).head);
  return { total, top: [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP) };
}

await main(async () => {
  for (const backend of BACKENDS) {
    for (const route of ROUTES) {
      const dir = await scratchDir('bench-alloc-');
      const svc = await startService(backend, { BENCH_ALLOC_DIR: dir, BENCH_ALLOC_ON: 'signal', BENCH_ALLOC_INTERVAL: '1024' }, ['--require', './bench/alloc-sample.cjs']);
      const { key } = await bootstrap(svc.url, 'bench');
      const env = { LOAD_URL: `${svc.url}/${route}`, LOAD_CONNECTIONS: '50', ...(route === 'emit' ? { LOAD_METHOD: 'POST', LOAD_BODY: EMIT_BODY, LOAD_KEY: key } : {}) };
      await runLoad('http-load.ts', { ...env, LOAD_REQUESTS: String(Math.ceil(N / 5)) }); // warm-up (JIT)
      svc.proc.kill('SIGUSR2');
      await runLoad('http-load.ts', { ...env, LOAD_REQUESTS: String(N) });
      const written = waitLine(svc.proc.stdout!, 'alloc written');
      svc.proc.kill('SIGUSR2');
      await written;
      const { total, top } = summed(join(dir, `alloc-${svc.proc.pid}.heapprofile`));
      for (const [k, v] of top) console.error(`${String(Math.round(v / N)).padStart(7)} B  ${k}`);
      report({ bench: 'alloc', route, target: backend, requests: N, bytes_per_req: Math.round(total / N) });
      await stopChild(svc.proc);
    }
  }
});

async function waitLine(stream: NodeJS.ReadableStream, msg: string): Promise<void> {
  let buf = '';
  for (;;) {
    const [d] = (await once(stream, 'data')) as [Buffer];
    buf += d.toString();
    if (buf.includes(`"msg":"${msg}"`)) return;
  }
}
