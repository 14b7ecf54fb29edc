import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { ConflictsQuerySchema, ListSchema, RenewSchema, ReserveSchema } from '../reservations/schemas.js';
import { commaList, compile } from '../validation.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const invalid = 'RESERVATION_VALIDATION_FAILED' as const;
const ReserveBody = compile(ReserveSchema);
const RenewBody = compile(RenewSchema);
const ListQuery = compile(Type.Object({ ...ListSchema.properties, after: After, limit: Limit }));
const ConflictsQuery = compile(ConflictsQuerySchema);

export const reservationRoutes = ({ reservations }: Services): Route<Principal>[] => [
  { method: 'post', path: '/reservations', auth: 'key', body: ReserveBody, invalid, handler: async (r) => ({ data: await reservations.reserve(r.principal, r.body) }) },
  {
    method: 'get',
    path: '/reservations',
    auth: 'key',
    query: ListQuery,
    invalid,
    handler: async (r) => pageReply('reservations', await reservations.list(r.principal, r.query, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  {
    method: 'get',
    path: '/reservations/conflicts',
    auth: 'key',
    query: ConflictsQuery,
    invalid,
    handler: async (r) => ({ data: { conflicts: await reservations.conflicts(r.principal, commaList(r.query.paths) ?? [], r.query.project, r.query.exclusive) } }),
  },
  { method: 'get', path: '/reservations/:id', auth: 'key', handler: async (r) => ({ data: await reservations.get(r.principal, r.params.id) }) },
  { method: 'post', path: '/reservations/:id/renew', auth: 'key', body: RenewBody, invalid, handler: async (r) => ({ data: await reservations.renew(r.principal, r.params.id, r.body.ttl_s) }) },
  { method: 'post', path: '/reservations/:id/release', auth: 'key', handler: async (r) => ({ data: await reservations.release(r.principal, r.params.id) }) },
  { method: 'post', path: '/reservations/:id/force-release', auth: 'key', handler: async (r) => ({ data: await reservations.forceRelease(r.principal, r.params.id) }) },
];
