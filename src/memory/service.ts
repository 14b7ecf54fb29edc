/**
 * Memories: records in the store, committed with version checks together with their indexes and the
 * namespace's count (the quota), then written to the vector index before the call returns, so a stored
 * memory is searchable when `store` answers. The commit also marks the id `unindexed` and a second write
 * clears the mark once the index has it: a crash between the two leaves the mark, and `open()` at startup
 * re-indexes every marked id from the store (or removes it from the index if it is gone).
 */
import { iso, now } from '../clock.js';
import type { Config } from '../config.js';
import { fromBase64, normalize, toBase64, type Embedder } from '../embedding/provider.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import { eventOp, type EventAudience } from '../journal/journal.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps } from '../store/idempotency.js';
import type { Op, Store } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import type { Hit, VectorDoc, VectorFilter, VectorIndex } from '../vector/port.js';
import { canonicalNamespace, type Acl } from './acl.js';
import { expiringMember, idOfExpiring, indexDiff, isLive, liveIndexes, memoryIndexes, memoryKeys, memoryView, type Memory, type MemoryRecord, type MemoryType, type NamespaceCount } from './model.js';

export const DUPLICATE_SIMILARITY = 0.98;
/** reciprocal rank fusion constant (Cormack et al.): damps the weight of the very first ranks */
const RRF_K = 60;
const REBUILD_BATCH = 500;

export interface StoreBody {
  namespace: string;
  content: string;
  memory_type?: MemoryType;
  entity?: string;
  category?: string;
  tags?: string[];
  confidence?: number;
  source?: string;
  metadata?: Record<string, unknown>;
  expires_at?: string;
  embedding?: number[];
  allow_duplicate?: boolean;
}

export type ImportedMemory = Omit<StoreBody, 'allow_duplicate'> & Partial<Pick<MemoryRecord, 'id' | 'owner' | 'source_org' | 'source_claw' | 'created_at' | 'updated_at' | 'version'>>;

export interface UpdateBody {
  content?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  confidence?: number;
  embedding?: number[];
}

export interface ListFilter {
  namespace: string;
  entity?: string;
  category?: string;
  memory_type?: string;
  tags?: string[];
}

export interface QueryBody {
  query: string;
  namespace: string;
  limit?: number;
  min_score?: number;
  entity?: string;
  category?: string;
  memory_type?: string;
  tags?: string[];
  mode?: 'semantic' | 'keyword' | 'hybrid';
  embedding?: number[];
}

export type Scored = Memory & { score: number; vector_rank?: number | null; keyword_rank?: number | null };

/** the ids this service mints (ULIDs); an imported id of any other form is another system's */
const OUR_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** An import line made a record, with the alias record it claims when its id was another system's. */
export interface ImportPlan {
  rec: MemoryRecord;
  alias?: string;
}

export class Memories {
  private sweeper: NodeJS.Timeout | undefined;
  private sweeperStopped = false;

  constructor(
    private rt: Runtime,
    readonly acl: Acl,
    readonly embedder: Embedder,
    readonly index: VectorIndex,
    private config: Pick<Config, 'memoryNamespaceQuota' | 'memoryExpirySweepMs'>,
    private log: Logger,
  ) {}

  private get db(): Store {
    return this.rt.store;
  }

  /** Startup: the in-process index is rebuilt from the store; RediSearch gets the marked ids re-indexed, or everything when its count differs. */
  async open(): Promise<void> {
    const live = await this.db.count(memoryIndexes.all);
    if (this.index.info.kind === 'hnsw' || (await this.index.size()) !== live) await this.rebuild();
    else await this.reconcile(await this.db.range(memoryIndexes.unindexed, { limit: 100_000 }));
    this.log.info({ vector_index: this.index.info, memories: live }, 'memory index ready');
  }

