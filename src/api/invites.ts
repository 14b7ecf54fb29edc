import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import { IDENTITY_TYPES } from '../identity/invites.js';
import type { Principal } from '../identity/model.js';
import type { Services } from './services.js';

const IdentityType = Type.Union(IDENTITY_TYPES.map((t) => Type.Literal(t)));
const Name = Type.String({ minLength: 1, maxLength: 200 });

const CreateBody = compile(Type.Object({ name: Name, type: IdentityType, is_admin: Type.Optional(Type.Boolean()) }));
const RedeemBody = compile(
  Type.Object({
    code: Type.String({ minLength: 1 }),
    name: Name,
    type: IdentityType,
    capabilities: Type.Optional(Type.Array(Type.String())),
    tags: Type.Optional(Type.Array(Type.String())),
  }),
);

export const inviteRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/invite/create',
    auth: 'optional',
    body: CreateBody,
    invalid: 'INVITE_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.invites.create(r.principal, r.body) }),
  },
  {
    method: 'post',
    path: '/invite',
    auth: 'public',
    body: RedeemBody,
    invalid: 'INVITE_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.invites.redeem(r.body) }),
  },
];
