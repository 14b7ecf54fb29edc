/**
 * Pure machine stepping for unit tests, mirroring how the runtime hosts a machine (src/runtime/runtime.ts):
 * resolve the persisted {value, context}, run `transition()`, treat a `refuse` action as a refusal with its
 * `params.code`, and treat a result whose value and context are identical (===) to the input as "no transition".
 */
import { transition, type AnyStateMachine } from 'xstate';
import { signalMachine, type SignalContext, type SignalEvent } from '../../actors/signal.js';

export interface StepResult<C> {
  value: string;
  context: C;
  /** the refusal code, when the machine emitted a `refuse` action */
  refused: string | undefined;
  /** the refusal's details, when it carries any */
  details?: Record<string, unknown>;
  /** true when the machine took no transition (value and context are the input's, by identity) */
  unchanged: boolean;
  /** the input context object handed to the machine, to check it was not mutated */
  input: C;
}

export function runMachine<C>(machine: AnyStateMachine, value: string, context: C, event: { type: string } & Record<string, unknown>): StepResult<C> {
  const snap = machine.resolveState({ value, context: context as any });
  const [next, actions] = transition(machine, snap, event as any);
  const refusal = (actions as { type: string; params?: { code?: string; details?: Record<string, unknown> } }[]).find((a) => a.type === 'refuse');
  return {
    value: next.value as string,
    context: next.context as C,
    refused: refusal?.params?.code,
    details: refusal?.params?.details,
    unchanged: next.value === snap.value && next.context === snap.context,
    input: snap.context as C,
  };
}

/** 2030-01-01T00:00:00.000Z: a fixed clock for the tests. */
export const T0 = Date.UTC(2030, 0, 1);
export const iso = (ms: number) => new Date(ms).toISOString();

/** A signal context as `Signals.emit` builds it (src/signals/service.ts), with overrides. */
export function signalContext(overrides: Partial<SignalContext> = {}): SignalContext {
  const signal_type = overrides.signal_type ?? 'task';
  const t = iso(T0);
  return {
    id: '01JTESTSIGNAL0000000000000',
    signal_type,
    base_type: signal_type,
    content: 'do the thing',
    urgency: 0.5,
    from_role: null,
    from_identity: 'id-emitter',
    to_role: null,
    to_identity: null,
    to_ring: null,
    parent_id: null,
    thread_id: '01JTESTSIGNAL0000000000000',
    sequence: 0,
    to_role_id: null,
    to_ring_id: null,
    tags: [],
    target_capabilities: [],
    routing_policy: null,
    metadata: {},
    payload: {},
    resources: [],
    task_status: signal_type === 'task' ? 'open' : null,
    claimed_by: null,
    claimed_at: null,
    claim_expires_at: null,
    protocol_version: 'svc/1.0',
    delivery_count: 0,
    max_attempts: 3,
    source_org: null,
    federation: null,
    created_at: t,
    updated_at: t,
    ...overrides,
  };
}

/** One event through the signal machine from `value` with a default emitted context plus `overrides`. */
export function step(value: string, overrides: Partial<SignalContext>, event: SignalEvent): StepResult<SignalContext> {
  return runMachine(signalMachine, value, signalContext(overrides), event);
}

/** Continues from a previous result (value and context carried over). */
export function next(prev: { value: string; context: SignalContext }, event: SignalEvent): StepResult<SignalContext> {
  return runMachine(signalMachine, prev.value, prev.context, event);
}