  private async rebuild(): Promise<void> {
    const seen = new Set<string>();
    let after: string | undefined;
    for (;;) {
      const ids = await this.db.range(memoryIndexes.all, { gt: after, limit: REBUILD_BATCH });
      if (!ids.length) break;
      ids.forEach((id) => seen.add(id));
      const recs = await this.records(ids);
      await this.index.upsert(recs.filter((r) => isLive(r, now())).map((r) => docOf(r!)));
      after = ids[ids.length - 1];
    }
    const stale = (await this.index.ids()).filter((id) => !seen.has(id));
    await this.index.remove(stale);
    await this.reconcile(await this.db.range(memoryIndexes.unindexed, { limit: 100_000 }));
  }

  /** Makes the index agree with the store for these ids, then clears their marks. */
  async reconcile(ids: string[]): Promise<void> {
    if (!ids.length) return;
    const recs = await this.records(ids);
    const t = now();
    await this.index.upsert(recs.filter((r) => isLive(r, t)).map((r) => docOf(r!)));
    await this.index.remove(ids.filter((_, i) => !isLive(recs[i], t)));
    await this.db.commit(ids.map((id): Op => ({ op: 'index', index: memoryIndexes.unindexed, member: id, remove: true })));
  }

  private async records(ids: string[]): Promise<(MemoryRecord | undefined)[]> {
    return (await this.db.getMany<MemoryRecord>(ids.map(memoryKeys.memory))).map((r) => r?.value);
  }

  private vectorOf(given: number[] | undefined): Float32Array | undefined {
    if (given === undefined) return undefined;
    if (given.length !== this.embedder.dim) throw new AppError('EMBEDDING_DIMENSION_MISMATCH', `embedding has ${given.length} dimensions, this service uses ${this.embedder.dim}`, { field: 'embedding', expected: this.embedder.dim, got: given.length });
    return normalize(Float32Array.from(given));
  }

  /** The content's vector, or null when no provider is configured (the memory is still stored and keyword-searchable). */
  private async embedContent(content: string): Promise<Float32Array | null> {
    if (this.embedder.provider === 'none') return null;
    return (await this.embedder.embed([content]))[0];
  }

  async store(p: Principal, b: StoreBody): Promise<{ memory: Memory; created: boolean }> {
    const namespace = await this.acl.assertWrite(p, b.namespace);
    const done = committedEffect<{ memory: Memory; created: boolean }>(p);
    if (done) return done;
    if (b.expires_at !== undefined && Date.parse(b.expires_at) <= now()) throw new AppError('MEMORY_VALIDATION_FAILED', 'expires_at must be in the future', { field: 'expires_at', reason: 'past' });
    const given = this.vectorOf(b.embedding);
    const vector = given ?? (await this.embedContent(b.content));
    const entity = b.entity ?? null;
    if (vector && !b.allow_duplicate) {
      const dup = await this.duplicateOf(vector, namespace, entity);
      if (dup) return { memory: { ...memoryView(dup), metadata: { ...dup.metadata, deduplicated: true } }, created: false };
    }
    const t = iso();
    const rec: MemoryRecord = {
      id: newId(),
      content: b.content,
      memory_type: b.memory_type ?? null,
      owner: p.identity.id,
      namespace,
      entity,
      category: b.category ?? null,
      tags: b.tags ?? [],
      confidence: b.confidence ?? null,
      source: b.source ?? null,
      metadata: b.metadata ?? {},
      source_org: null,
      source_claw: null,
      deleted_at: null,
      expires_at: b.expires_at ? iso(Date.parse(b.expires_at)) : null,
      created_at: t,
      updated_at: t,
      version: 1,
      embedding: vector ? toBase64(vector) : null,
      embedding_model: vector ? (given ? 'client' : this.embedder.model) : null,
    };
    const answer = { memory: memoryView(rec), created: true };
    await this.insert(rec, await this.acl.audienceOf(namespace), undefined, { by: p, answer });
    return answer;
  }

