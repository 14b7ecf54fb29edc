/**
 * One idempotency store for every kind of key: the front end's `Idempotency-Key` header and a service's own
 * body field (a reservation's `idempotency_key`). A key is run once per (identity, scope, key) for the TTL
 * (24 h by default, IDEMPOTENCY_TTL_MS). The record is reserved with a create-only put before the work
 * runs, so concurrent retries elect one runner and the others wait for its answer; the same key with another
 * request is refused with the caller's own 409. A refused run deletes its record, so its retry runs afresh.
 * Expired records count as absent and are swept.
 */
import { AppError } from '../errors.js';
import { sha256 } from '../ids.js';
import type { Op, Store } from './port.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const WAIT_MS = 30_000;
const POLL_MS = 20;
const SWEEP_EVERY_MS = 60_000;
const SWEEP_BATCH = 200;
const INDEX = 'idem:by-expiry';

interface Entry<A> {
  hash: string;
  created_at: number;
  answer?: A;
}

/** The right to run a key's request once: keep its answer (`keepOps`) or give it up (`abandon`). */
export interface Claim {
  rec: string;
  hash: string;
  at: number;
}

export type Begun<A> = { replay: A } | { claim: Claim };

/** The header's records keep their original key; a scope (a body field's owner) gets its own key space. */
const recordKey = (identity: string, scope: string, key: string) => (scope ? `idem:${identity}:${scope}:${sha256(key)}` : `idem:${identity}:${sha256(key)}`);
const member = (expires: number, rec: string) => `${String(expires).padStart(15, '0')}|${rec}`;

export class IdempotencyRecords {
  private lastSweep = 0;

  constructor(
    protected store: Store,
    readonly ttlMs = IDEMPOTENCY_TTL_MS,
    protected now: () => number = Date.now,
  ) {}

  /**
   * The first answer of this key when there is one (the same request), else a claim to run it. Waits while
   * another request with this key runs; `mismatch` is the refusal of the same key with another request.
   */
  async begin<A>(identity: string, scope: string, key: string, request: string, mismatch: () => AppError): Promise<Begun<A>> {
    this.maybeSweep();
    const rec = recordKey(identity, scope, key);
    const hash = sha256(request);
    const deadline = this.now() + WAIT_MS;
    for (;;) {
      const cur = await this.store.get<Entry<A>>(rec);
      const live = cur && cur.value.created_at + this.ttlMs > this.now() ? cur.value : undefined;
      if (live && live.hash !== hash) throw mismatch();
      if (live?.answer !== undefined) return { replay: live.answer };
      if (!live) {
        const at = this.now();
        const won = await this.store.commit([
          { op: 'put', key: rec, value: { hash, created_at: at } satisfies Entry<A>, expect: cur?.version ?? 0 },
          { op: 'index', index: INDEX, member: member(at + this.ttlMs, rec) },
        ]);
        if (won.ok) return { claim: { rec, hash, at } };
      }
      // another request with this key is running: wait for its answer (or its refusal, then run afresh)
      if (this.now() > deadline) throw new AppError('IDEMPOTENCY_KEY_IN_PROGRESS');
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  /** The op that keeps the answer; a service commits it with the change it answers for. */
  keepOp<A>(c: Claim, answer: A): Op {
    return { op: 'put', key: c.rec, value: { hash: c.hash, created_at: c.at, answer } satisfies Entry<A> };
  }

  async abandon(c: Claim): Promise<void> {
    await this.store.commit([{ op: 'del', key: c.rec }]);
  }

  /** Runs `exec` once for its claim: the answer `keep` picks (undefined: nothing replayable) is kept. */
  async run<T, A>(c: Claim, exec: () => Promise<T>, keep: (out: T) => A | undefined): Promise<T> {
    let out: T;
    try {
      out = await exec();
    } catch (e) {
      await this.abandon(c);
      throw e;
    }
    const answer = keep(out);
    if (answer !== undefined) await this.store.commit([this.keepOp(c, answer)]);
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
      const cur = await this.store.get<Entry<unknown>>(rec);
      const ops: Op[] = [{ op: 'index', index: INDEX, member: m, remove: true }];
      if (cur && cur.value.created_at + this.ttlMs <= now) ops.push({ op: 'del', key: rec, expect: cur.version });
      await this.store.commit(ops);
    }
    return due.length;
  }
}
