/**
 * Load process of bench/redis-ceiling.ts: the Redis store adapter (openRedisStore, exactly as the service
 * opens it) on CEIL_REDIS with prefix CEIL_PREFIX, committing the op list of one real emit (CEIL_TEMPLATE, a
 * JSON file: the ops the service committed for one POST /emit, captured by the parent) with a fresh signal
 * id each time, CEIL_CONCURRENCY commits in flight (the adapter's group commit batches those of one
 * event-loop turn into one script call, as in the service). Commits from CEIL_START_AT until CEIL_END_AT
 * (epoch ms) are counted. The journal is trimmed behind the writers (as the service's retention does) so
 * Redis memory stays bounded. Prints one JSON line.
 */
import { readFileSync } from 'node:fs';
import { openRedisStore } from '../src/store/redis.js';
import type { Op } from '../src/store/port.js';
import { intEnv, percentile } from './lib.js';

const template = readFileSync(process.env.CEIL_TEMPLATE!, 'utf8');
const templateId = process.env.CEIL_TEMPLATE_ID!;
const conc = intEnv('CEIL_CONCURRENCY', 64, 1);
const startAt = intEnv('CEIL_START_AT', Date.now(), 0);
const endAt = intEnv('CEIL_END_AT', Date.now() + 10_000, 0);
const me = intEnv('CEIL_PROC', 0, 0);
const store = await openRedisStore({ target: { url: process.env.CEIL_REDIS! }, prefix: process.env.CEIL_PREFIX!, connectTimeoutMs: 5000, queryTimeoutMs: 10_000 });

let n = 0;
/** A fresh id of the template id's length, unique across load processes. */
const freshId = () => ('Z' + me.toString(36).padStart(2, '0') + (n++).toString(36).padStart(10, '0')).padEnd(templateId.length, '0');
const opsFor = (id: string) => JSON.parse(template.split(templateId).join(id)) as Op[];

while (Date.now() < startAt) await new Promise((r) => setTimeout(r, 5));
let commits = 0;
let conflicts = 0;
const times: number[] = [];
let trimming = false;
const trim = setInterval(() => {
  if (trimming) return;
  trimming = true;
  void (async () => {
    for (const log of new Set(opsFor('x').filter((o): o is Extract<Op, { op: 'append' }> => o.op === 'append').map((o) => o.log))) {
      const last = await store.lastSeq(log);
      await store.trimLog(log, last - 10_000, 5000);
    }
  })().finally(() => (trimming = false));
}, 200);
await Promise.all(
  Array.from({ length: conc }, async () => {
    while (Date.now() < endAt) {
      const t = performance.now();
      const r = await store.commit(opsFor(freshId()));
      if (!r.ok) {
        conflicts++;
        continue;
      }
      times.push(performance.now() - t);
      commits++;
    }
  }),
);
clearInterval(trim);
const seconds = (Date.now() - startAt) / 1000;
await store.close();
const s = times.sort((a, b) => a - b);
console.log(JSON.stringify({ commits, conflicts, seconds: +seconds.toFixed(2), commit_p50_ms: +percentile(s, 50).toFixed(2), commit_p99_ms: +percentile(s, 99).toFixed(2) }));
process.exit(0);
