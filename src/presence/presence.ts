/**
 * Liveness from one stored timestamp per identity: a request or an open socket/stream keeps `last_seen`
 * fresh (written at most every TOUCH_EVERY_MS per identity and process; open connections are re-touched on
 * the same beat), so "active" needs no cross-instance connection counting.
 */
import { now } from '../clock.js';
import { indexes, keys, type Identity } from '../identity/model.js';
import type { Store } from '../store/port.js';

export const ACTIVE_MS = 5 * 60_000;
export const IDLE_MS = 30 * 60_000;
const TOUCH_EVERY_MS = 30_000;
const seenKey = (id: string) => `seen:${id}`;

export type Liveness = 'active' | 'idle' | 'disconnected';
export const livenessOf = (lastSeen: number | undefined, at = now()): Liveness =>
  lastSeen !== undefined && at - lastSeen <= ACTIVE_MS ? 'active' : lastSeen !== undefined && at - lastSeen <= IDLE_MS ? 'idle' : 'disconnected';

export class Presence {
  private written = new Map<string, number>();
  private open = new Map<string, number>();
  private beat: NodeJS.Timeout;

  constructor(private store: Store) {
    this.beat = setInterval(() => {
      for (const id of this.open.keys()) void this.touch(id, true);
    }, TOUCH_EVERY_MS);
    this.beat.unref();
  }

  async touch(identityId: string, force = false): Promise<void> {
    const t = now();
    if (!force && t - (this.written.get(identityId) ?? 0) < TOUCH_EVERY_MS) return;
    this.written.set(identityId, t);
    await this.store.commit([{ op: 'put', key: seenKey(identityId), value: { at: t } }]).catch(() => this.written.delete(identityId));
  }

  connected(identityId: string): void {
    this.open.set(identityId, (this.open.get(identityId) ?? 0) + 1);
    void this.touch(identityId, true);
  }

  disconnected(identityId: string): void {
    const n = (this.open.get(identityId) ?? 1) - 1;
    if (n > 0) this.open.set(identityId, n);
    else this.open.delete(identityId);
    void this.touch(identityId, true);
  }

  async lastSeen(ids: string[]): Promise<(number | undefined)[]> {
    const rows = await this.store.getMany<{ at: number }>(ids.map(seenKey));
    return rows.map((r) => r?.value.at);
  }

  /** Liveness of the agent identities. */
  async agents(): Promise<{ total: number; active: number; idle: number; disconnected: number }> {
    const ids = await this.store.range(indexes.identities, { limit: 100_000 });
    const [identities, seen] = await Promise.all([this.store.getMany<Identity>(ids.map(keys.identity)), this.lastSeen(ids)]);
    const out = { total: 0, active: 0, idle: 0, disconnected: 0 };
    const t = now();
    identities.forEach((r, i) => {
      if (r?.value.type !== 'agent') return;
      out.total++;
      out[livenessOf(seen[i], t)]++;
    });
    return out;
  }

  stop(): void {
    clearInterval(this.beat);
  }
}
