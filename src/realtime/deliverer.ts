/**
 * Marks pushed signals delivered, once per signal and process (a role of many sockets makes one attempt). The
 * marks of one event-loop turn go out together after its I/O (the emits that arrived in it come first), with
 * one read for all of them.
 */
import { elapsed } from '../clock.js';
import { isSignalEntry, type JournalEntry } from '../journal/journal.js';
import type { Signals } from '../signals/service.js';
import type { Audience } from './audience.js';
import { Lru } from '../lru.js';

const FORGET_MS = 10_000;
/** signals remembered as marked; past it the oldest is forgotten (at worst a second, idempotent attempt) */
export const DELIVERED_MAX = 10_000;

export class Deliverer {
  private recent: Lru<string, number>;
  private queued = new Set<string>();
  constructor(
    private signals: Signals,
    max = DELIVERED_MAX,
  ) {
    this.recent = new Lru(max);
  }

  get size(): number {
    return this.recent.size;
  }

  /** A new, still pending signal pushed to one of its recipients (or a waiting task pushed as it became claimable) is marked delivered. */
  consider(e: JournalEntry, audience: Audience): void {
    if (isSignalEntry(e) && e.signal.delivery_state === 'pending' && (e.type === 'signal' || e.prev_state === 'waiting') && audience.isRecipient(e)) this.pushed(e.signal.id);
  }

  pushed(signalId: string): void {
    const at = this.recent.get(signalId);
    if (at !== undefined && elapsed() - at < FORGET_MS) return;
    this.recent.set(signalId, elapsed());
    if (this.queued.size === 0) setImmediate(() => this.flush());
    this.queued.add(signalId);
  }

  private flush(): void {
    const ids = [...this.queued];
    this.queued.clear();
    void this.signals.deliver(ids).catch(() => ids.forEach((id) => this.recent.delete(id)));
  }
}
