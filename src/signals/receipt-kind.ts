import { isAckOverdue, receiptMachine, receiptTimers, type ReceiptContext } from '../../actors/inbox-receipt.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const RECEIPT = 'receipt';
export const receiptId = (identityId: string, signalId: string) => `${identityId}:${signalId}`;

export const receiptIndexes = {
  /** every receipt of a signal, member the identity id (the receipts route pages it) */
  bySignal: (signalId: string) => `receipts:signal:${signalId}`,
  /** an identity's overdue acknowledgements, members sorted like its inbox */
  ackOverdue: (identityId: string) => `inbox:ack-overdue:${identityId}`,
};

export const receiptKind: ActorKind<ReceiptContext> = {
  name: RECEIPT,
  machine: receiptMachine,
  notFound: 'SIGNAL_NOT_FOUND',
  invalid: 'SIGNAL_DELIVERY_INVALID_TRANSITION',
  indexes: (r) => [
    [receiptIndexes.bySignal(r.context.signal_id), r.context.identity_id],
    ...(isAckOverdue(r.context) && r.context.inbox_member ? [[receiptIndexes.ackOverdue(r.context.identity_id), r.context.inbox_member] as [string, string]] : []),
  ],
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
    ack_required: c?.ack_required ?? false,
    ack_due_at: c?.ack_due_at ?? null,
    ack_overdue: c ? isAckOverdue(c) : false,
  };
}
export type Receipt = ReturnType<typeof receiptView>;

/** Overdue as readers are shown it: an any_one signal someone took is owed by nobody. */
export const overdueFor = (c: ReceiptContext, taker: string | undefined) => taker === undefined && isAckOverdue(c);
