/**
 * Property test (fast-check) of the signal machine's dependency and schedule transitions against a model.
 * Random task graphs (each task depends on earlier ones, with optional not_before and deadline) run random
 * claims, completions, failed attempts, cancels and clock advances. The machine is stepped purely
 * (test/helpers/machine.ts); a task's end moves its dependants as `signalKind.alongside` does (the same
 * `endOf`), and due timers fire from `signalTimers`. After every step each task's state equals the model's,
 * and no task ever becomes claimable twice.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signalTimers, type SignalContext } from '../../actors/signal.js';
import { endOf } from '../../src/signals/dependencies.js';
import { T0, iso, runMachine, signalContext } from '../helpers/machine.js';
import { signalMachine } from '../../actors/signal.js';

const W = 'id-worker';
const MAX_ATTEMPTS = 2;
const LEASE = 1e9;

type Status = 'waiting' | 'open' | 'leased' | 'completed' | 'cancelled' | 'dead' | 'expired' | 'blocked';
interface Spec {
  deps: number[];
  notBefore: number | null;
  deadline: number | null;
}
/** `work`: a claim then a completion, the common path, so deep graphs run to their sinks */
type Op = { op: 'claim' | 'complete' | 'fail' | 'cancel' | 'work'; i: number } | { op: 'tick'; ms: number };

const idOf = (i: number) => `t${i}`;

/** The reference: what each task's status must be, by the rules of docs/signals.md, written directly. */
class Model {
  status: Status[];
  attempts: number[];
  constructor(
    private specs: Spec[],
    public now: number,
  ) {
    this.status = specs.map((s) => (s.deps.length || (s.notBefore !== null && s.notBefore > now) ? 'waiting' : 'open'));
    this.attempts = specs.map(() => 0);
  }
  private depsDone = (i: number) => this.specs[i].deps.every((d) => this.status[d] === 'completed');
  private unfinished = (i: number) => ['waiting', 'open', 'leased', 'blocked'].includes(this.status[i]);
  /** a dependency ended: its waiting dependants hear it */
  private ended(j: number) {
    const how = this.status[j];
    for (let i = 0; i < this.specs.length; i++) {
      if (!this.specs[i].deps.includes(j) || this.status[i] !== 'waiting') continue;
      if (how !== 'completed') {
        this.status[i] = 'blocked';
        this.ended(i);
      } else if (this.depsDone(i) && (this.specs[i].notBefore === null || this.specs[i].notBefore! <= this.now)) this.status[i] = 'open';
    }
  }
  claim(i: number) {
    if (this.status[i] === 'open') this.status[i] = 'leased';
  }
  complete(i: number) {
    if (this.status[i] !== 'leased') return;
    this.status[i] = 'completed';
    this.ended(i);
  }
  fail(i: number) {
    if (this.status[i] !== 'leased') return;
    this.attempts[i]++;
    this.status[i] = this.attempts[i] >= MAX_ATTEMPTS ? 'dead' : 'open';
    if (this.status[i] === 'dead') this.ended(i);
  }
  cancel(i: number) {
    if (!this.unfinished(i)) return;
    this.status[i] = 'cancelled';
    this.ended(i);
  }
  /** the due timers, earliest first (ties by task, then NOT_BEFORE before DEADLINE: the order signalTimers lists them) */
  due(): { i: number; event: 'NOT_BEFORE' | 'DEADLINE'; at: number } | undefined {
    const all = this.specs.flatMap((s, i) => [
      ...(this.status[i] === 'waiting' && this.depsDone(i) && s.notBefore !== null ? [{ i, event: 'NOT_BEFORE' as const, at: s.notBefore }] : []),
      ...(this.unfinished(i) && s.deadline !== null ? [{ i, event: 'DEADLINE' as const, at: s.deadline }] : []),
    ]);
    return all.filter((t) => t.at <= this.now).sort((a, b) => a.at - b.at || a.i - b.i || (a.event === 'NOT_BEFORE' ? -1 : 1))[0];
  }
  fire(t: { i: number; event: 'NOT_BEFORE' | 'DEADLINE' }) {
    if (t.event === 'NOT_BEFORE') this.status[t.i] = 'open';
    else {
      this.status[t.i] = 'expired';
      this.ended(t.i);
    }
  }
}

