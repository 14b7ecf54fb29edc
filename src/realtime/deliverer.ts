/**
 * Marks pushed signals delivered, once per signal and process (a role of many sockets makes one attempt). The
 * marks of one event-loop turn go out together after its I/O (the emits that arrived in it come first), with
 * one read for all of them. Each mark names the journal sequence of the push that caused it.
 */
import { elapsed } from '../clock.js';
import { isDeliverablePush, type JournalEntry } from '../journal/journal.js';
import type { Signals } from '../signals/service.js';
import type { Audience } from './audience.js';
import { Lru } from '../lru.js';

const FORGET_MS = 10_000;
/** signals remembered as marked; past it the oldest is forgotten (at worst a second, idempotent attempt) */
export const DELIVERED_MAX = 10_000;

export class Deliverer {
  private recent: Lru<string, number>;
  /** signal id → the journal sequence of its push */
  private queued = new Map<string, number>();
  constructor(
    private signals: Signals,
    max = DELIVERED_MAX,
  ) {
    this.recent = new Lru(max);
  }

  get size(): number {
    return this.recent.size;
  }

  /**
   * A new, still pending signal pushed to one of its recipients (or a waiting task pushed as it became
   * claimable) at journal sequence `seq` is marked delivered. Answers the signal's id when it was such a push.
   */
  consider(e: JournalEntry, seq: number, audience: Audience): string | undefined {
    if (!isDeliverablePush(e) || !audience.isRecipient(e)) return undefined;
    this.pushed(e.signal.id, seq);
    return e.signal.id;
  }

  pushed(signalId: string, seq: number): void {
    const at = this.recent.get(signalId);
    if (at !== undefined && elapsed() - at < FORGET_MS) return;
    this.recent.set(signalId, elapsed());
    if (this.queued.size === 0) setImmediate(() => this.flush());
    this.queued.set(signalId, seq);
  }

  private flush(): void {
    const pushes = [...this.queued].map(([id, pushed_at]) => ({ id, pushed_at }));
    this.queued.clear();
    void this.signals.deliver(pushes).catch(() => pushes.forEach((p) => this.recent.delete(p.id)));
  }
}
