/**
 * Signal machine unit tests: every transition and refusal of actors/signal.ts, run purely through xstate's
 * `transition()` exactly as the runtime hosts it (see test/helpers/machine.ts). No I/O.
 */
import { describe, expect, it } from 'vitest';
import { signalTimers, type SignalContext, type SignalEvent } from '../../actors/signal.js';
import { T0, iso, next, signalContext, step, type StepResult } from '../helpers/machine.js';

const WORKER = 'id-worker';
const OTHER = 'id-other';
const LEASE = 60_000;
const EXP = T0 + LEASE;
/** a task leased by WORKER at T0 for LEASE ms */
const leasedCtx: Partial<SignalContext> = { claimed_by: WORKER, claimed_at: iso(T0), claim_expires_at: iso(EXP) };
const INVALID = 'SIGNAL_DELIVERY_INVALID_TRANSITION';

const claim = (now: number, identity = WORKER, lease_ms = LEASE): SignalEvent => ({ type: 'CLAIM', now, identity, lease_ms });
const ack = (now: number, identity = WORKER, outcome?: 'completed' | 'failed'): SignalEvent => ({ type: 'ACK', now, identity, outcome });
const expire = (now: number): SignalEvent => ({ type: 'LEASE_EXPIRED', now });
const deliver = (now: number): SignalEvent => ({ type: 'DELIVER', now });

/** The error code the runtime would raise for this result (refusal code, else the kind's invalid code), if any. */
const runtimeCode = (r: StepResult<SignalContext>) => r.refused ?? (r.unchanged ? INVALID : undefined);

/** A refusal: the code is the given one, the state does not move and the context is untouched. */
function expectRefused(r: StepResult<SignalContext>, value: string, code: string) {
  expect(r.refused).toBe(code);
  expect(runtimeCode(r)).toBe(code);
  expect(r.value).toBe(value);
  expect(r.context).toEqual(r.input);
}

/** No transition: no refusal, value and context identical (===) to the input. */
function expectNoTransition(r: StepResult<SignalContext>, value: string) {
  expect(r.refused).toBeUndefined();
  expect(r.unchanged).toBe(true);
  expect(r.value).toBe(value);
  expect(r.context).toBe(r.input);
  expect(runtimeCode(r)).toBe(INVALID);
}

/** A committed transition: no refusal and something moved. */
function expectMoved(r: StepResult<SignalContext>, value: string) {
  expect(r.refused).toBeUndefined();
  expect(r.unchanged).toBe(false);
  expect(r.value).toBe(value);
}

describe('signal machine: pending', () => {
  it('DELIVER moves to delivered and stamps updated_at from event.now', () => {
    const r = step('pending', {}, deliver(T0 + 5));
    expectMoved(r, 'delivered');
    expect(r.context.updated_at).toBe(iso(T0 + 5));
    expect(r.context.created_at).toBe(iso(T0));
    expect(r.context.delivery_count).toBe(0);
    expect(r.context.claimed_by).toBeNull();
  });

  it('LEASE_EXPIRED is no transition', () => {
    expectNoTransition(step('pending', {}, expire(T0 + 10 * LEASE)), 'pending');
  });
});

describe.each(['pending', 'delivered'])('signal machine: %s (claim and ack)', (state) => {
  it('CLAIM of a non-task is refused SIGNAL_CLAIM_NOT_TASK', () => {
    expectRefused(step(state, { signal_type: 'pulse' }, claim(T0)), state, 'SIGNAL_CLAIM_NOT_TASK');
  });

  it('CLAIM of a non-task is SIGNAL_CLAIM_NOT_TASK even with an open task_status', () => {
    expectRefused(step(state, { signal_type: 'query', task_status: 'open' }, claim(T0)), state, 'SIGNAL_CLAIM_NOT_TASK');
  });

  it.each(['completed', 'cancelled', null])('CLAIM of a task with task_status %s is refused SIGNAL_CLAIM_INVALID_STATUS', (task_status) => {
    expectRefused(step(state, { task_status }, claim(T0)), state, 'SIGNAL_CLAIM_INVALID_STATUS');
  });

  it('CLAIM of an open task leases it to the claimer for lease_ms', () => {
    const r = step(state, {}, claim(T0 + 1000, WORKER, 30_000));
    expectMoved(r, 'leased');
    expect(r.context.claimed_by).toBe(WORKER);
    expect(r.context.claimed_at).toBe(iso(T0 + 1000));
    expect(r.context.claim_expires_at).toBe(iso(T0 + 31_000));
    expect(r.context.updated_at).toBe(iso(T0 + 1000));
    expect(r.context.task_status).toBe('open');
    expect(r.context.delivery_count).toBe(0);
  });

  it('ACK of a non-task acks it and stamps updated_at', () => {
    const r = step(state, { signal_type: 'pulse' }, ack(T0 + 7, OTHER));
    expectMoved(r, 'acked');
    expect(r.context.updated_at).toBe(iso(T0 + 7));
    expect(r.context.task_status).toBeNull();
    expect(r.context.claimed_by).toBeNull();
  });

  it('ACK of an unclaimed task is refused SIGNAL_DELIVERY_INVALID_TRANSITION', () => {
    expectRefused(step(state, {}, ack(T0, WORKER)), state, INVALID);
    expectRefused(step(state, {}, ack(T0, WORKER, 'failed')), state, INVALID);
  });
});

