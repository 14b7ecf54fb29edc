import type { DeliveryState } from './signal.js';

/** What a caller is shown of a signal that decides whether it still needs the caller's attention. */
export interface WakeView {
  signal_type: string;
  delivery_state?: DeliveryState | string;
  task_status?: string | null;
  claimed_by?: string | null;
}

/**
 * Still worth waking `me` for (`svc wait`, `svc_wait`, the hooks' nudges): not acked or dead, and not a task
 * that closed or that someone else holds. A pure view of the signal machine's states, kept here so every
 * surface that wakes an agent judges alike.
 */
export const worthWaking = (s: WakeView, me: string): boolean =>
  s.delivery_state !== 'acked' && s.delivery_state !== 'dead_letter' && (s.signal_type !== 'task' || ((s.task_status ?? 'open') === 'open' && (!s.claimed_by || s.claimed_by === me)));
