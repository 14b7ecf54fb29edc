/**
 * The push hub: one subscription per process to the committed signal journal. Entries are processed in
 * sequence order; a gap (a missed pub/sub message) is filled from the stored log, so every subscriber sees
 * every entry once, in commit order. A subscriber that resumes from a cursor is replayed from the log
 * while live entries are buffered, then switched to live without a gap or a duplicate.
 */
import { AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { SIGNAL_LOG, type JournalEntry } from '../signals/kind.js';
import type { LogEntry, Store } from '../store/port.js';

const REPLAY_PAGE = 500;
/** how often the hub compares its position with the stored journal, to catch up after a lost pub/sub link */
const CATCH_UP_MS = 1000;
/** how long a replay waits for a slow reader to make room before cutting it off */
export const REPLAY_DRAIN_TIMEOUT_MS = 30_000;
/** journal entries dropped per trim step, so one step never holds the store for long */
const TRIM_STEP = 10_000;

export interface Subscriber {
  /** the last sequence this subscriber has passed (delivered or filtered out) */
  lastSeq: number;
  /** sync: whether this subscriber is shown the entry */
  wants(e: JournalEntry): boolean;
  /** returns false when the subscriber must be dropped (closed, or too slow) */
  deliver(e: JournalEntry, seq: number): boolean;
  /** resolves when the subscriber's send buffer has room: a replay waits for a reader instead of cutting it off */
  ready?(): Promise<void>;
}

interface Slot {
  sub: Subscriber;
  replaying: boolean;
  buffer: LogEntry<JournalEntry>[];
}

export class Hub {
  private slots = new Set<Slot>();
  private bySub = new Map<Subscriber, Slot>();
  private lastSeq = 0;
  private chain: Promise<void> = Promise.resolve();
  private unsubscribe: (() => Promise<void>) | undefined;
  private catchUp: NodeJS.Timeout | undefined;
  /** the journal's first stored sequence, as last seen */
  private journalStart = 1;

  constructor(
    private store: Store,
    private log: Logger,
    /** how many journal entries to keep: the window a cursor can resume within */
    private retain: number,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.store.subscribe<JournalEntry>(SIGNAL_LOG, (e) => this.enqueue(e));
    this.lastSeq = await this.store.lastSeq(SIGNAL_LOG);
    this.catchUp = setInterval(() => {
      this.chain = this.chain.then(() => this.fill()).catch((err) => this.log.warn({ err }, 'push hub catch-up failed'));
      void this.trim().catch((err) => this.log.warn({ err }, 'journal trim failed'));
    }, CATCH_UP_MS);
    this.catchUp.unref();
  }

  /** Keeps the last `retain` journal entries; every instance may run it, the store makes it idempotent. */
  private async trim(): Promise<void> {
    const before = this.lastSeq - this.retain + 1;
    if (before > this.journalStart) this.journalStart = await this.store.trimLog(SIGNAL_LOG, before, TRIM_STEP);
  }

  /** Refuses a cursor whose following changes were trimmed away. */
  async assertResumable(after: number): Promise<void> {
    const start = await this.store.logStart(SIGNAL_LOG);
    if (after + 1 < start) throw new AppError('PUSH_CURSOR_EXPIRED', undefined, { oldest_cursor: String(start - 1) });
  }

  /** Processes whatever the stored journal has beyond this hub's position. */
  private async fill(): Promise<void> {
    for (;;) {
      const page = await this.store.readLog<JournalEntry>(SIGNAL_LOG, this.lastSeq, REPLAY_PAGE);
      for (const e of page) this.fanOut(e);
      if (page.length < REPLAY_PAGE) return;
    }
  }

  get cursor(): number {
    return this.lastSeq;
  }

  private enqueue(e: LogEntry<JournalEntry>): void {
    this.chain = this.chain.then(() => this.take(e)).catch((err) => this.log.warn({ err }, 'push hub entry failed'));
  }

  private async take(e: LogEntry<JournalEntry>): Promise<void> {
    if (e.seq <= this.lastSeq) return;
    if (e.seq > this.lastSeq + 1) await this.fill();
    this.fanOut(e);
  }

  private fanOut(e: LogEntry<JournalEntry>): void {
    if (e.seq <= this.lastSeq) return;
    this.lastSeq = e.seq;
    for (const slot of this.slots) {
      if (slot.replaying) slot.buffer.push(e);
      else this.offer(slot, e);
    }
  }

  private offer(slot: Slot, e: LogEntry<JournalEntry>): void {
    if (e.seq <= slot.sub.lastSeq) return;
    slot.sub.lastSeq = e.seq;
    if (slot.sub.wants(e.entry) && !slot.sub.deliver(e.entry, e.seq)) this.detach(slot.sub);
  }

  /** Live from now, or replayed from `after` first. */
  async attach(sub: Subscriber, after?: number): Promise<void> {
    if (after !== undefined) await this.assertResumable(after);
    const slot: Slot = { sub, replaying: after !== undefined, buffer: [] };
    this.slots.add(slot);
    this.bySub.set(sub, slot);
    if (after === undefined) {
      sub.lastSeq = this.lastSeq;
      return;
    }
    await this.replay(slot, after);
  }

  /** Replays from `after` (a resume on an attached subscriber goes through here too). */
  async resume(sub: Subscriber, after: number): Promise<void> {
    const slot = this.bySub.get(sub);
    if (!slot) return this.attach(sub, after);
    await this.assertResumable(after);
    slot.replaying = true;
    await this.replay(slot, after);
  }

  private async replay(slot: Slot, after: number): Promise<void> {
    slot.sub.lastSeq = after;
    try {
      for (;;) {
        const page = await this.store.readLog<JournalEntry>(SIGNAL_LOG, slot.sub.lastSeq, REPLAY_PAGE);
        // journal sequences have no holes: a missing next entry was trimmed while this replay ran
        if (page.length && page[0].seq > slot.sub.lastSeq + 1) await this.assertResumable(slot.sub.lastSeq);
        for (const e of page) {
          await slot.sub.ready?.();
          if (!this.bySub.has(slot.sub)) return;
          this.offer(slot, e);
        }
        if (page.length < REPLAY_PAGE) break;
      }
      // new live entries keep arriving in the buffer while this waits for the reader
      for (let i = 0; i < slot.buffer.length; i++) {
        await slot.sub.ready?.();
        if (!this.bySub.has(slot.sub)) return;
        this.offer(slot, slot.buffer[i]);
      }
    } finally {
      slot.buffer = [];
      slot.replaying = false;
    }
  }

  detach(sub: Subscriber): void {
    const slot = this.bySub.get(sub);
    if (!slot) return;
    this.slots.delete(slot);
    this.bySub.delete(sub);
  }

  async stop(): Promise<void> {
    clearInterval(this.catchUp);
    await this.unsubscribe?.();
    this.slots.clear();
    this.bySub.clear();
  }
}

/** A cursor as clients send it: the decimal journal sequence of a push. */
export function parseCursor(v: unknown, field = 'after'): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw new AppError('VALIDATION_INVALID_TYPE', `${field} must be a cursor from a push`, { field });
  return n;
}