describe('signal machine: delivered', () => {
  it('DELIVER again is no transition', () => {
    expectNoTransition(step('delivered', { updated_at: iso(T0 + 1) }, deliver(T0 + 2)), 'delivered');
  });

  it('LEASE_EXPIRED is no transition', () => {
    expectNoTransition(step('delivered', {}, expire(T0 + 10 * LEASE)), 'delivered');
  });
});

describe('signal machine: leased', () => {
  it('CLAIM by the same identity renews the lease: new claim_expires_at, claimed_at unchanged', () => {
    const r = step('leased', leasedCtx, claim(T0 + 20_000, WORKER, 90_000));
    expectMoved(r, 'leased');
    expect(r.context.claimed_by).toBe(WORKER);
    expect(r.context.claimed_at).toBe(iso(T0));
    expect(r.context.claim_expires_at).toBe(iso(T0 + 110_000));
    expect(r.context.updated_at).toBe(iso(T0 + 20_000));
    expect(r.context.delivery_count).toBe(0);
  });

  it('CLAIM by another identity is refused SIGNAL_CLAIM_CONFLICT', () => {
    expectRefused(step('leased', leasedCtx, claim(T0 + 1, OTHER)), 'leased', 'SIGNAL_CLAIM_CONFLICT');
  });

  it('ACK by a non-claimer is refused SIGNAL_ACK_UNAUTHORIZED, whatever the outcome', () => {
    expectRefused(step('leased', leasedCtx, ack(T0 + 1, OTHER)), 'leased', 'SIGNAL_ACK_UNAUTHORIZED');
    expectRefused(step('leased', leasedCtx, ack(T0 + 1, OTHER, 'completed')), 'leased', 'SIGNAL_ACK_UNAUTHORIZED');
    expectRefused(step('leased', leasedCtx, ack(T0 + 1, OTHER, 'failed')), 'leased', 'SIGNAL_ACK_UNAUTHORIZED');
  });

  it.each([undefined, 'completed'] as const)('ACK by the claimer (outcome %s) acks and completes the task', (outcome) => {
    const r = step('leased', leasedCtx, ack(T0 + 500, WORKER, outcome));
    expectMoved(r, 'acked');
    expect(r.context.task_status).toBe('completed');
    expect(r.context.updated_at).toBe(iso(T0 + 500));
    expect(r.context.delivery_count).toBe(0);
  });

  it('ACK outcome failed with attempts left returns to pending, clears the claim, counts the attempt', () => {
    const r = step('leased', { ...leasedCtx, delivery_count: 0, max_attempts: 3 }, ack(T0 + 500, WORKER, 'failed'));
    expectMoved(r, 'pending');
    expect(r.context.claimed_by).toBeNull();
    expect(r.context.claimed_at).toBeNull();
    expect(r.context.claim_expires_at).toBeNull();
    expect(r.context.delivery_count).toBe(1);
    expect(r.context.updated_at).toBe(iso(T0 + 500));
    expect(r.context.task_status).toBe('open');
    // and the task can be claimed again
    expectMoved(next(r, claim(T0 + 600, OTHER)), 'leased');
  });

  it('ACK outcome failed on the last attempt dead-letters the signal', () => {
    const r = step('leased', { ...leasedCtx, delivery_count: 2, max_attempts: 3 }, ack(T0 + 500, WORKER, 'failed'));
    expectMoved(r, 'dead_letter');
    expect(r.context.delivery_count).toBe(3);
    expect(r.context.claimed_by).toBeNull();
    expect(r.context.claimed_at).toBeNull();
    expect(r.context.claim_expires_at).toBeNull();
    expect(r.context.updated_at).toBe(iso(T0 + 500));
  });

  it('ACK outcome failed with max_attempts 1 dead-letters on the first failure', () => {
    const r = step('leased', { ...leasedCtx, delivery_count: 0, max_attempts: 1 }, ack(T0 + 500, WORKER, 'failed'));
    expectMoved(r, 'dead_letter');
    expect(r.context.delivery_count).toBe(1);
  });

  it('LEASE_EXPIRED before claim_expires_at is no transition', () => {
    expectNoTransition(step('leased', leasedCtx, expire(T0)), 'leased');
    expectNoTransition(step('leased', leasedCtx, expire(EXP - 1)), 'leased');
  });

  it('LEASE_EXPIRED with no claim_expires_at is no transition', () => {
    expectNoTransition(step('leased', { ...leasedCtx, claim_expires_at: null }, expire(EXP + 1)), 'leased');
  });

  it.each([
    ['at', EXP],
    ['after', EXP + 12_345],
  ])('LEASE_EXPIRED %s claim_expires_at returns to pending with the attempt counted and the claim cleared', (_, now) => {
    const r = step('leased', { ...leasedCtx, delivery_count: 1, max_attempts: 3 }, expire(now));
    expectMoved(r, 'pending');
    expect(r.context.delivery_count).toBe(2);
    expect(r.context.claimed_by).toBeNull();
    expect(r.context.claimed_at).toBeNull();
    expect(r.context.claim_expires_at).toBeNull();
    expect(r.context.updated_at).toBe(iso(now));
    expect(r.context.task_status).toBe('open');
  });

  it('LEASE_EXPIRED on the last attempt dead-letters the signal', () => {
    const r = step('leased', { ...leasedCtx, delivery_count: 2, max_attempts: 3 }, expire(EXP));
    expectMoved(r, 'dead_letter');
    expect(r.context.delivery_count).toBe(3);
    expect(r.context.claimed_by).toBeNull();
    expect(r.context.claim_expires_at).toBeNull();
    expect(r.context.updated_at).toBe(iso(EXP));
  });

  it('DELIVER is no transition', () => {
    expectNoTransition(step('leased', leasedCtx, deliver(T0 + 1)), 'leased');
  });
});

