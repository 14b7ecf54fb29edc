/**
 * The outbox dispatcher: tails the logs changes append to in their own commits (the signal journal, the
 * org log), maps entries to webhook events and creates one delivery actor per (webhook, event). Every
 * instance may run it: the cursor of a log and the deliveries of the range it covers are written in ONE
 * commit with a version check on the cursor, and delivery ids derive from (webhook, log, seq, event) and
 * are created with expect:0, so no two instances ever create the same delivery.
 */
import { newDelivery } from '../../actors/webhook-delivery.js';
import { now } from '../clock.js';
import type { Config } from '../config.js';
import { newId } from '../ids.js';
import type { Logger } from '../log.js';
import { ORG_LOG, type OrgLogEntry } from '../org/log.js';
import type { Runtime } from '../runtime/runtime.js';
import { isSignalEntry, JOURNAL_LOG, readJournal, type EventEntry, type JournalEntry } from '../journal/journal.js';
import type { Op } from '../store/port.js';
import { loadAll } from '../store/scan.js';
import { DELIVERY, deliveryId, webhookIndexes, webhookKeys, WEBHOOK_EVENTS, type Webhook, type WebhookEvent } from './model.js';

export const OUTBOX_LOGS = [JOURNAL_LOG, ORG_LOG];
const BATCH = 100;
/** ops per dispatcher commit, so a burst with many webhooks stays a modest transaction */
const MAX_OPS = 2000;
const POLL_MS = 1000;

export interface Cursor {
  seq: number;
}

interface Event {
  type: WebhookEvent;
  payload: Record<string, unknown>;
}

/** The webhook events one log entry stands for. */
export function eventsOf(log: string, entry: unknown): Event[] {
  const ev = (type: WebhookEvent, timestamp: string, data: Record<string, unknown>): Event => ({ type, payload: { type, timestamp, data } });
  if (log === ORG_LOG) {
    const e = entry as OrgLogEntry;
    const { type, at, ...data } = e;
    return [ev(type, at, data)];
  }
  const e = entry as JournalEntry;
  if (!isSignalEntry(e)) {
    // other parts' events (artifacts, workspace, ...) join the catalogue when those parts add theirs
    const at = eventTime(e);
    if (at !== undefined) return [ev(e.type as WebhookEvent, at, { [e.subject]: e.data })];
    if (e.type === 'signal.ack_overdue') {
      const d = e.data as { checked_at: string };
      return [ev('signal.ack_overdue', d.checked_at, e.data as Record<string, unknown>)];
    }
    if (e.type === 'task.expired') {
      const s = e.data as { updated_at: string };
      return [ev('task.expired', s.updated_at, { signal: e.data })];
    }
    if (e.type === 'task.progress') {
      const d = e.data as { heartbeat_at: string };
      return [ev('task.progress', d.heartbeat_at, { progress: e.data })];
    }
    if (e.type.startsWith('federation.') && (WEBHOOK_EVENTS as readonly string[]).includes(e.type)) {
      const s = e.data as { updated_at: string };
      return [ev(e.type as WebhookEvent, s.updated_at, { signal: e.data })];
    }
    if (e.type !== 'membership.changed') return [];
    const m = e.data as { updated_at: string };
    return [ev('membership.changed', m.updated_at, { membership: e.data })];
  }
  const s = e.signal;
  const at = String(s.updated_at ?? s.created_at);
  if (e.type === 'signal') return [ev('signal.emitted', at, { signal: s })];
  const state = s.delivery_state;
  if (e.prev_state === state) return [];
  const out: Event[] = [];
  if (state === 'leased') out.push(ev('signal.claimed', at, { signal: s }));
  if (state === 'acked') out.push(ev('signal.acked', at, { signal: s }));
  if (state === 'acked' && s.task_status === 'completed') out.push(ev('task.completed', at, { signal: s }));
  if (state === 'dead_letter') out.push(ev('signal.dead_lettered', at, { signal: s }));
  return out;
}

/** Reservation and memory events: the field of the record the entry carries that says when it happened. */
const TIME_FIELD: Partial<Record<string, string>> = {
  'reservation.granted': 'created_at',
  'reservation.released': 'released_at',
  'reservation.expired': 'expires_at',
  'memory.stored': 'updated_at',
  'memory.updated': 'updated_at',
  'memory.forgotten': 'updated_at',
};

/** When a reservation or memory event happened; undefined for any other entry. */
function eventTime(e: EventEntry): string | undefined {
  const field = TIME_FIELD[e.type];
  return field === undefined ? undefined : String((e.data as Record<string, unknown>)[field]);
}

