/**
 * Liveness from one stored timestamp per identity: a request or an open socket/stream keeps `last_seen`
 * fresh (written at most every `everyMs` per identity and process; open connections are re-touched on
 * the same beat), so "active" needs no cross-instance connection counting. A key's last use is kept the same
 * way, one blind put per key and interval (no read). The memory of when each was last written is bounded
 * (least recently touched forgotten first): forgetting only costs an early write.
 */
import { now as clock } from '../clock.js';
import { indexes, keys, type Identity } from '../identity/model.js';
import type { Op, Store, Versioned } from '../store/port.js';
import { forEachPage } from '../store/scan.js';

export const ACTIVE_MS = 5 * 60_000;
export const IDLE_MS = 30 * 60_000;
const TOUCH_EVERY_MS = 30_000;
const BEAT_SLICE = 64;
const READ_PAGE = 500;
const seenKey = (id: string) => `seen:${id}`;
const usedKey = (keyId: string) => `key-used:${keyId}`;
const TRIES = 3;

/**
 * The agent counts, kept in the commits that change them: `agents` holds the agent identities (identity
 * create, delete and type change), `agentsSeen` each one's last-seen time as `<at, zero-padded>:<id>`
 * (every write of `seen:<id>`), so liveness is three index counts, two of them over a time range.
 */
export const presenceIndexes = { agents: 'identities:agents', agentsSeen: 'presence:agents-seen' };
const atMember = (at: number) => String(Math.max(0, Math.floor(at))).padStart(16, '0');
const seenMember = (at: number, id: string) => `${atMember(at)}:${id}`;
type Seen = Versioned<{ at: number }>;

/** Ops that count an identity as an agent or stop counting it; `seen` is its seen record as read, checked so a touch between cannot be missed. */
export function agentOps(id: string, agent: boolean, seen: Seen | undefined): Op[] {
  const remove = !agent;
  return [
    { op: 'index', index: presenceIndexes.agents, member: id, remove },
    { op: 'check', key: seenKey(id), expect: seen?.version ?? 0 },
    ...(seen ? [{ op: 'index' as const, index: presenceIndexes.agentsSeen, member: seenMember(seen.value.at, id), remove }] : []),
  ];
}

export const readSeen = (store: Store, id: string) => store.get<{ at: number }>(seenKey(id));

export type Liveness = 'active' | 'idle' | 'disconnected';
export const livenessOf = (lastSeen: number | undefined, at = clock()): Liveness =>
  lastSeen !== undefined && at - lastSeen <= ACTIVE_MS ? 'active' : lastSeen !== undefined && at - lastSeen <= IDLE_MS ? 'idle' : 'disconnected';

export interface PresenceOptions {
  /** the clock liveness is judged by (tests move it instead of waiting minutes) */
  now?: () => number;
  /** the monotonic clock the write throttle runs on: a wall clock stepped back must not stop the writes */
  elapsed?: () => number;
  /** identities (and, apart, keys) whose last write time is remembered; beyond it the least recently touched is forgotten */
  maxTracked?: number;
  /** the beat: the least time between two writes of one identity's last_seen or one key's last use by this process */
  everyMs?: number;
}

export const MAX_TRACKED = 10_000;

export class Presence {
  /** identity → when (monotonic) this process last wrote its last_seen; insertion order is touch order (oldest first) */
  private written = new Map<string, number>();
  /** key id → when (monotonic) this process last wrote its last use; bounded as `written` is */
  private used = new Map<string, number>();
  /** identity → open connections in this process: bounded by the connections themselves */
  private open = new Map<string, number>();
  /** key id → open connections in this process holding it */
  private openKeys = new Map<string, number>();
  private beats: (() => Promise<void>)[] = [];
  private beat: NodeJS.Timeout;
  private stopped = false;
  private writing = new Set<Promise<boolean>>();
  private now: () => number;
  private elapsed: () => number;
  private maxTracked: number;
  readonly everyMs: number;

