/**
 * The composite calls only /rpc and MCP offer: each is a sequence of the same service calls REST makes
 * (inbox reads, claims, acks, emits), so every rule stays with its service.
 */
import type { Webhooks } from '../webhooks/service.js';
import type { Identities } from '../identity/identities.js';
import type { Graph } from '../memory/graph.js';
import type { Memories } from '../memory/service.js';
import { publicKey, type Principal } from '../identity/model.js';
import { AppError } from '../errors.js';
import type { Org } from '../org/service.js';
import { takeableTypes, type Inbox, type InboxItem } from '../signals/inbox.js';
import type { Signal } from '../signals/kind.js';
import { lostRace, type Signals, type TaskResult } from '../signals/service.js';
import type { Workstreams } from '../workstreams/service.js';
import type { Reservations } from '../reservations/service.js';
import type { ActorRecord } from '../runtime/runtime.js';
import type { Versioned } from '../store/port.js';
import type { SignalContext } from '../../actors/signal.js';
import { FairTurns } from './turns.js';

/** How far the composite calls read before they stop (documented in docs/surfaces.md). */
export const SCAN = { page: 100, heldPages: 10, unreadPages: 5, searchSignals: 2000, topItems: 5, resumeMemories: 10, resumeWorkstreams: 20 };

/** a claim lost to a race: its caller picks again */
const LOST = Symbol('lost');

export interface SearchParams {
  text?: string;
  tags?: string[];
  type?: string;
  role?: string;
  ring?: string;
  limit?: number;
}

export interface HandoffParams {
  to_role?: string;
  to_identity?: string;
  summary: string;
  content?: string;
  links?: { kind: string; id: string }[];
  acceptance_criteria?: string[];
  urgency?: number;
  task_type?: string;
  complete_claim?: string;
  release_claim?: string;
  claim_token?: number;
}

/** A part of workflow.resume that another service supplies (memories, workstreams): one entry each. */
export type ResumePart = (p: Principal) => Promise<unknown>;

export interface SurfaceServices {
  signals: Signals;
  inbox: Inbox;
  org: Org;
  identities: Identities;
  memories: Memories;
  graph: Graph;
  workstreams: Workstreams;
  webhooks: Webhooks;
  reservations: Reservations;
  /** extra sections of workflow.resume, keyed by their name in the answer */
  resumeParts?: Record<string, ResumePart>;
}

export class Workflow {
  private parts: Record<string, ResumePart>;
  /** tasks a workflow.next of this process is claiming right now */
  private claiming = new Set<string>();
  private turns = new FairTurns();

  constructor(private s: SurfaceServices) {
    this.parts = {
      memories: (p) => s.memories.recent(p, SCAN.resumeMemories),
      workstreams: (p) => s.workstreams.activeFor(p, SCAN.resumeWorkstreams),
      ...s.resumeParts,
    };
  }

  async whoami(p: Principal) {
    const { roles, rings } = await this.places(p);
    return { identity: p.identity, key: publicKey(p.key), membership: p.membership ?? null, roles, rings };
  }

  private async places(p: Principal) {
    const ids = await this.s.org.placesOf(p.identity.id);
    const [roles, rings] = await Promise.all([
      Promise.all(ids.roles.map((id) => this.s.org.role(id).catch(() => undefined))),
      Promise.all(ids.rings.map((id) => this.s.org.ring(id).catch(() => undefined))),
    ]);
    return { roles: roles.filter((r) => r !== undefined), rings: rings.filter((r) => r !== undefined) };
  }

  /** Everything an agent needs after a restart, in one answer. */
  async resume(p: Principal) {
    const [me, tasks, inbox] = await Promise.all([this.whoami(p), this.heldTasks(p), this.unread(p)]);
    const extra = Object.entries(this.parts);
    const parts = await Promise.all(extra.map(async ([name, part]) => [name, await part(p)] as const));
    return { ...me, tasks, inbox, ...Object.fromEntries(parts) };
  }

