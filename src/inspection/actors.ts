/**
 * Actor inspection for operators: counts per kind and state (read from the runtime's per-kind state
 * indexes), paged lists of matching actors, one actor's state with its pending timers and last
 * transitions, and one event sent by an admin (audited in the same commit as the transition).
 */
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { actorStateIndex, type ActorRecord, type Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';

export interface ActorSummary {
  kind: string;
  id: string;
  state: string;
  version: number;
  updated_at: string | null;
}

export interface ActorView extends ActorSummary {
  context: unknown;
  timers: { event: string; at: string }[];
  /** newest first */
  transitions: { event: string; from: string | null; to: string; at: string; request_id: string | null }[];
}

/** The audit entry of an admin's event, committed with the transition (the audit log's `auditOps`). */
export type AuditOps = (f: { actor: string | null; action: string; target: string | null; requestId: string | undefined; details?: Record<string, unknown> }) => Op[];

/** Members of the state indexes are `kind:id`, so one scan can merge several kinds. */
const splitMember = (m: string): [string, string] => {
  const i = m.indexOf(':');
  return [m.slice(0, i), m.slice(i + 1)];
};

export class Actors {
  constructor(
    private runtime: Runtime,
    private audit: AuditOps,
  ) {}

  private kind(kind: string, field = 'kind'): string {
    if (!this.runtime.kindNames().includes(kind)) throw new AppError('VALIDATION_INVALID_TYPE', `No actor kind ${kind}; kinds: ${this.runtime.kindNames().join(', ')}`, { field, reason: 'kind' });
    return kind;
  }

  async counts(): Promise<Record<string, Record<string, number>>> {
    const out: Record<string, Record<string, number>> = {};
    await Promise.all(
      this.runtime.kindNames().map(async (k) => {
        const states = this.runtime.statesOf(k);
        const n = await Promise.all(states.map((s) => this.runtime.store.count(actorStateIndex(k, s))));
        out[k] = Object.fromEntries(states.map((s, i) => [s, n[i]]));
      }),
    );
    return Object.fromEntries(Object.keys(out).sort().map((k) => [k, out[k]]));
  }

  async list(q: { kind?: string; state?: string }, before: string | undefined, limit: number): Promise<Scanned<ActorSummary>> {
    const kinds = q.kind ? [this.kind(q.kind)] : this.runtime.kindNames();
    if (q.state && !kinds.some((k) => this.runtime.statesOf(k).includes(q.state!))) throw new AppError('VALIDATION_INVALID_TYPE', `No kind ${q.kind ?? ''} has a state ${q.state}`, { field: 'state', reason: 'state' });
    const indexes = kinds.flatMap((k) => this.runtime.statesOf(k).filter((s) => !q.state || s === q.state).map((s) => actorStateIndex(k, s)));
    return scanDesc<ActorSummary>(this.runtime.store, indexes, {
      before,
      limit,
      load: (members) =>
        Promise.all(
          members.map(async (m) => {
            const [kind, id] = splitMember(m);
            const rec = await this.runtime.load(kind, id);
            return rec ? summary(kind, id, rec.value, rec.version) : undefined;
          }),
        ),
      keep: () => true,
    });
  }

  async show(kind: string, id: string): Promise<ActorView> {
    const k = this.kind(kind);
    const rec = await this.runtime.load(k, id);
    if (!rec) throw new AppError('NOT_FOUND', `No ${kind} actor ${id}`);
    return this.view(k, id, rec.value, rec.version);
  }

  /** One event through the machine, as any other sender would; `now` is always the runtime's clock. */
  async send(p: Principal, requestId: string, kind: string, id: string, event: Record<string, unknown> & { type: string }): Promise<ActorView> {
    const k = this.kind(kind);
    const { now: _ignored, ...fields } = event;
    const done = await this.runtime.send(k, id, fields as typeof event, {
      requestId,
      notFound: 'NOT_FOUND',
      extra: (rec, prev) => this.audit({ actor: p.identity.id, action: 'actor.event', target: `${k}:${id}`, requestId, details: { kind: k, id, event: fields, from: prev.value, to: rec.value } }),
    });
    const rec = await this.runtime.load(k, id);
    return this.view(k, id, rec?.value ?? done!.record, rec?.version ?? 0);
  }

  private view(kind: string, id: string, rec: ActorRecord, version: number): ActorView {
    return {
      ...summary(kind, id, rec, version),
      context: this.runtime.shownContext(kind, rec),
      timers: this.runtime.timersOf(kind, rec).map((t) => ({ event: t.event, at: new Date(t.at).toISOString() })),
      transitions: [...(rec.history ?? [])].reverse(),
    };
  }
}

function summary(kind: string, id: string, rec: ActorRecord, version: number): ActorSummary {
  return { kind, id, state: rec.value, version, updated_at: rec.history?.at(-1)?.at ?? null };
}
