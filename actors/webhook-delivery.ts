/** One webhook event on its way to one endpoint: an outbound delivery (actors/outbound-delivery.ts) with its event and body. */
import { newAttempts, type AttemptsContext, type DeliveryStatus, type NewAttempts } from './outbound-delivery.js';

export { deliveryMachine, deliveryTimers, MAX_ATTEMPTS_KEPT, retryDelayMs, type Attempt, type DeliveryEvent, type DeliveryStatus } from './outbound-delivery.js';

export interface DeliveryContext extends AttemptsContext {
  webhook_id: string;
  event: string;
  /** the body sent, the same on every attempt */
  payload: Record<string, unknown>;
  /** sorts the webhook's deliveries by creation */
  order: string;
}

export interface NewDelivery extends NewAttempts {
  webhook_id: string;
  event: string;
  payload: Record<string, unknown>;
  order: string;
}

export const newDelivery = (d: NewDelivery): { value: DeliveryStatus; context: DeliveryContext } => ({
  value: 'scheduled',
  context: { ...newAttempts(d), webhook_id: d.webhook_id, event: d.event, payload: d.payload, order: d.order },
});
