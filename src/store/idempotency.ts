/**
 * One idempotency store for every kind of key: the front end's `Idempotency-Key` header and a service's own
 * body field (an emit's or a reservation's `idempotency_key`). A key is run once per (identity, scope, key)
 * for the TTL (24 h by default, IDEMPOTENCY_TTL_MS). The record is claimed with a compare-and-set put before
 * the work runs, so concurrent retries elect one runner and the others wait for its answer; the same key with
 * another request is refused with the caller's own 409. A refused run deletes its record, so its retry runs
 * afresh. Expired records count as absent and are swept.
 *
 * A claim belongs to a live attempt: it holds a lease (IDEMPOTENCY_LEASE_MS) that the attempt renews while it
 * runs. When the attempt dies (a crash, a SIGKILL) the lease lapses and a retry takes the claim over. The
 * takeover moves the record's version, and an attempt's effect is committed with `expect` on the version it
 * claimed, so a superseded attempt can commit nothing. A service commits its answer (`keepOp`, or
 * `effectOps` for the header's claim) in the same commit as the effect it answers for: a retry finds either
 * no effect (and runs again) or the answer, never a second effect.
 */
import { elapsed } from '../clock.js';
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import { sha256 } from '../ids.js';
import type { CommitResult, Op, Store } from './port.js';

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
export const IDEMPOTENCY_LEASE_MS = 10_000;
const WAIT_MS = 30_000;
const POLL_MS = 20;
const SWEEP_EVERY_MS = 60_000;
const SWEEP_BATCH = 200;
const INDEX = 'idem:by-expiry';

interface Entry<A> {
  hash: string;
  created_at: number;
  /** the attempt holding the claim */
  attempt?: string;
  answer?: A;
  /** what the header's attempt committed with its effect: a later attempt answers it instead of acting again */
  effect?: unknown;
}

/** The right to run a key's request once, for one attempt: keep its answer (`keepOp`) or give it up (`abandon`). */
export interface Claim {
  rec: string;
  hash: string;
  at: number;
  attempt: string;
  /** the record's version this attempt claimed; its effect is committed against it */
  version: number;
  leaseVersion: number;
  /** the effect an earlier, dead attempt committed */
  effect?: unknown;
}

export type Begun<A> = { replay: A } | { claim: Claim };

/** The header's records keep their original key; a scope (a body field's owner) gets its own key space. */
const RECORD_PREFIX = 'idem:';
const recordKey = (identity: string, scope: string, key: string) => (scope ? `${RECORD_PREFIX}${identity}:${scope}:${sha256(key)}` : `${RECORD_PREFIX}${identity}:${sha256(key)}`);
const leaseKey = (rec: string) => `${rec}:lease`;
const member = (expires: number, rec: string) => `${String(expires).padStart(15, '0')}|${rec}`;

/** What carries the header's claim through a request: the principal the front end made for it (`runAttempt`). */
export interface ClaimHolder {
  claim?: Claim;
}

/** The effect an earlier attempt of this request committed before it died; the service answers it as is. */
export const committedEffect = <T>(by: ClaimHolder | undefined): T | undefined => by?.claim?.effect as T | undefined;

/** The op a service adds to the commit of the effect it answers with `data`, when the request has a claim. */
export function effectOps(by: ClaimHolder | undefined, data: unknown): Op[] {
  const c = by?.claim;
  return c ? [{ op: 'put', key: c.rec, value: { hash: c.hash, created_at: c.at, attempt: c.attempt, effect: data } satisfies Entry<unknown>, expect: c.version }] : [];
}

/**
 * Refuses a commit that failed on an idempotency record: only a claim's own ops (`keepOp`, `effectOps`) write
 * one with a version check, so a later attempt took the claim over and this one must not act.
 */
export function refuseLostClaim(res: CommitResult): void {
  if (!res.ok && res.conflict?.startsWith(RECORD_PREFIX)) throw new AppError('IDEMPOTENCY_KEY_IN_PROGRESS');
}

export class IdempotencyRecords {
  private lastSweep = 0;

  constructor(
    protected store: Store,
    readonly ttlMs = IDEMPOTENCY_TTL_MS,
    readonly leaseMs = IDEMPOTENCY_LEASE_MS,
    protected now: () => number = Date.now,
  ) {}

