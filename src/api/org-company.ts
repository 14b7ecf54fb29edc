import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import { EstablishBody, PeerLimitFields } from '../federation/schemas.js';
import type { Services } from './services.js';

const PeerCreate = compile(
  Type.Object({
    name: Type.String({ minLength: 1, maxLength: 200 }),
    endpoint: Type.String({ minLength: 1, maxLength: 2000 }),
    allowed_scopes: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 100 })),
    ...PeerLimitFields,
  }),
);
const PeerLimits = compile(Type.Object(PeerLimitFields, { minProperties: 1 }));
const PeerStatus = compile(Type.Object({ status: Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('revoked')]) }));
const PeerQuery = compile(Type.Object({ status: Type.Optional(Type.Union(['pending', 'active', 'suspended', 'revoked'].map((s) => Type.Literal(s)))) }));

const invalid = 'DISC_VALIDATION_FAILED' as const;
const MembershipCreate = compile(Type.Object({ identity_id: Type.String({ minLength: 1, maxLength: 100 }) }));
const MembershipStatus = compile(Type.Object({ status: Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('removed')]) }));
const ClawType = compile(Type.Object({ claw_type: Type.Union([Type.Literal('central'), Type.Literal('worker'), Type.Literal('observer')]) }));
const ListQuery = compile(Type.Object({ after: After, limit: Limit }));
const orgInvalid = 'ORG_VALIDATION_FAILED' as const;

export const orgCompanyRoutes = ({ company, peers, discovery, memberships, trust, federationOut, peerLimits }: Services): Route<Principal>[] => [
  { method: 'get', path: '/org/company', auth: 'key', handler: async () => ({ data: await company.get() }) },
  {
    method: 'get',
    path: '/org/company/memberships',
    auth: 'admin',
    query: ListQuery,
    handler: async (r) => pageReply('memberships', await memberships.list(decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/org/company/memberships', auth: 'admin', idempotent: true, body: MembershipCreate, invalid: orgInvalid, handler: async (r) => ({ status: 201, data: await memberships.create(r.principal, r.body.identity_id) }) },
  { method: 'patch', path: '/org/company/memberships/:id/status', auth: 'admin', body: MembershipStatus, invalid: orgInvalid, handler: async (r) => ({ data: await memberships.setStatus(r.principal, r.params.id, r.body.status) }) },
  { method: 'patch', path: '/org/company/memberships/:id/claw-type', auth: 'admin', body: ClawType, invalid: orgInvalid, handler: async (r) => ({ data: await memberships.setClawType(r.principal, r.params.id, r.body.claw_type) }) },
  { method: 'post', path: '/org/company/peers', auth: 'admin', unscoped: true, idempotent: true, body: PeerCreate, invalid, handler: async (r) => ({ status: 201, data: await peers.create(r.principal, r.body) }) },
  { method: 'get', path: '/org/company/peers', auth: 'admin', query: PeerQuery, handler: async (r) => ({ data: await peers.list(r.query.status) }) },
  { method: 'get', path: '/org/company/peers/:id', auth: 'admin', handler: async (r) => ({ data: await peers.get(r.params.id) }) },
  { method: 'del', path: '/org/company/peers/:id', auth: 'admin', handler: async (r) => ({ data: await peers.remove(r.params.id) }) },
  { method: 'patch', path: '/org/company/peers/:id', auth: 'admin', unscoped: true, body: PeerLimits, invalid, handler: async (r) => ({ data: await peers.setLimits(r.principal, r.params.id, r.body) }) },
  { method: 'patch', path: '/org/company/peers/:id/status', auth: 'admin', unscoped: true, body: PeerStatus, invalid, handler: async (r) => ({ data: await peers.setStatus(r.principal, r.params.id, r.body.status) }) },
  // the answer that issues the secret: the only read of it (docs/federation.md)
  { method: 'post', path: '/org/company/peers/:id/establish', auth: 'admin', unscoped: true, body: EstablishBody, invalid, handler: async (r) => ({ data: await trust.establish(r.params.id, r.principal, r.body.expires_in) }) },
  {
    method: 'get',
    path: '/admin/peers/:id/calls',
    auth: 'admin',
    query: ListQuery,
    handler: async (r) => {
      await peers.get(r.params.id);
      return pageReply('calls', await federationOut.calls(r.params.id, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT));
    },
  },
  { method: 'get', path: '/admin/peers', auth: 'admin', query: PeerQuery, handler: async (r) => ({ data: await peerLimits.withUsage(await federationOut.withDeliveries(await peers.list(r.query.status))) }) },
  {
    method: 'get',
    path: '/discovery',
    auth: 'key',
    handler: async (r) => {
      const data = await discovery.directory(r.principal, r.query);
      return { data, meta: { cursor: data.cursor } };
    },
  },
];
