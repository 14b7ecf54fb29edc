/**
 * A path reservation: one glob held by one identity in one project, active until its holder releases it,
 * someone force-releases it, or its expiry passes. Renewing moves the expiry (and so the derived timer).
 * Pure: time is `now` on every event.
 */
import { assign, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type ReservationState = 'active' | 'released' | 'expired';

export interface ReservationContext {
  id: string;
  project: string;
  identity: string;
  path: string;
  exclusive: boolean;
  reason: string | null;
  ttl_s: number;
  created_at: string;
  expires_at: string;
  /** expires_at in ms, for the timer and comparisons */
  expires_ms: number;
  released_at: string | null;
  released_by: string | null;
  forced: boolean;
  /** the fencing token: the project's grant counter at this grant, higher for every later grant (absent on older records) */
  fence?: number;
}

export type ReservationEvent =
  | { type: 'RENEW'; now: number; by: string; ttl_s: number }
  | { type: 'RELEASE'; now: number; by: string }
  | { type: 'FORCE_RELEASE'; now: number; by: string }
  /** the expiry timer */
  | { type: 'EXPIRE'; now: number };

const iso = (ms: number) => new Date(ms).toISOString();

export const reservationMachine = setup({
  types: { context: {} as ReservationContext, events: {} as ReservationEvent },
  guards: {
    holder: ({ context, event }) => 'by' in event && event.by === context.identity,
    due: ({ context, event }) => context.expires_ms <= event.now,
  },
  actions: {
    refuse: refuseAction,
    renew: assign(({ event }) => {
      const e = event as Extract<ReservationEvent, { type: 'RENEW' }>;
      const ms = e.now + e.ttl_s * 1000;
      return { ttl_s: e.ttl_s, expires_ms: ms, expires_at: iso(ms) };
    }),
    release: assign(({ event }) => ({ released_at: iso(event.now), released_by: (event as { by: string }).by, forced: event.type === 'FORCE_RELEASE' })),
  },
}).createMachine({
  id: 'reservation',
  initial: 'active',
  context: {} as ReservationContext,
  states: {
    active: {
      on: {
        RENEW: [
          { guard: 'due', actions: refuse('RESERVATION_NOT_ACTIVE') },
          { guard: 'holder', actions: 'renew' },
          { actions: refuse('RESERVATION_NOT_HOLDER') },
        ],
        RELEASE: [{ guard: 'holder', target: 'released', actions: 'release' }, { actions: refuse('RESERVATION_NOT_HOLDER') }],
        FORCE_RELEASE: { target: 'released', actions: 'release' },
        EXPIRE: { guard: 'due', target: 'expired' },
      },
    },
    released: { on: { RENEW: { actions: refuse('RESERVATION_NOT_ACTIVE') }, RELEASE: { actions: refuse('RESERVATION_NOT_ACTIVE') }, FORCE_RELEASE: { actions: refuse('RESERVATION_NOT_ACTIVE') } } },
    expired: { on: { RENEW: { actions: refuse('RESERVATION_NOT_ACTIVE') }, RELEASE: { actions: refuse('RESERVATION_NOT_ACTIVE') }, FORCE_RELEASE: { actions: refuse('RESERVATION_NOT_ACTIVE') } } },
  },
});

/** The expiry timer while active; none after. */
export const reservationTimers = (value: string, c: ReservationContext) => (value === 'active' ? [{ event: 'EXPIRE', at: c.expires_ms }] : []);
