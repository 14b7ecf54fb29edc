/**
 * The push hub: one subscription per process to the committed signal journal. Entries are processed in
 * sequence order; a gap (a missed pub/sub message) is filled from the stored log, so every subscriber sees
 * every entry once, in commit order.
 *
 * A subscriber is either live (offered each entry as the hub processes it) or catching up: it reads the
 * stored journal from its own position, waiting for its send buffer to make room before each entry, until
 * it reaches the hub's position and goes live again in the same turn. A resume and a live entry the
 * subscriber's buffer cannot take both start a catch-up, so nothing is held in memory for a subscriber and
 * nothing is skipped: an entry is passed only once it was sent or filtered out.
 */
import { matches, type ConnectionInfo, type ConnectionLister, type ConnectionQuery, type ConnectionRow } from '../presence/connections.js';
import { AppError } from '../errors.js';
import type { Logger } from '../log.js';
import { JOURNAL_LOG, readJournal, shownOnlyTo, SignalRun, trimPoint, type JournalEntry } from '../journal/journal.js';
import type { LogEntry, Store } from '../store/port.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

const REPLAY_PAGE = 500;
/** journal entries a catch-up reads and sends in one turn before it yields to I/O */
export const CATCH_UP_PAGE = 100;
/** catch-ups reading and sending at once; the others wait their turn in arrival order (docs/realtime.md) */
export const CATCH_UP_TURNS = 16;
/** how often the hub compares its position with the stored journal, to catch up after a lost pub/sub link */
const CATCH_UP_MS = 1000;
/**
 * live offers of one entry made in one turn before the fan-out yields to I/O: an entry for thousands of
 * sockets lets the emit's own answer, and other requests, go out between slices instead of after the last
 */
export const FAN_OUT_SLICE = 256;
/** journal entries dropped per trim step: one step (one write) holds the event loop well under 2 ms; a trim runs steps until done */
const TRIM_STEP = 500;

/** what a subscriber did with an entry: sent it, had no room for it (catch up later), or is gone */
export type Delivery = 'sent' | 'full' | 'gone';

/** One open socket or stream as operators see it. */
export type { ConnectionInfo };

export interface Subscriber {
  /** the last sequence this subscriber has passed (sent or filtered out) */
  lastSeq: number;
  /** false once closed: a closed subscriber is never attached */
  readonly open: boolean;
  /** the one identity whose entries this subscriber can want; absent for one that may want any entry (an admin's stream) */
  readonly identityId?: string;
  /** sync: whether this subscriber is shown the entry (at `seq`) */
  wants(e: JournalEntry, seq: number): boolean;
  /** `live`: offered as the hub processes it, not read in a catch-up */
  deliver(e: JournalEntry, seq: number, live: boolean): Delivery;
  /** true once the send buffer has room; false when closed or when it made no room in time (it has then cut itself off) */
  room(): Promise<boolean>;
  /** sync: whether the send buffer has room now; a catch-up that must wait for room gives up its turn meanwhile */
  hasRoom?(): boolean;
  /** what an operator is shown of this connection (GET /admin/connections); absent for in-process watchers */
  readonly connection?: ConnectionInfo;
  /** the hub cannot go on for this subscriber (journal trimmed under it, store failure): end it */
  fail(e: unknown): void;
}

interface Slot {
  sub: Subscriber;
  /** set while the subscriber catches up from the stored journal */
  pump?: Promise<void>;
  /** the catch-up waits for the subscriber's buffer to make room */
  waiting?: boolean;
  /** the identity it is indexed under (undefined: offered every entry) */
  indexedAs?: string;
}

/**
 * Turns of catch-up work: at most `max` catch-ups read and send at once, the rest wait in arrival order. With
 * a yield to I/O after each page, a reconnect storm's replays share the event loop with requests instead of
 * holding it, and at most `max` pages are in memory at once.
 */
class Turns {
  private running = 0;
  private waiting: (() => void)[] = [];
  private head = 0;
  constructor(private max: number) {}

