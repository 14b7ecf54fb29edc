import Type from 'typebox';
import type { Route } from '../http/server.js';
import { commaList, compile, Key } from '../validation.js';
import { AckBody, ClaimBody, EmitBody, HeartbeatFields, InboxQuery, ReadyQuery, ReceiptBody, SnoozeBody, THREAD_PAGE, ThreadQuery } from '../signals/schemas.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';
import { ATTACHMENTS_DEPRECATION } from '../artifacts/resources.js';

const NonEmpty = Type.String({ minLength: 1 });
const DeliveryState = Type.Union(['waiting', 'blocked', 'pending', 'delivered', 'leased', 'acked', 'failed', 'dead_letter'].map((s) => Type.Literal(s)));
const ListQuery = compile(
  Type.Object({
    after: After,
    limit: Limit,
    type: Type.Optional(Key('signal_type')),
    from_identity: Type.Optional(NonEmpty),
    to_role: Type.Optional(NonEmpty),
    to_ring: Type.Optional(NonEmpty),
    task_status: Type.Optional(NonEmpty),
    delivery_state: Type.Optional(DeliveryState),
    tag: Type.Optional(Key('tag')),
    since: Type.Optional(Type.String({ format: 'date-time' })),
  }),
);

const PageQuery = compile(Type.Object({ after: After, limit: Limit }));

const inboxQuery = (q: any) => ({ ...q, types: commaList(q.type) });

export const signalRoutes = (s: Services): Route<Principal>[] => [
  {
    method: 'post',
    path: '/emit',
    idempotent: true,
    auth: 'key',
    body: EmitBody,
    invalid: 'SIGNAL_EMIT_VALIDATION_FAILED',
    handler: async (r) => ({ status: 201, data: await s.signals.emit(r.principal, r.body), headers: r.body.attachments !== undefined ? ATTACHMENTS_DEPRECATION : undefined }),
  },
  { method: 'post', path: '/claim', auth: 'key', body: ClaimBody, handler: async (r) => ({ data: await s.signals.claim(r.principal, r.body.signal_id, r.body.lease_ms, r.body.claim_token) }) },
  { method: 'post', path: '/ack', auth: 'key', body: AckBody, handler: async (r) => ({ data: await s.signals.ack(r.principal, r.body.signal_id, r.body.outcome, r.body.claim_token, r.body) }) },
  { method: 'post', path: '/tasks/:id/heartbeat', auth: 'key', body: HeartbeatFields, handler: async (r) => ({ data: await s.signals.heartbeat(r.principal, r.params.id, r.body) }) },
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
  {
    method: 'get',
    path: '/signals/:id/receipts',
    auth: 'key',
    query: PageQuery,
    handler: async (r) => pageReply('receipts', await s.signals.receipts(r.principal, r.params.id, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  {
    method: 'get',
    path: '/tasks/ready',
    auth: 'key',
    query: ReadyQuery,
    handler: async (r) => pageReply('tasks', await s.inbox.ready(r.principal, { task_types: commaList(r.query.task_types) }, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/tasks/:id/cancel', auth: 'key', handler: async (r) => ({ data: await s.signals.cancel(r.principal, r.params.id) }) },
  { method: 'post', path: '/tasks/:id/release', auth: 'admin', handler: async (r) => ({ data: await s.signals.release(r.principal, r.params.id) }) },
  { method: 'post', path: '/tasks/:id/retry', auth: 'key', handler: async (r) => ({ data: await s.signals.retry(r.principal, r.params.id) }) },
  { method: 'get', path: '/tasks/:id/graph', auth: 'key', handler: async (r) => ({ data: await s.signals.graph(r.principal, r.params.id) }) },
  {
    method: 'get',
    path: '/thread/:id',
    auth: 'key',
    query: ThreadQuery,
    handler: async (r) => pageReply('signals', await s.signals.thread(r.principal, r.params.id, decodeCursor(r.query.after), r.query.limit ?? THREAD_PAGE)),
  },
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