  /** Commits a new memory with its indexes and the namespace count (the quota), and `memory.stored` when an audience is given, then indexes it. False when the id exists. */
  /** `alias`: a unique record claimed in the same commit (an imported line's foreign id); taken, nothing is written. */
  /** `request`: what the request answers for it, committed with it (an Idempotency-Key's effect). */
  private async insert(rec: MemoryRecord, audience?: EventAudience, alias?: string, request?: { by: Principal; answer: unknown }): Promise<boolean> {
    const namespace = rec.namespace;
    const created = await this.rt.retry(async () => {
      const nsKey = memoryKeys.namespace(namespace);
      const [cur, existing, aliased] = await Promise.all([this.db.get<NamespaceCount>(nsKey), this.db.get(memoryKeys.memory(rec.id)), alias ? this.db.get(alias) : undefined]);
      if (existing || aliased) return { result: false };
      const count = cur?.value.count ?? 0;
      // an emptied namespace passes to the role or ring holding its name now
      const owner = count > 0 && cur?.value.owner_id ? cur.value.owner_id : await this.acl.ownerOf(namespace);
      if (count >= this.config.memoryNamespaceQuota) throw new AppError('MEMORY_QUOTA_EXCEEDED', `Namespace ${namespace} holds its limit of ${this.config.memoryNamespaceQuota} memories`, { namespace, limit: this.config.memoryNamespaceQuota });
      return {
        ops: [
          { op: 'put', key: memoryKeys.memory(rec.id), value: rec, expect: 0 },
          { op: 'put', key: nsKey, value: { namespace, count: count + 1, ...(owner ? { owner_id: owner } : {}) }, expect: cur?.version ?? 0 },
          { op: 'index', index: memoryIndexes.namespaces, member: namespace },
          { op: 'index', index: memoryIndexes.unindexed, member: rec.id },
          ...liveIndexes(rec).map(([index, member]): Op => ({ op: 'index', index, member })),
          ...(audience ? [memoryEvent('memory.stored', rec, audience)] : []),
          ...(alias ? [{ op: 'put', key: alias, value: { id: rec.id }, expect: 0 } as Op] : []),
          ...(request ? effectOps(request.by, request.answer) : []),
        ],
        result: true,
      };
    });
    if (created) await this.indexed([rec]);
    return created;
  }

  /**
   * One exported memory as the record an import stores (fields kept as exported, its vector made), or 'skipped'
   * when it is stored. An id that is not one of ours (another system's) gets a new id, is kept as
   * `metadata.source_id`, and claims an alias record, so importing the same line again is skipped like one of ours.
   */
  async importRecord(m: ImportedMemory, owner: string): Promise<ImportPlan | 'skipped'> {
    const namespace = canonicalNamespace(m.namespace);
    const foreign = m.id !== undefined && !OUR_ID.test(m.id) ? m.id : undefined;
    const alias = foreign === undefined ? undefined : memoryKeys.importedId(foreign);
    const seen = alias ?? (m.id === undefined ? undefined : memoryKeys.memory(m.id));
    if (seen !== undefined && (await this.db.get(seen))) return 'skipped';
    const given = this.vectorOf(m.embedding);
    const vector = given ?? (await this.embedContent(m.content));
    const t = iso();
    const rec: MemoryRecord = {
      id: foreign === undefined ? (m.id ?? newId()) : newId(),
      content: m.content,
      memory_type: m.memory_type ?? null,
      owner: m.owner ?? owner,
      namespace,
      entity: m.entity ?? null,
      category: m.category ?? null,
      tags: m.tags ?? [],
      confidence: m.confidence ?? null,
      source: m.source ?? null,
      metadata: foreign === undefined ? (m.metadata ?? {}) : { ...m.metadata, source_id: foreign },
      source_org: m.source_org ?? null,
      source_claw: m.source_claw ?? null,
      deleted_at: null,
      expires_at: m.expires_at ?? null,
      created_at: m.created_at ?? t,
      updated_at: m.updated_at ?? t,
      version: m.version ?? 1,
      embedding: vector ? toBase64(vector) : null,
      embedding_model: vector ? (given ? 'client' : this.embedder.model) : null,
    };
    return { rec, alias };
  }

