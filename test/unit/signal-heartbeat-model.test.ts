/**
 * Property test (fast-check) of the signal machine's heartbeat transitions against a model. One task with a
 * heartbeat_timeout_ms runs random claims, heartbeats, completions and clock advances; due timers fire from
 * `signalTimers`. The lease ends at the earlier of its claim_expires_at and the last heartbeat (or claim) plus
 * the timeout; a refused event changes nothing (the runtime commits nothing). After every step the task's
 * state, lease end, progress and attempts equal the model's.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import { T0, iso, runMachine, signalContext } from '../helpers/machine.js';

const W = 'id-worker';
const MAX_ATTEMPTS = 3;
type Op = { op: 'claim'; lease: number } | { op: 'beat'; lease: number; progress: number } | { op: 'ack' } | { op: 'tick'; ms: number };

class Model {
  state: 'open' | 'leased' | 'completed' | 'dead' = 'open';
  attempts = 0;
  exp = 0;
  live = 0;
  progress: number | null = null;
  constructor(
    private timeout: number,
    public now: number,
  ) {}
  private over = () => this.exp <= this.now || this.live + this.timeout <= this.now;
  private release() {
    this.attempts++;
    this.state = this.attempts >= MAX_ATTEMPTS ? 'dead' : 'open';
  }
  claim(lease: number) {
    if (this.state === 'leased' && this.over()) {
      this.release();
      if ((this.state as Model['state']) === 'dead') {
        // the claim is refused, so its release is not committed either
        this.attempts--;
        this.state = 'leased';
        return;
      }
    }
    if (this.state === 'open') {
      this.state = 'leased';
      this.live = this.now;
    }
    if (this.state === 'leased') this.exp = this.now + lease;
  }
  beat(lease: number, progress: number) {
    if (this.state !== 'leased' || this.over()) return;
    this.exp = this.now + lease;
    this.live = this.now;
    this.progress = progress;
  }
  ack() {
    if (this.state === 'leased' && !this.over()) this.state = 'completed';
  }
  /** what the timers do once the clock reaches them */
  fire() {
    if (this.state === 'leased' && this.over()) this.release();
  }
}

describe('signal machine heartbeats against a model', () => {
  it('lease end, heartbeat timeout, progress and attempts agree with the model', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('claim' as const), lease: fc.integer({ min: 50, max: 2000 }) }),
      fc.record({ op: fc.constant('beat' as const), lease: fc.integer({ min: 50, max: 2000 }), progress: fc.double({ min: 0, max: 1, noNaN: true }) }),
      fc.constant({ op: 'ack' as const }),
      fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 1500 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 50, max: 1000 }), fc.array(op, { maxLength: 40 }), (timeout, ops) => {
        const m = new Model(timeout, T0);
        let rec: { value: string; context: SignalContext } = { value: 'pending', context: signalContext({ heartbeat_timeout_ms: timeout, max_attempts: MAX_ATTEMPTS }) };
        const send = (event: Record<string, unknown> & { type: string }) => {
          const r = runMachine(signalMachine, rec.value, rec.context, { now: m.now, ...event });
          if (!r.refused && !r.unchanged) rec = { value: r.value, context: r.context };
        };
        for (const o of ops) {
          if (o.op === 'claim') {
            send({ type: 'CLAIM', identity: W, lease_ms: o.lease });
            m.claim(o.lease);
          } else if (o.op === 'beat') {
            send({ type: 'HEARTBEAT', identity: W, lease_ms: o.lease, progress: o.progress });
            m.beat(o.lease, o.progress);
          } else if (o.op === 'ack') {
            send({ type: 'ACK', identity: W, outcome: 'completed' });
            m.ack();
          } else {
            m.now += o.ms;
            for (const t of signalTimers(rec.value, rec.context).filter((x) => x.at <= m.now).sort((a, b) => a.at - b.at)) send({ type: t.event });
            m.fire();
          }
          const want = { open: 'pending', leased: 'leased', completed: 'acked', dead: 'dead_letter' }[m.state];
          expect(rec.value).toBe(want);
          expect(rec.context.delivery_count).toBe(m.attempts);
          if (m.state === 'leased') {
            expect(rec.context.claim_expires_at).toBe(iso(m.exp));
            const timers = signalTimers(rec.value, rec.context).map((t) => t.event);
            expect(timers.includes('HEARTBEAT_TIMEOUT')).toBe(m.live + timeout < m.exp);
          }
          expect(rec.context.progress ?? null).toBe(m.progress);
        }
      }),
      { numRuns: 300 },
    );
  });
});
