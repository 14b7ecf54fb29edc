/**
 * Fair concurrency (docs/signals.md, Fair concurrency). Every concurrency_key has one record listing the tasks
 * of that key leased now. A move into `leased` adds its task and a move out of it (ack, release, expiry,
 * cancel, dead letter) removes it, in the move's own commit and checked against the record's version, so two
 * instances claiming tasks of one key at once cannot both take its last slot: the loser re-plans and is refused.
 */
import type { SignalContext } from '../../actors/signal.js';
import { AppError } from '../errors.js';
import type { ActorRecord, Runtime } from '../runtime/runtime.js';
import type { Op, Store } from '../store/port.js';

export const concurrencyRecordKey = (key: string) => `task-concurrency:${key}`;

export interface ConcurrencyRecord {
  concurrency_key: string;
  /** the ids of the tasks of this key leased now */
  leased: string[];
}

const holdsSlot = (r: ActorRecord<SignalContext> | undefined) => r?.value === 'leased';
export const limitOf = (c: Pick<SignalContext, 'concurrency_limit'>) => c.concurrency_limit ?? 1;

/**
 * The key's leased tasks after `id` moved from `prev` to `rec`, or undefined when the move does not change them.
 * A move into `leased` with `limit` (the claimed task's own) others already leased is refused.
 */
export function nextLeased(leased: string[], id: string, rec: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): string[] | undefined {
  const holds = holdsSlot(rec);
  if (holds === holdsSlot(prev)) return undefined;
  const others = leased.filter((x) => x !== id);
  if (!holds) return others;
  const limit = limitOf(rec.context);
  if (others.length >= limit) throw atLimitError(rec.context.concurrency_key!, limit, others);
  return [...others, id];
}

export const atLimitError = (key: string, limit: number, leased: string[]) =>
  new AppError('SIGNAL_CLAIM_INVALID_STATUS', `concurrency_key "${key}" has ${leased.length} of ${limit} tasks leased`, { reason: 'concurrency_limit', concurrency_key: key, concurrency_limit: limit, leased });

/** The write of the key's record a signal's move implies, for the move's commit (`signalKind.alongside`). */
export async function concurrencyOps(rt: Runtime, id: string, rec: ActorRecord<SignalContext>, prev: ActorRecord<SignalContext> | undefined): Promise<Op[]> {
  const key = rec.context.concurrency_key;
  if (!key || holdsSlot(rec) === holdsSlot(prev)) return [];
  const k = concurrencyRecordKey(key);
  const stored = await rt.store.get<ConcurrencyRecord>(k);
  const leased = nextLeased(stored?.value.leased ?? [], id, rec, prev)!;
  const expect = stored?.version ?? 0;
  if (leased.length) return [{ op: 'put', key: k, value: { concurrency_key: key, leased } satisfies ConcurrencyRecord, expect }];
  return stored ? [{ op: 'del', key: k, expect }] : [];
}

/**
 * Whether a task's key has no slot free now, for walks that pass such tasks over (workflow.next, the ready
 * list); `seen` keeps one read per key per walk.
 */
export async function keyAtLimit(store: Store, c: SignalContext, seen: Map<string, string[]>): Promise<boolean> {
  const key = c.concurrency_key;
  if (!key) return false;
  let leased = seen.get(key);
  if (!leased) {
    leased = (await store.get<ConcurrencyRecord>(concurrencyRecordKey(key)))?.value.leased ?? [];
    seen.set(key, leased);
  }
  return leased.filter((x) => x !== c.id).length >= limitOf(c);
}