  /** Tasks the caller holds, each with its lease end. */
  async heldTasks(p: Principal) {
    const held: { signal: Signal; lease_ends_at: string | null }[] = [];
    let after: string | undefined;
    for (let i = 0; i < SCAN.heldPages; i++) {
      const res = await this.s.signals.list(p, { types: ['task'], delivery_state: 'leased' }, after, SCAN.page);
      for (const s of res.items) if (s.claimed_by === p.identity.id) held.push({ signal: s, lease_ends_at: s.claim_expires_at });
      if (res.cursor === null) break;
      after = res.cursor;
    }
    return held;
  }

  private async unread(p: Principal) {
    let count = 0;
    let top: InboxItem[] = [];
    let after: string | undefined;
    let complete = false;
    for (let i = 0; i < SCAN.unreadPages; i++) {
      const res = await this.s.inbox.identityInbox(p, p.identity.id, { receipt_state: 'unread' }, after, SCAN.page);
      if (i === 0) top = res.items.slice(0, SCAN.topItems);
      count += res.items.length;
      if (res.cursor === null) {
        complete = true;
        break;
      }
      after = res.cursor;
    }
    return { unread: count, unread_complete: complete, top };
  }

  /**
   * Ends the caller's current claim when asked (so a worker loop takes one request per task, as BullMQ's
   * `moveToFinished` hands over the next job), then claims the open task the caller may take that is highest in priority, then most urgent.
   */
  async next(p: Principal, q: { task_types?: string[]; lease_ms?: number; complete_claim?: string; release_claim?: string; claim_token?: number } & TaskResult): Promise<{ signal: Signal | null; claim?: Signal }> {
    this.s.signals.requireMember(p);
    const ended = await this.endClaim(p, q);
    // a task just handed back is left for someone else
    const next = await this.claimInTurn(p, q, q.release_claim);
    return ended ? { ...next, claim: ended } : next;
  }

  /** The caller's claim on `complete_claim` completed, or on `release_claim` handed back (a failed attempt); one of them at most. */
  private async endClaim(p: Principal, h: { complete_claim?: string; release_claim?: string; claim_token?: number } & TaskResult): Promise<Signal | undefined> {
    if (h.complete_claim !== undefined && h.release_claim !== undefined) throw new AppError('VALIDATION_INVALID_TYPE', 'complete_claim and release_claim exclude each other', { field: 'release_claim' });
    const id = h.complete_claim ?? h.release_claim;
    return id === undefined ? undefined : this.s.signals.ack(p, id, h.complete_claim !== undefined ? 'completed' : 'failed', h.claim_token, { result: h.result, resources: h.resources });
  }

  /**
   * Callers asking for the same task types take turns in this process, round-robin by identity (FairTurns): an
   * identity with many calls in flight does not crowd out another. A turn's picks read side by side and take in
   * turn order; their claims commit together. A claim lost meanwhile (another instance, a socket's dispatch)
   * sends its caller back into the line, passing that task over. Instances each keep their own line; between
   * them the claim's compare-and-set decides.
   */
  private async claimInTurn(p: Principal, q: { task_types?: string[]; lease_ms?: number }, leave?: string): Promise<{ signal: Signal | null }> {
    const types = takeableTypes(q.task_types, p.key.permissions.task_types);
    if (types?.length === 0) return { signal: null };
    const line = types ? JSON.stringify([...new Set(types)].sort()) : '*';
    const passed = new Set<string>(leave === undefined ? [] : [leave]);
    const keys = new Map<string, string[]>();
    for (;;) {
      const got = await this.turns.take(
        line,
        p.identity.id,
        async (baton, taken) => {
          const task = await this.pick(p, types, passed, keys, baton, taken);
          return { picked: task, served: task !== undefined };
        },
        (task) => (task ? this.claimPicked(p, task, q.lease_ms, keys) : Promise.resolve(null)),
      );
      if (got !== LOST) return { signal: got };
    }
  }

