import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile, validate } from '../validation.js';
import { IDENTITY_TYPES } from '../identity/invites.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Text = Type.String({ minLength: 1, maxLength: 10_000 });
export const Address = Type.String({ pattern: '^0x[0-9a-fA-F]{40}$' });
export const AgentId = Type.String({ pattern: '^[0-9]{1,78}$' });

const LoginBody = compile(Type.Object({ message: Text, signature: Text }));
const AttachBody = compile(Type.Object({ wallet_address: Address, message: Text, signature: Text, agent_8004_id: Type.Optional(AgentId), previous_message: Type.Optional(Text), previous_signature: Type.Optional(Text) }));
const AnyObject = compile(Type.Object({}));
const SubmitBody = compile(
  Type.Object({
    name: Type.String({ minLength: 1, maxLength: 200 }),
    type: Type.Union(IDENTITY_TYPES.map((t) => Type.Literal(t))),
    wallet_address: Address,
    message: Text,
    signature: Text,
    agent_8004_id: Type.Optional(AgentId),
  }),
);
const ListQuery = compile(Type.Object({ after: After, limit: Limit, status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('approved'), Type.Literal('rejected')])) }));

export const authRoutes = (s: Services): Route<Principal>[] => {
  const login: Route<Principal>['handler'] = async (r) => ({ data: await s.wallets.login(r.body.message, r.body.signature, r.requestId) });
  return [
    { method: 'get', path: '/auth/nonce', auth: 'public', handler: async () => ({ data: await s.siwe.nonce() }) },
    { method: 'post', path: '/auth/siwe-login', auth: 'public', mints: true, body: LoginBody, invalid: 'SIWE_VALIDATION_FAILED', handler: login },
    { method: 'post', path: '/siwe/login', auth: 'public', mints: true, body: LoginBody, invalid: 'SIWE_VALIDATION_FAILED', handler: login },
    { method: 'post', path: '/auth/attach-wallet', auth: 'key', body: AttachBody, invalid: 'IDENTITY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.wallets.attach(r.principal, r.body) }) },
    {
      method: 'post',
      path: '/auth-request',
      auth: 'public',
      // any object: a disabled instance answers AUTH_REQUEST_DISABLED whatever the body
      body: AnyObject,
      handler: async (r) => {
        s.authRequests.assertEnabled();
        return { status: 201, data: await s.authRequests.submit(validate(SubmitBody, r.body, 'AUTH_REQUEST_VALIDATION_FAILED'), r.requestId) };
      },
    },
    {
      method: 'get',
      path: '/auth-requests',
      auth: 'admin',
      query: ListQuery,
      handler: async (r) => pageReply('auth_requests', await s.authRequests.list(r.query.status, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
    },
    { method: 'post', path: '/auth-request/:id/approve', auth: 'admin', handler: async (r) => ({ data: await s.authRequests.approve(r.principal, r.params.id) }) },
    { method: 'post', path: '/auth-request/:id/reject', auth: 'admin', handler: async (r) => ({ data: await s.authRequests.reject(r.principal, r.params.id) }) },
  ];
};