  async enter(): Promise<void> {
    if (this.running < this.max) return void this.running++;
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** hands the turn to the next waiter, if any */
  leave(): void {
    if (this.head < this.waiting.length) {
      const next = this.waiting[this.head++];
      if (this.head > 1024 && this.head * 2 > this.waiting.length) this.waiting = this.waiting.slice(this.head), (this.head = 0);
      return next();
    }
    this.running--;
  }
}

export class Hub implements ConnectionLister {
  private turns = new Turns(CATCH_UP_TURNS);
  private slots = new Map<Subscriber, Slot>();
  /** the slots of subscribers without an identity (offered every entry), and the others by identity */
  private wide = new Set<Slot>();
  private byIdentity = new Map<string, Set<Slot>>();
  private lastSeq = 0;
  private chain: Promise<void> = Promise.resolve();
  private unsubscribe: (() => Promise<void>) | undefined;
  private catchUp: NodeJS.Timeout | undefined;
  private trimming: Promise<void> | undefined;
  /** the journal's first stored sequence, as last seen */
  private journalStart = 1;
  /** the hub reads the journal in order: the entries stored with `same_signal` get their Signal from it */
  private run: SignalRun;

  constructor(
    private store: Store,
    private log: Logger,
    /** how many journal entries to keep: the window a cursor can resume within */
    private retain: number,
  ) {
    this.run = new SignalRun(store);
  }

  async start(): Promise<void> {
    this.unsubscribe = await this.store.subscribe<JournalEntry>(JOURNAL_LOG, (e) => this.enqueue(e));
    this.lastSeq = await this.store.lastSeq(JOURNAL_LOG);
    this.catchUp = setInterval(() => {
      this.chain = this.chain.then(() => this.rewind()).then(() => this.fill()).catch((err) => this.log.warn({ err }, 'push hub catch-up failed'));
      // one trim at a time: a long one (many steps) is not joined by the next tick's
      this.trimming ??= this.trim()
        .catch((err) => this.log.warn({ err }, 'journal trim failed'))
        .finally(() => (this.trimming = undefined));
    }, CATCH_UP_MS);
    this.catchUp.unref();
  }

  private floors: (() => Promise<number | undefined>)[] = [];

  /** Another reader of the journal (the webhook outbox) names the lowest sequence it still needs: trimming stops below it. */
  holdTrimAt(floor: () => Promise<number | undefined>): void {
    this.floors.push(floor);
  }

  /** Keeps the last `retain` journal entries; every instance may run it, the store makes it idempotent. */
  private async trim(): Promise<void> {
    let before = this.lastSeq - this.retain + 1;
    if (before <= this.journalStart) return;
    for (const f of this.floors) {
      const need = await f();
      if (need !== undefined) before = Math.min(before, need);
    }
    before = await trimPoint(this.store, before);
    while (before > this.journalStart) this.journalStart = await this.store.trimLog(JOURNAL_LOG, before, TRIM_STEP);
  }

  /** Refuses a cursor whose following changes were trimmed away. */
  async assertResumable(after: number): Promise<void> {
    const start = await this.store.logStart(JOURNAL_LOG);
    if (after + 1 < start) throw new AppError('PUSH_CURSOR_EXPIRED', undefined, { oldest_cursor: String(start - 1) });
  }

  /**
   * The stored journal ends before this hub's position only when entries the hub saw were lost: a Redis master
   * that published them died before its replica had them, and the promoted replica hands their sequences to
   * new entries. Go back to where the journal ends, so those entries are pushed rather than skipped (a client
   * may get a cursor twice, which the at-least-once push allows).
   */
  private async rewind(): Promise<void> {
    const stored = await this.store.lastSeq(JOURNAL_LOG);
    if (stored >= this.lastSeq) return;
    this.log.warn({ hub: this.lastSeq, journal: stored }, 'journal ends before the push hub: entries were lost in a failover; pushing from the journal end');
    this.lastSeq = stored;
    this.run = new SignalRun(this.store);
    for (const slot of this.slots.values()) slot.sub.lastSeq = Math.min(slot.sub.lastSeq, stored);
  }

  /** Processes whatever the stored journal has beyond this hub's position. */
  private async fill(): Promise<void> {
    for (;;) {
      const page = await this.store.readLog<JournalEntry>(JOURNAL_LOG, this.lastSeq, REPLAY_PAGE);
      for (const e of page) await this.fanOut(e);
      if (page.length < REPLAY_PAGE) return;
    }
  }

  /** open sockets and streams attached to this hub (metrics) */
  get subscribers(): number {
    return this.slots.size;
  }

  get cursor(): number {
    return this.lastSeq;
  }

  /** The sockets and streams open on this process, optionally those of one identity or key. */
  connections(q: ConnectionQuery = {}): ConnectionRow[] {
    return [...this.slots.values()]
      .filter((s) => s.sub.connection && matches(s.sub.connection, q))
      .map((s) => ({ ...s.sub.connection!, cursor: String(s.sub.lastSeq), catching_up: s.pump !== undefined }));
  }

