/** Request schemas of the memory operations, shared by every transport that offers them (REST, /rpc, MCP). */
import Type from 'typebox';
import { compile, Key } from '../validation.js';
import { MEMORY_TYPES } from './model.js';

export const Name = Type.String({ minLength: 1, maxLength: 500 });
const Content = Type.String({ minLength: 1, maxLength: 100_000 });
export const Tags = Type.Array(Key('tag'), { maxItems: 100 });
export const Namespace = Key('namespace');
export const Entity = Key('entity');
export const MemoryType = Type.Union(MEMORY_TYPES.map((t) => Type.Literal(t)));
const Embedding = Type.Array(Type.Number(), { minItems: 1, maxItems: 4096 });
const Confidence = Type.Number({ minimum: 0, maximum: 1 });
export const Metadata = Type.Record(Type.String(), Type.Unknown());
export const Time = Type.String({ format: 'date-time' });
const Id = Type.String({ minLength: 1 });

export const StoreBody = compile(
  Type.Object({
    namespace: Namespace,
    content: Content,
    memory_type: Type.Optional(MemoryType),
    entity: Type.Optional(Entity),
    category: Type.Optional(Name),
    tags: Type.Optional(Tags),
    confidence: Type.Optional(Confidence),
    source: Type.Optional(Name),
    metadata: Type.Optional(Metadata),
    expires_at: Type.Optional(Time),
    embedding: Type.Optional(Embedding),
    allow_duplicate: Type.Optional(Type.Boolean()),
  }),
);
const UpdateFields = { content: Type.Optional(Content), tags: Type.Optional(Tags), metadata: Type.Optional(Metadata), confidence: Type.Optional(Confidence), embedding: Type.Optional(Embedding) };
export const UpdateBody = compile(Type.Object(UpdateFields));
/** update with the memory's id in the params (where REST has it in the path) */
export const UpdateParams = compile(Type.Object({ id: Id, ...UpdateFields }));
export const IdBody = compile(Type.Object({ id: Id }));
export const QueryBody = compile(
  Type.Object({
    query: Content,
    namespace: Namespace,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    min_score: Type.Optional(Type.Number()),
    entity: Type.Optional(Entity),
    category: Type.Optional(Name),
    memory_type: Type.Optional(MemoryType),
    tags: Type.Optional(Tags),
    mode: Type.Optional(Type.Union([Type.Literal('semantic'), Type.Literal('keyword'), Type.Literal('hybrid')])),
    embedding: Type.Optional(Embedding),
  }),
);
/** the list filter; REST takes `tags` comma-separated in the query, /rpc and MCP as an array */
export const ListFilterFields = { namespace: Namespace, category: Type.Optional(Name), entity: Type.Optional(Entity), memory_type: Type.Optional(MemoryType) };
export const EdgeFields = {
  weight: Type.Optional(Type.Number()),
  metadata: Type.Optional(Metadata),
  valid_from: Type.Optional(Type.Union([Time, Type.Null()])),
  valid_to: Type.Optional(Type.Union([Time, Type.Null()])),
};
export const RelateBody = compile(Type.Object({ from_id: Id, to_id: Id, relation: Name, ...EdgeFields }));
