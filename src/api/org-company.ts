import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import type { Principal } from '../identity/model.js';
import type { Services } from './services.js';

const PeerCreate = compile(
  Type.Object({
    name: Type.String({ minLength: 1, maxLength: 200 }),
    endpoint: Type.String({ minLength: 1, maxLength: 2000 }),
    allowed_scopes: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 100 })),
  }),
);
const PeerStatus = compile(Type.Object({ status: Type.Union([Type.Literal('active'), Type.Literal('suspended'), Type.Literal('revoked')]) }));
const PeerQuery = compile(Type.Object({ status: Type.Optional(Type.Union(['pending', 'active', 'suspended', 'revoked'].map((s) => Type.Literal(s)))) }));

const invalid = 'DISC_VALIDATION_FAILED' as const;

export const orgCompanyRoutes = ({ company, peers, discovery }: Services): Route<Principal>[] => [
  { method: 'get', path: '/org/company', auth: 'key', handler: async () => ({ data: await company.get() }) },
  { method: 'post', path: '/org/company/peers', auth: 'admin', body: PeerCreate, invalid, handler: async (r) => ({ status: 201, data: await peers.create(r.principal.identity.id, r.body) }) },
  { method: 'get', path: '/org/company/peers', auth: 'admin', query: PeerQuery, handler: async (r) => ({ data: await peers.list(r.query.status) }) },
  { method: 'get', path: '/org/company/peers/:id', auth: 'admin', handler: async (r) => ({ data: await peers.get(r.params.id) }) },
  { method: 'del', path: '/org/company/peers/:id', auth: 'admin', handler: async (r) => ({ data: await peers.remove(r.params.id) }) },
  { method: 'patch', path: '/org/company/peers/:id/status', auth: 'admin', body: PeerStatus, invalid, handler: async (r) => ({ data: await peers.setStatus(r.params.id, r.body.status) }) },
  { method: 'post', path: '/org/company/peers/:id/establish', auth: 'admin', handler: async (r) => ({ status: 202, data: await peers.establish(r.params.id, r.principal.identity.id) }) },
  { method: 'get', path: '/admin/peers', auth: 'admin', query: PeerQuery, handler: async (r) => ({ data: await peers.list(r.query.status) }) },
  { method: 'get', path: '/discovery', auth: 'key', handler: async (r) => ({ data: await discovery.directory(r.principal, r.query) }) },
];