describe('signal machine: acked', () => {
  const ackedTask: Partial<SignalContext> = { ...leasedCtx, task_status: 'completed' };

  it('ACK is refused SIGNAL_DELIVERY_INVALID_TRANSITION (task and non-task)', () => {
    expectRefused(step('acked', ackedTask, ack(T0 + 1, WORKER)), 'acked', INVALID);
    expectRefused(step('acked', { signal_type: 'pulse' }, ack(T0 + 1, OTHER)), 'acked', INVALID);
  });

  it('CLAIM of a task is refused SIGNAL_CLAIM_INVALID_STATUS', () => {
    expectRefused(step('acked', ackedTask, claim(T0 + 1, WORKER)), 'acked', 'SIGNAL_CLAIM_INVALID_STATUS');
    expectRefused(step('acked', ackedTask, claim(T0 + 1, OTHER)), 'acked', 'SIGNAL_CLAIM_INVALID_STATUS');
  });

  it('CLAIM of a non-task is refused SIGNAL_CLAIM_NOT_TASK', () => {
    expectRefused(step('acked', { signal_type: 'pulse' }, claim(T0 + 1)), 'acked', 'SIGNAL_CLAIM_NOT_TASK');
  });

  it('DELIVER and LEASE_EXPIRED are no transition', () => {
    expectNoTransition(step('acked', ackedTask, deliver(T0 + 1)), 'acked');
    expectNoTransition(step('acked', ackedTask, expire(EXP + 1)), 'acked');
  });
});