  /**
   * The writes that store imported records in one commit (a job's batch rides its fenced PROGRESS, so a worker
   * whose lease moved on stores nothing): each record whose id (or alias) is not stored, within its namespace's
   * quota, with its indexes and the namespace's count and owner. Answers each record's outcome in order.
   */
  async importOps(plans: ImportPlan[]): Promise<{ ops: Op[]; outcomes: ('imported' | 'skipped' | AppError)[] }> {
    const recs = plans.map((x) => x.rec);
    const namespaces = [...new Set(recs.map((r) => r.namespace))];
    const [counts, existing, aliased] = await Promise.all([
      this.db.getMany<NamespaceCount>(namespaces.map(memoryKeys.namespace)),
      this.db.getMany(recs.map((r) => memoryKeys.memory(r.id))),
      this.db.getMany(plans.map((x) => x.alias ?? memoryKeys.memory(x.rec.id))),
    ]);
    const held = new Map(namespaces.map((ns, i) => [ns, counts[i]?.value.count ?? 0]));
    const taken = new Set<string>();
    const ops: Op[] = [];
    const outcomes = plans.map(({ rec, alias }, i) => {
      if (existing[i] || aliased[i] || taken.has(rec.id) || (alias && taken.has(alias))) return 'skipped' as const;
      const count = held.get(rec.namespace)!;
      if (count >= this.config.memoryNamespaceQuota) return new AppError('MEMORY_QUOTA_EXCEEDED', `Namespace ${rec.namespace} holds its limit of ${this.config.memoryNamespaceQuota} memories`, { namespace: rec.namespace, limit: this.config.memoryNamespaceQuota });
      taken.add(rec.id);
      if (alias) taken.add(alias);
      held.set(rec.namespace, count + 1);
      ops.push(
        { op: 'put', key: memoryKeys.memory(rec.id), value: rec, expect: 0 },
        { op: 'index', index: memoryIndexes.unindexed, member: rec.id },
        ...liveIndexes(rec).map(([index, member]): Op => ({ op: 'index', index, member })),
        ...(alias ? [{ op: 'put', key: alias, value: { id: rec.id }, expect: 0 } as Op] : []),
      );
      return 'imported' as const;
    });
    for (const [i, ns] of namespaces.entries()) {
      const cur = counts[i];
      if (held.get(ns) === (cur?.value.count ?? 0)) continue;
      // an emptied namespace passes to the role or ring holding its name now
      const owner = cur && cur.value.count > 0 && cur.value.owner_id ? cur.value.owner_id : await this.acl.ownerOf(ns);
      ops.push({ op: 'put', key: memoryKeys.namespace(ns), value: { namespace: ns, count: held.get(ns)!, ...(owner ? { owner_id: owner } : {}) }, expect: cur?.version ?? 0 }, { op: 'index', index: memoryIndexes.namespaces, member: ns });
    }
    return { ops, outcomes };
  }

  /** After the commit `importOps` planned: the stored records into the vector index. */
  importIndexed(recs: MemoryRecord[]): Promise<void> {
    return this.indexed(recs);
  }

  /** Re-embeds these memories with the current provider where another made their vector (jobs); answers how many changed. */
  async reembed(ids: string[], namespace: string | null): Promise<number> {
    const t = now();
    const stale = (await this.records(ids)).filter(
      (r): r is MemoryRecord => isLive(r, t) && (namespace === null || r.namespace === namespace) && r.embedding_model !== 'client' && r.embedding_model !== this.embedder.model,
    );
    if (!stale.length || this.embedder.provider === 'none') return 0;
    const vecs = await this.embedder.embed(stale.map((r) => r.content));
    const done: MemoryRecord[] = [];
    for (let i = 0; i < stale.length; i++) {
      const cur = await this.db.get<MemoryRecord>(memoryKeys.memory(stale[i].id));
      // an update meanwhile embedded the new content itself
      if (!cur || cur.value.content !== stale[i].content || !isLive(cur.value, now())) continue;
      const next: MemoryRecord = { ...cur.value, embedding: toBase64(vecs[i]), embedding_model: this.embedder.model };
      const r = await this.db.commit([
        { op: 'put', key: memoryKeys.memory(next.id), value: next, expect: cur.version },
        { op: 'index', index: memoryIndexes.unindexed, member: next.id },
        ...indexDiff(cur.value, next),
      ]);
      if (r.ok) done.push(next);
    }
    await this.indexed(done);
    return done.length;
  }

