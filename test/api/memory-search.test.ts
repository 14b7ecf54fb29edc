/**
 * POST /memory/query on both backends (Redis with RediSearch loaded): known nearest neighbours with
 * client-supplied embeddings, filters inside the index query, keyword and hybrid (RRF) modes, min_score,
 * duplicates, the index kind in /health/detailed, and a crash between the store commit and the index
 * write repaired at restart.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { startServer, BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { memoryIndexes, memoryKeys, type MemoryRecord } from '../../src/memory/model.js';
import { expectError, expectOk } from './support.js';

const WITH_SEARCH = { args: ['--loadmodule', REDISEARCH_MODULE] };
const DIM = 384;
/** a unit-ish vector with weight on the given axes */
const vec = (axes: Record<number, number>) => Array.from({ length: DIM }, (_, i) => axes[i] ?? 0);
const cos = (a: number[], b: number[]) => {
  const d = a.reduce((s, x, i) => s + x * b[i], 0);
  return d / (Math.hypot(...a) * Math.hypot(...b));
};

describe.each(BACKENDS)('memory search on %s', (backend) => {
  const servers = serversOn(backend, WITH_SEARCH);
  let svc: Started;
  let root: Member;
  let ann: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    ann = await join(root.client, 'ann');
  });

  const store = async (c: Client, body: Record<string, unknown>, status = 201) => expectOk(await c.post('/memory/store', body), status);
  const query = async (c: Client, body: Record<string, unknown>) => expectOk(await c.post('/memory/query', body)).memories as any[];

  it('/health/detailed names the vector index in use', async () => {
    const h = expectOk(await new Client(svc.url).get('/health/detailed'));
    expect(h.vector_index).toEqual({ kind: backend === 'redis' ? 'redisearch' : 'hnsw', dim: DIM });
  });

  it('semantic mode answers the known nearest neighbours of a given embedding, in order, scored by cosine', async () => {
    const ns = `agent:${ann.id}`;
    const given = { a: vec({ 0: 1 }), b: vec({ 0: 0.9, 1: 0.1 }), c: vec({ 1: 1 }), d: vec({ 0: 0.95, 1: 0.05 }), e: vec({ 2: 1 }) };
    const ids: Record<string, string> = {};
    for (const [name, embedding] of Object.entries(given)) ids[name] = (await store(ann.client, { namespace: ns, content: `vector ${name}`, embedding, entity: 'nn', allow_duplicate: true })).id;
    const q = vec({ 0: 1 });
    const hits = await query(ann.client, { namespace: ns, query: 'ignored when an embedding is given', embedding: q, mode: 'semantic', limit: 3 });
    expect(hits.map((h) => h.id)).toEqual([ids.a, ids.d, ids.b]);
    hits.forEach((h, i) => expect(h.score).toBeCloseTo(cos(q, given[(['a', 'd', 'b'] as const)[i]]), 4));
    expect(hits[0]).toMatchObject({ content: 'vector a', namespace: ns });
    expect(hits[0]).not.toHaveProperty('vector_rank');
    const all = await query(ann.client, { namespace: ns, query: 'x', embedding: vec({ 1: 0.1, 2: 1 }), mode: 'semantic', entity: 'nn' });
    expect(all.map((h) => h.id)).toEqual([ids.e, ids.c, ids.b, ids.d, ids.a]);
    const above = await query(ann.client, { namespace: ns, query: 'x', embedding: q, mode: 'semantic', min_score: 0.995 });
    expect(above.map((h) => h.id)).toEqual([ids.a, ids.d]);
    expectError(await ann.client.post('/memory/query', { namespace: ns, query: 'x', embedding: [1, 0] }), 400, 'EMBEDDING_DIMENSION_MISMATCH');
  });

  it('filters are inside the index query: a filtered query returns limit results when that many match', async () => {
    const ns = 'org';
    for (let i = 0; i < 40; i++) await store(ann.client, { namespace: ns, content: `noise ${i}`, category: 'noise', embedding: vec({ 10: 1, 11: i / 1000 }), allow_duplicate: true });
    const target: string[] = [];
    for (let i = 0; i < 4; i++) target.push((await store(ann.client, { namespace: ns, content: `target ${i}`, category: 'target', entity: 'filtered', tags: ['t', `n${i}`], memory_type: 'fact', embedding: vec({ 12: 1, 13: i / 10 }), allow_duplicate: true })).id);
    const q = { namespace: ns, query: 'x', embedding: vec({ 10: 1 }), mode: 'semantic' };
    expect((await query(ann.client, { ...q, category: 'target', limit: 4 })).map((h) => h.id).sort()).toEqual([...target].sort());
    expect((await query(ann.client, { ...q, entity: 'filtered', memory_type: 'fact', tags: ['t', 'n2'] })).map((h) => h.id)).toEqual([target[2]]);
    expect((await query(ann.client, { ...q, limit: 5 })).every((h) => h.category === 'noise')).toBe(true);
    expect(await query(ann.client, { ...q, memory_type: 'episodic' })).toEqual([]);
  });

  it('keyword mode ranks by text relevance; hybrid fuses both ranks (RRF) and reports them', async () => {
    const ns = 'ring:kw';
    expectOk(await root.client.post('/rings', { name: 'kw', members: [ann.id] }), 201);
    const both = await store(ann.client, { namespace: ns, content: 'the kubernetes cluster autoscaler doubles nodes at noon' });
    const words = await store(ann.client, { namespace: ns, content: 'kubernetes kubernetes cluster cluster notes' });
    const other = await store(ann.client, { namespace: ns, content: 'a recipe for lemon cake' });
    const kw = await query(ann.client, { namespace: ns, query: 'kubernetes cluster', mode: 'keyword' });
    expect(kw.map((h) => h.id)).toEqual([words.id, both.id]);
    expect(kw[0].score).toBeGreaterThan(kw[1].score);
    const hy = await query(ann.client, { namespace: ns, query: 'kubernetes cluster autoscaler doubles nodes', mode: 'hybrid' });
    expect(hy[0].id).toBe(both.id);
    expect(hy[0]).toMatchObject({ vector_rank: 1, keyword_rank: 1 });
    expect(hy[0].score).toBeCloseTo(2 / 61, 6);
    const cake = hy.find((h) => h.id === other.id);
    if (cake) expect(cake.keyword_rank).toBeNull();
    // default mode is hybrid
    expect((await query(ann.client, { namespace: ns, query: 'lemon cake recipe' }))[0]).toMatchObject({ id: other.id, vector_rank: 1, keyword_rank: 1 });
    // semantic with the built-in provider: related wording is nearest
    expect((await query(ann.client, { namespace: ns, query: 'lemon cakes', mode: 'semantic', limit: 1 }))[0].id).toBe(other.id);
    expectError(await ann.client.post('/memory/query', { namespace: ns }), 400, 'MEMORY_VALIDATION_FAILED', 'query');
    expectError(await ann.client.post('/memory/query', { namespace: ns, query: 'x', mode: 'fuzzy' }), 400, 'MEMORY_VALIDATION_FAILED', 'mode');
    expectError(await ann.client.post('/memory/query', { namespace: ns, query: 'x', limit: 0 }), 400, 'MEMORY_VALIDATION_FAILED', 'limit');
  });

  it('a near-identical memory in the same namespace and entity is returned instead of stored, unless allow_duplicate', async () => {
    const ns = `agent:${ann.id}`;
    const first = await store(ann.client, { namespace: ns, entity: 'dup', content: 'The deploy window is Tuesday at 14:00 UTC', metadata: { from: 'a' } });
    const again = await store(ann.client, { namespace: ns, entity: 'dup', content: 'the deploy window is tuesday at 14:00 UTC!' }, 200);
    expect(again).toMatchObject({ id: first.id, content: first.content, metadata: { from: 'a', deduplicated: true } });
    expect(expectOk(await ann.client.get(`/memory/${first.id}`)).metadata).toEqual({ from: 'a' });
    const other = await store(ann.client, { namespace: ns, entity: 'other', content: 'The deploy window is Tuesday at 14:00 UTC' });
    expect(other.id).not.toBe(first.id);
    const noEntity = await store(ann.client, { namespace: ns, content: 'The deploy window is Tuesday at 14:00 UTC' });
    expect(noEntity.id).not.toBe(first.id);
    expect((await store(ann.client, { namespace: ns, content: 'The deploy window is Tuesday at 14:00 UTC' }, 200)).id).toBe(noEntity.id);
    const forced = await store(ann.client, { namespace: ns, entity: 'dup', content: 'The deploy window is Tuesday at 14:00 UTC', allow_duplicate: true });
    expect(forced.id).not.toBe(first.id);
    expect(forced.metadata).toEqual({});
    const distinct = await store(ann.client, { namespace: ns, entity: 'dup', content: 'The freeze starts on Friday' });
    expect(distinct.id).not.toBe(first.id);
  });

  it('a crash between the store commit and the index write is repaired at restart', async () => {
    const s1 = await servers.start();
    const admin = await bootstrap(s1.url);
    const m = await store(admin.client, { namespace: 'org', content: 'original aardvark content', entity: 'crash' });
    // what a crash leaves: the update committed with its unindexed mark, the index never written
    const cur = (await s1.store.get<MemoryRecord>(memoryKeys.memory(m.id)))!;
    const changed: MemoryRecord = { ...cur.value, content: 'rewritten platypus content', version: 2 };
    expect((await s1.store.commit([{ op: 'put', key: memoryKeys.memory(m.id), value: changed, expect: cur.version }, { op: 'index', index: memoryIndexes.unindexed, member: m.id }])).ok).toBe(true);
    // and a memory committed whose index write never happened at all
    const lost: MemoryRecord = { ...cur.value, id: '01ARZ3NDEKTSV4RRFFQ69G5FAV', content: 'lost narwhal content' };
    expect((await s1.store.commit([
      { op: 'put', key: memoryKeys.memory(lost.id), value: lost, expect: 0 },
      { op: 'index', index: memoryIndexes.unindexed, member: lost.id },
      { op: 'index', index: memoryIndexes.all, member: lost.id },
      { op: 'index', index: memoryIndexes.byNamespace('org'), member: lost.id },
    ])).ok).toBe(true);
    const kw = async (c: Client, text: string) => (await query(c, { namespace: 'org', query: text, mode: 'keyword' })).map((h) => h.id);
    expect(await kw(admin.client, 'platypus')).toEqual([]);
    await s1.close();
    const s2 = await startServer(s1.env);
    try {
      const c = new Client(s2.url, admin.key);
      expect(await kw(c, 'platypus')).toEqual([m.id]);
      expect(await kw(c, 'aardvark')).toEqual([]);
      expect(await kw(c, 'narwhal')).toEqual([lost.id]);
      expect(await s2.store.range(memoryIndexes.unindexed, { limit: 10 })).toEqual([]);
    } finally {
      await s2.close();
    }
  });
});