  constructor(
    private store: Store,
    opts: PresenceOptions = {},
  ) {
    this.now = opts.now ?? clock;
    this.elapsed = opts.elapsed ?? (() => performance.now());
    this.maxTracked = opts.maxTracked ?? MAX_TRACKED;
    this.everyMs = opts.everyMs ?? TOUCH_EVERY_MS;
    this.beat = setInterval(() => void this.beatOnce(), this.everyMs);
    this.beat.unref();
  }

  /** How many identities' write times are remembered (never more than maxTracked). */
  get tracked(): number {
    return this.written.size;
  }

  /** How many keys' last-use write times are remembered (never more than maxTracked). */
  get trackedKeys(): number {
    return this.used.size;
  }

  /** Runs `fn` on every beat too (another per-instance refresh, e.g. the published connections); never awaited by a request. */
  onBeat(fn: () => Promise<void>): void {
    this.beats.push(fn);
  }

  private async beatOnce(): Promise<void> {
    await Promise.all([this.touchOpen(), ...this.beats.map((fn) => fn().catch(() => undefined))]);
  }

  /** Touches every open identity and key, BEAT_SLICE at a time, so a beat over thousands of sockets never holds the loop or the store long. */
  private async touchOpen(): Promise<void> {
    const ids = [...this.open.keys()];
    for (let i = 0; i < ids.length; i += BEAT_SLICE) await Promise.all(ids.slice(i, i + BEAT_SLICE).map((id) => this.touch(id, true)));
    const keyIds = [...this.openKeys.keys()];
    for (let i = 0; i < keyIds.length; i += BEAT_SLICE) await Promise.all(keyIds.slice(i, i + BEAT_SLICE).map((id) => this.keyUsed(id, true)));
  }

  async touch(identityId: string, force = false): Promise<void> {
    const e = this.elapsed();
    if (!force && e - (this.written.get(identityId) ?? -Infinity) < this.everyMs) return;
    if (this.stopped) return;
    remember(this.written, identityId, e, this.maxTracked);
    if (!(await this.track(this.writeSeen(identityId)))) this.written.delete(identityId);
  }

  /**
   * The key was used (a request authenticated with it, or a connection holding it is open): its last use is
   * written at most every `everyMs` per key and process, by a put that reads nothing. A failed write (a full
   * store) is forgotten, so the next use tries again; it never reaches the request.
   */
  async keyUsed(keyId: string, force = false): Promise<void> {
    const e = this.elapsed();
    if (!force && e - (this.used.get(keyId) ?? -Infinity) < this.everyMs) return;
    if (this.stopped) return;
    remember(this.used, keyId, e, this.maxTracked);
    const put = this.store.commit([{ op: 'put', key: usedKey(keyId), value: { at: this.now() } }]).then((r) => r.ok);
    if (!(await this.track(put))) this.used.delete(keyId);
  }

  /** A write under way, waited for by stop(); its failure is an answer of false, never a rejection. */
  private async track(write: Promise<boolean>): Promise<boolean> {
    const safe = write.catch(() => false);
    this.writing.add(safe);
    try {
      return await safe;
    } finally {
      this.writing.delete(safe);
    }
  }

  /** Each key's last use (ms), undefined when never written; read a page at a time. */
  async lastUsed(keyIds: string[]): Promise<(number | undefined)[]> {
    const out: (number | undefined)[] = [];
    for (let i = 0; i < keyIds.length; i += READ_PAGE) out.push(...(await this.store.getMany<{ at: number }>(keyIds.slice(i, i + READ_PAGE).map(usedKey))).map((r) => r?.value.at));
    return out;
  }

