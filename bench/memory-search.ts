/**
 * Memory search (issue 15 item 5): BENCH_MEMORIES random memories of BENCH_MEMORY_DIM dimensions upserted
 * through the vector port, then BENCH_MEMORY_QUERIES k=10 queries: p50/p99 query time and recall@10
 * against exact (brute-force) search. Embedded: the in-process usearch HNSW index the service opens without
 * Redis (target: p99 < 20 ms with recall@10 >= 0.95). Redis: the RediSearch index in a private redis-server
 * with vendor/redis-modules/redisearch.so loaded, at BENCH_MEMORIES_REDIS (reported, no target). Each
 * index is built and queried in its own load process (bench/memory-search-load.ts); the exact search is the
 * baseline of recall, computed in the same run over the same vectors.
 *
 * Env: BENCH_MEMORIES (100000; 0 skips embedded), BENCH_MEMORIES_REDIS (20000; 0 skips Redis), BENCH_MEMORY_DIM (384),
 * BENCH_MEMORY_QUERIES (1000), BENCH_MEMORY_RAW (off; e.g. "16:64:128,32:200:512": the usearch library alone
 * at connectivity:expansion_add:expansion_search over the same vectors, a diagnostic of the embedded line),
 * BENCH_MEMORY_DATA (random; "latent" = vectors of low intrinsic dimension, see memory-search-load.ts).
 */
import { REDISEARCH_MODULE, startRedis } from '../test/helpers/redis.js';
import { intEnv, main, onCleanup, report, runLoad } from './lib.js';

const N = intEnv('BENCH_MEMORIES', 100_000, 0);
const NR = intEnv('BENCH_MEMORIES_REDIS', 20_000, 0);
const DIM = intEnv('BENCH_MEMORY_DIM', 384, 1);
const Q = intEnv('BENCH_MEMORY_QUERIES', 1000, 1);

interface Result {
  p99_ms: number;
  recall_at_10: number;
  [k: string]: unknown;
}

await main(async () => {
  const env = { MEM_DIM: String(DIM), MEM_QUERIES: String(Q), MEM_DATA: process.env.BENCH_MEMORY_DATA ?? 'random' };
  const goal = 'p99 < 20 ms with recall@10 >= 0.95 at 100,000 x 384';
  if (N > 0) {
    process.stderr.write(`memory search: embedded, ${N} memories\n`);
    const emb = await runLoad<Result>('memory-search-load.ts', { ...env, MEM_MODE: 'embedded', MEM_N: String(N), MEM_RAW: process.env.BENCH_MEMORY_RAW ?? '' });
    report({ bench: 'memory-search', target: 'embedded (usearch HNSW via openEmbeddedVectorIndex)', baseline: 'exact brute-force search (recall)', ...emb, goal, met: N >= 100_000 && DIM >= 384 && emb.p99_ms < 20 && emb.recall_at_10 >= 0.95 });
  }
  if (NR > 0) {
    const redis = await startRedis({ args: ['--loadmodule', REDISEARCH_MODULE] });
    onCleanup(() => redis.stop());
    process.stderr.write(`memory search: redis (RediSearch), ${NR} memories\n`);
    const red = await runLoad<Result>('memory-search-load.ts', { ...env, MEM_MODE: 'redis', MEM_N: String(NR), MEM_REDIS: redis.url });
    report({ bench: 'memory-search', target: 'redis (RediSearch 2.6 via openRedisVectorIndex: HNSW field, namespace pre-filter)', baseline: 'exact brute-force search (recall)', ...red, goal: `reported (embedded's goal for comparison: ${goal})`, met: null });
  }
});