describe('signal machine: dead_letter', () => {
  const dead: Partial<SignalContext> = { delivery_count: 3, max_attempts: 3 };

  it('ACK is refused SIGNAL_DEAD_LETTER', () => {
    expectRefused(step('dead_letter', dead, ack(T0 + 1, WORKER)), 'dead_letter', 'SIGNAL_DEAD_LETTER');
    expectRefused(step('dead_letter', dead, ack(T0 + 1, WORKER, 'failed')), 'dead_letter', 'SIGNAL_DEAD_LETTER');
  });

  it('CLAIM is refused SIGNAL_DEAD_LETTER', () => {
    expectRefused(step('dead_letter', dead, claim(T0 + 1, WORKER)), 'dead_letter', 'SIGNAL_DEAD_LETTER');
    expectRefused(step('dead_letter', { ...dead, signal_type: 'pulse' }, claim(T0 + 1)), 'dead_letter', 'SIGNAL_DEAD_LETTER');
  });

  it('LEASE_EXPIRED is no transition', () => {
    expectNoTransition(step('dead_letter', dead, expire(EXP + 1)), 'dead_letter');
  });

  it('DELIVER is no transition', () => {
    expectNoTransition(step('dead_letter', dead, deliver(T0 + 1)), 'dead_letter');
  });
});

describe('signal machine: lifecycle', () => {
  it('with max_attempts 3, claim/expire three times ends in dead_letter with delivery_count 3', () => {
    let r: { value: string; context: SignalContext } = { value: 'pending', context: signalContext({ max_attempts: 3 }) };
    let now = T0;
    const seen: [string, number][] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const identity = `id-worker-${attempt}`;
      const c = next(r, claim(now, identity, LEASE));
      expectMoved(c, 'leased');
      expect(c.context.claimed_by).toBe(identity);
      expect(signalTimers(c.value, c.context)).toEqual([{ event: 'LEASE_EXPIRED', at: now + LEASE }]);
      // an early timer is ignored
      expectNoTransition(next(c, expire(now + LEASE - 1)), 'leased');
      now += LEASE;
      const e = next(c, expire(now));
      expectMoved(e, attempt < 3 ? 'pending' : 'dead_letter');
      expect(e.context.claimed_by).toBeNull();
      seen.push([e.value, e.context.delivery_count]);
      r = e;
      now += 1000;
    }
    expect(seen).toEqual([
      ['pending', 1],
      ['pending', 2],
      ['dead_letter', 3],
    ]);
    expect(signalTimers(r.value, r.context)).toEqual([]);
    expectRefused(next(r, claim(now, WORKER)), 'dead_letter', 'SIGNAL_DEAD_LETTER');
  });

  it('deliver, claim, renew, ack completes the task', () => {
    const d = step('pending', {}, deliver(T0));
    expectMoved(d, 'delivered');
    const c = next(d, claim(T0 + 10, WORKER));
    expectMoved(c, 'leased');
    const rn = next(c, claim(T0 + 20, WORKER));
    expectMoved(rn, 'leased');
    expect(rn.context.claim_expires_at).toBe(iso(T0 + 20 + LEASE));
    const a = next(rn, ack(T0 + 30, WORKER));
    expectMoved(a, 'acked');
    expect(a.context.task_status).toBe('completed');
    expect(a.context.delivery_count).toBe(0);
  });
});

describe('signalTimers', () => {
  it('a leased signal yields one LEASE_EXPIRED timer at claim_expires_at', () => {
    expect(signalTimers('leased', signalContext(leasedCtx))).toEqual([{ event: 'LEASE_EXPIRED', at: Date.parse(iso(EXP)) }]);
    expect(signalTimers('leased', signalContext(leasedCtx))[0].at).toBe(EXP);
  });

  it.each(['pending', 'delivered', 'acked', 'dead_letter'])('%s yields no timers', (state) => {
    expect(signalTimers(state, signalContext())).toEqual([]);
    // even with stale claim fields present
    expect(signalTimers(state, signalContext(leasedCtx))).toEqual([]);
  });

  it('the timer follows a renewal', () => {
    const r = step('leased', leasedCtx, claim(T0 + 5000, WORKER, LEASE));
    expect(signalTimers(r.value, r.context)).toEqual([{ event: 'LEASE_EXPIRED', at: T0 + 5000 + LEASE }]);
  });
});

describe('signal machine purity', () => {
  const deepFreeze = <T>(o: T): T => {
    if (o && typeof o === 'object' && !Object.isFrozen(o)) {
      Object.freeze(o);
      for (const v of Object.values(o)) deepFreeze(v);
    }
    return o;
  };

  const cases: [string, Partial<SignalContext>, SignalEvent][] = [
    ['pending', {}, deliver(T0 + 1)],
    ['pending', {}, claim(T0 + 1)],
    ['pending', { signal_type: 'pulse' }, ack(T0 + 1)],
    ['delivered', {}, claim(T0 + 1)],
    ['leased', leasedCtx, claim(T0 + 1, WORKER)],
    ['leased', leasedCtx, ack(T0 + 1, WORKER)],
    ['leased', leasedCtx, ack(T0 + 1, WORKER, 'failed')],
    ['leased', { ...leasedCtx, delivery_count: 2 }, expire(EXP)],
    ['leased', leasedCtx, claim(T0 + 1, OTHER)],
  ];

  it.each(cases)('%s + %o: the input context is not mutated', (value, overrides, event) => {
    const input = deepFreeze(signalContext(overrides));
    const before = structuredClone(input);
    const r = next({ value, context: input }, event);
    expect(input).toEqual(before);
    if (!r.unchanged && !r.refused) expect(r.context).not.toBe(input);
  });
});