  /** Live memories of these ids, as export lines (the view plus its vector). */
  async exportLines(ids: string[]): Promise<string[]> {
    const t = now();
    return (await this.records(ids))
      .filter((r): r is MemoryRecord => isLive(r, t))
      .map((r) => JSON.stringify({ ...memoryView(r), embedding: r.embedding ? Array.from(fromBase64(r.embedding)) : undefined }));
  }

  /** Writes the records to the vector index, then clears their `unindexed` marks. */
  private async indexed(recs: MemoryRecord[]): Promise<void> {
    const t = now();
    await this.index.upsert(recs.filter((r) => isLive(r, t)).map(docOf));
    await this.index.remove(recs.filter((r) => !isLive(r, t)).map((r: MemoryRecord) => r.id));
    await this.db.commit(recs.map((r): Op => ({ op: 'index', index: memoryIndexes.unindexed, member: r.id, remove: true })));
  }

  private async duplicateOf(vector: Float32Array, namespace: string, entity: string | null): Promise<MemoryRecord | undefined> {
    const hits = await this.index.knn(vector, { namespaces: [namespace], ...(entity !== null ? { entity } : {}) }, 10);
    const close = hits.filter((h) => h.score >= DUPLICATE_SIMILARITY);
    const recs = await this.records(close.map((h) => h.id));
    const t = now();
    return recs.find((r) => isLive(r, t) && r.entity === entity);
  }

  /** A memory the caller may read; anything else (missing, forgotten, expired, not readable) is MEMORY_NOT_FOUND, so existence never leaks. */
  async readable(p: Principal, id: string, code: 'MEMORY_NOT_FOUND' | 'GRAPH_MEMORY_NOT_FOUND' = 'MEMORY_NOT_FOUND'): Promise<MemoryRecord> {
    const r = (await this.db.get<MemoryRecord>(memoryKeys.memory(id)))?.value;
    if (!isLive(r, now()) || !(await this.acl.canRead(p, r.namespace))) throw new AppError(code, `No memory ${id}`, { id });
    return r;
  }

  /** A workstream link's summary: the memory when it exists and the caller may read it, else undefined. */
  async linkSummary(p: Principal, id: string): Promise<{ memory: Memory } | undefined> {
    const r = (await this.db.get<MemoryRecord>(memoryKeys.memory(id)))?.value;
    return isLive(r, now()) && (await this.acl.canRead(p, r.namespace)) ? { memory: memoryView(r) } : undefined;
  }

  async get(p: Principal, id: string): Promise<Memory> {
    return memoryView(await this.readable(p, id));
  }

  async list(p: Principal, f: ListFilter, after: string | undefined, limit: number): Promise<Scanned<Memory>> {
    const ns = await this.acl.assertRead(p, f.namespace);
    const index = f.entity !== undefined ? memoryIndexes.byEntity(ns, f.entity) : memoryIndexes.byNamespace(ns);
    return this.scan([index], after, limit, (m) => matchesFilter(m, f));
  }

  /** Memories about the entity in every namespace the caller may read, newest first. */
  async recall(p: Principal, entity: string, after: string | undefined, limit: number): Promise<Scanned<Memory>> {
    const namespaces = await this.acl.readable(p);
    return this.scan(namespaces.map((ns) => memoryIndexes.byEntity(ns, entity)), after, limit, () => true);
  }

