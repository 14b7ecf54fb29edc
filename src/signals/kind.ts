/** The signal actor kind: its machine, the indexes a signal record implies, and its durable timers. */
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const SIGNAL = 'signal';
export const signalIndexes = {
  all: 'signals',
  byState: (state: string) => `signals:state:${state}`,
};

export const signalKind: ActorKind<SignalContext> = {
  name: SIGNAL,
  machine: signalMachine,
  notFound: 'SIGNAL_NOT_FOUND',
  invalid: 'SIGNAL_DELIVERY_INVALID_TRANSITION',
  indexes: (r) => [
    [signalIndexes.all, r.context.id],
    [signalIndexes.byState(r.value), r.context.id],
  ],
  timers: (r) => signalTimers(r.value, r.context),
};

/** The Signal as the interface shows it: the machine's context plus its state as delivery_state. */
export function signalView(r: ActorRecord<SignalContext>) {
  const { max_attempts: _max, ...fields } = r.context;
  return { ...fields, delivery_state: r.value };
}
export type Signal = ReturnType<typeof signalView>;