  /** Writes seen:<id>, moving an agent's member of the last-seen index in the same commit. */
  private async writeSeen(id: string): Promise<boolean> {
    for (let i = 0; i < TRIES; i++) {
      const [seen, identity] = await this.store.getMany<unknown>([seenKey(id), keys.identity(id)]);
      const at = this.now();
      const ops: Op[] = [{ op: 'put', key: seenKey(id), value: { at }, expect: seen?.version ?? 0 }];
      if (identity) ops.push({ op: 'check', key: keys.identity(id), expect: identity.version });
      if ((identity?.value as Identity | undefined)?.type === 'agent') {
        if (seen) ops.push({ op: 'index', index: presenceIndexes.agentsSeen, member: seenMember((seen as Seen).value.at, id), remove: true });
        ops.push({ op: 'index', index: presenceIndexes.agentsSeen, member: seenMember(at, id) });
      }
      if ((await this.store.commit(ops)).ok) return true;
    }
    return false;
  }

  /** Only an identity's (and a key's) first socket writes at once: a reconnect storm of one identity's sockets is one write, not one per socket. */
  connected(identityId: string, keyId: string): void {
    void this.touch(identityId, count(this.open, identityId, 1) === 1);
    void this.keyUsed(keyId, count(this.openKeys, keyId, 1) === 1);
  }

  disconnected(identityId: string, keyId: string): void {
    void this.touch(identityId, count(this.open, identityId, -1) === 0);
    void this.keyUsed(keyId, count(this.openKeys, keyId, -1) === 0);
  }

  async lastSeen(ids: string[]): Promise<(number | undefined)[]> {
    const rows = await this.store.getMany<{ at: number }>(ids.map(seenKey));
    return rows.map((r) => r?.value.at);
  }

  /** Liveness of the agent identities: three index counts, however many agents there are. */
  async agents(): Promise<{ total: number; active: number; idle: number; disconnected: number }> {
    const t = this.now();
    const [total, active, idle] = await Promise.all([
      this.store.count(presenceIndexes.agents),
      // a member sorts after the bare time it starts with, so `gt` keeps a time equal to the bound (see livenessOf)
      this.store.count(presenceIndexes.agentsSeen, { gt: atMember(t - ACTIVE_MS) }),
      this.store.count(presenceIndexes.agentsSeen, { gt: atMember(t - IDLE_MS), lt: atMember(t - ACTIVE_MS) }),
    ]);
    return { total, active, idle, disconnected: total - active - idle };
  }

  /** Stops touching and waits for the writes under way: they read the store, which closes next. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.beat);
    await Promise.allSettled(this.writing);
  }
}

function remember(map: Map<string, number>, id: string, t: number, max: number): void {
  map.delete(id);
  map.set(id, t);
  if (map.size > max) map.delete(map.keys().next().value!);
}

/** Adds `by` to an open-connection count (dropping it at zero); answers the new count. */
function count(map: Map<string, number>, id: string, by: 1 | -1): number {
  const n = Math.max(0, (map.get(id) ?? 0) + by);
  if (n > 0) map.set(id, n);
  else map.delete(id);
  return n;
}

const INDEXED = 'migration:agent-liveness-v1';

/** A data dir from before the agent counts: every agent identity is indexed once at startup, each commit checked against its records. */
export async function indexAgentsOnce(store: Store): Promise<number> {
  if (await store.get(INDEXED)) return 0;
  let indexed = 0;
  await forEachPage(store, indexes.identities, async (ids) => {
    for (const id of ids) if (await indexAgent(store, id)) indexed++;
  });
  await store.commit([{ op: 'put', key: INDEXED, value: { at: new Date().toISOString(), indexed } }]);
  return indexed;
}

async function indexAgent(store: Store, id: string): Promise<boolean> {
  for (let i = 0; i < TRIES; i++) {
    const [identity, seen] = await store.getMany<unknown>([keys.identity(id), seenKey(id)]);
    if ((identity?.value as Identity | undefined)?.type !== 'agent') return false;
    if ((await store.commit([{ op: 'check', key: keys.identity(id), expect: identity!.version }, ...agentOps(id, true, seen as Seen | undefined)])).ok) return true;
  }
  return false;
}
