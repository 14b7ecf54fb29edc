/**
 * One call to a peer organization on its way: `/federation/deliver` (a signal emitted to the peer),
 * `/federation/ack` (a federated task completed here) or `/federation/cancel` (a federated task withdrawn or
 * declined). An outbound delivery (actors/outbound-delivery.ts): retried with back-off until its deadline,
 * each attempt's outcome recorded; the body is fixed at creation, the proof is made fresh per attempt.
 */
import { newAttempts, type AttemptsContext, type DeliveryStatus, type NewAttempts } from './outbound-delivery.js';

export { deliveryMachine as federationDeliveryMachine, deliveryTimers as federationDeliveryTimers } from './outbound-delivery.js';

export type FederationCall = 'deliver' | 'ack' | 'cancel';

export interface FederationDeliveryContext extends AttemptsContext {
  peer_id: string;
  call: FederationCall;
  /** the local signal the call is about */
  signal_id: string;
  /** the JSON body sent on every attempt */
  body: Record<string, unknown>;
  /** sorts the peer's deliveries by creation */
  order: string;
}

export interface NewFederationDelivery extends NewAttempts {
  peer_id: string;
  call: FederationCall;
  signal_id: string;
  body: Record<string, unknown>;
  order: string;
}

export const newFederationDelivery = (d: NewFederationDelivery): { value: DeliveryStatus; context: FederationDeliveryContext } => ({
  value: 'scheduled',
  context: { ...newAttempts(d), peer_id: d.peer_id, call: d.call, signal_id: d.signal_id, body: d.body, order: d.order },
});
