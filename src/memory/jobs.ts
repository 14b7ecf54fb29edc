/**
 * Runs memory jobs (job actors, `actors/memory-job.ts`) in batches. A worker CLAIMs a running job whose
 * lease is over, then each batch's PROGRESS moves the cursor and extends the lease, so after a restart
 * (or in another instance) the job resumes where its last committed batch left it. A clean stop RELEASEs
 * the lease at once; a crash leaves it to run out (MEMORY_JOB_LEASE_MS). Every event the worker sends carries
 * the fencing token its CLAIM was granted, and a batch's writes (an import's memories, an export's chunk)
 * commit with its PROGRESS: a worker whose lease lapsed and was granted to another writes nothing and stops.
 */
import Type from 'typebox';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import type { JobContext, JobKind } from '../../actors/memory-job.js';
import type { Artifacts } from '../artifacts/service.js';
import { iso, now } from '../clock.js';
import { AppError, clientError, isAppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Logger } from '../log.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import type { Op } from '../store/port.js';
import { checkDepth, compile, Key } from '../validation.js';
import { canonicalNamespace } from './acl.js';
import { jobIndexes, jobView, MEMORY_JOB } from './job-kind.js';
import { memoryIndexes, MEMORY_TYPES, type MemoryRecord } from './model.js';
import type { ImportedMemory, ImportPlan, Memories } from './service.js';

const POLL_MS = 1000;
const BATCH = 100;

/** A job's failure as its owner reads it: the catalogue view (`clientError`), never an internal message. */
const failure = (e: unknown) => {
  const c = clientError(e);
  return `${c.code}: ${c.message}`;
};
const chunkKey = (jobId: string, step: number) => `memory-export:${jobId}:${step}`;

const Str = Type.String({ minLength: 1 });
const ImportLine = compile(
  Type.Object({
    /** ours (a ULID) is kept; any other system's is kept as metadata.source_id (Memories.importOne) */
    id: Type.Optional(Key('foreign_id')),
    namespace: Key('namespace'),
    content: Str,
    memory_type: Type.Optional(Type.Union([...MEMORY_TYPES.map((t) => Type.Literal(t)), Type.Null()])),
    owner: Type.Optional(Str),
    entity: Type.Optional(Type.Union([Key('entity'), Type.Null()])),
    category: Type.Optional(Type.Union([Str, Type.Null()])),
    tags: Type.Optional(Type.Array(Key('tag'))),
    confidence: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()])),
    source: Type.Optional(Type.Union([Str, Type.Null()])),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    source_org: Type.Optional(Type.Union([Str, Type.Null()])),
    source_claw: Type.Optional(Type.Union([Str, Type.Null()])),
    expires_at: Type.Optional(Type.Union([Type.String({ format: 'date-time' }), Type.Null()])),
    created_at: Type.Optional(Type.String({ format: 'date-time' })),
    updated_at: Type.Optional(Type.String({ format: 'date-time' })),
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    embedding: Type.Optional(Type.Array(Type.Number())),
  }),
);

interface Step {
  done: boolean;
  cursor: string | null;
  processed: number;
  counts: Record<string, number>;
  errors: { line: number; error: string }[];
  /** the batch's writes, committed with its PROGRESS (planned again on a retry of that commit) */
  writes?: () => Promise<Op[]>;
  /** imported records, into the vector index once committed */
  stored?: MemoryRecord[];
}

/** An import batch's plan went stale between planning and its commit (a memory stored meanwhile): redo the batch. */
class Replan extends Error {}