  private beforeOffers: ((e: JournalEntry) => Promise<void> | void)[] = [];

  /** Runs on each entry, awaited, before the entry is offered to anyone (what decides visibility catches up first). */
  beforeOffer(fn: (e: JournalEntry) => Promise<void> | void): void {
    this.beforeOffers.push(fn);
  }

  private changeWatchers: (() => void)[] = [];

  onChange(fn: () => void): void {
    this.changeWatchers.push(fn);
  }

  private changed(slot: Slot): void {
    if (slot.sub.connection) for (const fn of this.changeWatchers) fn();
  }

  /** Each attached subscriber's position and whether it is catching up (for operators and tests). */
  positions(): { lastSeq: number; catchingUp: boolean; waitingForRoom: boolean }[] {
    return [...this.slots.values()].map((s) => ({ lastSeq: s.sub.lastSeq, catchingUp: s.pump !== undefined, waitingForRoom: s.waiting === true }));
  }

  private enqueue(e: LogEntry<JournalEntry>): void {
    this.chain = this.chain.then(() => this.take(e)).catch((err) => this.log.warn({ err }, 'push hub entry failed'));
  }

  private async take(e: LogEntry<JournalEntry>): Promise<void> {
    if (e.seq <= this.lastSeq) return;
    if (e.seq > this.lastSeq + 1) await this.fill();
    await this.fanOut(e);
  }

  /**
   * Offers an entry to every live subscriber that may want it, FAN_OUT_SLICE offers a turn. The hub's chain
   * takes the next entry only after this one's last slice, so each subscriber still sees entries in order;
   * one attached or detached between slices is visited or skipped as Map and Set iteration allows (a live
   * attach starts after the hub's position, a catch-up reads the entry from the journal).
   */
  private async fanOut(stored: LogEntry<JournalEntry>): Promise<void> {
    if (stored.seq <= this.lastSeq) return;
    const e = await this.run.take(stored);
    for (const before of this.beforeOffers) {
      const pending = before(e.entry);
      if (pending) await pending;
    }
    this.lastSeq = e.seq;
    let offers = 0;
    const offer = async (slots: Iterable<Slot>) => {
      for (const slot of slots) {
        this.offerLive(slot, e);
        if (++offers % FAN_OUT_SLICE === 0) await nextTurn();
      }
    };
    const only = shownOnlyTo(e.entry);
    if (!only) return offer(this.slots.values());
    await offer(this.wide);
    for (let i = 0; i < only.length; i++) {
      const id = only[i];
      // the same identity named twice (a signal to its own sender) is offered once
      if (id === null || only.indexOf(id) < i) continue;
      const slots = this.byIdentity.get(id);
      if (slots) await offer(slots);
    }
  }

  /**
   * A live subscriber was not offered the entries since its position that it could not want (they named
   * other identities): it has passed them. A catching-up one reads this entry from the journal when it gets there.
   */
  private offerLive(slot: Slot, e: LogEntry<JournalEntry>): void {
    if (slot.pump) return;
    if (slot.sub.lastSeq < e.seq - 1) slot.sub.lastSeq = e.seq - 1;
    if (this.offer(slot, e, true) === 'full') slot.pump = this.pump(slot);
  }

  /** Offers one entry; the subscriber's position moves only past an entry it sent or does not want. */
  private offer(slot: Slot, e: LogEntry<JournalEntry>, live: boolean): Delivery {
    const sub = slot.sub;
    if (e.seq <= sub.lastSeq) return 'sent';
    if (!sub.wants(e.entry, e.seq)) {
      sub.lastSeq = e.seq;
      return 'sent';
    }
    const r = sub.deliver(e.entry, e.seq, live);
    if (r === 'sent') sub.lastSeq = e.seq;
    else if (r === 'gone') this.detach(sub);
    return r;
  }

  /**
   * Catches a subscriber up from the stored journal, waiting for room before each entry it is shown, and
   * turns it live in the same turn it reaches the hub's position (so no live entry falls between).
   */
  private async pump(slot: Slot): Promise<void> {
    const sub = slot.sub;
    try {
      for (;;) {
        await this.turns.enter();
        let done: boolean | undefined;
        try {
          done = await this.page(slot);
        } finally {
          this.turns.leave();
        }
        if (done !== false) return;
        await nextTurn();
      }
    } catch (err) {
      if (this.slots.get(sub) !== slot) return;
      this.detach(sub);
      sub.fail(err);
    }
  }

