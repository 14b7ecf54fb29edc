/**
 * Load process of bench/memory-search.ts: builds the vector index the service uses and queries it.
 * MEM_MODE "embedded": openEmbeddedVectorIndex (usearch HNSW + minisearch, in this process), exactly as
 * src/vector/index.ts opens it without Redis. MEM_MODE "redis": openRedisVectorIndex against MEM_REDIS
 * (a redis-server with RediSearch loaded). MEM_N random unit vectors of MEM_DIM dimensions (seeded) are
 * upserted in batches of 1000 through the port, all in one namespace; then MEM_QUERIES random unit queries,
 * one at a time, k = 10, each timed around `knn`; recall@10 is measured against an exact (brute-force,
 * plain JS) search over the same vectors, computed after the timed queries. MEM_RAW (see below) adds the
 * usearch library alone at given parameters. Prints one JSON line.
 */
import { intEnv } from './lib.js';
import { openEmbeddedVectorIndex } from '../src/vector/embedded.js';
import { openRedisVectorIndex } from '../src/vector/redis.js';
import type { VectorDoc, VectorIndex } from '../src/vector/port.js';

const N = intEnv('MEM_N', 100_000, 1);
const DIM = intEnv('MEM_DIM', 384, 1);
const Q = intEnv('MEM_QUERIES', 1000, 1);
const K = 10;
const mode = process.env.MEM_MODE ?? 'embedded';

// xorshift32 + Box-Muller: the same vectors every run
let seed = intEnv('MEM_SEED', 12345, 1) >>> 0 || 1;
const rnd = () => {
  seed ^= seed << 13;
  seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  seed >>>= 0;
  return (seed + 0.5) / 4294967296;
};
const gauss = () => Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd());
function unit(into: Float32Array, off: number): void {
  let s = 0;
  for (let i = 0; i < DIM; i++) s += (into[off + i] = gauss()) ** 2;
  const n = Math.sqrt(s);
  for (let i = 0; i < DIM; i++) into[off + i] /= n;
}

/*
 * MEM_DATA "random" (default): independent Gaussian directions, the worst case for any graph index (every
 * point is almost equally far from every other). "latent": each vector is a fixed random 384 x 16 map of a
 * 16-dimensional Gaussian point plus 10 % noise, normalised: data of low intrinsic dimension, closer to
 * what text embeddings look like. Queries are drawn the same way as the data.
 */
const DATA = process.env.MEM_DATA ?? 'random';
const LATENT = 16;
const basis = new Float32Array(DIM * LATENT);
for (let i = 0; i < basis.length; i++) basis[i] = gauss();
function draw(into: Float32Array, off: number): void {
  if (DATA !== 'latent') return unit(into, off);
  const z = Array.from({ length: LATENT }, gauss);
  let s = 0;
  for (let d = 0; d < DIM; d++) {
    let x = 0.1 * Math.sqrt(LATENT) * gauss();
    for (let j = 0; j < LATENT; j++) x += basis[d * LATENT + j] * z[j];
    s += (into[off + d] = x) ** 2;
  }
  const n = Math.sqrt(s);
  for (let d = 0; d < DIM; d++) into[off + d] /= n;
}
const data = new Float32Array(N * DIM);
for (let i = 0; i < N; i++) draw(data, i * DIM);
const queries = new Float32Array(Q * DIM);
for (let i = 0; i < Q; i++) draw(queries, i * DIM);
const idOf = (i: number) => 'mem' + String(i).padStart(7, '0');

const index: VectorIndex =
  mode === 'redis' ? await openRedisVectorIndex({ url: process.env.MEM_REDIS!, prefix: 'bench', dim: DIM }) : openEmbeddedVectorIndex(DIM);

const rssBefore = process.memoryUsage().rss;
const t0 = performance.now();
for (let i = 0; i < N; i += 1000) {
  const docs: VectorDoc[] = [];
  for (let j = i; j < Math.min(N, i + 1000); j++)
    docs.push({ id: idOf(j), namespace: 'bench', entity: null, category: null, memory_type: 'fact', tags: [], content: `memory ${j}`, vector: data.subarray(j * DIM, (j + 1) * DIM) });
  await index.upsert(docs);
  if (i % 20_000 === 0) process.stderr.write(`  ${mode}: ${i}/${N} upserted\n`);
}
// RediSearch indexes in the background on later versions: wait until every document is searchable
for (let tries = 0; (await index.size()) < N; tries++) {
  if (tries > 600) throw new Error(`index holds ${await index.size()} of ${N} after 60 s`);
  await new Promise((r) => setTimeout(r, 100));
}
const insertS = (performance.now() - t0) / 1000;
const rssAfter = process.memoryUsage().rss;

