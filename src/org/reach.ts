/**
 * An identity's reach (the roles it fills, the rings it belongs to) lives in two indexes per identity. Any
 * commit that changes one of them also appends a `reach.changed` entry naming those identities, so every
 * process's push reloads their reach in journal order instead of trusting a copy that may be a second old.
 */
import { eventOp, reachChangedEntry } from '../journal/journal.js';
import type { CommitRule } from '../store/commit-rules.js';
import { orgIndexes } from './model.js';

const ROLES_OF = orgIndexes.rolesOf('');
const RINGS_OF = orgIndexes.ringsOf('');

function reachOf(index: string): string | undefined {
  if (index.startsWith(ROLES_OF)) return index.slice(ROLES_OF.length);
  if (index.startsWith(RINGS_OF)) return index.slice(RINGS_OF.length);
  return undefined;
}

export const reachChangeRule: CommitRule = (ops) => {
  let ids: Set<string> | undefined;
  for (const o of ops) {
    const id = o.op === 'index' ? reachOf(o.index) : undefined;
    if (id !== undefined) (ids ??= new Set()).add(id);
  }
  return ids ? [eventOp(reachChangedEntry([...ids]))] : [];
};
