/**
 * Acknowledgement due checks in the signal and receipt machines, purely through `transition()` as the runtime
 * hosts them: the signal records its check once (a second ACK_DUE is no transition, so a redelivered timer
 * commits nothing), in every delivery state; the due timers exist exactly while a check or an answer is owed.
 */
import { describe, expect, it } from 'vitest';
import { isAckOverdue, newReceipt, receiptMachine, receiptTimers, type ReceiptContext } from '../../actors/inbox-receipt.js';
import { signalTimers, type SignalContext } from '../../actors/signal.js';
import { T0, iso, runMachine, signalContext, step } from '../helpers/machine.js';

const DUE = T0 + 60_000;
const tracked: Partial<SignalContext> = { signal_type: 'query', task_status: null, ack_required: true, ack_due_at: iso(DUE), ack_recipients: ['a', 'b'], ack_checked_at: null, ack_overdue: [] };

describe('signal ACK_DUE', () => {
  it.each(['pending', 'delivered', 'acked', 'dead_letter'])('in %s records the overdue recipients once, keeping the delivery state', (state) => {
    const r = step(state, tracked, { type: 'ACK_DUE', now: DUE, overdue: ['b'] });
    expect(r.value).toBe(state);
    expect(r.context).toMatchObject({ ack_checked_at: iso(DUE), ack_overdue: ['b'] });
    expect(signalTimers(r.value, r.context)).toEqual([]);
    const again = step(state, r.context, { type: 'ACK_DUE', now: DUE + 1, overdue: ['a', 'b'] });
    expect(again.unchanged).toBe(true);
  });

  it('in leased keeps the lease and its timer', () => {
    const lease = { ...tracked, signal_type: 'task', task_status: 'open', claimed_by: 'a', claimed_at: iso(T0), claim_expires_at: iso(DUE + 5000) };
    const r = step('leased', lease, { type: 'ACK_DUE', now: DUE, overdue: [] });
    expect(r.value).toBe('leased');
    expect(r.context.claimed_by).toBe('a');
    expect(signalTimers(r.value, r.context)).toEqual([{ event: 'LEASE_EXPIRED', at: DUE + 5000 }]);
  });

  it('before the due time, without the receipts read, or on a signal without a due time: no transition', () => {
    expect(step('pending', tracked, { type: 'ACK_DUE', now: DUE - 1, overdue: [] }).unchanged).toBe(true);
    expect(step('pending', tracked, { type: 'ACK_DUE', now: DUE } as any).unchanged).toBe(true);
    expect(step('pending', { ...tracked, ack_due_at: null }, { type: 'ACK_DUE', now: DUE, overdue: [] }).unchanged).toBe(true);
    expect(step('pending', {}, { type: 'ACK_DUE', now: DUE, overdue: [] }).unchanged).toBe(true);
  });

  it('the due timer exists while the check is unrecorded', () => {
    expect(signalTimers('pending', signalContext(tracked))).toEqual([{ event: 'ACK_DUE', at: DUE }]);
    expect(signalTimers('delivered', signalContext({ ...tracked, ack_due_at: null }))).toEqual([]);
    expect(signalTimers('pending', signalContext())).toEqual([]);
  });
});

describe('receipt ACK_DUE', () => {
  const owed = newReceipt('b', 'sig', T0, { ack_due_at: iso(DUE), inbox_member: '0500sig' });
  const run = (value: string, c: ReceiptContext, event: any) => runMachine<ReceiptContext>(receiptMachine, value, c, event);

  it('marks an owed acknowledgement overdue at the due time; acknowledging later clears it', () => {
    expect(receiptTimers(owed.value, owed.context)).toEqual([{ event: 'ACK_DUE', at: DUE }]);
    expect(run('unread', owed.context, { type: 'ACK_DUE', now: DUE - 1 }).unchanged).toBe(true);
    const late = run('unread', owed.context, { type: 'ACK_DUE', now: DUE });
    expect(isAckOverdue(late.context)).toBe(true);
    expect(receiptTimers(late.value, late.context)).toEqual([]);
    const answered = run(late.value, late.context, { type: 'ACKNOWLEDGE', now: DUE + 10 });
    expect(answered.value).toBe('acknowledged');
    expect(isAckOverdue(answered.context)).toBe(false);
  });

  it('a snoozed recipient still owes it; a resolved or acknowledged one does not', () => {
    const snoozed = run('unread', owed.context, { type: 'SNOOZE', now: T0, until: DUE + 1000 });
    const r = run(snoozed.value, snoozed.context, { type: 'ACK_DUE', now: DUE });
    expect(r.value).toBe('snoozed');
    expect(isAckOverdue(r.context)).toBe(true);
    for (const type of ['RESOLVE', 'ACKNOWLEDGE']) {
      const done = run('unread', owed.context, { type, now: T0 });
      expect(receiptTimers(done.value, done.context)).toEqual([]);
      expect(run(done.value, done.context, { type: 'ACK_DUE', now: DUE }).unchanged).toBe(true);
    }
  });

  it('a receipt made by a first inbox action owes nothing', () => {
    const plain = newReceipt('b', 'sig', T0);
    expect(receiptTimers(plain.value, plain.context)).toEqual([]);
    expect(run('unread', plain.context, { type: 'ACK_DUE', now: DUE }).unchanged).toBe(true);
  });
});