  /** The newest memories of every namespace the caller may read (workflow.resume). */
  async recent(p: Principal, limit: number): Promise<Memory[]> {
    const namespaces = await this.acl.readable(p);
    return (await this.scan(namespaces.map((ns) => memoryIndexes.byNamespace(ns)), undefined, limit, () => true)).items;
  }

  private async scan(indexes: string[], after: string | undefined, limit: number, keep: (m: MemoryRecord) => boolean): Promise<Scanned<Memory>> {
    const t = now();
    const s = await scanDesc<MemoryRecord>(this.db, indexes, { before: after, limit, load: (ids) => this.records(ids), keep: (m) => isLive(m, t) && keep(m) });
    return { items: s.items.map(memoryView), cursor: s.cursor };
  }

  /** Soft delete: `deleted_at` is set, the indexes and the vector entry go, the namespace count drops. */
  async forget(p: Principal, id: string): Promise<Memory> {
    const rec = await this.readable(p, id);
    if (!(await this.acl.canWrite(p, rec.namespace))) throw new AppError('MEMORY_NAMESPACE_DENIED', `No write access to namespace ${rec.namespace}`, { namespace: rec.namespace });
    const done = await this.softDelete(id, (m) => isLive(m, now()), await this.acl.audienceOf(rec.namespace));
    if (!done) throw new AppError('MEMORY_NOT_FOUND', `No memory ${id}`, { id });
    return memoryView(done);
  }

  /** Sets `deleted_at`, drops the indexes, the vector entry and one from the namespace count, if `still` holds for the stored record; `memory.forgotten` when an audience is given. */
  private async softDelete(id: string, still: (m: MemoryRecord) => boolean, audience?: EventAudience): Promise<MemoryRecord | undefined> {
    const done = await this.rt.retry(async () => {
      const cur = await this.db.get<MemoryRecord>(memoryKeys.memory(id));
      if (!cur || cur.value.deleted_at !== null || !still(cur.value)) return { result: undefined };
      const ns = await this.db.get<NamespaceCount>(memoryKeys.namespace(cur.value.namespace));
      const t = iso();
      const next: MemoryRecord = { ...cur.value, deleted_at: t, updated_at: t };
      return {
        ops: [
          { op: 'put', key: memoryKeys.memory(id), value: next, expect: cur.version },
          { op: 'put', key: memoryKeys.namespace(next.namespace), value: { ...ns?.value, namespace: next.namespace, count: Math.max(0, (ns?.value.count ?? 1) - 1) }, expect: ns?.version ?? 0 },
          { op: 'index', index: memoryIndexes.unindexed, member: id },
          ...liveIndexes(cur.value).map(([index, member]): Op => ({ op: 'index', index, member, remove: true })),
          ...(audience ? [memoryEvent('memory.forgotten', next, audience)] : []),
        ],
        result: next,
      };
    });
    if (done) await this.indexed([done]);
    return done;
  }

  /** Purges memories whose `expires_at` has passed (they were already hidden from every read). */
  async purgeExpired(): Promise<number> {
    const due = await this.db.range(memoryIndexes.expiring, { lt: expiringMember(now(), '\uffff'), limit: 100 });
    let n = 0;
    for (const member of due) {
      const id = idOfExpiring(member);
      const done = await this.softDelete(id, (m) => m.expires_at !== null && Date.parse(m.expires_at) <= now());
      if (done) n++;
      // a record already gone leaves only its index entry behind
      else await this.db.commit([{ op: 'index', index: memoryIndexes.expiring, member, remove: true }]);
    }
    return n;
  }

  /** Startup: a sweep at once and every `MEMORY_EXPIRY_SWEEP_MS` purges expired memories; durable because the due times are an index in the store. */
  startSweeper(): void {
    const tick = async () => {
      try {
        await this.purgeExpired();
      } catch (e) {
        this.log.warn({ err: e }, 'memory expiry sweep failed');
      }
      if (!this.sweeperStopped) this.sweeper = setTimeout(tick, this.config.memoryExpirySweepMs);
    };
    this.sweeper = setTimeout(tick, 0);
  }