const filter = { namespaces: ['bench'] };
const times: number[] = [];
const found: string[][] = [];
for (let q = 0; q < Q; q++) {
  const v = queries.subarray(q * DIM, (q + 1) * DIM);
  const t = performance.now();
  const hits = await index.knn(v, filter, K);
  times.push(performance.now() - t);
  found.push(hits.map((h) => h.id));
}

// exact search: every stored vector, cosine = dot (all unit length), top K
let hitsTotal = 0;
const top = new Float64Array(K);
const exact = new Int32Array(Q * K);
for (let q = 0; q < Q; q++) {
  const topI = exact.subarray(q * K, (q + 1) * K);
  top.fill(-Infinity);
  topI.fill(-1);
  const qo = q * DIM;
  for (let i = 0; i < N; i++) {
    let s = 0;
    const o = i * DIM;
    for (let d = 0; d < DIM; d++) s += queries[qo + d] * data[o + d];
    if (s <= top[K - 1]) continue;
    let p = K - 1;
    while (p > 0 && top[p - 1] < s) {
      top[p] = top[p - 1];
      topI[p] = topI[p - 1];
      p--;
    }
    top[p] = s;
    topI[p] = i;
  }
  const got = new Set(found[q]);
  for (const i of topI) if (got.has(idOf(i))) hitsTotal++;
}
const pctOf = (t: number[], p: number) => {
  const s = [...t].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(3);
};
const pct = (p: number) => pctOf(times, p);
await index.close();

/*
 * MEM_RAW="M:efAdd:efSearch,..." (diagnostic, off by default): the usearch library alone, without the port,
 * built with those parameters over the same vectors and asked the same queries for k = 10 — what the
 * library gives at other settings, and how much of the port's query time is the library's.
 */
const raw: object[] = [];
for (const spec of (process.env.MEM_RAW ?? '').split(',').filter(Boolean)) {
  const [m, efAdd, efSearch] = spec.split(':').map(Number);
  const { default: usearch } = await import('usearch');
  const idx = new usearch.Index({ dimensions: DIM, metric: usearch.MetricKind.Cos, connectivity: m, expansion_add: efAdd, expansion_search: efSearch } as never);
  const tb = performance.now();
  for (let i = 0; i < N; i += 10_000) idx.add(BigUint64Array.from({ length: Math.min(10_000, N - i) }, (_, j) => BigInt(i + j)), data.subarray(i * DIM, Math.min(N, i + 10_000) * DIM), 0);
  const buildS = (performance.now() - tb) / 1000;
  const rt: number[] = [];
  let rh = 0;
  for (let q = 0; q < Q; q++) {
    const t = performance.now();
    const res = idx.search(queries.subarray(q * DIM, (q + 1) * DIM), K, 1);
    rt.push(performance.now() - t);
    const want = new Set(exact.subarray(q * K, (q + 1) * K));
    for (const key of res.keys) if (want.has(Number(key))) rh++;
  }
  raw.push({ connectivity: m, expansion_add: efAdd, expansion_search: efSearch, build_s: +buildS.toFixed(1), p50_ms: pctOf(rt, 50), p99_ms: pctOf(rt, 99), recall_at_10: +(rh / (Q * K)).toFixed(4) });
  process.stderr.write(`  raw usearch ${spec}: ${JSON.stringify(raw.at(-1))}\n`);
}
console.log(
  JSON.stringify({
    kind: index.info.kind,
    data: DATA,
    memories: N,
    dim: DIM,
    queries: Q,
    insert_s: +insertS.toFixed(1),
    inserts_per_s: Math.round(N / insertS),
    p50_ms: pct(50),
    p99_ms: pct(99),
    max_ms: pct(100),
    recall_at_10: +(hitsTotal / (Q * K)).toFixed(4),
    index_rss_mib: mode === 'redis' ? null : Math.round((rssAfter - rssBefore) / 2 ** 20),
    ...(raw.length ? { raw_usearch: raw } : {}),
  }),
);
process.exit(0);
