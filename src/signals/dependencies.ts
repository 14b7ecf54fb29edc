/**
 * Task dependencies (docs/signals.md, Dependencies). A task names its dependencies at emit (`depends_on`), so
 * no cycle can form. Each dependency keeps the list of its dependants in one record, written by the emit and
 * checked by the dependency's end: whichever commits second re-plans, so a dependant is never missed. The end
 * of a dependency moves its dependants in the same commit (`signalKind.alongside`): the last completed makes
 * a task claimable there; a cancelled, dead-lettered, expired or blocked one blocks it, and so on downstream.
 */
import type { DependencyEnd, SignalContext } from '../../actors/signal.js';
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { actorKey, type ActorRecord, type Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { SIGNAL } from './kind.js';
import { outOfScope } from './policy.js';

/** dependants one task may have: its dependants record is read and its dependants moved in one commit */
export const DEPENDANTS_MAX = 1000;
/** tasks a graph answer shows in each direction */
export const GRAPH_MAX = 500;

export const dependantsKey = (id: string) => `task-dependants:${id}`;
interface Dependants {
  ids: string[];
}

/** How a task ended, as its dependants hear it; undefined while it may still complete. */
export function endOf(r: ActorRecord<SignalContext> | undefined): 'completed' | DependencyEnd | undefined {
  if (!r) return undefined;
  if (r.value === 'acked') return r.context.task_status === 'completed' ? 'completed' : 'cancelled';
  if (r.value === 'dead_letter') return r.context.task_status === 'expired' ? 'expired' : 'dead_letter';
  if (r.value === 'blocked') return 'blocked';
  return undefined;
}

/**
 * The moves of the dependants of a task that has just ended, and downstream of each one that becomes blocked;
 * each actor moves once per commit (`seen`).
 */
export async function dependantOps(rt: Runtime, id: string, rec: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined, requestId?: string, seen = new Set<string>([id])): Promise<Op[]> {
  const end = endOf(rec);
  if (rec.context.signal_type !== 'task' || !prev || !end || endOf(prev)) return [];
  const stored = await rt.store.get<Dependants>(dependantsKey(id));
  // none yet: the commit still checks that none came, or a dependant emitted meanwhile would wait forever
  if (!stored) return [{ op: 'check', key: dependantsKey(id), expect: 0 }];
  const ops: Op[] = [{ op: 'check', key: dependantsKey(id), expect: stored.version }];
  const ids = stored.value.ids.filter((d) => !seen.has(d));
  const rows = await rt.loadStoredMany<SignalContext>(SIGNAL, ids);
  const event = end === 'completed' ? { type: 'DEPENDENCY_COMPLETED', dependency_id: id } : { type: 'DEPENDENCY_FAILED', dependency_id: id, reason: end };
  for (const [i, row] of rows.entries()) {
    if (!row || seen.has(ids[i])) continue;
    const move = rt.moveOps<SignalContext>(SIGNAL, ids[i], row, event, requestId);
    if (!move) continue;
    seen.add(ids[i]);
    ops.push(...move.ops, ...(await dependantOps(rt, ids[i], move.record, row.value, requestId, seen)));
  }
  return ops;
}

export interface DependencyPlan {
  /** the dependencies not completed yet */
  blocked_by: string[];
  /** set when a dependency already ended without completing: the task is born blocked */
  blocked_reason: { dependency_id: string; reason: DependencyEnd } | null;
  /** the emit commit's share: each dependency unchanged since read, and the new task in its dependants */
  ops: Op[];
}

/** Reads the dependencies an emit names (planned again on every attempt of its commit). */
export async function planDependencies(rt: Runtime, p: Principal, taskId: string, dependsOn: string[]): Promise<DependencyPlan> {
  const ids = [...new Set(dependsOn)];
  const [rows, lists] = await Promise.all([rt.loadStoredMany<SignalContext>(SIGNAL, ids), rt.store.getMany<Dependants>(ids.map(dependantsKey))]);
  const plan: DependencyPlan = { blocked_by: [], blocked_reason: null, ops: [] };
  for (const [i, row] of rows.entries()) {
    const dep = ids[i];
    if (!row || outOfScope(p.key, row.value.context)) throw new AppError('SIGNAL_NOT_FOUND', `No task signal ${dep}`, { field: 'depends_on', id: dep });
    if (row.value.context.signal_type !== 'task') throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${dep} is not a task signal`, { field: 'depends_on', id: dep });
    const end = endOf(row.value);
    if (end === undefined) plan.blocked_by.push(dep);
    else if (end !== 'completed') plan.blocked_reason ??= { dependency_id: dep, reason: end };
    const list = lists[i];
    const dependants = list?.value.ids ?? [];
    if (dependants.length >= DEPENDANTS_MAX) throw new AppError('SIGNAL_EMIT_VALIDATION_FAILED', `${dep} already has ${DEPENDANTS_MAX} dependants`, { field: 'depends_on', id: dep });
    plan.ops.push({ op: 'check', key: actorKey(SIGNAL, dep), expect: row.version }, { op: 'put', key: dependantsKey(dep), value: { ids: [...dependants, taskId] }, expect: list?.version ?? 0 });
  }
  return plan;
}

export interface GraphNode {
  id: string;
  content: string;
  delivery_state: string;
  task_status: string | null;
  priority: number;
  depends_on: string[];
  blocked_by: string[];
  claimed_by: string | null;
  /** steps from the task asked about (1: a direct dependency or dependant) */
  depth: number;
  /** what a direct dependency reported when it completed (a dependant's inputs); absent on other nodes */
  result?: unknown;
  result_resources?: unknown[];
}

/** A task's upstream (what it waits for, transitively) and downstream (what waits for it), breadth first, GRAPH_MAX each. */
export async function taskGraph(rt: Runtime, p: Principal, root: ActorRecord<SignalContext>): Promise<{ upstream: GraphNode[]; downstream: GraphNode[]; truncated: boolean }> {
  const up = await walk(rt, p, root, async (r) => r.context.depends_on ?? [], true);
  const down = await walk(rt, p, root, async (r) => (await rt.store.get<Dependants>(dependantsKey(r.context.id)))?.value.ids ?? []);
  return { upstream: up.nodes, downstream: down.nodes, truncated: up.truncated || down.truncated };
}

async function walk(rt: Runtime, p: Principal, root: ActorRecord<SignalContext>, next: (r: ActorRecord<SignalContext>) => Promise<string[]>, results = false): Promise<{ nodes: GraphNode[]; truncated: boolean }> {
  const seen = new Set([root.context.id]);
  const nodes: GraphNode[] = [];
  let level = [root];
  for (let depth = 1; level.length; depth++) {
    const ids = [...new Set((await Promise.all(level.map(next))).flat())].filter((id) => !seen.has(id));
    ids.forEach((id) => seen.add(id));
    const rows = (await rt.loadMany<SignalContext>(SIGNAL, ids)).filter((r): r is ActorRecord<SignalContext> => !!r && !outOfScope(p.key, r.context));
    for (const r of rows) {
      if (nodes.length === GRAPH_MAX) return { nodes, truncated: true };
      nodes.push(results && depth === 1 ? { ...graphNode(r, depth), result: r.context.result ?? null, result_resources: r.context.result_resources ?? [] } : graphNode(r, depth));
    }
    level = rows;
  }
  return { nodes, truncated: false };
}

const graphNode = (r: ActorRecord<SignalContext>, depth: number): GraphNode => ({
  id: r.context.id,
  content: r.context.content,
  delivery_state: r.value,
  task_status: r.context.task_status,
  priority: r.context.priority ?? 0,
  depends_on: r.context.depends_on ?? [],
  blocked_by: r.context.blocked_by ?? [],
  claimed_by: r.context.claimed_by,
  depth,
});