  stopSweeper(): void {
    this.sweeperStopped = true;
    clearTimeout(this.sweeper);
  }

  /** Content, tags, metadata, confidence; a new content is re-embedded. `version` counts the changes. */
  async update(p: Principal, id: string, b: UpdateBody): Promise<Memory> {
    const rec = await this.readable(p, id);
    if (!(await this.acl.canWrite(p, rec.namespace))) throw new AppError('MEMORY_NAMESPACE_DENIED', `No write access to namespace ${rec.namespace}`, { namespace: rec.namespace });
    const given = this.vectorOf(b.embedding);
    const vector = given ?? (b.content !== undefined && b.content !== rec.content ? await this.embedContent(b.content) : undefined);
    const audience = await this.acl.audienceOf(rec.namespace);
    const done = await this.rt.retry(async () => {
      const cur = await this.db.get<MemoryRecord>(memoryKeys.memory(id));
      if (!cur || !isLive(cur.value, now())) throw new AppError('MEMORY_NOT_FOUND', `No memory ${id}`, { id });
      const next: MemoryRecord = {
        ...cur.value,
        content: b.content ?? cur.value.content,
        tags: b.tags ?? cur.value.tags,
        metadata: b.metadata ?? cur.value.metadata,
        confidence: b.confidence ?? cur.value.confidence,
        updated_at: iso(),
        version: cur.value.version + 1,
        ...(vector !== undefined ? { embedding: vector ? toBase64(vector) : null, embedding_model: vector ? (given ? 'client' : this.embedder.model) : null } : {}),
      };
      return {
        ops: [
          { op: 'put', key: memoryKeys.memory(id), value: next, expect: cur.version },
          { op: 'index', index: memoryIndexes.unindexed, member: id },
          ...indexDiff(cur.value, next),
          memoryEvent('memory.updated', next, audience),
        ],
        result: next,
      };
    });
    await this.indexed([done]);
    return memoryView(done);
  }

  async query(p: Principal, b: QueryBody): Promise<{ memories: Scored[]; mode: string }> {
    const ns = await this.acl.assertRead(p, b.namespace);
    const mode = b.mode ?? 'hybrid';
    const limit = b.limit ?? 10;
    const filter: VectorFilter = { namespaces: [ns], entity: b.entity, category: b.category, memory_type: b.memory_type, tags: b.tags };
    let vector: Float32Array | undefined;
    if (mode !== 'keyword') {
      vector = this.vectorOf(b.embedding);
      if (!vector) {
        if (this.embedder.provider === 'none') throw new AppError('EMBEDDING_PROVIDER_UNAVAILABLE', 'Semantic and hybrid search need an embedding provider (EMBEDDING_PROVIDER)', { mode });
        vector = (await this.embedder.embed([b.query]))[0];
      }
    }
    // hybrid fuses deeper lists than it answers, so an item ranked well by one side only can still surface
    const depth = mode === 'hybrid' ? Math.max(limit * 3, 30) : limit;
    const [vhits, khits] = await Promise.all([
      vector ? this.index.knn(vector, filter, depth) : Promise.resolve([] as Hit[]),
      mode !== 'semantic' ? this.index.keyword(b.query, filter, depth) : Promise.resolve([] as Hit[]),
    ]);
    type Ranked = Hit & { vector_rank?: number | null; keyword_rank?: number | null };
    const ranked: Ranked[] = mode === 'semantic' ? vhits : mode === 'keyword' ? khits : fuse(vhits, khits);
    const kept = ranked.filter((h) => b.min_score === undefined || h.score >= b.min_score);
    const recs = await this.records(kept.map((h) => h.id));
    const t = now();
    const memories: Scored[] = [];
    kept.forEach((h, i) => {
      const r = recs[i];
      if (!isLive(r, t) || memories.length >= limit) return;
      const ranks = mode === 'hybrid' ? { vector_rank: h.vector_rank ?? null, keyword_rank: h.keyword_rank ?? null } : {};
      memories.push({ ...memoryView(r), score: h.score, ...ranks });
    });
    return { memories, mode };
  }

