/**
 * Safe retries of create routes: a request with an `Idempotency-Key` header is run once per (identity, key)
 * for 24 hours. A retry with the same body gets the first answer again; the same key with another body is
 * refused (409 IDEMPOTENCY_KEY_REUSED). The record is reserved in the store before the handler runs, with a
 * create-only put, so concurrent retries elect one runner and the others wait for its answer. A refused
 * request leaves no record, so its retry runs afresh. Expired records count as absent and are swept.
 */
import { AppError } from '../errors.js';
import { sha256 } from '../ids.js';
import type { Store } from '../store/port.js';
import type { Reply } from './server.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const WAIT_MS = 30_000;
const POLL_MS = 20;
const SWEEP_EVERY_MS = 60_000;
const SWEEP_BATCH = 200;
const INDEX = 'idem:by-expiry';

interface Entry {
  hash: string;
  created_at: number;
  answer?: { status: number; data: unknown; meta?: Record<string, unknown>; headers?: Record<string, string> };
}

const recordKey = (identity: string, key: string) => `idem:${identity}:${sha256(key)}`;
const member = (expires: number, rec: string) => `${String(expires).padStart(15, '0')}|${rec}`;

export class Idempotency {
  private lastSweep = 0;

  constructor(
    private store: Store,
    private ttlMs = IDEMPOTENCY_TTL_MS,
    private now: () => number = Date.now,
  ) {}

  /** Runs `exec` once for this identity and key; a retry with the same request answers the first reply. */
  async once(identity: string, key: string, request: string, exec: () => Promise<Reply>): Promise<Reply> {
    if (key.length === 0 || key.length > 255) throw new AppError('VALIDATION_INVALID_TYPE', 'Idempotency-Key must be 1 to 255 characters', { field: 'Idempotency-Key', reason: 'length' });
    this.maybeSweep();
    const rec = recordKey(identity, key);
    const hash = sha256(request);
    const deadline = this.now() + WAIT_MS;
    for (;;) {
      const cur = await this.store.get<Entry>(rec);
      const live = cur && cur.value.created_at + this.ttlMs > this.now() ? cur.value : undefined;
      if (live && live.hash !== hash) throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request', { field: 'Idempotency-Key' });
      if (live?.answer) return { ...live.answer, headers: { ...live.answer.headers, 'idempotent-replayed': 'true' } };
      if (!live) {
        const at = this.now();
        const won = await this.store.commit([
          { op: 'put', key: rec, value: { hash, created_at: at } satisfies Entry, expect: cur?.version ?? 0 },
          { op: 'index', index: INDEX, member: member(at + this.ttlMs, rec) },
        ]);
        if (won.ok) return this.run(rec, hash, at, exec);
      }
      // another request with this key is running: wait for its answer (or its refusal, then run afresh)
      if (this.now() > deadline) throw new AppError('IDEMPOTENCY_KEY_IN_PROGRESS');
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  private async run(rec: string, hash: string, at: number, exec: () => Promise<Reply>): Promise<Reply> {
    let out: Reply;
    try {
      out = await exec();
    } catch (e) {
      await this.store.commit([{ op: 'del', key: rec }]);
      throw e;
    }
    // only a JSON answer is kept; streams and web responses cannot be replayed
    if (!out.raw && !out.web && !out.text) {
      const answer = { status: out.status ?? 200, data: out.data, ...(out.meta ? { meta: out.meta } : {}), ...(out.headers ? { headers: out.headers } : {}) };
      await this.store.commit([{ op: 'put', key: rec, value: { hash, created_at: at, answer } satisfies Entry }]);
    }
    return out;
  }

  /** Drops expired records; runs off the request path at most once a minute. */
  private maybeSweep(): void {
    const now = this.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    void this.sweep(now).catch(() => undefined);
  }

  async sweep(now = this.now()): Promise<number> {
    const due = await this.store.range(INDEX, { lt: member(now, ''), limit: SWEEP_BATCH });
    for (const m of due) {
      const rec = m.slice(m.indexOf('|') + 1);
      const cur = await this.store.get<Entry>(rec);
      const ops: Parameters<Store['commit']>[0] = [{ op: 'index', index: INDEX, member: m, remove: true }];
      if (cur && cur.value.created_at + this.ttlMs <= now) ops.push({ op: 'del', key: rec, expect: cur.version });
      await this.store.commit(ops);
    }
    return due.length;
  }
}
