/** The reservation machine: holder-only renew and release, force-release by anyone, expiry only once due, and the derived timer. */
import { transition } from 'xstate';
import { describe, expect, it } from 'vitest';
import { reservationMachine, reservationTimers, type ReservationContext } from '../../actors/reservation.js';

const T0 = 1_700_000_000_000;
const ctx: ReservationContext = {
  id: 'r1', project: 'p', identity: 'alice', path: 'src/**', exclusive: true, reason: null, ttl_s: 60,
  created_at: new Date(T0).toISOString(), expires_at: new Date(T0 + 60_000).toISOString(), expires_ms: T0 + 60_000,
  released_at: null, released_by: null, forced: false,
};
const active = () => reservationMachine.resolveState({ value: 'active', context: ctx });
const run = (event: any) => {
  const [next, actions] = transition(reservationMachine, active(), event);
  return { next, refused: (actions as any[]).find((a) => a.type === 'refuse')?.params?.code };
};

describe('reservation machine', () => {
  it('renew by the holder moves the expiry and so the timer', () => {
    const { next } = run({ type: 'RENEW', by: 'alice', ttl_s: 120, now: T0 + 1000 });
    expect(next.value).toBe('active');
    expect(next.context.expires_ms).toBe(T0 + 121_000);
    expect(reservationTimers(next.value as string, next.context)).toEqual([{ event: 'EXPIRE', at: T0 + 121_000 }]);
  });
  it('renew or release by another identity is refused; renew after the expiry is refused', () => {
    expect(run({ type: 'RENEW', by: 'bob', ttl_s: 10, now: T0 }).refused).toBe('RESERVATION_NOT_HOLDER');
    expect(run({ type: 'RELEASE', by: 'bob', now: T0 }).refused).toBe('RESERVATION_NOT_HOLDER');
    expect(run({ type: 'RENEW', by: 'alice', ttl_s: 10, now: T0 + 60_000 }).refused).toBe('RESERVATION_NOT_ACTIVE');
  });
  it('release and force-release end it with no timer left; a second release is refused', () => {
    const r = run({ type: 'RELEASE', by: 'alice', now: T0 });
    expect(r.next.value).toBe('released');
    expect(reservationTimers(r.next.value as string, r.next.context)).toEqual([]);
    const f = run({ type: 'FORCE_RELEASE', by: 'bob', now: T0 });
    expect(f.next.value).toBe('released');
    expect(f.next.context).toMatchObject({ released_by: 'bob', forced: true });
    const [, actions] = transition(reservationMachine, f.next, { type: 'RELEASE', by: 'alice', now: T0 } as any);
    expect((actions as any[]).find((a) => a.type === 'refuse')?.params.code).toBe('RESERVATION_NOT_ACTIVE');
  });
  it('EXPIRE moves only once due (a stale timer after a renew does nothing)', () => {
    expect(run({ type: 'EXPIRE', now: T0 + 59_999 }).next.value).toBe('active');
    expect(run({ type: 'EXPIRE', now: T0 + 60_000 }).next.value).toBe('expired');
  });
});
