/**
 * The vector port: one index of memories for nearest-neighbour (cosine) and keyword (BM25-style) search.
 * Contract: filters are part of the query, so a filtered search returns `k` hits whenever `k` documents
 * match; an upsert or remove is visible to the next search once its promise resolves.
 */
export interface VectorDoc {
  id: string;
  namespace: string;
  entity: string | null;
  category: string | null;
  memory_type: string | null;
  tags: string[];
  content: string;
  /** unit length, `dim` long; null when the memory has no embedding (provider none) */
  vector: Float32Array | null;
}

export interface VectorFilter {
  /** any of these namespaces (required: nothing is searched across the whole index) */
  namespaces: string[];
  entity?: string;
  category?: string;
  memory_type?: string;
  /** every one of these tags */
  tags?: string[];
}

export interface Hit {
  id: string;
  /** semantic: cosine similarity; keyword: the index's relevance score */
  score: number;
}

export interface VectorInfo {
  kind: 'redisearch' | 'hnsw';
  dim: number;
  /** why this kind was chosen (e.g. the module is missing) */
  note?: string;
}

export interface VectorIndex {
  readonly info: VectorInfo;
  upsert(docs: VectorDoc[]): Promise<void>;
  remove(ids: string[]): Promise<void>;
  knn(vector: Float32Array, filter: VectorFilter, k: number): Promise<Hit[]>;
  keyword(text: string, filter: VectorFilter, k: number): Promise<Hit[]>;
  size(): Promise<number>;
  /** every id in the index (reconciliation with the store) */
  ids(): Promise<string[]>;
  close(): Promise<void>;
}

export const matches = (d: VectorDoc, f: VectorFilter): boolean =>
  f.namespaces.includes(d.namespace) &&
  (f.entity === undefined || d.entity === f.entity) &&
  (f.category === undefined || d.category === f.category) &&
  (f.memory_type === undefined || d.memory_type === f.memory_type) &&
  (f.tags === undefined || f.tags.every((t) => d.tags.includes(t)));