describe('signal machine: a lease that ended before its timer fired', () => {
  const lease = (count: number) => ({ claimed_by: 'a', claimed_at: iso(T0), claim_expires_at: iso(T0 + 1000), delivery_count: count });

  it('a claim by another identity releases the old attempt and leases to the new claimer', () => {
    const r = step('leased', lease(0), { type: 'CLAIM', identity: 'b', lease_ms: 500, now: T0 + 2000 });
    expect(r.refused).toBeUndefined();
    expect(r.value).toBe('leased');
    expect(r.context.claimed_by).toBe('b');
    expect(r.context.delivery_count).toBe(1);
    expect(r.context.claim_expires_at).toBe(iso(T0 + 2500));
  });

  it('a claim on the last attempt is refused as dead letter', () => {
    const r = step('leased', lease(2), { type: 'CLAIM', identity: 'b', lease_ms: 500, now: T0 + 2000 });
    expect(r.refused).toBe('SIGNAL_DEAD_LETTER');
  });

  it('the old claimer can no longer ack it', () => {
    const r = step('leased', lease(0), { type: 'ACK', identity: 'a', now: T0 + 1000 });
    expect(r.refused).toBe('SIGNAL_DELIVERY_INVALID_TRANSITION');
  });

  it('the old claimer cannot renew it but claims it afresh', () => {
    const r = step('leased', lease(0), { type: 'CLAIM', identity: 'a', lease_ms: 500, now: T0 + 1500 });
    expect(r.value).toBe('leased');
    expect(r.context.delivery_count).toBe(1);
    expect(r.context.claimed_at).toBe(iso(T0 + 1500));
  });
});

describe('claim_token: the fencing token of a task lease', () => {
  const stale = (r: StepResult<SignalContext>, value: string) => {
    expectRefused(r, value, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(r.details).toEqual({ reason: 'stale_claim' });
  };

  it('each grant raises it, a renewal keeps it, and a lapsed lease granted again to the same identity gets the next', () => {
    const first = step('pending', {}, claim(T0));
    expect(first.context.claim_token).toBe(1);
    const renewed = next(first, { ...claim(T0 + 10), claim_token: 1 } as SignalEvent);
    expect(renewed).toMatchObject({ value: 'leased', context: { claim_token: 1 } });
    const again = next(renewed, claim(T0 + 10 + LEASE));
    expect(again).toMatchObject({ value: 'leased', context: { claimed_by: WORKER, claim_token: 2, delivery_count: 1 } });
  });

  it('a renewal or ack naming another grant is refused stale_claim in every state a task takes them; the current one passes', () => {
    const held = step('pending', { claim_token: 1 }, claim(T0));
    expect(held.context.claim_token).toBe(2);
    for (const e of [{ ...claim(T0 + 1), claim_token: 1 }, { ...ack(T0 + 1), claim_token: 1 }, { ...ack(T0 + 1, WORKER, 'failed'), claim_token: 1 }, { ...ack(T0 + 1), claim_token: 3 }])
      stale(next(held, e as SignalEvent), 'leased');
    stale(step('pending', { claim_token: 2 }, { ...ack(T0), claim_token: 1 } as SignalEvent), 'pending');
    stale(step('delivered', { claim_token: 2 }, { ...claim(T0), claim_token: 1 } as SignalEvent), 'delivered');
    stale(step('acked', { claim_token: 2, task_status: 'completed' }, { ...ack(T0), claim_token: 1 } as SignalEvent), 'acked');
    expect(next(held, { ...ack(T0 + 1), claim_token: 2 } as SignalEvent)).toMatchObject({ value: 'acked', context: { task_status: 'completed', claim_token: 2 } });
    // no token: the identity check alone, as before
    expect(next(held, ack(T0 + 1)).value).toBe('acked');
  });
});