export class Dispatcher {
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private poll: NodeJS.Timeout | undefined;
  private unsubs: (() => Promise<void>)[] = [];

  constructor(
    private rt: Runtime,
    private config: Pick<Config, 'webhookRetryWindowMs' | 'webhookTimeoutMs' | 'webhookBackoffBaseMs'>,
    private log: Logger,
  ) {}

  private get store() {
    return this.rt.store;
  }

  async start(): Promise<void> {
    for (const l of OUTBOX_LOGS) this.unsubs.push(await this.store.subscribe(l, () => this.wake()));
    // a lost pub/sub message or an instance that died mid-range is caught up by polling
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.wake();
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drainAll()
      .catch((e) => this.log.warn({ err: e }, 'webhook dispatch failed; retried on the next poll'))
      .finally(() => {
        this.running = undefined;
        if (this.again) this.wake();
      });
  }

  private async drainAll(): Promise<void> {
    this.again = false;
    for (const l of OUTBOX_LOGS) if (!this.stopped) await this.drain(l);
  }

  /** The lowest sequence of `log` the dispatcher still needs (trimming must keep it and everything after). */
  async needsFrom(log: string): Promise<number | undefined> {
    const c = await this.store.get<Cursor>(webhookKeys.cursor(log));
    return c ? c.value.seq + 1 : undefined;
  }

  private async drain(log: string): Promise<void> {
    while (!this.stopped) {
      const cur = await this.store.get<Cursor>(webhookKeys.cursor(log));
      if (!cur) {
        // first run on this store: webhooks made from now on care only about what follows
        await this.store.commit([{ op: 'put', key: webhookKeys.cursor(log), value: { seq: await this.store.lastSeq(log) }, expect: 0 }]);
        continue;
      }
      // read before the webhooks: one made after that read starts after this sequence (its `since`)
      const last = await this.store.lastSeq(log);
      if (last <= cur.value.seq) return;
      const hooks = (await loadAll<Webhook>(this.store, webhookIndexes.all, webhookKeys.webhook)).filter((h) => h.active);
      if (!hooks.length) {
        // nobody subscribed: move past the range without reading (decoding) its entries
        await this.store.commit([{ op: 'put', key: webhookKeys.cursor(log), value: { seq: last }, expect: cur.version }]);
        continue;
      }
      const entries = log === JOURNAL_LOG ? await readJournal(this.store, cur.value.seq, BATCH) : await this.store.readLog(log, cur.value.seq, BATCH);
      if (!entries.length) return;
      const ops: Op[] = [];
      let upTo = cur.value.seq;
      for (const e of entries) {
        const add: Op[] = [];
        for (const ev of eventsOf(log, e.entry))
          for (const h of hooks)
            if (h.events.includes(ev.type) && e.seq > (h.since[log] ?? 0)) add.push(...this.deliveryOps(h, log, e.seq, ev));
        if (ops.length && ops.length + add.length > MAX_OPS) break;
        ops.push(...add);
        upTo = e.seq;
      }
      const res = await this.store.commit([{ op: 'put', key: webhookKeys.cursor(log), value: { seq: upTo }, expect: cur.version }, ...ops]);
      if (!res.ok && res.conflict !== webhookKeys.cursor(log)) {
        const moved = await this.store.get<Cursor>(webhookKeys.cursor(log));
        if (moved?.version === cur.version) throw new Error(`webhook dispatch of ${log} after ${cur.value.seq} refused: ${res.conflict}`);
      }
    }
  }

  private deliveryOps(h: Webhook, log: string, seq: number, ev: Event): Op[] {
    const id = deliveryId(h.id, log, seq, ev.type);
    const rec = newDelivery({
      id,
      webhook_id: h.id,
      event: ev.type,
      payload: ev.payload,
      order: newId(),
      now: now(),
      retry_window_ms: this.config.webhookRetryWindowMs,
      backoff_base_ms: this.config.webhookBackoffBaseMs,
      // an attempt ends by its own timeout; twice that without a result means the sender died mid-send,
      // and as long queued without a start, that its process may be gone (queued again, nothing recorded)
      send_hold_ms: 2 * this.config.webhookTimeoutMs + 1000,
    });
    return this.rt.createOps(DELIVERY, id, rec);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.poll) clearInterval(this.poll);
    await Promise.allSettled(this.unsubs.map((u) => u()));
    await this.running;
  }
}

