/**
 * Relation edges between memories and breadth-first graph expansion. Edges carry `valid_from` /
 * `valid_to` (a changed fact ends an edge rather than deleting it); `at` asks for the graph as of a
 * time. Every node is checked against the caller's ACL: an edge to a memory the caller cannot read is
 * not shown, and neither is anything beyond it.
 */
import { iso, now } from '../clock.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import type { Op } from '../store/port.js';
import type { Acl, Places } from './acl.js';
import { isLive, memoryIndexes, memoryKeys, memoryView, type Memory, type MemoryRecord } from './model.js';
import type { Memories } from './service.js';

export interface Edge {
  id: string;
  from_id: string;
  to_id: string;
  relation: string;
  weight: number;
  metadata: Record<string, unknown>;
  valid_from: string | null;
  valid_to: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export interface EdgeBody {
  relation?: string;
  weight?: number;
  metadata?: Record<string, unknown>;
  valid_from?: string | null;
  valid_to?: string | null;
}

const MAX_NODES = 500;
const EDGES_PER_NODE = 1000;

const validAt = (e: Edge, at: number) => (e.valid_from === null || Date.parse(e.valid_from) <= at) && (e.valid_to === null || at < Date.parse(e.valid_to));

function checkWindow(e: Pick<Edge, 'valid_from' | 'valid_to'>): void {
  if (e.valid_from !== null && e.valid_to !== null && Date.parse(e.valid_to) <= Date.parse(e.valid_from)) {
    throw new AppError('MEMORY_VALIDATION_FAILED', 'valid_to must be after valid_from', { field: 'valid_to', reason: 'window' });
  }
}

export class Graph {
  constructor(
    private rt: Runtime,
    private acl: Acl,
    private memories: Memories,
  ) {}

  private async writable(p: Principal, m: MemoryRecord): Promise<void> {
    if (!(await this.acl.canWrite(p, m.namespace))) throw new AppError('MEMORY_NAMESPACE_DENIED', `No write access to namespace ${m.namespace}`, { namespace: m.namespace });
  }

  async relate(p: Principal, b: EdgeBody & { from_id: string; to_id: string; relation: string }): Promise<Edge> {
    if (b.from_id === b.to_id) throw new AppError('GRAPH_SELF_REFERENCE', 'An edge needs two different memories', { field: 'to_id' });
    const done = committedEffect<Edge>(p);
    if (done) return done;
    const from = await this.memories.readable(p, b.from_id, 'GRAPH_MEMORY_NOT_FOUND');
    await this.memories.readable(p, b.to_id, 'GRAPH_MEMORY_NOT_FOUND');
    await this.writable(p, from);
    const t = iso();
    const edge: Edge = {
      id: newId(),
      from_id: b.from_id,
      to_id: b.to_id,
      relation: b.relation,
      weight: b.weight ?? 1,
      metadata: b.metadata ?? {},
      valid_from: b.valid_from ? iso(Date.parse(b.valid_from)) : null,
      valid_to: b.valid_to ? iso(Date.parse(b.valid_to)) : null,
      created_by: p.identity.id,
      created_at: t,
      updated_at: t,
    };
    checkWindow(edge);
    const res = await this.rt.store.commit([
      { op: 'put', key: memoryKeys.edge(edge.id), value: edge, expect: 0 },
      { op: 'index', index: memoryIndexes.edgesFrom(edge.from_id), member: edge.id },
      { op: 'index', index: memoryIndexes.edgesTo(edge.to_id), member: edge.id },
      ...effectOps(p, edge),
    ]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'edge id collision');
    return edge;
  }

  /** An edge whose source memory the caller can read; anything else is GRAPH_EDGE_NOT_FOUND. */
  private async edge(p: Principal, id: string): Promise<{ edge: Edge; version: number; from: MemoryRecord }> {
    const cur = await this.rt.store.get<Edge>(memoryKeys.edge(id));
    if (!cur) throw new AppError('GRAPH_EDGE_NOT_FOUND', `No edge ${id}`, { id });
    const from = await this.memories.readable(p, cur.value.from_id).catch(() => {
      throw new AppError('GRAPH_EDGE_NOT_FOUND', `No edge ${id}`, { id });
    });
    return { edge: cur.value, version: cur.version, from };
  }

  async updateEdge(p: Principal, id: string, b: EdgeBody): Promise<Edge> {
    return this.rt.retry(async () => {
      const { edge, version, from } = await this.edge(p, id);
      await this.writable(p, from);
      const next: Edge = {
        ...edge,
        relation: b.relation ?? edge.relation,
        weight: b.weight ?? edge.weight,
        metadata: b.metadata ?? edge.metadata,
        valid_from: b.valid_from === undefined ? edge.valid_from : b.valid_from && iso(Date.parse(b.valid_from)),
        valid_to: b.valid_to === undefined ? edge.valid_to : b.valid_to && iso(Date.parse(b.valid_to)),
        updated_at: iso(),
      };
      checkWindow(next);
      return { ops: [{ op: 'put', key: memoryKeys.edge(id), value: next, expect: version }], result: next };
    });
  }