/** The machine side: one record per task, moved only by the machine, dependants moved as the runtime's alongside does. */
class Harness {
  recs: { value: string; context: SignalContext }[];
  releases: number[];
  constructor(
    specs: Spec[],
    public now: number,
  ) {
    this.recs = specs.map((s, i) => {
      const context = signalContext({
        id: idOf(i),
        max_attempts: MAX_ATTEMPTS,
        depends_on: s.deps.map(idOf),
        blocked_by: s.deps.map(idOf),
        blocked_reason: null,
        not_before: s.notBefore === null ? null : iso(s.notBefore),
        deadline: s.deadline === null ? null : iso(s.deadline),
      });
      return { value: s.deps.length || (s.notBefore !== null && s.notBefore > now) ? 'waiting' : 'pending', context };
    });
    this.releases = specs.map(() => 0);
  }
  send(i: number, event: Record<string, unknown> & { type: string }, seen = new Set([i])) {
    const prev = this.recs[i];
    const r = runMachine(signalMachine, prev.value, prev.context, { now: this.now, ...event });
    if (r.refused || r.unchanged) return r;
    this.recs[i] = { value: r.value, context: r.context };
    if (prev.value === 'waiting' && r.value === 'pending') this.releases[i]++;
    this.tellDependants(i, prev, seen);
    return r;
  }
  private tellDependants(j: number, prev: { value: string; context: SignalContext }, seen: Set<number>) {
    const end = endOf(this.recs[j]);
    if (!end || endOf(prev)) return;
    const event = end === 'completed' ? { type: 'DEPENDENCY_COMPLETED', dependency_id: idOf(j) } : { type: 'DEPENDENCY_FAILED', dependency_id: idOf(j), reason: end };
    for (const [i, rec] of this.recs.entries()) {
      if (seen.has(i) || !rec.context.depends_on?.includes(idOf(j))) continue;
      const before = this.recs[i];
      const r = runMachine(signalMachine, before.value, before.context, { now: this.now, ...event });
      expect(r.refused).toBeUndefined();
      if (r.unchanged) continue;
      seen.add(i);
      this.recs[i] = { value: r.value, context: r.context };
      if (before.value === 'waiting' && r.value === 'pending') this.releases[i]++;
      this.tellDependants(i, before, seen);
    }
  }
  due(): { i: number; event: string; at: number } | undefined {
    const all = this.recs.flatMap((r, i) => signalTimers(r.value, r.context).map((t) => ({ i, ...t })));
    return all.filter((t) => t.at <= this.now).sort((a, b) => a.at - b.at || a.i - b.i || (a.event === 'NOT_BEFORE' ? -1 : 1))[0];
  }
  status(i: number): Status {
    const { value, context: c } = this.recs[i];
    if (value === 'pending' || value === 'delivered') return 'open';
    if (value === 'acked') return c.task_status === 'completed' ? 'completed' : 'cancelled';
    if (value === 'dead_letter') return c.task_status === 'expired' ? 'expired' : 'dead';
    return value as Status;
  }
}

