import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import { MCP_PROFILES, type Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Strings = Type.Optional(Type.Array(Type.String()));
export const McpProfileField = Type.Union(MCP_PROFILES.map((p) => Type.Literal(p)));
const KeyCreate = compile(
  Type.Object({
    owner: Type.Optional(Type.String({ minLength: 1 })),
    permissions: Type.Optional(Type.Object({ signal_types: Strings, rings: Strings, task_types: Strings, memory_scopes: Strings })),
    ring_scopes: Strings,
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
    rate_limit: Type.Optional(Type.Integer({ minimum: 1 })),
    mcp_profile: Type.Optional(McpProfileField),
  }),
);
const KeyRotate = compile(Type.Object({ mcp_profile: Type.Optional(Type.Union([McpProfileField, Type.Null()])) }));

const ListQuery = compile(Type.Object({ after: After, limit: Limit }));

export const adminRoutes = ({ apiKeys, invites }: Services): Route<Principal>[] => [
  {
    method: 'get',
    path: '/admin/invites',
    auth: 'admin',
    query: ListQuery,
    handler: async (r) => pageReply('invites', await invites.list(decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'get', path: '/admin/api-keys', auth: 'admin', handler: async () => ({ data: await apiKeys.list() }) },
  { method: 'post', path: '/admin/api-keys', auth: 'admin', idempotent: true, mints: true, body: KeyCreate, handler: async (r) => ({ status: 201, data: await apiKeys.create(r.principal, r.body) }) },
  { method: 'post', path: '/admin/api-keys/:id/revoke', auth: 'admin', handler: async (r) => ({ data: await apiKeys.revoke(r.principal, r.params.id) }) },
  { method: 'post', path: '/admin/api-keys/:id/rotate', auth: 'admin', idempotent: true, mints: true, body: KeyRotate, handler: async (r) => ({ data: await apiKeys.rotate(r.principal, r.params.id, r.body) }) },
];
