import Type from 'typebox';
import type { Route } from '../http/server.js';
import { compile } from '../validation.js';
import type { Principal } from '../identity/model.js';
import { After, decodeCursor, DEFAULT_LIMIT, Limit, pageReply } from './paging.js';
import type { Services } from './services.js';

const fields = {
  url: Type.String({ minLength: 1, maxLength: 2000 }),
  events: Type.Array(Type.String({ minLength: 1 }), { maxItems: 50 }),
  secret: Type.Optional(Type.String({ maxLength: 200 })),
  description: Type.Optional(Type.Union([Type.String({ maxLength: 500 }), Type.Null()])),
  active: Type.Optional(Type.Boolean()),
};
const WebhookCreate = compile(Type.Object(fields));
const WebhookUpdate = compile(Type.Object({ ...fields, url: Type.Optional(fields.url), events: Type.Optional(fields.events) }, { minProperties: 1 }));
const ListQuery = compile(Type.Object({ after: After, limit: Limit }));
const invalid = 'WEBHOOK_VALIDATION_FAILED' as const;

export const webhookRoutes = ({ webhooks }: Services): Route<Principal>[] => [
  { method: 'post', path: '/admin/webhooks', auth: 'admin', unscoped: true, idempotent: true, body: WebhookCreate, invalid, handler: async (r) => ({ status: 201, data: await webhooks.create(r.principal, r.body) }) },
  { method: 'get', path: '/admin/webhooks', auth: 'admin', handler: async () => ({ data: await webhooks.list() }) },
  { method: 'get', path: '/admin/webhooks/:id', auth: 'admin', handler: async (r) => ({ data: await webhooks.get(r.params.id) }) },
  { method: 'patch', path: '/admin/webhooks/:id', auth: 'admin', unscoped: true, body: WebhookUpdate, invalid, handler: async (r) => ({ data: await webhooks.update(r.params.id, r.body) }) },
  { method: 'del', path: '/admin/webhooks/:id', auth: 'admin', handler: async (r) => ({ data: await webhooks.remove(r.params.id) }) },
  {
    method: 'get',
    path: '/admin/webhooks/:id/deliveries',
    auth: 'admin',
    query: ListQuery,
    handler: async (r) => pageReply('deliveries', await webhooks.deliveries(r.params.id, decodeCursor(r.query.after), r.query.limit ?? DEFAULT_LIMIT)),
  },
  { method: 'post', path: '/admin/webhooks/deliveries/:id/replay', auth: 'admin', idempotent: true, handler: async (r) => ({ status: 202, data: await webhooks.replay(r.principal, r.params.id) }) },
];
