/**
 * The Signal a view shows: every field of the context but the ack bookkeeping and routing ids, the defaults the
 * interface names, its state as delivery_state; `to_peer` and `retry_backoff_max_ms` only when the context holds
 * them. The oracle is the rule written out directly (every context key not hidden, then the defaults), so a field
 * added to the context and forgotten in the view's literal fails here.
 */
import { describe, expect, it } from 'vitest';
import { signalView } from '../../src/signals/kind.js';
import type { SignalContext } from '../../actors/signal.js';
import { iso, signalContext, T0 } from '../helpers/machine.js';

const HIDDEN = ['max_attempts', 'to_role_id', 'to_ring_id', 'ack_recipients', 'ack_checked_at', 'ack_overdue'];
const DEFAULTED = ['ack_required', 'ack_due_at', 'claim_token', 'priority', 'depends_on', 'blocked_by', 'blocked_reason', 'not_before', 'deadline', 'dead_letter_reason', 'retry_backoff_ms', 'retry_at', 'heartbeat_timeout_ms', 'heartbeat_at', 'progress', 'progress_note', 'concurrency_key', 'concurrency_limit', 'result', 'result_resources', 'delivery_state'];
const expectedKeys = (c: SignalContext) => new Set([...Object.keys(c).filter((k) => !HIDDEN.includes(k)), ...DEFAULTED]);

/** every field SignalContext can hold, each set */
const full = (): SignalContext =>
  signalContext({
    to_peer: 'peer-1',
    claim_token: 4,
    ack_required: true,
    ack_due_at: iso(T0 + 60_000),
    ack_recipients: ['a'],
    ack_checked_at: iso(T0 + 61_000),
    ack_overdue: ['a'],
    priority: 3,
    depends_on: ['d'],
    blocked_by: ['d'],
    blocked_reason: { dependency_id: 'd', reason: 'cancelled' },
    not_before: iso(T0),
    deadline: iso(T0 + 3_600_000),
    dead_letter_reason: null,
    retry_backoff_ms: 100,
    retry_backoff_max_ms: 1000,
    retry_at: null,
    heartbeat_timeout_ms: 5000,
    heartbeat_at: iso(T0),
    progress: 0.5,
    progress_note: 'half',
    concurrency_key: 'k',
    concurrency_limit: 2,
    result: { ok: true },
    result_resources: [],
  });

describe('signalView', () => {
  it('shows every field of a context that holds them all, and none of the bookkeeping', () => {
    const c = full();
    const v = signalView({ value: 'leased', context: c });
    expect(new Set(Object.keys(v))).toEqual(expectedKeys(c));
    for (const k of Object.keys(c)) if (!HIDDEN.includes(k)) expect((v as Record<string, unknown>)[k], k).toEqual((c as unknown as Record<string, unknown>)[k]);
    expect(v.delivery_state).toBe('leased');
  });

  it('fills the defaults on a context stored before those fields, and leaves out the two optional ones', () => {
    const c = signalContext();
    const v = signalView({ value: 'pending', context: c });
    expect(new Set(Object.keys(v))).toEqual(expectedKeys(c));
    expect(v).not.toHaveProperty('to_peer');
    expect(v).not.toHaveProperty('retry_backoff_max_ms');
    expect(v).toMatchObject({ ack_required: false, claim_token: null, priority: 0, depends_on: [], retry_backoff_ms: 0, concurrency_key: null, concurrency_limit: null, result: null, result_resources: [] });
  });
});