  async deleteEdge(p: Principal, id: string): Promise<Edge> {
    return this.rt.retry(async () => {
      const { edge, version, from } = await this.edge(p, id);
      await this.writable(p, from);
      const ops: Op[] = [
        { op: 'del', key: memoryKeys.edge(id), expect: version },
        { op: 'index', index: memoryIndexes.edgesFrom(edge.from_id), member: id, remove: true },
        { op: 'index', index: memoryIndexes.edgesTo(edge.to_id), member: id, remove: true },
      ];
      return { ops, result: edge };
    });
  }

  private async edgesOf(id: string, direction: 'out' | 'in' | 'both'): Promise<Edge[]> {
    const lists = await Promise.all([
      direction !== 'in' ? this.rt.store.range(memoryIndexes.edgesFrom(id), { limit: EDGES_PER_NODE }) : [],
      direction !== 'out' ? this.rt.store.range(memoryIndexes.edgesTo(id), { limit: EDGES_PER_NODE }) : [],
    ]);
    const ids = [...new Set(lists.flat())];
    return (await this.rt.store.getMany<Edge>(ids.map(memoryKeys.edge))).filter((r) => r).map((r) => r!.value);
  }

  /** Reads with one ACL lookup per namespace for the whole request. */
  private async reader(p: Principal): Promise<(ids: string[]) => Promise<Map<string, MemoryRecord>>> {
    const places: Places = await this.acl.places(p);
    const allowed = new Map<string, boolean>();
    return async (ids) => {
      const recs = await this.rt.store.getMany<MemoryRecord>(ids.map(memoryKeys.memory));
      const out = new Map<string, MemoryRecord>();
      const t = now();
      for (const r of recs) {
        const m = r?.value;
        if (!isLive(m, t)) continue;
        if (!allowed.has(m.namespace)) allowed.set(m.namespace, await this.acl.canRead(p, m.namespace, places));
        if (allowed.get(m.namespace)) out.set(m.id, m);
      }
      return out;
    };
  }

  async edges(p: Principal, id: string, q: { direction?: 'out' | 'in' | 'both'; relation?: string }): Promise<Edge[]> {
    await this.memories.readable(p, id, 'GRAPH_MEMORY_NOT_FOUND');
    const edges = (await this.edgesOf(id, q.direction ?? 'both')).filter((e) => q.relation === undefined || e.relation === q.relation);
    const visible = await (await this.reader(p))(edges.map((e) => (e.from_id === id ? e.to_id : e.from_id)));
    return edges.filter((e) => visible.has(e.from_id === id ? e.to_id : e.from_id)).sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  async expand(p: Principal, id: string, q: { depth?: number; relation?: string; at?: string }): Promise<{ root: string; nodes: (Memory & { depth: number })[]; edges: Edge[] }> {
    const root = await this.memories.readable(p, id, 'GRAPH_MEMORY_NOT_FOUND');
    const read = await this.reader(p);
    const at = q.at !== undefined ? Date.parse(q.at) : undefined;
    const nodes = new Map<string, Memory & { depth: number }>([[root.id, { ...memoryView(root), depth: 0 }]]);
    const edges = new Map<string, Edge>();
    let frontier = [root.id];
    for (let depth = 1; depth <= (q.depth ?? 1) && frontier.length && nodes.size < MAX_NODES; depth++) {
      const found = (await Promise.all(frontier.map((n) => this.edgesOf(n, 'both')))).flat()
        .filter((e) => (q.relation === undefined || e.relation === q.relation) && (at === undefined || validAt(e, at)));
      const others = [...new Set(found.flatMap((e) => [e.from_id, e.to_id]).filter((n) => !nodes.has(n)))];
      const visible = await read(others);
      const next: string[] = [];
      for (const e of found) {
        const ends = [e.from_id, e.to_id];
        if (!ends.every((n) => nodes.has(n) || visible.has(n))) continue;
        for (const n of ends) {
          if (nodes.has(n) || nodes.size >= MAX_NODES) continue;
          nodes.set(n, { ...memoryView(visible.get(n)!), depth });
          next.push(n);
        }
        if (ends.every((n) => nodes.has(n))) edges.set(e.id, e);
      }
      frontier = next;
    }
    return { root: root.id, nodes: [...nodes.values()], edges: [...edges.values()].sort((a, b) => (a.id < b.id ? -1 : 1)) };
  }
}
