/**
 * Fan-out: BENCH_SOCKETS WebSockets (BENCH_FANOUT_IDENTITIES identities, sockets spread over them), one
 * broadcast signal, the time until the last socket has it (median of BENCH_ROUNDS). On one instance per
 * backend, and with BENCH_REDIS_PAIR (default on) across two instances sharing one Redis, half the
 * sockets on each while the signal is emitted on the first. Load runs in bench/push-load.ts.
 *
 * Env: BENCH_BACKENDS (embedded,redis), BENCH_SOCKETS (5000), BENCH_FANOUT_IDENTITIES (50), BENCH_ROUNDS (5),
 * BENCH_REDIS_PAIR (1).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join as pathJoin } from 'node:path';
import { bootstrap } from '../test/helpers/client.js';
import { intEnv, main, scratchDir, report, runLoad, startService, stopChild, type Backend } from './lib.js';
import { agents } from './push-agents.js';

const BACKENDS = (process.env.BENCH_BACKENDS ?? 'embedded,redis').split(',') as Backend[];
const SOCKETS = intEnv('BENCH_SOCKETS', 5000, 1);
const IDENTITIES = intEnv('BENCH_FANOUT_IDENTITIES', 50, 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 5, 1);
const PAIR = (process.env.BENCH_REDIS_PAIR ?? '1') !== '0';
const TARGET_MS = 150;

async function run(label: string, urls: string[], adminKey: string, emitUrl: string): Promise<void> {
  const ids = await agents(emitUrl, adminKey, IDENTITIES, 'fan-' + randomBytes(3).toString('hex'));
  const list = Array.from({ length: SOCKETS }, (_, i) => ({ ...ids[i % ids.length], url: urls[i % urls.length] }));
  const file = pathJoin(await scratchDir('bench-fanout-'), 'sockets.json');
  writeFileSync(file, JSON.stringify(list));
  const r = await runLoad<{ last_receipt_p50_ms: number }>('push-load.ts', { PUSH_SOCKETS: file, PUSH_EMIT_URL: emitUrl, PUSH_ADMIN_KEY: adminKey, PUSH_MODE: 'fanout', PUSH_ROUNDS: String(ROUNDS) });
  report({ bench: 'fanout', target: label, instances: urls.length, ...r, goal: `last receipt < ${TARGET_MS} ms`, met: r.last_receipt_p50_ms < TARGET_MS });
}

await main(async () => {
  for (const backend of BACKENDS) {
    const prefix = 'bench' + randomBytes(4).toString('hex');
    const a = await startService(backend, backend === 'redis' ? { REDIS_PREFIX: prefix } : {});
    const root = await bootstrap(a.url, 'bench');
    await run(backend, [a.url], root.key, a.url);
    if (backend === 'redis' && PAIR) {
      const b = await startService('redis', { REDIS_PREFIX: prefix }, [], a.redisUrl);
      await run('redis, two instances', [a.url, b.url], root.key, a.url);
      await stopChild(b.proc);
    }
    await stopChild(a.proc);
  }
});
