import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { compile } from '../validation.js';
import { After, decodeCursor, DEFAULT_LIMIT, encodeCursor, Limit } from './paging.js';
import type { Services } from './services.js';

const Name = Type.String({ minLength: 1 });
const ListQuery = compile(Type.Object({ kind: Type.Optional(Name), state: Type.Optional(Name), after: After, limit: Limit }));
/** one event: its type and the fields the machine reads; `now` is stamped by the runtime */
const EventBody = compile(Type.Object({ type: Type.String({ minLength: 1, maxLength: 100 }) }, { additionalProperties: true }));

export const actorRoutes = ({ actors }: Services): Route<Principal>[] => [
  {
    method: 'get',
    path: '/admin/actors',
    auth: 'admin',
    query: ListQuery,
    errors: ['VALIDATION_INVALID_TYPE'],
    handler: async (r) => {
      const [counts, page] = await Promise.all([actors.counts(), actors.list(r.query, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)]);
      const cursor = page.cursor === null ? null : encodeCursor(page.cursor);
      return { data: { counts, actors: page.items, cursor, has_more: cursor !== null }, meta: { cursor } };
    },
  },
  { method: 'get', path: '/admin/actors/:kind/:id', auth: 'admin', errors: ['NOT_FOUND'], handler: async (r) => ({ data: await actors.show(r.params.kind, r.params.id) }) },
  {
    method: 'post',
    path: '/admin/actors/:kind/:id/events',
    auth: 'admin',
    body: EventBody,
    // a refused event answers the code of the machine's rule, whichever kind it is
    errors: ['NOT_FOUND', 'SIGNAL_DELIVERY_INVALID_TRANSITION', 'SIGNAL_CLAIM_CONFLICT', 'SIGNAL_CLAIM_NOT_TASK', 'SIGNAL_CLAIM_INVALID_STATUS', 'SIGNAL_ACK_UNAUTHORIZED', 'SIGNAL_DEAD_LETTER'],
    handler: async (r) => ({ data: await actors.send(r.principal, r.requestId, r.params.kind, r.params.id, r.body) }),
  },
];
