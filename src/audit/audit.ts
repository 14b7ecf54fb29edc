/**
 * The audit log. `auditOps` returns the ops of one entry; callers put them in the same commit as the change
 * the entry records, so an entry exists exactly when its change does (a refused request writes none).
 * Entries are ULID-keyed records with one index for all and one per actor, action and target.
 */
import { decodeTime, encodeTime } from 'ulid';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import type { Op, Store } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';

export interface AuditEntry {
  id: string;
  /** the identity that acted; null for an anonymous caller (bootstrap, public join request) */
  actor: string | null;
  action: string;
  /** what the action was done to: an identity, key, invite or auth request id */
  target: string | null;
  at: string;
  request_id: string;
  outcome: 'success';
  details: Record<string, unknown> | null;
}

export interface AuditFacts {
  actor: string | null;
  action: string;
  target: string | null;
  requestId: string | undefined;
  details?: Record<string, unknown>;
}

const key = (id: string) => `audit:${id}`;
export const auditIndexes = {
  all: 'audit',
  actor: (id: string) => `audit:actor:${id}`,
  action: (a: string) => `audit:action:${a}`,
  target: (t: string) => `audit:target:${t}`,
};

/** The ops that append one audit entry; commit them with the change they record. */
export function auditOps(f: AuditFacts): Op[] {
  const id = newId();
  // `at` is the id's own time: read separately, the two could straddle a millisecond and the time window below would miss the entry
  const e: AuditEntry = { id, actor: f.actor, action: f.action, target: f.target, at: iso(decodeTime(id)), request_id: f.requestId ?? 'none', outcome: 'success', details: f.details ?? null };
  const ops: Op[] = [
    { op: 'put', key: key(e.id), value: e, expect: 0 },
    { op: 'index', index: auditIndexes.all, member: e.id },
    { op: 'index', index: auditIndexes.action(e.action), member: e.id },
  ];
  if (e.actor) ops.push({ op: 'index', index: auditIndexes.actor(e.actor), member: e.id });
  if (e.target) ops.push({ op: 'index', index: auditIndexes.target(e.target), member: e.id });
  return ops;
}

export interface AuditFilter {
  actor?: string;
  action?: string;
  target?: string;
  /** ISO time: entries at or after it */
  since?: string;
  /** ISO time: entries at or before it */
  until?: string;
}

export class Audit {
  constructor(private store: Store) {}

  /** Newest first. One filter picks the index scanned; the others are checked per entry. */
  async list(f: AuditFilter, before: string | undefined, limit: number): Promise<Scanned<AuditEntry>> {
    const index = f.target ? auditIndexes.target(f.target) : f.actor ? auditIndexes.actor(f.actor) : f.action ? auditIndexes.action(f.action) : auditIndexes.all;
    const since = f.since ? Date.parse(f.since) : undefined;
    const until = f.until ? Date.parse(f.until) : undefined;
    // ULIDs start with their time, so the window bounds the scan; a second of slack keeps entries written before `at` was the id's time, and `keep` is exact
    const after = since !== undefined ? encodeTime(Math.max(0, since - 1000), 10) : undefined;
    const upTo = until !== undefined ? encodeTime(until + 1000, 10) + 'Z'.repeat(16) : undefined;
    return scanDesc<AuditEntry>(this.store, [index], {
      before: before !== undefined && upTo !== undefined ? (before < upTo ? before : upTo) : (before ?? upTo),
      after,
      limit,
      load: async (ids) => (await this.store.getMany<AuditEntry>(ids.map(key))).map((r) => r?.value),
      keep: (e) => (!f.actor || e.actor === f.actor) && (!f.action || e.action === f.action) && (!f.target || e.target === f.target) && (since === undefined || Date.parse(e.at) >= since) && (until === undefined || Date.parse(e.at) <= until),
    });
  }
}
