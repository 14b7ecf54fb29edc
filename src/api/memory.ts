import Type from 'typebox';
import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { MEMORY_TYPES } from '../memory/model.js';
import { commaList, compile } from '../validation.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Name = Type.String({ minLength: 1, maxLength: 500 });
const Content = Type.String({ minLength: 1, maxLength: 100_000 });
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 });
const MemoryType = Type.Union(MEMORY_TYPES.map((t) => Type.Literal(t)));
const Embedding = Type.Array(Type.Number(), { minItems: 1, maxItems: 4096 });
const Confidence = Type.Number({ minimum: 0, maximum: 1 });
const Metadata = Type.Record(Type.String(), Type.Unknown());

const StoreBody = compile(
  Type.Object({
    namespace: Name,
    content: Content,
    memory_type: Type.Optional(MemoryType),
    entity: Type.Optional(Name),
    category: Type.Optional(Name),
    tags: Type.Optional(Tags),
    confidence: Type.Optional(Confidence),
    source: Type.Optional(Name),
    metadata: Type.Optional(Metadata),
    expires_at: Type.Optional(Type.String({ format: 'date-time' })),
    embedding: Type.Optional(Embedding),
    allow_duplicate: Type.Optional(Type.Boolean()),
  }),
);
const UpdateBody = compile(
  Type.Object({ content: Type.Optional(Content), tags: Type.Optional(Tags), metadata: Type.Optional(Metadata), confidence: Type.Optional(Confidence), embedding: Type.Optional(Embedding) }),
);
const ForgetBody = compile(Type.Object({ id: Type.String({ minLength: 1 }) }));
const QueryBody = compile(
  Type.Object({
    query: Content,
    namespace: Name,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    min_score: Type.Optional(Type.Number()),
    entity: Type.Optional(Name),
    category: Type.Optional(Name),
    memory_type: Type.Optional(MemoryType),
    tags: Type.Optional(Tags),
    mode: Type.Optional(Type.Union([Type.Literal('semantic'), Type.Literal('keyword'), Type.Literal('hybrid')])),
    embedding: Type.Optional(Embedding),
  }),
);
const ListQuery = compile(
  Type.Object({ namespace: Name, category: Type.Optional(Name), entity: Type.Optional(Name), memory_type: Type.Optional(MemoryType), tags: Type.Optional(Name), after: After, limit: Limit }),
);
const PageQuery = compile(Type.Object({ after: After, limit: Limit }));
const Time = Type.String({ format: 'date-time' });
const EdgeFields = {
  weight: Type.Optional(Type.Number()),
  metadata: Type.Optional(Metadata),
  valid_from: Type.Optional(Type.Union([Time, Type.Null()])),
  valid_to: Type.Optional(Type.Union([Time, Type.Null()])),
};
const RelateBody = compile(Type.Object({ from_id: Type.String({ minLength: 1 }), to_id: Type.String({ minLength: 1 }), relation: Name, ...EdgeFields }));
const EdgeUpdateBody = compile(Type.Object({ relation: Type.Optional(Name), ...EdgeFields }));
const EdgesQuery = compile(Type.Object({ direction: Type.Optional(Type.Union([Type.Literal('out'), Type.Literal('in'), Type.Literal('both')])), relation: Type.Optional(Name) }));
const GraphQuery = compile(Type.Object({ depth: Type.Optional(Type.Integer({ minimum: 1, maximum: 3 })), relation: Type.Optional(Name), at: Type.Optional(Time) }));

const ShareBody = compile(
  Type.Object({
    namespace: Name,
    grantee_type: Type.Union([Type.Literal('role'), Type.Literal('ring'), Type.Literal('identity'), Type.Literal('org')]),
    grantee: Name,
    expires_at: Type.Optional(Time),
  }),
);

const JobBody = compile(Type.Object({ namespace: Type.Optional(Name) }));
const ImportBody = compile(Type.Object({ ndjson: Type.String({ minLength: 1 }) }));

const jobRoutes = (s: Services, kind: 're-embed' | 'export' | 'import'): Route<Principal>[] => [
  {
    method: 'post',
    path: `/memory/admin/${kind}`,
    auth: 'admin',
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
  { method: 'post', path: '/memory/forget', auth: 'key', body: ForgetBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.memories.forget(r.principal, r.body.id) }) },
  {
    method: 'get',
    path: '/memory/recall/:entity',
    auth: 'key',
    query: PageQuery,
    handler: async (r) => pageReply('memories', await s.memories.recall(r.principal, r.params.entity, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/memory/relate', auth: 'key', body: RelateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ status: 201, data: await s.graph.relate(r.principal, r.body) }) },
  { method: 'get', path: '/memory/relate/:id/edges', auth: 'key', query: EdgesQuery, handler: async (r) => ({ data: { edges: await s.graph.edges(r.principal, r.params.id, r.query) } }) },
  { method: 'put', path: '/memory/relate/:edge_id', auth: 'key', body: EdgeUpdateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.graph.updateEdge(r.principal, r.params.edge_id, r.body) }) },
  { method: 'del', path: '/memory/relate/:edge_id', auth: 'key', handler: async (r) => ({ data: await s.graph.deleteEdge(r.principal, r.params.edge_id) }) },
  { method: 'get', path: '/memory/graph/:id', auth: 'key', query: GraphQuery, handler: async (r) => ({ data: await s.graph.expand(r.principal, r.params.id, r.query) }) },
  { method: 'get', path: '/memory/stats', auth: 'key', handler: async (r) => ({ data: await s.memoryStats.stats(r.principal) }) },
  ...jobRoutes(s, 're-embed'),
  ...jobRoutes(s, 'export'),
  ...jobRoutes(s, 'import'),
  { method: 'post', path: '/memory/admin/share', auth: 'admin', body: ShareBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ status: 201, data: await s.shares.create(r.principal, r.body) }) },
  { method: 'get', path: '/memory/admin/shares', auth: 'admin', handler: async () => ({ data: { shares: await s.shares.list() } }) },
  { method: 'del', path: '/memory/admin/share/:id', auth: 'admin', handler: async (r) => ({ data: await s.shares.remove(r.params.id) }) },
  { method: 'get', path: '/memory/:id', auth: 'key', handler: async (r) => ({ data: await s.memories.get(r.principal, r.params.id) }) },
  { method: 'patch', path: '/memory/:id', auth: 'key', body: UpdateBody, invalid: 'MEMORY_VALIDATION_FAILED', handler: async (r) => ({ data: await s.memories.update(r.principal, r.params.id, r.body) }) },
];
