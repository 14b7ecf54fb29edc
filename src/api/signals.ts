import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../http/validate.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const Str = Type.String();
const NonEmpty = Type.String({ minLength: 1 });
export const EmitBody = compile(
  Type.Object({
    signal_type: Type.String({ minLength: 1, maxLength: 100 }),
    content: Type.String(),
    from_role: Type.Optional(Str),
    from_identity: Type.Optional(Str),
    to_role: Type.Optional(NonEmpty),
    to_ring: Type.Optional(NonEmpty),
    to_identity: Type.Optional(NonEmpty),
    parent_id: Type.Optional(NonEmpty),
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
const SignalRef = { signal_id: NonEmpty };
export const ClaimBody = compile(Type.Object({ ...SignalRef, lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })) }));
export const AckBody = compile(Type.Object({ ...SignalRef, outcome: Type.Optional(Type.Union([Type.Literal('completed'), Type.Literal('failed')])) }));
export const ReceiptBody = compile(Type.Object(SignalRef));
const SnoozeBody = compile(Type.Object({ ...SignalRef, until: Type.String({ format: 'date-time' }) }));

const DeliveryState = Type.Union(['pending', 'delivered', 'leased', 'acked', 'failed', 'dead_letter'].map((s) => Type.Literal(s)));
const ListQuery = compile(
  Type.Object({
    after: After,
    limit: Limit,
    type: Type.Optional(NonEmpty),
    from_identity: Type.Optional(NonEmpty),
    to_role: Type.Optional(NonEmpty),
    to_ring: Type.Optional(NonEmpty),
    task_status: Type.Optional(NonEmpty),
    delivery_state: Type.Optional(DeliveryState),
    tag: Type.Optional(NonEmpty),
    since: Type.Optional(Type.String({ format: 'date-time' })),
  }),
);
const InboxQuery = compile(
  Type.Object({
    after: After,
    limit: Limit,
    type: Type.Optional(NonEmpty),
    ring: Type.Optional(NonEmpty),
    tag: Type.Optional(NonEmpty),
    delivery_state: Type.Optional(DeliveryState),
    min_urgency: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    view: Type.Optional(Type.Union([Type.Literal('full'), Type.Literal('summary')])),
    project_tag: Type.Optional(NonEmpty),
    receipt_state: Type.Optional(Type.Union(['unread', 'acknowledged', 'resolved', 'snoozed'].map((s) => Type.Literal(s)))),
    include_resolved: Type.Optional(Type.Boolean()),
    include_snoozed: Type.Optional(Type.Boolean()),
  }),
);

const commaList = (s: string | undefined) => (s === undefined ? undefined : s.split(',').map((x) => x.trim()).filter(Boolean));
const inboxQuery = (q: any) => ({ ...q, types: commaList(q.type) });

export const signalRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/emit',
    auth: 'key',
    body: EmitBody,
    invalid: 'SIGNAL_EMIT_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.signals.emit(r.principal, r.body) }),
  },
  { method: 'post', path: '/claim', auth: 'key', body: ClaimBody, handler: async (r) => ({ data: await s.signals.claim(r.principal, r.body.signal_id, r.body.lease_ms) }) },
  { method: 'post', path: '/ack', auth: 'key', body: AckBody, handler: async (r) => ({ data: await s.signals.ack(r.principal, r.body.signal_id, r.body.outcome) }) },
  {
    method: 'get',
    path: '/signals/list',
    auth: 'key',
    query: ListQuery,
    handler: async (r) => {
      const q = r.query;
      const filter = { ...q, types: commaList(q.type), since: q.since ? Date.parse(q.since) : undefined };
      return pageReply('signals', await s.signals.list(r.principal, filter, decodeCursor(q.after), q.limit ?? DEFAULT_LIMIT));
    },
  },
  { method: 'get', path: '/thread/:id', auth: 'key', handler: async (r) => ({ data: { signals: await s.signals.thread(r.principal, r.params.id) } }) },
  {
    method: 'get',
    path: '/inbox/identity/:id',
    auth: 'key',
    query: InboxQuery,
    handler: async (r) => pageReply('signals', await s.inbox.identityInbox(r.principal, r.params.id, inboxQuery(r.query), decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  {
    method: 'get',
    path: '/inbox/:target',
    auth: 'key',
    query: InboxQuery,
    handler: async (r) => {
      const t = r.params.target;
      const q = inboxQuery(r.query);
      const after = decodeCursor(r.query.after);
      const limit = r.query.limit ?? DEFAULT_LIMIT;
      return pageReply('signals', t.startsWith('@') ? await s.inbox.identityInbox(r.principal, t, q, after, limit) : await s.inbox.roleInbox(r.principal, t, q, after, limit));
    },
  },
  { method: 'post', path: '/inbox/acknowledge', auth: 'key', body: ReceiptBody, handler: async (r) => ({ data: await s.inbox.act(r.principal, 'ACKNOWLEDGE', r.body.signal_id) }) },
  { method: 'post', path: '/inbox/resolve', auth: 'key', body: ReceiptBody, handler: async (r) => ({ data: await s.inbox.act(r.principal, 'RESOLVE', r.body.signal_id) }) },
  { method: 'post', path: '/inbox/snooze', auth: 'key', body: SnoozeBody, handler: async (r) => ({ data: await s.inbox.act(r.principal, 'SNOOZE', r.body.signal_id, Date.parse(r.body.until)) }) },
  { method: 'post', path: '/inbox/unsnooze', auth: 'key', body: ReceiptBody, handler: async (r) => ({ data: await s.inbox.act(r.principal, 'UNSNOOZE', r.body.signal_id) }) },
];
