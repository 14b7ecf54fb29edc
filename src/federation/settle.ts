/**
 * How a peer's ack or cancel meets the task as it stands (docs/federation.md, Repeats and conflicts): a call
 * whose outcome already holds is a repeat (answered with the current state, nothing written), a call asking
 * for another outcome than the one the task reached is a conflict (FED_STATE_CONFLICT), anything else is
 * applied through the signal machine. Judged on the state alone, so a retry needs no call id.
 */
import type { SignalContext } from '../../actors/signal.js';
import type { ActorRecord } from '../runtime/runtime.js';

export type Verdict = 'apply' | 'repeat' | 'conflict';

/** Someone other than `who` holds a lease that has not run out. */
const heldByOther = (r: ActorRecord<SignalContext>, who: string, now: number) =>
  r.value === 'leased' && r.context.claimed_by !== who && (r.context.claim_expires_at === null || Date.parse(r.context.claim_expires_at) > now);

/** A peer agent's ack: `completed` is a repeat once it completed the task, a conflict once the task ended otherwise or another holds it. */
export function ackVerdict(r: ActorRecord<SignalContext>, who: string, outcome: 'completed' | 'failed', now: number): Verdict {
  const c = r.context;
  if (c.signal_type !== 'task') return 'apply';
  if (outcome === 'failed') {
    // giving a task up: done once the agent no longer holds the open task
    if (c.task_status !== 'open') return 'conflict';
    return r.value === 'leased' && c.claimed_by === who ? 'apply' : 'repeat';
  }
  if (c.task_status === 'completed') return c.claimed_by === who ? 'repeat' : 'conflict';
  if (c.task_status !== 'open' || heldByOther(r, who, now)) return 'conflict';
  return 'apply';
}

/** A cancel: a repeat once cancelled, a conflict once completed. */
export function cancelVerdict(r: ActorRecord<SignalContext>): Verdict {
  if (r.context.signal_type !== 'task') return 'apply';
  if (r.context.task_status === 'cancelled') return 'repeat';
  return r.context.task_status === 'completed' ? 'conflict' : 'apply';
}
