import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../http/validate.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Str = Type.String();
const EmitBody = compile(
  Type.Object({
    signal_type: Type.String({ minLength: 1, maxLength: 100 }),
    content: Type.String(),
    from_role: Type.Optional(Str),
    from_identity: Type.Optional(Str),
    to_role: Type.Optional(Str),
    to_ring: Type.Optional(Str),
    to_identity: Type.Optional(Str),
    parent_id: Type.Optional(Str),
    urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    tags: Type.Optional(Type.Array(Str)),
    target_capabilities: Type.Optional(Type.Array(Str)),
    routing_policy: Type.Optional(Str),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    payload: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    resources: Type.Optional(Type.Array(Type.Unknown())),
    attachments: Type.Optional(Type.Array(Type.Unknown())),
  }),
);
const ClaimBody = compile(Type.Object({ signal_id: Type.String({ minLength: 1 }), lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })) }));
const AckBody = compile(Type.Object({ signal_id: Type.String({ minLength: 1 }), outcome: Type.Optional(Type.Union([Type.Literal('completed'), Type.Literal('failed')])) }));
const ListQuery = compile(Type.Object({ after: After, limit: Limit }));

export const signalRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/emit',
    auth: 'key',
    body: EmitBody,
    invalid: 'SIGNAL_EMIT_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.signals.emit(r.principal, r.body) }),
  },
  {
    method: 'post',
    path: '/claim',
    auth: 'key',
    body: ClaimBody,
    handler: async (r) => ({ data: await s.signals.claim(r.principal, r.body.signal_id, r.body.lease_ms) }),
  },
  {
    method: 'post',
    path: '/ack',
    auth: 'key',
    body: AckBody,
    handler: async (r) => ({ data: await s.signals.ack(r.principal, r.body.signal_id, r.body.outcome) }),
  },
  {
    method: 'get',
    path: '/signals/list',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => pageReply('signals', await s.signals.list(decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
];
