/**
 * Liveness from one stored timestamp per identity: a request or an open socket/stream keeps `last_seen`
 * fresh (written at most every TOUCH_EVERY_MS per identity and process; open connections are re-touched on
 * the same beat), so "active" needs no cross-instance connection counting. The memory of when an identity
 * was last written is bounded (least recently touched forgotten first): forgetting only costs an early write.
 */
import { now as clock } from '../clock.js';
import { indexes, keys, type Identity } from '../identity/model.js';
import type { Store } from '../store/port.js';
import { forEachPage } from '../store/scan.js';

export const ACTIVE_MS = 5 * 60_000;
export const IDLE_MS = 30 * 60_000;
const TOUCH_EVERY_MS = 30_000;
const BEAT_SLICE = 64;
const seenKey = (id: string) => `seen:${id}`;

export type Liveness = 'active' | 'idle' | 'disconnected';
export const livenessOf = (lastSeen: number | undefined, at = clock()): Liveness =>
  lastSeen !== undefined && at - lastSeen <= ACTIVE_MS ? 'active' : lastSeen !== undefined && at - lastSeen <= IDLE_MS ? 'idle' : 'disconnected';

export interface PresenceOptions {
  /** the clock liveness is judged by (tests move it instead of waiting minutes) */
  now?: () => number;
  /** the monotonic clock the write throttle runs on: a wall clock stepped back must not stop the writes */
  elapsed?: () => number;
  /** identities whose last write time is remembered; beyond it the least recently touched is forgotten */
  maxTracked?: number;
}

export const MAX_TRACKED = 10_000;

export class Presence {
  /** identity → when (monotonic) this process last wrote its last_seen; insertion order is touch order (oldest first) */
  private written = new Map<string, number>();
  /** identity → open connections in this process: bounded by the connections themselves */
  private open = new Map<string, number>();
  private beat: NodeJS.Timeout;
  private now: () => number;
  private elapsed: () => number;
  private maxTracked: number;

  constructor(
    private store: Store,
    opts: PresenceOptions = {},
  ) {
    this.now = opts.now ?? clock;
    this.elapsed = opts.elapsed ?? (() => performance.now());
    this.maxTracked = opts.maxTracked ?? MAX_TRACKED;
    this.beat = setInterval(() => void this.touchOpen(), TOUCH_EVERY_MS);
    this.beat.unref();
  }

  /** How many identities' write times are remembered (never more than maxTracked). */
  get tracked(): number {
    return this.written.size;
  }

  /** Touches every open identity, BEAT_SLICE at a time, so a beat over thousands of sockets never holds the loop or the store long. */
  private async touchOpen(): Promise<void> {
    const ids = [...this.open.keys()];
    for (let i = 0; i < ids.length; i += BEAT_SLICE) await Promise.all(ids.slice(i, i + BEAT_SLICE).map((id) => this.touch(id, true)));
  }

  async touch(identityId: string, force = false): Promise<void> {
    const e = this.elapsed();
    if (!force && e - (this.written.get(identityId) ?? -Infinity) < TOUCH_EVERY_MS) return;
    this.remember(identityId, e);
    await this.store.commit([{ op: 'put', key: seenKey(identityId), value: { at: this.now() } }]).catch(() => this.written.delete(identityId));
  }

  private remember(identityId: string, t: number): void {
    this.written.delete(identityId);
    this.written.set(identityId, t);
    if (this.written.size > this.maxTracked) this.written.delete(this.written.keys().next().value!);
  }

  /** Only an identity's first socket writes at once: a reconnect storm of one identity's sockets is one write, not one per socket. */
  connected(identityId: string): void {
    const n = (this.open.get(identityId) ?? 0) + 1;
    this.open.set(identityId, n);
    void this.touch(identityId, n === 1);
  }

  disconnected(identityId: string): void {
    const n = (this.open.get(identityId) ?? 1) - 1;
    if (n > 0) this.open.set(identityId, n);
    else this.open.delete(identityId);
    void this.touch(identityId, n <= 0);
  }

  async lastSeen(ids: string[]): Promise<(number | undefined)[]> {
    const rows = await this.store.getMany<{ at: number }>(ids.map(seenKey));
    return rows.map((r) => r?.value.at);
  }

  /** Liveness of the agent identities, counted over every identity page by page. */
  async agents(): Promise<{ total: number; active: number; idle: number; disconnected: number }> {
    const out = { total: 0, active: 0, idle: 0, disconnected: 0 };
    const t = this.now();
    await forEachPage(this.store, indexes.identities, async (ids) => {
      const [identities, seen] = await Promise.all([this.store.getMany<Identity>(ids.map(keys.identity)), this.lastSeen(ids)]);
      identities.forEach((r, i) => {
        if (r?.value.type !== 'agent') return;
        out.total++;
        out[livenessOf(seen[i], t)]++;
      });
    });
    return out;
  }

  stop(): void {
    clearInterval(this.beat);
  }
}
