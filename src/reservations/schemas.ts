/** Request schemas of reservations, shared by REST and the method table (/rpc, MCP). */
import Type from 'typebox';
import { Key } from '../validation.js';

const Path = Key('path');
export const Paths = Type.Array(Path, { minItems: 1, maxItems: 200 });
const Project = Key('project');
const Ttl = Type.Integer({ minimum: 1 });

export const ReserveSchema = Type.Object({
  paths: Paths,
  exclusive: Type.Optional(Type.Boolean()),
  ttl_s: Type.Optional(Ttl),
  reason: Type.Optional(Type.String({ maxLength: 1000 })),
  project: Type.Optional(Project),
  idempotency_key: Type.Optional(Key('idempotency_key')),
});
export const RenewSchema = Type.Object({ ttl_s: Type.Optional(Ttl) });
export const ListSchema = Type.Object({
  project: Type.Optional(Project),
  identity: Type.Optional(Type.String({ minLength: 1 })),
  path: Type.Optional(Path),
  include_expired: Type.Optional(Type.Boolean()),
});
/** `paths` is a comma list on the query string */
export const ConflictsQuerySchema = Type.Object({ paths: Type.String({ minLength: 1 }), project: Type.Optional(Project), exclusive: Type.Optional(Type.Boolean()) });
