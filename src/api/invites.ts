import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile, Key } from '../validation.js';
import { IDENTITY_TYPES } from '../identity/invites.js';
import type { Principal } from '../identity/model.js';
import { Address, AgentId } from './auth.js';
import { McpProfileField } from './admin.js';
import type { Services } from './services.js';

const IdentityType = Type.Union(IDENTITY_TYPES.map((t) => Type.Literal(t)));
const Name = Key('identity_name');

const CreateBody = compile(Type.Object({ name: Name, type: IdentityType, is_admin: Type.Optional(Type.Boolean()), expires_at: Type.Optional(Type.String({ format: 'date-time' })), mcp_profile: Type.Optional(McpProfileField) }));
const RedeemBody = compile(
  Type.Object({
    code: Type.String({ minLength: 1 }),
    name: Name,
    type: IdentityType,
    capabilities: Type.Optional(Type.Array(Key('capability'))),
    tags: Type.Optional(Type.Array(Key('tag'))),
    wallet_address: Type.Optional(Address),
    message: Type.Optional(Type.String({ minLength: 1, maxLength: 10_000 })),
    signature: Type.Optional(Type.String({ minLength: 1, maxLength: 10_000 })),
    agent_8004_id: Type.Optional(AgentId),
  }),
);

export const inviteRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/invite/create',
    idempotent: true,
    auth: 'optional',
    body: CreateBody,
    invalid: 'INVITE_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.invites.create(r.principal, r.body, r.requestId) }),
  },
  {
    method: 'post',
    path: '/invite',
    auth: 'public',
    mints: true,
    body: RedeemBody,
    invalid: 'INVITE_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.invites.redeem(r.body, r.requestId) }),
  },
  {
    method: 'get',
    path: '/invite/:code/skill',
    auth: 'public',
    handler: async (r) => ({ data: null, text: { contentType: 'text/markdown; charset=utf-8', body: await s.invites.skill(r.params.code) } }),
  },
];
