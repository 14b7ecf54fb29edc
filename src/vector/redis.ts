/**
 * RediSearch adapter. The store's records are hashes `{v, d}` with JSON in `d`, which RediSearch cannot
 * index, so each memory also gets a hash of its own, `<prefix>:{main}:mem:<id>` (same hash tag as the
 * store), with TAG fields namespace, entity, category, memory_type, tags, a TEXT field content and a
 * FLOAT32 COSINE HNSW vector field. Searches are `FT.SEARCH` with the filters inside the query: KNN with
 * pre-filters, or a BM25-scored text query, both `DIALECT 2`. The index name carries the dimension, so a
 * changed EMBEDDING_DIM builds a new index instead of silently failing to index the new vectors.
 */
import { createClient, type RedisClientType } from 'redis';
import { words } from '../embedding/hash.js';
import type { Hit, VectorFilter, VectorIndex } from './port.js';

const SEP = '\x1f';
const EF_RUNTIME = 200;

/** RediSearch query syntax treats ASCII punctuation and spaces as operators: escape them in TAG values. */
const escapeTag = (s: string) => s.replace(/[^\p{L}\p{N}_]/gu, (c) => (c.charCodeAt(0) < 128 ? '\\' + c : c));
/** A comma separates tags in the hash: it cannot be part of one. */
const tagText = (t: string) => t.replace(/,/g, ' ');

export function filterQuery(f: VectorFilter): string {
  const parts = [`@namespace:{${f.namespaces.map(escapeTag).join(' | ')}}`];
  if (f.entity !== undefined) parts.push(`@entity:{${escapeTag(f.entity)}}`);
  if (f.category !== undefined) parts.push(`@category:{${escapeTag(f.category)}}`);
  if (f.memory_type !== undefined) parts.push(`@memory_type:{${escapeTag(f.memory_type)}}`);
  for (const t of f.tags ?? []) parts.push(`@tags:{${escapeTag(tagText(t))}}`);
  return parts.join(' ');
}

/** Is the search module loaded into this Redis? */
export async function hasSearchModule(url: string): Promise<boolean> {
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  try {
    const mods = (await client.sendCommand(['MODULE', 'LIST'])) as unknown[][];
    return mods.some((m) => {
      const i = m.indexOf('name');
      return ['search', 'ft'].includes(String(m[i + 1]).toLowerCase());
    });
  } catch {
    return false;
  } finally {
    await client.close().catch(() => {});
  }
}

export async function openRedisVectorIndex(o: { url: string; prefix: string; dim: number }): Promise<VectorIndex> {
  const P = `${o.prefix}:{main}:`;
  const keyPrefix = P + 'mem:';
  const index = `${P}memidx:${o.dim}`;
  const client = createClient({ url: o.url, socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 2000) } }) as RedisClientType;
  client.on('error', () => {});
  await client.connect();
  const send = (args: (string | Buffer)[]) => client.sendCommand(args) as Promise<unknown>;
  /** one numeric field of FT.INFO; undefined when this module's FT.INFO has none */
  const infoField = async (field: string): Promise<number | undefined> => {
    const info = (await send(['FT.INFO', index])) as unknown[];
    const i = info.indexOf(field);
    return i < 0 ? undefined : Number(info[i + 1]);
  };

  const existing = (await send(['FT._LIST'])) as string[];
  if (!existing.includes(index)) {
    const tag = (name: string, sep = SEP) => [name, 'TAG', 'SEPARATOR', sep, 'CASESENSITIVE'];
    await send([
      'FT.CREATE', index, 'ON', 'HASH', 'PREFIX', '1', keyPrefix, 'STOPWORDS', '0', 'SCHEMA',
      ...tag('namespace'), ...tag('entity'), ...tag('category'), ...tag('memory_type'), ...tag('tags', ','),
      'content', 'TEXT',
      'vec', 'VECTOR', 'HNSW', '10', 'TYPE', 'FLOAT32', 'DIM', String(o.dim), 'DISTANCE_METRIC', 'COSINE', 'M', '16', 'EF_CONSTRUCTION', '100',
    ]);
  }
  // FT.CREATE starts a background scan of the whole keyspace. A hash written while it runs is indexed on write and
  // again when the scan reaches it, under a new doc id; the old postings stay until GC, so each term's document
  // count exceeds num_docs, RediSearch 2.6's IDF (logb(1 + N/n)) drops to 0, every BM25 score is 0 and the order
  // falls back to doc ids. num_docs is short while it runs too. So the index is handed out once the scan is done.
  for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
    if (((await infoField('indexing')) ?? 0) === 0) break;
    await new Promise((r) => setTimeout(r, wait));
  }

  const blob = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  const idOf = (key: string) => key.slice(keyPrefix.length);

  return {
    info: { kind: 'redisearch', dim: o.dim },
    async upsert(docs) {
      if (!docs.length) return;
      const m = client.multi();
      for (const d of docs) {
        const key = keyPrefix + d.id;
        const fields: Record<string, string | Buffer> = { namespace: d.namespace, tags: d.tags.map(tagText).join(','), content: d.content };
        if (d.entity !== null) fields.entity = d.entity;
        if (d.category !== null) fields.category = d.category;
        if (d.memory_type !== null) fields.memory_type = d.memory_type;
        if (d.vector) fields.vec = blob(d.vector);
        m.del(key).hSet(key, fields);
      }
      await m.exec();
    },
    async remove(ids) {
      if (ids.length) await client.del(ids.map((id) => keyPrefix + id));
    },
    async knn(vector, f, k) {
      const r = (await send([
        'FT.SEARCH', index, `(${filterQuery(f)})=>[KNN ${k} @vec $q EF_RUNTIME ${Math.max(EF_RUNTIME, k)} AS dist]`,
        'PARAMS', '2', 'q', blob(vector), 'SORTBY', 'dist', 'ASC', 'RETURN', '1', 'dist', 'LIMIT', '0', String(k), 'DIALECT', '2',
      ])) as unknown[];
      const hits: Hit[] = [];
      for (let i = 1; i + 1 < r.length; i += 2) {
        const fields = r[i + 1] as string[];
        hits.push({ id: idOf(String(r[i])), score: 1 - Number(fields[fields.indexOf('dist') + 1]) });
      }
      return hits;
    },
    async keyword(text, f, k) {
      const terms = words(text);
      if (!terms.length) return [];
      const r = (await send([
        'FT.SEARCH', index, `(${filterQuery(f)}) (${terms.join(' | ')})`, 'WITHSCORES', 'SCORER', 'BM25', 'NOCONTENT', 'LIMIT', '0', String(k), 'DIALECT', '2',
      ])) as unknown[];
      const hits: Hit[] = [];
      for (let i = 1; i + 1 < r.length; i += 2) hits.push({ id: idOf(String(r[i])), score: Number(r[i + 1]) });
      return hits;
    },
    async size() {
      return (await infoField('num_docs')) ?? 0;
    },
    async ids() {
      const out: string[] = [];
      for await (const keys of client.scanIterator({ MATCH: keyPrefix + '*', COUNT: 1000 })) out.push(...(keys as unknown as string[]).map(idOf));
      return out;
    },
    async close() {
      await Promise.race([client.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
    },
  };
}