export class Jobs {
  private local = new Map<string, Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private rt: Runtime,
    private memories: Memories,
    private artifacts: Artifacts,
    private log: Logger,
    private leaseMs: number,
  ) {}

  async create(p: Principal, kind: JobKind, given: { namespace?: string; ndjson?: string; artifact_id?: string }): Promise<ReturnType<typeof jobView>> {
    const done = committedEffect<ReturnType<typeof jobView>>(p);
    if (done) return done;
    const params = kind === 'import' ? { ndjson: await this.importText(p, given) } : given;
    const namespace = params.namespace !== undefined ? canonicalNamespace(params.namespace) : null;
    const store = this.rt.store;
    const total =
      kind === 'import'
        ? (params.ndjson ?? '').split('\n').filter((l) => l.trim()).length
        : await store.count(namespace !== null ? memoryIndexes.byNamespace(namespace) : memoryIndexes.all);
    // an import spends a unit of the key's budget per line, as a batch emit does per signal (the request's own pays the first)
    if (kind === 'import') await p.spend?.(total);
    const t = iso();
    const id = newId();
    const record: ActorRecord<JobContext> = {
      value: 'running',
      context: {
        id, kind, params: { namespace, ...(kind === 'import' ? { ndjson: params.ndjson ?? '' } : {}) }, cursor: null, step: 0, processed: 0, total,
        counts: {}, errors: [], result: null, lease_until: 0, created_by: p.identity.id, created_at: t, updated_at: t,
      },
    };
    const res = await store.commit([...this.rt.createOps(MEMORY_JOB, id, record, p.requestId), ...effectOps(p, jobView(record))]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'job id collision');
    void this.poll();
    return jobView(record);
  }

  /** An import's NDJSON: given inline, or the content of an artifact the caller may see. */
  private async importText(p: Principal, b: { ndjson?: string; artifact_id?: string }): Promise<string> {
    if ((b.ndjson === undefined) === (b.artifact_id === undefined)) throw new AppError('MEMORY_VALIDATION_FAILED', 'Exactly one of ndjson or artifact_id is required', { field: 'ndjson' });
    if (b.ndjson !== undefined) return b.ndjson;
    const ndjson = await text((await this.artifacts.content(p, b.artifact_id!, undefined)).stream);
    if (!ndjson.trim()) throw new AppError('MEMORY_VALIDATION_FAILED', 'The artifact is empty', { field: 'artifact_id' });
    return ndjson;
  }

  private async exportText(id: string, steps: number): Promise<string> {
    const chunks = await this.rt.store.getMany<{ lines: string[] }>(Array.from({ length: steps }, (_, i) => chunkKey(id, i)));
    return chunks.flatMap((c) => c?.value.lines ?? []).map((l) => l + '\n').join('');
  }

  /** The job of this kind, with an export's NDJSON once it is complete; MEMORY_NOT_FOUND otherwise. */
  async get(kind: JobKind, id: string) {
    const r = (await this.rt.load<JobContext>(MEMORY_JOB, id))?.value;
    if (!r || r.context.kind !== kind) throw new AppError('MEMORY_NOT_FOUND', `No ${kind} job ${id}`, { id });
    const view = jobView(r);
    if (kind !== 'export' || r.value !== 'completed') return view;
    return { ...view, result: { ...view.result, ndjson: await this.exportText(id, r.context.step) } };
  }

  async countsByState(): Promise<Record<string, number>> {
    const states = ['running', 'completed', 'failed'];
    const n = await Promise.all(states.map((s) => this.rt.store.count(jobIndexes.byState(s))));
    return Object.fromEntries(states.map((s, i) => [s, n[i]]));
  }

  start(): void {
    const tick = async () => {
      await this.poll();
      if (!this.stopped) this.timer = setTimeout(tick, POLL_MS);
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.allSettled([...this.local.values()]);
  }

  private async poll(): Promise<void> {
    if (this.stopped) return;
    try {
      const ids = await this.rt.store.range(jobIndexes.byState('running'), { limit: 100 });
      for (const id of ids) {
        if (this.local.has(id)) continue;
        const claimed = await this.rt.send<JobContext>(MEMORY_JOB, id, { type: 'CLAIM', lease_until: now() + this.leaseMs }, { quiet: true });
        if (!claimed) continue;
        const run = this.run(id, claimed.record.context.fence ?? 0).finally(() => this.local.delete(id));
        this.local.set(id, run);
      }
    } catch (e) {
      this.log.warn({ err: e }, 'memory job poll failed');
    }
  }

  /** Runs the job while this worker holds the grant `fence`; any event refused (the lease moved on) ends it here. */
  private async run(id: string, fence: number): Promise<void> {
    const send = (event: Record<string, unknown> & { type: string }, extra?: () => Promise<Op[]>) =>
      this.rt.send<JobContext>(MEMORY_JOB, id, { ...event, fence }, { quiet: true, extra });
    for (;;) {
      const r = (await this.rt.load<JobContext>(MEMORY_JOB, id))?.value;
      if (!r || r.value !== 'running' || (r.context.fence ?? 0) !== fence) return;
      if (this.stopped) {
        await send({ type: 'RELEASE' });
        return;
      }
      let step: Step;
      try {
        step = await this.step(r.context);
      } catch (e) {
        this.log.warn({ err: e, job: id }, 'memory job failed');
        await send({ type: 'FAIL', error: failure(e) });
        return;
      }
      if (step.done) {
        const c = r.context;
        let result: Record<string, unknown> = c.counts;
        try {
          if (c.kind === 'export') result = { ...c.counts, lines: c.counts.exported ?? 0, artifact_id: await this.exportArtifact(c) };
        } catch (e) {
          this.log.warn({ err: e, job: id }, 'memory export upload failed');
          await send({ type: 'FAIL', error: failure(e) });
          return;
        }
        await send({ type: 'COMPLETE', result });
        return;
      }
      const { writes, stored, ...progress } = step;
      let moved;
      try {
        moved = await send({ type: 'PROGRESS', lease_until: now() + this.leaseMs, ...progress }, writes);
      } catch (e) {
        if (e instanceof Replan) continue;
        throw e;
      }
      if (!moved) return;
      if (stored?.length) await this.memories.importIndexed(stored);
    }
  }

  /** The finished export as a private artifact of the admin who started it (a crash before COMPLETE uploads it again). */
  private async exportArtifact(c: JobContext): Promise<string> {
    const body = Buffer.from(await this.exportText(c.id, c.step), 'utf8');
    const name = `memory-export-${c.params.namespace ?? 'all'}-${c.id}.ndjson`.replace(/[^\w.-]/g, '_');
    const a = await this.artifacts.create(c.created_by, { name, visibility: 'private', tags: ['memory-export'], metadata: { job_id: c.id, namespace: c.params.namespace } }, Readable.from([body]), 'application/x-ndjson');
    return a.id;
  }

  private async step(c: JobContext): Promise<Step> {
    const ns = c.params.namespace;
    if (c.kind === 'import') return this.importStep(c);
    const index = ns !== null ? memoryIndexes.byNamespace(ns) : memoryIndexes.all;
    const ids = await this.rt.store.range(index, { gt: c.cursor ?? undefined, limit: BATCH });
    const base = { done: !ids.length, cursor: ids.length ? ids[ids.length - 1] : c.cursor, processed: ids.length, errors: [] };
    if (!ids.length) return { ...base, counts: {} };
    if (c.kind === 're-embed') return { ...base, counts: { reembedded: await this.memories.reembed(ids, ns) } };
    const lines = await this.memories.exportLines(ids);
    return { ...base, counts: { exported: lines.length }, writes: async () => [{ op: 'put', key: chunkKey(c.id, c.step), value: { lines } }] };
  }

  private async importStep(c: JobContext): Promise<Step> {
    const lines = (c.params.ndjson ?? '').split('\n');
    const start = c.cursor === null ? 0 : Number(c.cursor);
    if (start >= lines.length) return { done: true, cursor: c.cursor, processed: 0, counts: {}, errors: [] };
    const end = Math.min(lines.length, start + BATCH);
    const counts = { imported: 0, skipped: 0, failed: 0 };
    const errors: Step['errors'] = [];
    const recs: ImportPlan[] = [];
    const lineOf: number[] = [];
    let processed = 0;
    for (let i = start; i < end; i++) {
      const text = lines[i].trim();
      if (!text) continue;
      processed++;
      try {
        const rec = await this.memories.importRecord(importLine(text), c.created_by);
        if (rec === 'skipped') {
          counts.skipped++;
          continue;
        }
        recs.push(rec);
        lineOf.push(i + 1);
      } catch (e) {
        if (!isAppError(e) || e.code === 'EMBEDDING_PROVIDER_ERROR') throw e;
        counts.failed++;
        errors.push({ line: i + 1, error: failure(e) });
      }
    }
    const plan = await this.memories.importOps(recs);
    plan.outcomes.forEach((o, k) => {
      if (typeof o === 'string') return void counts[o]++;
      counts.failed++;
      errors.push({ line: lineOf[k], error: failure(o) });
    });
    errors.sort((a, b) => a.line - b.line);
    const writes = async () => {
      const again = await this.memories.importOps(recs);
      if (again.outcomes.some((o, k) => String(o) !== String(plan.outcomes[k]))) throw new Replan();
      return again.ops;
    };
    return { done: false, cursor: String(end), processed, counts, errors, writes, stored: recs.filter((_, k) => plan.outcomes[k] === 'imported').map((x) => x.rec) };
  }
}

/** One NDJSON line as an import record, or MEMORY_VALIDATION_FAILED saying why not. */
function importLine(text: string): ImportedMemory {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError('MEMORY_VALIDATION_FAILED', 'not JSON');
  }
  if (!ImportLine.check(parsed)) {
    const first = ImportLine.errors(parsed)[0];
    throw new AppError('MEMORY_VALIDATION_FAILED', `${first?.instancePath || first?.params?.requiredProperties || 'line'}: ${first?.message ?? 'invalid'}`);
  }
  return checkDepth(ImportLine, parsed) as ImportedMemory;
}
