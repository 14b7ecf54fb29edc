/**
 * Workstreams and their links. A link names a resource by kind and id; resolving one (to check it on link,
 * and to expand it in the context) goes through a resolver per kind that answers a summary only when the
 * resource exists and the caller may see it. signal, workspace_item, artifact and workstream are resolved
 * here; other kinds (memory) are registered by the part that owns them (`register`).
 */
import { iso } from '../clock.js';
import { eventOp } from '../journal/journal.js';
import { AppError } from '../errors.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import { outOfScope } from '../signals/policy.js';
import type { Signals } from '../signals/service.js';
import { signalView } from '../signals/kind.js';
import { THREAD_PAGE } from '../signals/schemas.js';
import type { Store, Versioned } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import type { Artifacts } from '../artifacts/service.js';
import { requireMember } from '../workspace/access.js';
import type { Workspace } from '../workspace/service.js';
import { MAX_LINKS, workstreamIndexes, workstreamKeys, type LinkKind, type Workstream, type WorkstreamStatus } from './model.js';

/** A summary of the resource when it exists and `p` may see it, else undefined. */
export type LinkResolver = (p: Principal, id: string) => Promise<Record<string, unknown> | undefined>;

export interface WorkstreamBody {
  name?: string;
  description?: string;
  status?: WorkstreamStatus;
  tags?: string[];
}

export interface Context {
  workstream: Workstream;
  resources: ({ kind: LinkKind; id: string } & Record<string, unknown>)[];
  /** links the caller may not see (or whose resource is gone): counted, never shown */
  hidden: number;
}

export class Workstreams {
  private resolvers = new Map<LinkKind, LinkResolver>();

  constructor(
    private rt: Runtime,
    signals: Signals,
    workspace: Workspace,
    artifacts: Artifacts,
  ) {
    this.register('signal', async (p, id) => {
      const r = await signals.load(id).catch(notFoundAsUndefined);
      if (!r || outOfScope(p.key, r.context)) return undefined;
      // the first page of the thread; GET /thread/:id pages on when thread_has_more
      const thread = await signals.thread(p, id, undefined, THREAD_PAGE);
      return { signal: signalView(r), thread: thread.items, thread_has_more: thread.cursor !== null };
    });
    this.register('workspace_item', (p, id) => workspace.summary(p, id).catch(notFoundAsUndefined));
    this.register('artifact', async (p, id) => {
      const a = await artifacts.find(p, id);
      return a && { artifact: a };
    });
    this.register('workstream', async (_p, id) => {
      const w = await this.store.get<Workstream>(workstreamKeys.workstream(id));
      return w && { workstream: w.value };
    });
  }

  /** Adds (or replaces) the resolver of a link kind: how a part outside this folder (memory) makes its resources linkable. */
  register(kind: LinkKind, resolve: LinkResolver): void {
    this.resolvers.set(kind, resolve);
  }

  private get store(): Store {
    return this.rt.store;
  }

  private async load(id: string): Promise<Versioned<Workstream>> {
    const r = await this.store.get<Workstream>(workstreamKeys.workstream(id));
    if (!r) throw new AppError('WORKSTREAM_NOT_FOUND', `No workstream ${id}`);
    return r;
  }

