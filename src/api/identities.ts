import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile, Key } from '../validation.js';
import { IDENTITY_TYPES } from '../identity/invites.js';
import type { Principal } from '../identity/model.js';
import { AgentId } from './auth.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Strings = Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 }));
const UpdateBody = compile(
  Type.Object({
    name: Type.Optional(Key('identity_name')),
    type: Type.Optional(Type.Union(IDENTITY_TYPES.map((t) => Type.Literal(t)))),
    capabilities: Type.Optional(Type.Array(Key('capability'), { maxItems: 100 })),
    tags: Type.Optional(Type.Array(Key('tag'), { maxItems: 100 })),
    is_admin: Type.Optional(Type.Boolean()),
    agent_8004_id: Type.Optional(Type.Union([AgentId, Type.Null()])),
  }),
);
const ListQuery = compile(Type.Object({ after: After, limit: Limit }));
const RebindBody = compile(Type.Object({ permissions: Type.Optional(Type.Object({ signal_types: Strings, rings: Strings, task_types: Strings, memory_scopes: Strings })), ring_scopes: Strings }));

export const identityRoutes = ({ identities, wallets }: Services): Route<Principal>[] => [
  {
    method: 'get',
    path: '/identities',
    auth: 'admin',
    query: ListQuery,
    handler: async (r) => pageReply('identities', await identities.list(decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'get', path: '/identities/:id', auth: 'admin', handler: async (r) => ({ data: await identities.get(r.params.id) }) },
  { method: 'put', path: '/identities/:id', auth: 'admin', body: UpdateBody, invalid: 'IDENTITY_VALIDATION_FAILED', handler: async (r) => ({ data: await identities.update(r.principal, r.params.id, r.body) }) },
  { method: 'del', path: '/admin/identity/:id', auth: 'admin', handler: async (r) => ({ data: await identities.delete(r.principal, r.params.id) }) },
  {
    method: 'post',
    path: '/admin/identity/:id/rebind-wallet',
    auth: 'admin',
    body: RebindBody,
    invalid: 'IDENTITY_VALIDATION_FAILED',
    errors: ['IDENTITY_NOT_FOUND', 'AUTH_SCOPE_DENIED'],
    handler: async (r) => ({ data: await wallets.rebind(r.principal, r.params.id, r.body) }),
  },
];
