/** The table of docs/federation.md, Repeats and conflicts: how a peer's ack or cancel meets the task as it stands. */
import { describe, expect, it } from 'vitest';
import type { SignalContext } from '../../actors/signal.js';
import { ackVerdict, cancelVerdict } from '../../src/federation/settle.js';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const task = (value: string, c: Partial<SignalContext>) => ({ value, context: { signal_type: 'task', task_status: 'open', claimed_by: null, claim_expires_at: null, ...c } as SignalContext });
const running = new Date(NOW + 60_000).toISOString();
const lapsed = new Date(NOW - 1).toISOString();
const ME = 'peer:p:me';

describe('peer ack and cancel verdicts', () => {
  it.each([
    ['completed by the agent', task('acked', { task_status: 'completed', claimed_by: ME }), 'completed', 'repeat'],
    ['completed by another', task('acked', { task_status: 'completed', claimed_by: 'someone' }), 'completed', 'conflict'],
    ['cancelled', task('acked', { task_status: 'cancelled' }), 'completed', 'conflict'],
    ["another's lease running", task('leased', { claimed_by: 'someone', claim_expires_at: running }), 'completed', 'conflict'],
    ["another's lease lapsed, timer not fired", task('leased', { claimed_by: 'someone', claim_expires_at: lapsed }), 'completed', 'apply'],
    ['leased by the agent', task('leased', { claimed_by: ME, claim_expires_at: running }), 'completed', 'apply'],
    ['nobody holds it (a late completion)', task('pending', {}), 'completed', 'apply'],
    ['dead-lettered', task('dead_letter', {}), 'completed', 'apply'],
    ['given up: leased by the agent', task('leased', { claimed_by: ME, claim_expires_at: running }), 'failed', 'apply'],
    ['given up: no longer held', task('pending', {}), 'failed', 'repeat'],
    ["given up: another's lease", task('leased', { claimed_by: 'someone', claim_expires_at: running }), 'failed', 'repeat'],
    ['given up: completed', task('acked', { task_status: 'completed', claimed_by: ME }), 'failed', 'conflict'],
  ] as const)('ack %s', (_, rec, outcome, verdict) => {
    expect(ackVerdict(rec, ME, outcome, NOW)).toBe(verdict);
  });

  it.each([
    ['cancelled', task('acked', { task_status: 'cancelled' }), 'repeat'],
    ['completed', task('acked', { task_status: 'completed' }), 'conflict'],
    ['leased', task('leased', { claimed_by: 'someone', claim_expires_at: running }), 'apply'],
    ['open', task('delivered', {}), 'apply'],
  ] as const)('cancel %s', (_, rec, verdict) => {
    expect(cancelVerdict(rec)).toBe(verdict);
  });

  it('a non-task is left to the signal machine', () => {
    const pulse = { value: 'pending', context: { signal_type: 'pulse', task_status: null } as unknown as SignalContext };
    expect(ackVerdict(pulse, ME, 'completed', NOW)).toBe('apply');
    expect(cancelVerdict(pulse)).toBe('apply');
  });
});