  /**
   * The first open task the caller may take that no call of this process is claiming, marked as being claimed.
   * The walk reads before the caller holds the turn's baton; what it found is checked again once it does, against
   * the tasks being claimed and those the turn's picks took (`taken`: a claim that has ended is no longer in
   * `claiming`, and a record read before it is stale).
   */
  private async pick(p: Principal, types: string[] | undefined, passed: Set<string>, keys: Map<string, string[]>, baton: Promise<void>, taken: Set<string>): Promise<Versioned<ActorRecord<SignalContext>> | undefined> {
    const skip = (id: string) => passed.has(id) || this.claiming.has(id) || taken.has(id);
    for await (const task of this.s.inbox.openTasks(p, skip, types, keys)) {
      await baton;
      const id = task.value.context.id;
      if (skip(id)) continue;
      this.claiming.add(id);
      taken.add(id);
      passed.add(id);
      return task;
    }
    return undefined;
  }

  /** Claims a picked task (`Signals.claimRead`); a claim lost to a race answers LOST (a key found full is passed over from then on). */
  private async claimPicked(p: Principal, task: Versioned<ActorRecord<SignalContext>>, leaseMs: number | undefined, keys: Map<string, string[]>): Promise<Signal | typeof LOST> {
    try {
      return await this.s.signals.claimRead(p, task, leaseMs);
    } catch (e) {
      if (!lostRace(e)) throw e;
      const d = e.details as { reason?: string; concurrency_key?: string; leased?: string[] } | null;
      if (d?.reason === 'concurrency_limit' && d.concurrency_key) keys.set(d.concurrency_key, d.leased ?? []);
      return LOST;
    } finally {
      this.claiming.delete(task.value.context.id);
    }
  }

  /**
   * A structured handoff: the caller's own claim is completed or released first, then the task signal is
   * emitted. Two commits (the claim is one actor, the new signal another), in that order.
   */
  async handoff(p: Principal, h: HandoffParams): Promise<{ signal: Signal; claim: Signal | null }> {
    if ((h.to_role === undefined) === (h.to_identity === undefined)) throw new AppError('VALIDATION_FIELD_REQUIRED', 'Exactly one of to_role or to_identity is required', { field: 'to_role' });
    this.s.signals.requireMember(p);
    const claimId = h.complete_claim ?? h.release_claim;
    const claim = (await this.endClaim(p, h)) ?? null;
    const signal = await this.s.signals.emit(p, {
      signal_type: 'task',
      content: h.content ?? h.summary,
      to_role: h.to_role,
      to_identity: h.to_identity,
      urgency: h.urgency,
      parent_id: claimId,
      payload: {
        ...(h.task_type !== undefined ? { task_type: h.task_type } : {}),
        handoff: { summary: h.summary, links: h.links ?? [], acceptance_criteria: h.acceptance_criteria ?? [], from_claim: claimId ?? null },
      },
    });
    return { signal, claim };
  }

  /** Full-text over content (every word must occur), newest first, within the last SCAN.searchSignals signals the key may read. */
  async search(p: Principal, q: SearchParams): Promise<Signal[]> {
    const words = (q.text ?? '').toLowerCase().split(/\s+/).filter(Boolean);
    const limit = q.limit ?? 20;
    const out: Signal[] = [];
    let after: string | undefined;
    for (let seen = 0; seen < SCAN.searchSignals && out.length < limit; ) {
      const res = await this.s.signals.list(p, { types: q.type ? [q.type] : undefined, to_role: q.role, to_ring: q.ring, tag: q.tags?.[0] }, after, SCAN.page);
      seen += res.items.length;
      for (const s of res.items) {
        const text = s.content.toLowerCase();
        if (words.every((w) => text.includes(w)) && (q.tags ?? []).every((t) => s.tags.includes(t))) out.push(s);
        if (out.length === limit) break;
      }
      if (res.cursor === null) break;
      after = res.cursor;
    }
    return out;
  }
}