  /** Live memories whose vector another provider or model made (client vectors excluded): what a re-embed would do. */
  async reembedBacklog(): Promise<number> {
    const [all, current, client] = await Promise.all([
      this.db.count(memoryIndexes.all),
      this.db.count(memoryIndexes.byModel(this.embedder.provider === 'none' ? null : this.embedder.model)),
      this.db.count(memoryIndexes.byModel('client')),
    ]);
    return Math.max(0, all - current - client);
  }

  /**
   * Live memories of some namespaces: their stored counts less the memories whose `expires_at` has passed
   * but the sweeper has not purged yet (the due part of the expiry index, normally a sweep's worth), so
   * counts hide an expired memory from `expires_at` on like every other read.
   */
  async namespaceCounts(names: string[]): Promise<NamespaceCount[]> {
    const [rows, hidden] = await Promise.all([this.db.getMany<NamespaceCount>(names.map(memoryKeys.namespace)), this.expiredUnpurged()]);
    return rows.map((r, i) => {
      const c = r?.value ?? { namespace: names[i], count: 0 };
      return { namespace: c.namespace, count: Math.max(0, c.count - (hidden.get(c.namespace) ?? 0)) };
    });
  }

  /** Every live memory: the live index's count less the expired ones not purged yet. */
  async liveTotal(): Promise<number> {
    const [all, hidden] = await Promise.all([this.db.count(memoryIndexes.all), this.expiredUnpurged()]);
    return Math.max(0, all - [...hidden.values()].reduce((s, n) => s + n, 0));
  }

  /** Expired memories the sweeper has not purged yet, per namespace. */
  private async expiredUnpurged(): Promise<Map<string, number>> {
    const t = now();
    const due = await this.db.range(memoryIndexes.expiring, { lt: expiringMember(t, '\uffff'), limit: 100_000 });
    const hidden = new Map<string, number>();
    for (const r of await this.records(due.map(idOfExpiring))) if (r && r.deleted_at === null && r.expires_at !== null && Date.parse(r.expires_at) <= t) hidden.set(r.namespace, (hidden.get(r.namespace) ?? 0) + 1);
    return hidden;
  }
}

/** A memory event: pushed to the namespace's readers, narrowed by each key's memory_scopes. */
const memoryEvent = (type: string, r: MemoryRecord, audience: EventAudience): Op => eventOp({ type, subject: 'memory', data: memoryView(r), audience, memory_namespace: r.namespace });

/** Reciprocal rank fusion: score = Σ 1/(60 + rank) over the lists an item appears in (ranks from 1). */
export function fuse(vector: Hit[], keyword: Hit[]): (Hit & { vector_rank: number | null; keyword_rank: number | null })[] {
  const out = new Map<string, Hit & { vector_rank: number | null; keyword_rank: number | null }>();
  const at = (id: string) => out.get(id) ?? out.set(id, { id, score: 0, vector_rank: null, keyword_rank: null }).get(id)!;
  vector.forEach((h, i) => {
    const e = at(h.id);
    e.vector_rank = i + 1;
    e.score += 1 / (RRF_K + i + 1);
  });
  keyword.forEach((h, i) => {
    const e = at(h.id);
    e.keyword_rank = i + 1;
    e.score += 1 / (RRF_K + i + 1);
  });
  return [...out.values()].sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

export function docOf(r: MemoryRecord): VectorDoc {
  return { id: r.id, namespace: r.namespace, entity: r.entity, category: r.category, memory_type: r.memory_type, tags: r.tags, content: r.content, vector: r.embedding ? fromBase64(r.embedding) : null };
}

const matchesFilter = (m: MemoryRecord, f: ListFilter) =>
  (f.entity === undefined || m.entity === f.entity) &&
  (f.category === undefined || m.category === f.category) &&
  (f.memory_type === undefined || m.memory_type === f.memory_type) &&
  (f.tags === undefined || f.tags.every((t) => m.tags.includes(t)));
