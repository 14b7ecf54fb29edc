/**
 * The vector port's contract, on every adapter: RediSearch (redis-server with the module loaded) and the
 * in-process index, the latter both on its exact path and forced onto its HNSW path. Known nearest
 * neighbours with given vectors, filters inside the query, deletes and updates visible at once, keyword
 * ranking, and recall@10 of the HNSW indexes against exact search on 20k random vectors.
 */
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalize } from '../../src/embedding/provider.js';
import { openEmbeddedVectorIndex } from '../../src/vector/embedded.js';
import type { VectorDoc, VectorIndex } from '../../src/vector/port.js';
import { hasSearchModule, openRedisVectorIndex } from '../../src/vector/redis.js';
import { REDISEARCH_MODULE, startRedis, type RedisServer } from '../helpers/redis.js';

const v = (...xs: number[]) => normalize(Float32Array.from(xs));
const doc = (id: string, vector: Float32Array | null, extra: Partial<VectorDoc> = {}): VectorDoc => ({
  id, namespace: 'org', entity: null, category: null, memory_type: null, tags: [], content: '', vector, ...extra,
});

type Adapter = { name: string; open(dim: number): Promise<VectorIndex>; hnsw: boolean };

let redis: RedisServer;
const opened: VectorIndex[] = [];
beforeAll(async () => {
  redis = await startRedis({ args: ['--loadmodule', REDISEARCH_MODULE] });
});
afterAll(async () => {
  await Promise.all(opened.map((i) => i.close()));
  await redis.stop();
});

const track = (i: VectorIndex) => (opened.push(i), i);
const ADAPTERS: Adapter[] = [
  { name: 'redisearch', hnsw: true, open: async (dim) => track(await openRedisVectorIndex({ url: redis.url, prefix: 'v' + randomBytes(4).toString('hex'), dim })) },
  { name: 'embedded (exact below the threshold)', hnsw: false, open: async (dim) => openEmbeddedVectorIndex(dim) },
  { name: 'embedded (HNSW path)', hnsw: true, open: async (dim) => openEmbeddedVectorIndex(dim, undefined, { exactMax: 0 }) },
];

it('the test Redis has the search module and a plain one does not', async () => {
  expect(await hasSearchModule(redis.url)).toBe(true);
  const plain = await startRedis();
  try {
    expect(await hasSearchModule(plain.url)).toBe(false);
  } finally {
    await plain.stop();
  }
});

