/** The reservation actor kind: its machine, the indexes a record implies, its expiry timer and its journal events. */
import { reservationMachine, reservationTimers, type ReservationContext } from '../../actors/reservation.js';
import { JOURNAL_LOG, type EventEntry } from '../journal/journal.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const RESERVATION = 'reservation';

export const reservationIndexes = {
  /** active reservations of a project: what a new request is checked against */
  active: (project: string) => `reservations:active:${project}`,
  all: (project: string) => `reservations:project:${project}`,
  identity: (identity: string) => `reservations:identity:${identity}`,
};

export const reservationKind: ActorKind<ReservationContext> = {
  name: RESERVATION,
  machine: reservationMachine,
  notFound: 'RESERVATION_NOT_FOUND',
  invalid: 'RESERVATION_NOT_ACTIVE',
  indexes: (r) => [
    ...(r.value === 'active' ? [[reservationIndexes.active(r.context.project), r.context.id] as [string, string]] : []),
    [reservationIndexes.all(r.context.project), r.context.id],
    [reservationIndexes.identity(r.context.identity), r.context.id],
  ],
  timers: (r) => reservationTimers(r.value, r.context),
  journal: (r, prev) => {
    const type = !prev ? 'reservation.granted' : prev.value === 'active' && r.value !== 'active' ? `reservation.${r.value}` : undefined;
    if (!type) return undefined;
    const entry: EventEntry = { type, subject: 'reservation', data: reservationView(r), audience: { members: true } };
    return { log: JOURNAL_LOG, entry };
  },
};

/** The Reservation as the API shows it. */
export function reservationView(r: ActorRecord<ReservationContext>) {
  const { expires_ms: _e, ...fields } = r.context;
  return { ...fields, state: r.value };
}
export type Reservation = ReturnType<typeof reservationView>;
