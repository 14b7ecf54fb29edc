/** Routes the operator console reads besides the others: one search over what a key may read, and the sockets and streams open on every instance. */
import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { Search } from '../inspection/search.js';
import { compile } from '../validation.js';
import type { Services } from './services.js';

const SearchQuery = compile(Type.Object({ q: Type.String({ minLength: 1, maxLength: 200 }), limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })) }));
const ConnectionsQuery = compile(Type.Object({ identity_id: Type.Optional(Type.String({ minLength: 1 })), key_id: Type.Optional(Type.String({ minLength: 1 })) }));

export const consoleRoutes = (s: Services): Route<Principal>[] => {
  const search = new Search(s);
  return [
    { method: 'get', path: '/search', auth: 'key', query: SearchQuery, handler: async (r) => ({ data: await search.find(r.principal, r.query.q, r.query.limit ?? 10) }) },
    {
      method: 'get',
      path: '/admin/connections',
      auth: 'admin',
      query: ConnectionsQuery,
      handler: async (r) => ({ data: { instance: s.connections.current?.instance, connections: (await s.connections.current?.list(r.query)) ?? [] } }),
    },
  ];
};