describe.each(ADAPTERS)('vector index: $name', (a) => {
  it('answers the known nearest neighbours in order, with cosine similarity as score', async () => {
    const idx = await a.open(4);
    await idx.upsert([doc('a', v(1, 0, 0, 0)), doc('b', v(0.9, 0.1, 0, 0)), doc('c', v(0, 1, 0, 0)), doc('d', v(0.95, 0.05, 0, 0)), doc('e', v(0, 0, 1, 0)), doc('novec', null, { content: 'no vector' })]);
    const hits = await idx.knn(v(1, 0, 0, 0), { namespaces: ['org'] }, 3);
    expect(hits.map((h) => h.id)).toEqual(['a', 'd', 'b']);
    expect(hits[0].score).toBeCloseTo(1, 5);
    expect(hits[1].score).toBeCloseTo(0.95 / Math.hypot(0.95, 0.05), 5);
    expect(hits[2].score).toBeCloseTo(0.9 / Math.hypot(0.9, 0.1), 5);
    expect((await idx.knn(v(0, 0.1, 1, 0), { namespaces: ['org'] }, 10)).map((h) => h.id)).toEqual(['e', 'c', 'b', 'd', 'a']);
    expect(await idx.size()).toBe(6);
    expect((await idx.ids()).sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'novec']);
  });

  it('applies filters inside the query: k hits whenever k documents match, however many closer ones do not', async () => {
    const idx = await a.open(4);
    const near = Array.from({ length: 60 }, (_, i) => doc(`near${i}`, v(1, 0.001 * i, 0, 0), { category: 'noise', tags: ['x'] }));
    const far = Array.from({ length: 5 }, (_, i) => doc(`far${i}`, v(0, 1, 0.01 * i, 0), { category: 'target', entity: 'Ada Lovelace', tags: ['x', 'y'], memory_type: 'fact' }));
    const other = doc('other-ns', v(0, 1, 0, 0), { namespace: 'role:dev ops', category: 'target', entity: 'Ada Lovelace' });
    await idx.upsert([...near, ...far, other]);
    const q = v(1, 0, 0, 0);
    expect((await idx.knn(q, { namespaces: ['org'], category: 'target' }, 5)).map((h) => h.id).sort()).toEqual(far.map((d) => d.id));
    expect((await idx.knn(q, { namespaces: ['org'], entity: 'Ada Lovelace', memory_type: 'fact', tags: ['y', 'x'] }, 10)).map((h) => h.id).sort()).toEqual(far.map((d) => d.id));
    expect((await idx.knn(q, { namespaces: ['org'], tags: ['y', 'z'] }, 10))).toEqual([]);
    expect((await idx.knn(q, { namespaces: ['role:dev ops'] }, 10)).map((h) => h.id)).toEqual(['other-ns']);
    expect((await idx.knn(q, { namespaces: ['role:dev ops', 'org'], category: 'target' }, 10)).map((h) => h.id).sort()).toEqual([...far.map((d) => d.id), 'other-ns'].sort());
    expect(await idx.knn(q, { namespaces: ['agent:nobody'] }, 10)).toEqual([]);
  });

  it('sees deletes and updates at once', async () => {
    const idx = await a.open(4);
    await idx.upsert([doc('a', v(1, 0, 0, 0), { content: 'alpha apples' }), doc('b', v(0, 1, 0, 0), { content: 'beta bananas' })]);
    await idx.remove(['a']);
    expect((await idx.knn(v(1, 0, 0, 0), { namespaces: ['org'] }, 5)).map((h) => h.id)).toEqual(['b']);
    expect(await idx.keyword('apples', { namespaces: ['org'] }, 5)).toEqual([]);
    await idx.upsert([doc('b', v(0, 0, 1, 0), { content: 'gamma grapes', category: 'fruit' })]);
    const hits = await idx.knn(v(0, 0, 1, 0), { namespaces: ['org'], category: 'fruit' }, 5);
    expect(hits.map((h) => h.id)).toEqual(['b']);
    expect(hits[0].score).toBeCloseTo(1, 5);
    expect(await idx.keyword('bananas', { namespaces: ['org'] }, 5)).toEqual([]);
    expect((await idx.keyword('grapes', { namespaces: ['org'] }, 5)).map((h) => h.id)).toEqual(['b']);
    expect(await idx.size()).toBe(1);
  });

  it('keeps answering while documents are replaced and the index grows', async () => {
    const idx = await a.open(8);
    const at = (i: number, shift: number) => v(...Array.from({ length: 8 }, (_, j) => (j === i % 8 ? 1 : 0) + (j === (i + shift) % 8 ? 0.5 : 0) + 0.001 * i));
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 60; i++) await idx.upsert([doc(`g${i}`, at(i, round + 1), { category: `c${i % 8}` })]);
    }
    expect(await idx.size()).toBe(60);
    const hits = await idx.knn(at(5, 3), { namespaces: ['org'], category: 'c5' }, 3);
    expect(hits).toHaveLength(3);
    expect(hits[0].score).toBeCloseTo(1, 2);
    expect(hits.every((h) => Number(h.id.slice(1)) % 8 === 5)).toBe(true);
  });

  it('ranks keyword matches by relevance, inside the filter', async () => {
    const idx = await a.open(4);
    await idx.upsert([
      doc('k1', null, { content: 'the deploy pipeline broke on friday' }),
      doc('k2', null, { content: 'deploy pipeline pipeline deploy notes' }),
      doc('k3', null, { content: 'lunch menu for friday' }),
      doc('k4', null, { content: 'deploy pipeline in another namespace', namespace: 'ring:core' }),
    ]);
    const hits = await idx.keyword('deploy pipeline', { namespaces: ['org'] }, 10);
    expect(hits.map((h) => h.id)).toEqual(['k2', 'k1']);
    expect(hits[0].score).toBeGreaterThan(hits[1].score);
    expect((await idx.keyword('Friday!', { namespaces: ['org'] }, 10)).map((h) => h.id).sort()).toEqual(['k1', 'k3']);
    expect(await idx.keyword('...', { namespaces: ['org'] }, 10)).toEqual([]);
  });
});

