/** Webhooks: the record, the event catalogue, the delivery actor kind and the Standard Webhooks signature. */
import { createHmac, randomBytes } from 'node:crypto';
import { deliveryMachine, deliveryTimers, type DeliveryContext } from '../../actors/webhook-delivery.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

/** Every event a webhook may subscribe to; later parts add theirs here. */
export const WEBHOOK_EVENTS = [
  'signal.emitted', 'signal.claimed', 'signal.acked', 'signal.dead_lettered', 'signal.ack_overdue', 'task.completed', 'task.expired', 'task.progress', 'identity.joined', 'membership.changed',
  'federation.delivered', 'federation.claimed', 'federation.completed', 'federation.failed',
  'reservation.granted', 'reservation.released', 'reservation.expired',
  'memory.stored', 'memory.updated', 'memory.forgotten',
] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface Webhook {
  id: string;
  url: string;
  events: WebhookEvent[];
  description: string | null;
  active: boolean;
  /** `whsec_` + base64 key; answered only by the create call */
  secret: string;
  /** per outbox log: the last sequence that existed when the webhook was made; older entries are not its business */
  since: Record<string, number>;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export const webhookView = ({ secret: _s, since: _n, ...w }: Webhook) => w;

export const webhookKeys = {
  webhook: (id: string) => `webhook:${id}`,
  cursor: (log: string) => `webhook-cursor:${log}`,
};
export const webhookIndexes = { all: 'webhooks', deliveries: (webhookId: string) => `webhook-deliveries:${webhookId}` };

export const DELIVERY = 'webhook-delivery';
export const deliveryId = (webhookId: string, log: string, seq: number, event: string) => `whd_${webhookId}_${log}_${seq}_${event}`;
const deliveryMember = (c: DeliveryContext) => `${c.order}|${c.id}`;
export const idOfDeliveryMember = (m: string) => m.slice(m.indexOf('|') + 1);

/** `onQueued` is told every commit leaving a delivery `queued` (a due attempt, or one queued again): the sender queues it. */
export function deliveryKind(onQueued: (id: string, rec: ActorRecord<DeliveryContext>) => void): ActorKind<DeliveryContext> {
  return {
    name: DELIVERY,
    machine: deliveryMachine,
    notFound: 'WEBHOOK_DELIVERY_NOT_FOUND',
    invalid: 'WEBHOOK_DELIVERY_IN_PROGRESS',
    indexes: (r) => [[webhookIndexes.deliveries(r.context.webhook_id), deliveryMember(r.context)]],
    timers: (r) => deliveryTimers(r.value, r.context),
    committed: (id, rec) => {
      if (rec.value === 'queued') onQueued(id, rec);
    },
  };
}

export const deliveryView = (r: ActorRecord<DeliveryContext>) => {
  const c = r.context;
  return {
    id: c.id,
    webhook_id: c.webhook_id,
    event: c.event,
    status: r.value,
    attempt_count: c.attempt_count,
    attempts: c.attempts,
    next_attempt_at: c.next_attempt_at === null ? null : new Date(c.next_attempt_at).toISOString(),
    created_at: c.created_at,
    updated_at: c.updated_at,
    delivered_at: c.delivered_at,
    failed_at: c.failed_at,
    payload: c.payload,
  };
};
export type Delivery = ReturnType<typeof deliveryView>;

export const newSecret = () => 'whsec_' + randomBytes(24).toString('base64');

/** Standard Webhooks: `v1,` + base64 HMAC-SHA256 over `id.timestamp.body`, keyed by the secret's base64 part. */
export function sign(secret: string, id: string, timestampS: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${timestampS}.${body}`).digest('base64');
}
