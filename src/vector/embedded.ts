/**
 * In-process index: usearch HNSW for vectors, minisearch (BM25+) for keywords, both in memory and rebuilt
 * from the store at startup. A filtered search first narrows to the documents of the filter's namespaces:
 * up to EXACT_MAX matching documents it is an exact scan, above that an HNSW search whose candidate count
 * grows until `k` matching hits are found or the whole index was asked. Keywords are indexed per namespace
 * (one minisearch each), so a keyword search reads only the filter's namespaces, whatever the rest holds;
 * BM25 weighs a term by its rarity within the namespace searched.
 */
import MiniSearch from 'minisearch';
import usearch from 'usearch';
import { words } from '../embedding/hash.js';
import { matches, type Hit, type VectorDoc, type VectorFilter, type VectorIndex, type VectorInfo } from './port.js';

export const EXACT_MAX = 4096;

interface Entry {
  doc: VectorDoc;
  key: bigint;
}

export function openEmbeddedVectorIndex(dim: number, note?: string, opts: { exactMax?: number } = {}): VectorIndex {
  const exactMax = opts.exactMax ?? EXACT_MAX;
  const hnsw = new usearch.Index({ dimensions: dim, metric: usearch.MetricKind.Cos, connectivity: 16, expansion_add: 64, expansion_search: 128 } as never);
  const minis = new Map<string, MiniSearch<{ id: string; content: string }>>();
  const miniOf = (ns: string) => minis.get(ns) ?? minis.set(ns, new MiniSearch({ fields: ['content'], tokenize: (t) => words(t), processTerm: (t) => t.toLowerCase() })).get(ns)!;
  const entries = new Map<string, Entry>();
  const byKey = new Map<bigint, string>();
  const byNs = new Map<string, Set<string>>();
  let nextKey = 1n;

  function drop(id: string): void {
    const e = entries.get(id);
    if (!e) return;
    entries.delete(id);
    // The HNSW entry stays as a tombstone (its key no longer maps to a document, so searches skip it):
    // usearch 2.25 hangs when the index grows after a removal. Tombstones go at the next startup rebuild.
    byKey.delete(e.key);
    const ns = byNs.get(e.doc.namespace);
    ns?.delete(id);
    // an emptied namespace lets go of its keyword index (discarded documents linger in one until vacuumed)
    if (ns?.size === 0) {
      byNs.delete(e.doc.namespace);
      minis.delete(e.doc.namespace);
    } else minis.get(e.doc.namespace)?.discard(id);
  }

  /** The filter's documents with a vector while there are at most `max`; undefined past that (search the HNSW index). */
  function smallPool(f: VectorFilter, max: number): VectorDoc[] | undefined {
    const out: VectorDoc[] = [];
    for (const ns of f.namespaces)
      for (const id of byNs.get(ns) ?? []) {
        const d = entries.get(id)!.doc;
        if (!d.vector || !matches(d, f)) continue;
        // stop counting here: listing a 100k-document namespace on every query cost more than the search
        if (out.push(d) > max) return undefined;
      }
    return out;
  }

  const info: VectorInfo = { kind: 'hnsw', dim, ...(note ? { note } : {}) };
  return {
    info,
    async upsert(docs) {
      const keys: bigint[] = [];
      const vecs: Float32Array[] = [];
      for (const doc of docs) {
        drop(doc.id);
        const key = nextKey++;
        entries.set(doc.id, { doc, key });
        byKey.set(key, doc.id);
        let ns = byNs.get(doc.namespace);
        if (!ns) byNs.set(doc.namespace, (ns = new Set()));
        ns.add(doc.id);
        miniOf(doc.namespace).add({ id: doc.id, content: doc.content });
        if (doc.vector) {
          keys.push(key);
          vecs.push(doc.vector);
        }
      }
      if (keys.length) {
        const flat = new Float32Array(keys.length * dim);
        vecs.forEach((v, i) => flat.set(v, i * dim));
        hnsw.add(BigUint64Array.from(keys), flat);
      }
    },
    async remove(ids) {
      for (const id of ids) drop(id);
    },
    async knn(vector, f, k) {
      const pool = smallPool(f, exactMax);
      if (pool) {
        return pool
          .map((d) => ({ id: d.id, score: dot(vector, d.vector!) }))
          .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
          .slice(0, k);
      }
      const total = hnsw.size();
      for (let ask = Math.min(total, k * 4); ; ask = Math.min(total, ask * 4)) {
        // one thread: a per-call thread pool costs more than a small search
        const m = hnsw.search(vector, ask, 1);
        const hits: Hit[] = [];
        for (let i = 0; i < m.keys.length && hits.length < k; i++) {
          const id = byKey.get(m.keys[i]);
          const e = id === undefined ? undefined : entries.get(id);
          if (e && matches(e.doc, f)) hits.push({ id: e.doc.id, score: 1 - m.distances[i] });
        }
        if (hits.length >= k || ask >= total) return hits;
      }
    },
    async keyword(text, f, k) {
      if (!words(text).length) return [];
      const found = [...new Set(f.namespaces)].flatMap((ns) => minis.get(ns)?.search(text, { combineWith: 'OR', filter: (r) => matches(entries.get(r.id as string)!.doc, f) }) ?? []);
      return found
        .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
        .slice(0, k)
        .map((r) => ({ id: r.id as string, score: r.score }));
    },
    async size() {
      return entries.size;
    },
    async ids() {
      return [...entries.keys()];
    },
    async close() {},
  };
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
