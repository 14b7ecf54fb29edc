/**
 * The open-task indexes (`signalIndexes.openTasks`, and per task type `openTasksOfType`, ordered by priority)
 * are derived from each signal's state on every commit. A data dir from before them (or from before priority,
 * whose indexes had other names and members) holds open tasks in none: they are indexed once at startup, each
 * in a commit checked against the record's version (so a task claimed meanwhile is never listed as open) that
 * also removes it from the older indexes.
 */
import { actorKey, type ActorRecord } from '../runtime/runtime.js';
import type { Store } from '../store/port.js';
import { forEachPage } from '../store/scan.js';
import type { SignalContext } from '../../actors/signal.js';
import { idOfStateMember, inboxMember, isOpenTask, openTaskIndexes, readyMember, SIGNAL, signalIndexes } from './kind.js';

export const OPEN_TASKS_DONE = 'migration:ready-tasks-v3';
const DONE = OPEN_TASKS_DONE;
const TRIES = 3;

export async function indexOpenTasksOnce(store: Store): Promise<number> {
  if (await store.get(DONE)) return 0;
  let indexed = 0;
  for (const state of ['pending', 'delivered'])
    await forEachPage(store, signalIndexes.byState(state), async (members) => {
      for (const m of members) if (await indexOne(store, idOfStateMember(m))) indexed++;
    });
  await store.commit([{ op: 'put', key: DONE, value: { at: new Date().toISOString(), indexed } }]);
  return indexed;
}

async function indexOne(store: Store, id: string): Promise<boolean> {
  const key = actorKey(SIGNAL, id);
  for (let i = 0; i < TRIES; i++) {
    const rec = await store.get<ActorRecord<SignalContext>>(key);
    if (!rec || !isOpenTask(rec.value.value, rec.value.context)) return false;
    const c = rec.value.context;
    const legacy = openTaskIndexes(c, signalIndexes.legacyOpenTasks, signalIndexes.legacyOpenTasksOfType).map((index) => ({ op: 'index' as const, index, member: inboxMember(c), remove: true }));
    const ops = [...openTaskIndexes(c).map((index) => ({ op: 'index' as const, index, member: readyMember(c) })), ...legacy];
    if ((await store.commit([{ op: 'check', key, expect: rec.version }, ...ops])).ok) return true;
  }
  return false;
}
