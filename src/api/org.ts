import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile, Key } from '../validation.js';
import type { Principal } from '../identity/model.js';
import type { Services } from './services.js';

const Strings = Type.Array(Type.String());
const roleFields = { purpose: Type.Optional(Type.String()), domains: Type.Optional(Strings), duties: Type.Optional(Strings) };
const ringFields = { purpose: Type.Optional(Type.String()), members: Type.Optional(Strings) };
const RoleCreate = compile(Type.Object({ name: Key('role_name'), ...roleFields }));
const RoleUpdate = compile(Type.Object({ name: Type.Optional(Key('role_name')), ...roleFields }));
const RingCreate = compile(Type.Object({ name: Key('ring_name'), ...ringFields }));
const RingUpdate = compile(Type.Object({ name: Type.Optional(Key('ring_name')), ...ringFields }));
const FillCreate = compile(Type.Object({ identity_id: Type.String({ minLength: 1 }), role_id: Type.String({ minLength: 1 }) }));
const FillQuery = compile(Type.Object({ role_id: Type.Optional(Type.String()), identity_id: Type.Optional(Type.String()) }));

const invalid = 'ORG_VALIDATION_FAILED' as const;

export const orgRoutes = ({ org }: Services): Route<Principal>[] => [
  { method: 'post', path: '/roles', auth: 'admin', idempotent: true, body: RoleCreate, invalid, handler: async (r) => ({ status: 201, data: await org.createRole(r.body, r.principal) }) },
  { method: 'get', path: '/roles', auth: 'key', handler: async () => ({ data: await org.listRoles() }) },
  { method: 'get', path: '/roles/:id', auth: 'key', handler: async (r) => ({ data: await org.role(r.params.id) }) },
  { method: 'put', path: '/roles/:id', auth: 'admin', body: RoleUpdate, invalid, handler: async (r) => ({ data: await org.updateRole(r.params.id, r.body, r.principal) }) },
  { method: 'del', path: '/roles/:id', auth: 'admin', handler: async (r) => ({ data: await org.deleteRole(r.params.id, r.principal) }) },
  { method: 'post', path: '/rings', auth: 'admin', idempotent: true, body: RingCreate, invalid, handler: async (r) => ({ status: 201, data: await org.createRing(r.body, r.principal) }) },
  { method: 'get', path: '/rings', auth: 'key', handler: async () => ({ data: await org.listRings() }) },
  { method: 'get', path: '/rings/:id', auth: 'key', handler: async (r) => ({ data: await org.ring(r.params.id) }) },
  { method: 'put', path: '/rings/:id', auth: 'admin', body: RingUpdate, invalid, handler: async (r) => ({ data: await org.updateRing(r.params.id, r.body, r.principal) }) },
  { method: 'del', path: '/rings/:id', auth: 'admin', handler: async (r) => ({ data: await org.deleteRing(r.params.id, r.principal) }) },
  { method: 'post', path: '/fills', auth: 'admin', idempotent: true, body: FillCreate, invalid, handler: async (r) => ({ status: 201, data: await org.createFill(r.body.identity_id, r.body.role_id, r.principal) }) },
  { method: 'get', path: '/fills', auth: 'key', query: FillQuery, handler: async (r) => ({ data: await org.listFills(r.query) }) },
  { method: 'del', path: '/fills/:id', auth: 'admin', handler: async (r) => ({ data: await org.deleteFill(r.params.id, r.principal) }) },
];