  async create(p: Principal, b: Required<Pick<WorkstreamBody, 'name'>> & WorkstreamBody): Promise<Workstream> {
    requireMember(p);
    const done = committedEffect<Workstream>(p);
    if (done) return done;
    const t = iso();
    const w: Workstream = { id: newId(), name: b.name, description: b.description ?? '', status: b.status ?? 'active', tags: b.tags ?? [], links: [], created_by: p.identity.id, created_at: t, updated_at: t };
    const res = await this.store.commit([
      { op: 'put', key: workstreamKeys.workstream(w.id), value: w, expect: 0 },
      { op: 'index', index: workstreamIndexes.all, member: w.id },
      ...effectOps(p, w),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'workstream id collision');
    return w;
  }

  async get(p: Principal, id: string): Promise<Workstream> {
    requireMember(p);
    return (await this.load(id)).value;
  }

  async list(p: Principal, f: { status?: WorkstreamStatus; tag?: string }, before: string | undefined, limit: number): Promise<Scanned<Workstream>> {
    requireMember(p);
    return scanDesc(this.store, [workstreamIndexes.all], {
      before,
      limit,
      load: async (ids) => (await this.store.getMany<Workstream>(ids.map(workstreamKeys.workstream))).map((r) => r?.value),
      keep: (w) => (f.status === undefined || w.status === f.status) && (f.tag === undefined || w.tags.includes(f.tag)),
    });
  }

  /** Active workstreams the caller created or linked something to, newest first (workflow.resume); none for a non-member. */
  async activeFor(p: Principal, limit: number): Promise<Workstream[]> {
    if (p.membership?.status !== 'active') return [];
    const mine = (w: Workstream) => w.status === 'active' && (w.created_by === p.identity.id || w.links.some((l) => l.linked_by === p.identity.id));
    return (await scanDesc(this.store, [workstreamIndexes.all], { limit, load: async (ids) => (await this.store.getMany<Workstream>(ids.map(workstreamKeys.workstream))).map((r) => r?.value), keep: mine })).items;
  }

  async update(p: Principal, id: string, b: WorkstreamBody): Promise<Workstream> {
    requireMember(p);
    return this.rt.retry(async () => {
      const cur = await this.load(id);
      const next: Workstream = { ...cur.value, ...definedOf(b), updated_at: iso() };
      return { result: next, ops: [{ op: 'put', key: workstreamKeys.workstream(id), value: next, expect: cur.version }, updated(next)] };
    });
  }

  /** Links a resource that exists and the caller may see; linking it again changes nothing. */
  async link(p: Principal, id: string, kind: LinkKind, targetId: string): Promise<Workstream> {
    requireMember(p);
    const done = committedEffect<Workstream>(p);
    if (done) return done;
    await this.load(id);
    if (kind === 'workstream' && targetId === id) throw new AppError('WORKSTREAM_VALIDATION_FAILED', 'A workstream cannot link itself', { field: 'id' });
    const resolve = this.resolvers.get(kind);
    if (!resolve) throw new AppError('WORKSTREAM_LINK_TARGET_NOT_FOUND', `This instance cannot resolve ${kind} links yet`, { kind, id: targetId });
    if (!(await resolve(p, targetId))) throw new AppError('WORKSTREAM_LINK_TARGET_NOT_FOUND', `No ${kind} ${targetId}`, { kind, id: targetId });
    return this.rt.retry(async () => {
      const cur = await this.load(id);
      if (cur.value.links.some((l) => l.kind === kind && l.id === targetId)) return { result: cur.value };
      if (cur.value.links.length >= MAX_LINKS) throw new AppError('WORKSTREAM_VALIDATION_FAILED', `A workstream holds at most ${MAX_LINKS} links`, { field: 'links' });
      const t = iso();
      const next: Workstream = { ...cur.value, links: [...cur.value.links, { kind, id: targetId, linked_by: p.identity.id, linked_at: t }], updated_at: t };
      return { result: next, ops: [{ op: 'put', key: workstreamKeys.workstream(id), value: next, expect: cur.version }, updated(next), ...effectOps(p, next)] };
    });
  }

  async unlink(p: Principal, id: string, kind: LinkKind, targetId: string): Promise<Workstream> {
    requireMember(p);
    return this.rt.retry(async () => {
      const cur = await this.load(id);
      const links = cur.value.links.filter((l) => !(l.kind === kind && l.id === targetId));
      if (links.length === cur.value.links.length) throw new AppError('WORKSTREAM_LINK_NOT_FOUND', `No ${kind} ${targetId} linked`, { kind, id: targetId });
      const next: Workstream = { ...cur.value, links, updated_at: iso() };
      return { result: next, ops: [{ op: 'put', key: workstreamKeys.workstream(id), value: next, expect: cur.version }, updated(next)] };
    });
  }

  /** Every linked resource the caller may see, expanded: signals with their thread, files with their latest revision. */
  async context(p: Principal, id: string): Promise<Context> {
    requireMember(p);
    const w = (await this.load(id)).value;
    const resolved = await Promise.all(w.links.map(async (l) => ({ l, s: await this.resolvers.get(l.kind)?.(p, l.id) })));
    const resources = resolved.filter((r) => r.s).map(({ l, s }) => ({ kind: l.kind, id: l.id, linked_at: l.linked_at, ...s }));
    return { workstream: w, resources, hidden: w.links.length - resources.length };
  }
}

function notFoundAsUndefined(e: unknown): undefined {
  if (e instanceof AppError && e.status === 404) return undefined;
  throw e;
}

const definedOf = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** A changed workstream (fields or links), pushed to every member. */
const updated = (w: Workstream) => eventOp({ type: 'workstream.updated', subject: 'workstream', data: w, audience: { members: true } });