const graph = fc.integer({ min: 1, max: 6 }).chain((n) =>
  fc.array(
    fc.record({
      deps: fc.array(fc.nat(), { maxLength: 3 }),
      notBefore: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: null }),
      deadline: fc.option(fc.integer({ min: 1, max: 8000 }), { nil: null }),
    }),
    { minLength: n, maxLength: n },
  ).map((raw) => raw.map((s, i): Spec => ({ deps: i === 0 ? [] : [...new Set(s.deps.map((d) => d % i))], notBefore: s.notBefore === null ? null : T0 + s.notBefore, deadline: s.deadline === null ? null : T0 + s.deadline }))),
);
const ops = (n: number) =>
  fc.array(
    fc.oneof(
      { arbitrary: fc.record({ op: fc.constant('work' as const), i: fc.nat({ max: n - 1 }) }), weight: 4 },
      { arbitrary: fc.record({ op: fc.constantFrom('claim' as const, 'complete' as const, 'fail' as const, 'cancel' as const), i: fc.nat({ max: n - 1 }) }), weight: 3 },
      { arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 1500 }) }), weight: 2 },
    ),
    { maxLength: 40 },
  );

describe('signal machine: dependencies and schedule against a model', () => {
  it('every task is in the model state after every step, and none becomes claimable twice', () => {
    fc.assert(
      fc.property(
        graph.chain((specs) => fc.tuple(fc.constant(specs), ops(specs.length))),
        ([specs, steps]) => {
          const model = new Model(specs, T0);
          const h = new Harness(specs, T0);
          const check = (after: string) => specs.forEach((_, i) => expect(h.status(i), `${idOf(i)} after ${after}`).toBe(model.status[i]));
          for (const step of (steps as Op[]).flatMap((x): Op[] => (x.op === 'work' ? [{ op: 'claim', i: x.i }, { op: 'complete', i: x.i }] : [x]))) {
            if (step.op === 'tick') {
              model.now = h.now = model.now + step.ms;
              for (let t = model.due(); t; t = model.due()) {
                const fired = h.due();
                expect(fired && { i: fired.i, event: fired.event }).toEqual({ i: t.i, event: t.event });
                model.fire(t);
                h.send(t.i, { type: t.event });
              }
              expect(h.due()).toBeUndefined();
            } else if (step.op === 'claim') {
              const before = model.status[step.i];
              const r = h.send(step.i, { type: 'CLAIM', identity: W, lease_ms: LEASE });
              model.claim(step.i);
              if (before === 'waiting' || before === 'blocked') {
                expect(r.refused).toBe('SIGNAL_CLAIM_INVALID_STATUS');
                const left = specs[step.i].deps.filter((d) => model.status[d] !== 'completed').map(idOf);
                if (before === 'waiting') expect(r.details).toMatchObject({ reason: 'waiting', blocked_by: left });
                else expect(r.details).toMatchObject({ reason: 'blocked' });
              }
            } else if (step.op === 'complete' || step.op === 'fail') {
              h.send(step.i, { type: 'ACK', identity: W, outcome: step.op === 'complete' ? 'completed' : 'failed' });
              model[step.op](step.i);
            } else {
              h.send(step.i, { type: 'CANCEL' });
              model.cancel(step.i);
            }
            check(JSON.stringify(step));
            for (const [i, k] of h.releases.entries()) expect(k, `${idOf(i)} released`).toBeLessThanOrEqual(1);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a blocked task names the dependency and how it ended; the blocked_by of a waiting one shrinks as they complete', () => {
    const h = new Harness([{ deps: [], notBefore: null, deadline: null }, { deps: [], notBefore: null, deadline: null }, { deps: [0, 1], notBefore: null, deadline: null }, { deps: [2], notBefore: null, deadline: null }], T0);
    h.send(0, { type: 'CLAIM', identity: W, lease_ms: LEASE });
    h.send(0, { type: 'ACK', identity: W, outcome: 'completed' });
    expect(h.recs[2]).toMatchObject({ value: 'waiting', context: { blocked_by: [idOf(1)] } });
    h.send(1, { type: 'CANCEL' });
    expect(h.recs[2]).toMatchObject({ value: 'blocked', context: { task_status: 'blocked', blocked_reason: { dependency_id: idOf(1), reason: 'cancelled' } } });
    expect(h.recs[3]).toMatchObject({ value: 'blocked', context: { blocked_reason: { dependency_id: idOf(2), reason: 'blocked' } } });
  });
});
