import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { EdgeFields, Entity, IdBody, ListFilterFields, Name, Namespace, QueryBody, RelateBody, StoreBody, Time, UpdateBody } from '../memory/schemas.js';
import { commaList, compile, Key } from '../validation.js';
import { After, decodeCursor, DEFAULT_LIMIT, encodeCursor, Limit, pageReply } from './paging.js';

/** namespaces an admin's /memory/stats page shows by default: the most a page may hold */
const STATS_PAGE = 100;
import type { Services } from './services.js';

const ListQuery = compile(Type.Object({ ...ListFilterFields, tags: Type.Optional(Name), after: After, limit: Limit }));
export const PageQuery = compile(Type.Object({ after: After, limit: Limit }));
const EdgeUpdateBody = compile(Type.Object({ relation: Type.Optional(Name), ...EdgeFields }));
const EdgesQuery = compile(Type.Object({ direction: Type.Optional(Type.Union([Type.Literal('out'), Type.Literal('in'), Type.Literal('both')])), relation: Type.Optional(Name) }));
const GraphQuery = compile(Type.Object({ depth: Type.Optional(Type.Integer({ minimum: 1, maximum: 3 })), relation: Type.Optional(Name), at: Type.Optional(Time) }));

const ShareBody = compile(
  Type.Object({
    namespace: Namespace,
    grantee_type: Type.Union([Type.Literal('role'), Type.Literal('ring'), Type.Literal('identity'), Type.Literal('org')]),
    grantee: Key('identity_name'),
    expires_at: Type.Optional(Time),
  }),
);

const JobBody = compile(Type.Object({ namespace: Type.Optional(Namespace) }));
const RecallPath = compile(Type.Object({ entity: Entity }));
const ImportBody = compile(Type.Object({ ndjson: Type.Optional(Type.String({ minLength: 1 })), artifact_id: Type.Optional(Type.String({ minLength: 1 })) }));

const jobRoutes = (s: Services, kind: 're-embed' | 'export' | 'import'): Route<Principal>[] => [
  {
    method: 'post',
    path: `/memory/admin/${kind}`,
    auth: 'admin',
    idempotent: true,
    body: kind === 'import' ? ImportBody : JobBody,
    invalid: 'MEMORY_VALIDATION_FAILED',
    handler: async (r) => ({ status: 202, data: await s.jobs.create(r.principal, kind, r.body) }),
  },
  { method: 'get', path: `/memory/admin/${kind}/:job_id`, auth: 'admin', handler: async (r) => ({ data: await s.jobs.get(kind, r.params.job_id) }) },
];

export const memoryRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/memory/store',
    idempotent: true,
    auth: 'key',
    body: StoreBody,
    invalid: 'MEMORY_VALIDATION_FAILED',
    handler: async (r) => {
      const { memory, created } = await s.memories.store(r.principal, r.body);
      return { status: created ? 201 : 200, data: memory };
    },
  },
  {
    method: 'get',
    path: '/memory/list',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => pageReply('memories', await s.memories.list(r.principal, { ...r.query, tags: commaList(r.query.tags) }, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/memory/query', auth: 'key', body: QueryBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.memories.query(r.principal, r.body) }) },
  { method: 'post', path: '/memory/forget', auth: 'key', body: IdBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.memories.forget(r.principal, r.body.id) }) },
  {
    method: 'get',
    path: '/memory/recall/:entity',
    params: RecallPath,
    auth: 'key',
    query: PageQuery,
    handler: async (r) => pageReply('memories', await s.memories.recall(r.principal, r.params.entity, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/memory/relate', auth: 'key', idempotent: true, body: RelateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ status: 201, data: await s.graph.relate(r.principal, r.body) }) },
  { method: 'get', path: '/memory/relate/:id/edges', auth: 'key', query: EdgesQuery, handler: async (r) => ({ data: { edges: await s.graph.edges(r.principal, r.params.id, r.query) } }) },
  { method: 'put', path: '/memory/relate/:edge_id', auth: 'key', body: EdgeUpdateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.graph.updateEdge(r.principal, r.params.edge_id, r.body) }) },
  { method: 'del', path: '/memory/relate/:edge_id', auth: 'key', handler: async (r) => ({ data: await s.graph.deleteEdge(r.principal, r.params.edge_id) }) },
  { method: 'get', path: '/memory/graph/:id', auth: 'key', query: GraphQuery, handler: async (r) => ({ data: await s.graph.expand(r.principal, r.params.id, r.query) }) },
  {
    method: 'get',
    path: '/memory/stats',
    auth: 'key',
    query: PageQuery,
    handler: async (r) => {
      const st = await s.memoryStats.stats(r.principal, decodeCursor(r.query.after), r.query.limit ?? STATS_PAGE);
      const cursor = st.cursor === null ? null : encodeCursor(st.cursor);
      return { data: { ...st, cursor, has_more: cursor !== null }, meta: { cursor } };
    },
  },
  ...jobRoutes(s, 're-embed'),
  ...jobRoutes(s, 'export'),
  ...jobRoutes(s, 'import'),
  { method: 'post', path: '/memory/admin/share', auth: 'admin', idempotent: true, body: ShareBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ status: 201, data: await s.shares.create(r.principal, r.body) }) },
  { method: 'get', path: '/memory/admin/shares', auth: 'admin', handler: async () => ({ data: { shares: await s.shares.list() } }) },
  { method: 'del', path: '/memory/admin/share/:id', auth: 'admin', handler: async (r) => ({ data: await s.shares.remove(r.params.id) }) },
  { method: 'get', path: '/memory/:id', auth: 'key', handler: async (r) => ({ data: await s.memories.get(r.principal, r.params.id) }) },
  { method: 'patch', path: '/memory/:id', auth: 'key', body: UpdateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.memories.update(r.principal, r.params.id, r.body) }) },
];
