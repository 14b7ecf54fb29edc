import { receiptMachine, receiptTimers, type ReceiptContext } from '../../actors/inbox-receipt.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const RECEIPT = 'receipt';
export const receiptId = (identityId: string, signalId: string) => `${identityId}:${signalId}`;

export const receiptKind: ActorKind<ReceiptContext> = {
  name: RECEIPT,
  machine: receiptMachine,
  notFound: 'SIGNAL_NOT_FOUND',
  invalid: 'SIGNAL_DELIVERY_INVALID_TRANSITION',
  indexes: () => [],
  timers: (r) => receiptTimers(r.value, r.context),
};

export function receiptView(r: ActorRecord<ReceiptContext> | undefined, identityId: string, signalId: string) {
  const c = r?.context;
  return {
    signal_id: signalId,
    identity_id: identityId,
    state: r?.value ?? 'unread',
    snoozed_until: c?.snoozed_until ?? null,
    acknowledged_at: c?.acknowledged_at ?? null,
    resolved_at: c?.resolved_at ?? null,
    updated_at: c?.updated_at ?? null,
  };
}
export type Receipt = ReturnType<typeof receiptView>;