describe('vector index: redisearch over a keyspace that is not empty', () => {
  it('is handed out once FT.CREATE\'s background scan is done: documents written at once are indexed once, ranked by BM25', async () => {
    // the scan walks every key of the db; a hash written before it gets there is indexed twice, and the stale
    // postings (until GC) push each term's document count past num_docs: IDF 0, every score 0, order by doc id
    const c = createClient({ url: redis.url });
    await c.connect();
    const fillers = Array.from({ length: 5000 }, (_, i) => `filler:${i}`);
    try {
      await c.mSet(fillers.map((k) => [k, 'x'] as [string, string]));
      const prefix = 'v' + randomBytes(4).toString('hex');
      const idx = track(await openRedisVectorIndex({ url: redis.url, prefix, dim: 4 }));
      await idx.upsert([
        doc('k1', null, { content: 'the deploy pipeline broke on friday' }),
        doc('k2', null, { content: 'deploy pipeline pipeline deploy notes' }),
        doc('k3', null, { content: 'lunch menu for friday' }),
      ]);
      // let any scan still running finish, so a scan that indexes them again shows here
      const info = async () => {
        const r = (await c.sendCommand(['FT.INFO', `${prefix}:{main}:memidx:4`])) as unknown[];
        return (field: string) => Number(r[r.indexOf(field) + 1]);
      };
      while ((await info())('indexing') !== 0) await new Promise((r) => setTimeout(r, 10));
      expect((await info())('max_doc_id')).toBe(3);
      const hits = await idx.keyword('deploy pipeline', { namespaces: ['org'] }, 10);
      expect(hits.map((h) => h.id)).toEqual(['k2', 'k1']);
      expect(hits[0].score).toBeGreaterThan(hits[1].score);
    } finally {
      await c.unlink(fillers);
      await c.close();
    }
  });
});

describe.each(ADAPTERS.filter((a) => a.hnsw))('HNSW recall: $name', (a) => {
  it('recall@10 against exact search on 20k random vectors is at least 0.95', async () => {
    const dim = 32;
    const n = 20_000;
    const idx = await a.open(dim);
    let seed = 42;
    const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    const vecs = Array.from({ length: n }, () => normalize(Float32Array.from({ length: dim }, rnd)));
    for (let i = 0; i < n; i += 2000) await idx.upsert(vecs.slice(i, i + 2000).map((x, j) => doc(`r${i + j}`, x)));
    expect(await idx.size()).toBe(n);
    let found = 0;
    const queries = 40;
    for (let q = 0; q < queries; q++) {
      const query = normalize(Float32Array.from({ length: dim }, rnd));
      const exact = vecs
        .map((x, i) => {
          let s = 0;
          for (let j = 0; j < dim; j++) s += x[j] * query[j];
          return { i, s };
        })
        .sort((p, r) => r.s - p.s)
        .slice(0, 10)
        .map((e) => `r${e.i}`);
      const got = new Set((await idx.knn(query, { namespaces: ['org'] }, 10)).map((h) => h.id));
      found += exact.filter((id) => got.has(id)).length;
    }
    expect(found / (queries * 10)).toBeGreaterThanOrEqual(0.95);
  }, 120_000);
});

describe.each(ADAPTERS.filter((a) => a.name.startsWith('embedded')))('keyword search bounded to its namespaces: $name', (a) => {
  it('20,000 documents in another namespace, sharing the query terms, leave a namespace\'s hits and scores unchanged', async () => {
    const idx = await a.open(4);
    await idx.upsert([doc('s1', null, { content: 'deploy pipeline notes', namespace: 'ring:small' }), doc('s2', null, { content: 'lunch menu', namespace: 'ring:small' })]);
    const before = await idx.keyword('deploy pipeline', { namespaces: ['ring:small'] }, 10);
    expect(before.map((h) => h.id)).toEqual(['s1']);
    // the whole corpus searched (and filtered after) weighs terms by their rarity across every namespace
    for (let i = 0; i < 20_000; i += 1000)
      await idx.upsert(Array.from({ length: 1000 }, (_, j) => doc(`big${i + j}`, null, { content: `deploy pipeline run ${i + j}`, namespace: 'ring:big' })));
    const after = await idx.keyword('deploy pipeline', { namespaces: ['ring:small'] }, 10);
    expect(after).toEqual(before);
    expect((await idx.keyword('deploy pipeline', { namespaces: ['ring:big'] }, 5)).every((h) => h.id.startsWith('big'))).toBe(true);
  }, 60_000);
});
