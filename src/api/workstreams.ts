import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { LINK_KINDS, WORKSTREAM_STATUSES } from '../workstreams/model.js';
import { compile, Key } from '../validation.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const invalid = 'WORKSTREAM_VALIDATION_FAILED' as const;
const Status = Type.Union(WORKSTREAM_STATUSES.map((s) => Type.Literal(s)));
const Kind = Type.Union(LINK_KINDS.map((s) => Type.Literal(s)));
const Tags = Type.Array(Key('tag'), { maxItems: 100 });
const fields = { description: Type.Optional(Type.String({ maxLength: 10_000 })), status: Type.Optional(Status), tags: Type.Optional(Tags) };
const Name = Type.String({ minLength: 1, maxLength: 200 });
const CreateBody = compile(Type.Object({ name: Name, ...fields }));
const PatchBody = compile(Type.Object({ name: Type.Optional(Name), ...fields }));
const LinkBody = compile(Type.Object({ kind: Kind, id: Type.String({ minLength: 1 }) }));
const ListQuery = compile(Type.Object({ status: Type.Optional(Status), tag: Type.Optional(Type.String({ minLength: 1 })), after: After, limit: Limit }));

export const workstreamRoutes = ({ workstreams }: Services): Route<Principal>[] => [
  {
    method: 'get',
    path: '/workstreams',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => pageReply('workstreams', await workstreams.list(r.principal, r.query, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/workstreams', auth: 'key', idempotent: true, body: CreateBody, invalid, handler: async (r) => ({ status: 201, data: await workstreams.create(r.principal, r.body) }) },
  { method: 'get', path: '/workstreams/:id', auth: 'key', handler: async (r) => ({ data: await workstreams.get(r.principal, r.params.id) }) },
  { method: 'patch', path: '/workstreams/:id', auth: 'key', body: PatchBody, invalid, handler: async (r) => ({ data: await workstreams.update(r.principal, r.params.id, r.body) }) },
  { method: 'get', path: '/workstreams/:id/context', auth: 'key', handler: async (r) => ({ data: await workstreams.context(r.principal, r.params.id) }) },
  { method: 'post', path: '/workstreams/:id/links', auth: 'key', idempotent: true, body: LinkBody, invalid, handler: async (r) => ({ status: 201, data: await workstreams.link(r.principal, r.params.id, r.body.kind, r.body.id) }) },
  // DELETE carries no body on this front end: the link is named in the query
  { method: 'del', path: '/workstreams/:id/links', auth: 'key', query: LinkBody, handler: async (r) => ({ data: await workstreams.unlink(r.principal, r.params.id, r.query.kind, r.query.id) }) },
];