  /**
   * The first answer of this key when there is one (the same request), else a claim to run it. Waits while
   * a live attempt with this key runs; `mismatch` is the refusal of the same key with another request.
   */
  async begin<A>(identity: string, scope: string, key: string, request: string, mismatch: () => AppError): Promise<Begun<A>> {
    this.maybeSweep();
    const rec = recordKey(identity, scope, key);
    const hash = sha256(request);
    const deadline = elapsed() + WAIT_MS;
    for (;;) {
      const [cur, lease] = await this.store.getMany<unknown>([rec, leaseKey(rec)]);
      const at = this.now();
      const live = cur && (cur.value as Entry<A>).created_at + this.ttlMs > at ? (cur.value as Entry<A>) : undefined;
      if (live && live.hash !== hash) throw mismatch();
      if (live?.answer !== undefined) return { replay: live.answer };
      const held = live && ((lease?.value as { until: number } | undefined)?.until ?? live.created_at + this.leaseMs) > at;
      if (!held) {
        // absent, expired, or its attempt stopped renewing: this attempt takes it
        const entry: Entry<A> = { hash, created_at: live?.created_at ?? at, attempt: randomUUID(), ...(live?.effect !== undefined ? { effect: live.effect } : {}) };
        const won = await this.store.commit([
          { op: 'put', key: rec, value: entry, expect: cur?.version ?? 0 },
          { op: 'put', key: leaseKey(rec), value: { until: at + this.leaseMs } },
          { op: 'index', index: INDEX, member: member(entry.created_at + this.ttlMs, rec) },
        ]);
        if (won.ok) return { claim: { rec, hash, at: entry.created_at, attempt: entry.attempt!, version: (cur?.version ?? 0) + 1, leaseVersion: (lease?.version ?? 0) + 1, ...(entry.effect !== undefined ? { effect: entry.effect } : {}) } };
      }
      // another attempt with this key is running: wait for its answer (or its refusal or death, then run)
      if (elapsed() > deadline) throw new AppError('IDEMPOTENCY_KEY_IN_PROGRESS');
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  /** The op that keeps the answer, fenced by the claim; a service commits it with the change it answers for. */
  keepOp<A>(c: Claim, answer: A, expect = c.version): Op {
    return { op: 'put', key: c.rec, value: { hash: c.hash, created_at: c.at, attempt: c.attempt, answer } satisfies Entry<A>, expect };
  }

  /** Gives the claim up: a retry runs afresh, unless this attempt already committed an effect (kept for it). */
  async abandon(c: Claim): Promise<void> {
    await this.store.commit([{ op: 'del', key: c.rec, expect: c.version }]);
    await this.store.commit([{ op: 'del', key: leaseKey(c.rec) }]);
  }

  /**
   * Runs `exec` once for its claim, renewing the claim's lease meanwhile: the answer `keep` picks (undefined:
   * nothing to keep, or kept already with the effect) is kept unless another attempt took the claim over.
   */
  async run<T, A>(c: Claim, exec: () => Promise<T>, keep: (out: T) => A | undefined): Promise<T> {
    const renewal = setInterval(() => void this.renew(c, renewal).catch(() => undefined), Math.max(1, Math.floor(this.leaseMs / 3)));
    renewal.unref();
    let out: T;
    try {
      out = await exec();
    } catch (e) {
      clearInterval(renewal);
      await this.abandon(c);
      throw e;
    }
    clearInterval(renewal);
    const answer = keep(out);
    if (answer !== undefined) {
      // the effect's commit may have moved the record on: keep the answer while the claim is still this attempt's
      const cur = await this.store.get<Entry<A>>(c.rec);
      if (cur?.value.attempt === c.attempt) await this.store.commit([this.keepOp(c, answer, cur.version), { op: 'del', key: leaseKey(c.rec) }]);
    }
    return out;
  }

  /** `run` handing the claim to `exec`, which gives it to the request's holder for `effectOps` and `committedEffect`. */
  runAttempt<T, A>(c: Claim, exec: (c: Claim) => Promise<T>, keep: (out: T) => A | undefined): Promise<T> {
    return this.run(c, () => exec(c), keep);
  }

  private async renew(c: Claim, renewal: NodeJS.Timeout): Promise<void> {
    const res = await this.store.commit([{ op: 'put', key: leaseKey(c.rec), value: { until: this.now() + this.leaseMs }, expect: c.leaseVersion }]);
    // a lost lease was taken over: the effect's fence refuses this attempt's commit, nothing to renew
    if (res.ok) c.leaseVersion++;
    else clearInterval(renewal);
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
      if (cur && cur.value.created_at + this.ttlMs <= now) ops.push({ op: 'del', key: rec, expect: cur.version }, { op: 'del', key: leaseKey(rec) });
      await this.store.commit(ops);
    }
    return due.length;
  }
}