  /** One page of a catch-up, in one turn: false while there is more to read, true once live, undefined when it ended. */
  private async page(slot: Slot): Promise<boolean | undefined> {
    const sub = slot.sub;
    const page = await readJournal(this.store, sub.lastSeq, CATCH_UP_PAGE);
    if (this.slots.get(sub) !== slot) return;
    // journal sequences have no holes: a missing next entry was trimmed while this subscriber lagged
    if ((page.length && page[0].seq > sub.lastSeq + 1) || (!page.length && sub.lastSeq < this.lastSeq)) await this.assertResumable(sub.lastSeq);
    for (const e of page) {
      // an entry refused once waits for room the slow way: a fast "has room" that the delivery then refuses must not loop
      for (let refused = false; ; refused = true) {
        if (e.seq > sub.lastSeq && sub.wants(e.entry, e.seq) && !(await this.room(slot, refused))) return void this.detach(sub);
        if (this.slots.get(sub) !== slot) return;
        const r = this.offer(slot, e, false);
        if (r === 'gone') return;
        if (r === 'sent') break;
      }
    }
    if (page.length < CATCH_UP_PAGE && sub.lastSeq >= this.lastSeq) {
      slot.pump = undefined;
      return true;
    }
    return false;
  }

  /** Waits for room; a subscriber that has none now gives up its catch-up turn while it waits. */
  private async room(slot: Slot, refused: boolean): Promise<boolean> {
    if (!refused && (slot.sub.hasRoom?.() ?? false)) return true;
    slot.waiting = true;
    const yielded = slot.sub.hasRoom !== undefined;
    if (yielded) this.turns.leave();
    try {
      return await slot.sub.room();
    } finally {
      slot.waiting = false;
      if (yielded) await this.turns.enter();
    }
  }

  /** Live from now, or caught up from `after` first. A subscriber closed meanwhile is not attached. */
  async attach(sub: Subscriber, after?: number): Promise<void> {
    if (after !== undefined) await this.assertResumable(after);
    if (!sub.open || this.slots.has(sub)) return;
    const slot: Slot = { sub };
    this.slots.set(sub, slot);
    this.index(slot);
    this.changed(slot);
    if (after === undefined) {
      sub.lastSeq = this.lastSeq;
      return;
    }
    sub.lastSeq = after;
    slot.pump = this.pump(slot);
    await slot.pump;
  }

  /**
   * Rewinds an attached subscriber to `after` and catches it up; resolves when it is live again. A
   * subscriber that is not attached (closed) is left alone. The caller runs one resume at a time.
   */
  async resume(sub: Subscriber, after: number): Promise<void> {
    await this.assertResumable(after);
    const slot = this.slots.get(sub);
    if (!slot) return;
    while (slot.pump && this.slots.get(sub) === slot) await slot.pump;
    if (this.slots.get(sub) !== slot) return;
    sub.lastSeq = after;
    slot.pump = this.pump(slot);
    await slot.pump;
  }

  detach(sub: Subscriber): void {
    const slot = this.slots.get(sub);
    if (!slot) return;
    this.slots.delete(sub);
    this.unindex(slot);
    this.changed(slot);
  }

  /** The subscriber's `identityId` changed (its rights were re-checked): offer it entries by the new one. */
  reindex(sub: Subscriber): void {
    const slot = this.slots.get(sub);
    if (!slot || slot.indexedAs === sub.identityId) return;
    this.unindex(slot);
    this.index(slot);
  }

  private unindex(slot: Slot): void {
    const id = slot.indexedAs;
    if (id === undefined) return void this.wide.delete(slot);
    const slots = this.byIdentity.get(id);
    slots?.delete(slot);
    if (slots?.size === 0) this.byIdentity.delete(id);
  }

  private index(slot: Slot): void {
    const id = slot.sub.identityId;
    slot.indexedAs = id;
    if (id === undefined) return void this.wide.add(slot);
    const slots = this.byIdentity.get(id);
    if (slots) slots.add(slot);
    else this.byIdentity.set(id, new Set([slot]));
  }

  async stop(): Promise<void> {
    clearInterval(this.catchUp);
    await this.unsubscribe?.();
    this.slots.clear();
    this.wide.clear();
    this.byIdentity.clear();
  }
}

/** A cursor as clients send it: the decimal journal sequence of a push. */
export function parseCursor(v: unknown, field = 'after'): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw new AppError('VALIDATION_INVALID_TYPE', `${field} must be a cursor from a push`, { field });
  return n;
}
