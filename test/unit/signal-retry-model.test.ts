/**
 * Property test (fast-check) of the signal machine's retry transitions against a model. A task with random
 * back-off terms and max_attempts runs random claims (and renewals), failed acks, clock advances (leases expire) and
 * retries of its dead letter. The machine is stepped purely (test/helpers/machine.ts) and its due timers
 * fire from `signalTimers`, late as a real timer may. After every step its state, attempts and `retry_at`
 * equal the model's: a failed attempt n waits min(base × 2^(n-1), cap) from when it failed.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signalMachine, signalTimers, type SignalContext, type SignalEvent } from '../../actors/signal.js';
import { T0, iso, runMachine, signalContext } from '../helpers/machine.js';

const W = 'id-worker';
type Status = 'open' | 'leased' | 'waiting' | 'dead';
type Op = { op: 'claim'; lease: number } | { op: 'fail' } | { op: 'tick'; ms: number } | { op: 'retry' };

class Model {
  status: Status = 'open';
  attempts = 0;
  retryAt: number | null = null;
  leaseEnd = 0;
  constructor(
    private base: number,
    private cap: number,
    private max: number,
    public now: number,
  ) {}
  private failedAt(t: number) {
    this.attempts++;
    if (this.attempts >= this.max) return void (this.status = 'dead');
    const wait = this.base > 0 ? Math.min(this.base * 2 ** (this.attempts - 1), this.cap) : 0;
    if (wait > 0) [this.status, this.retryAt] = ['waiting', t + wait];
    else this.status = 'open';
  }
  apply(o: Op) {
    // a claim by the holder renews its lease
    if (o.op === 'claim' && (this.status === 'open' || this.status === 'leased')) [this.status, this.leaseEnd] = ['leased', this.now + o.lease];
    if (o.op === 'fail' && this.status === 'leased') this.failedAt(this.now);
    if (o.op === 'retry' && this.status === 'dead') [this.status, this.attempts, this.retryAt] = ['open', 0, null];
    if (o.op !== 'tick') return;
    this.now += o.ms;
    if (this.status === 'leased' && this.leaseEnd <= this.now) this.failedAt(this.leaseEnd);
    if (this.status === 'waiting' && this.retryAt! <= this.now) this.status = 'open';
  }
}

const STATE: Record<string, Status> = { pending: 'open', leased: 'leased', waiting: 'waiting', dead_letter: 'dead' };

describe('signal machine retries against a model (fast-check)', () => {
  it('state, attempts and retry_at follow the back-off formula, capped, through expiries and retries', () => {
    const op = fc.oneof(
      fc.record({ op: fc.constant('claim' as const), lease: fc.integer({ min: 1, max: 5000 }) }),
      fc.constant({ op: 'fail' as const }),
      fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 20_000 }) }),
      fc.constant({ op: 'retry' as const }),
    );
    const terms = fc.record({ base: fc.integer({ min: 0, max: 3000 }), cap: fc.integer({ min: 0, max: 10_000 }), max: fc.integer({ min: 1, max: 6 }) });
    fc.assert(
      fc.property(terms, fc.array(op, { maxLength: 60 }), ({ base, cap, max }, ops) => {
        const model = new Model(base, cap, max, T0);
        let value = 'pending';
        let context: SignalContext = signalContext({ max_attempts: max, delivery_count: 0, ...(base > 0 ? { retry_backoff_ms: base, retry_backoff_max_ms: cap } : {}) });
        const send = (e: SignalEvent) => {
          const r = runMachine<SignalContext>(signalMachine, value, context, e as never);
          if (!r.refused) [value, context] = [r.value, r.context];
        };
        let now = T0;
        for (const o of ops) {
          model.apply(o);
          if (o.op === 'claim') send({ type: 'CLAIM', now, identity: W, lease_ms: o.lease });
          if (o.op === 'fail') send({ type: 'ACK', now, identity: W, outcome: 'failed' });
          if (o.op === 'retry') send({ type: 'RETRY', now });
          if (o.op === 'tick') {
            now += o.ms;
            // due timers fire late, at `now`, in their order; each firing may make the next due
            for (let due = signalTimers(value, context).filter((t) => t.at <= now); due.length; due = signalTimers(value, context).filter((t) => t.at <= now)) {
              const before = value;
              send({ type: due.sort((a, b) => a.at - b.at)[0].event, now } as SignalEvent);
              if (value === before) break;
            }
          }
          expect(STATE[value]).toBe(model.status);
          expect(context.delivery_count).toBe(model.attempts);
          if (model.status === 'waiting') expect(context.retry_at).toBe(iso(model.retryAt!));
        }
      }),
      { numRuns: 300 },
    );
  });
});
