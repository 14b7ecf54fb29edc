/**
 * The auth generation: one record whose version moves in the same commit as any write to an API key, an
 * identity or a membership. Authentication reads this one record and reuses what it read of the key,
 * identity and membership while the version is unchanged, so a revocation, deletion or suspension takes
 * effect on the very next request, on every instance, without reading those three records each time.
 */
import type { Op, Store } from '../store/port.js';
import type { CommitRule } from '../store/commit-rules.js';
import { authChangedEntry, JOURNAL_LOG } from '../journal/journal.js';

export const AUTH_GENERATION = 'auth:generation';
const AUTH_PREFIXES = ['apikey:', 'identity:', 'actor:membership:', 'membership:'];

const touchesAuth = (o: Op) => (o.op === 'put' || o.op === 'del') && AUTH_PREFIXES.some((p) => o.key.startsWith(p));

/** The identity an auth write concerns (a key's owner, the identity, the member); undefined when the op does not say. */
function identityOf(o: Op): string | undefined {
  if (o.op !== 'put' && o.op !== 'del') return undefined;
  if (o.key.startsWith('apikey:')) return o.op === 'put' ? (o.value as { owner?: string }).owner : undefined;
  const prefix = AUTH_PREFIXES.find((p) => o.key.startsWith(p));
  return prefix ? o.key.slice(prefix.length) : undefined;
}

/** The journal entry that has every open connection of the written identities re-check its key (docs/realtime.md). */
function authChangedOp(ops: Op[]): Op {
  const ids = ops.filter(touchesAuth).map(identityOf);
  const known = ids.every((id): id is string => id !== undefined);
  return { op: 'append', log: JOURNAL_LOG, entry: authChangedEntry(known ? [...new Set(ids)] : null) };
}

/**
 * The rule that bumps the auth generation whenever a commit writes an auth record, and appends the
 * auth-changed entry after the commit's own ops (after the entries that describe the change, such as
 * `membership.changed`), so that every instance's push re-checks before anything committed later.
 */
export const authGenerationRule: CommitRule = (ops) => (ops.some(touchesAuth) ? [{ op: 'put', key: AUTH_GENERATION, value: 1 }, authChangedOp(ops)] : []);

export async function authGeneration(store: Store): Promise<number> {
  return (await store.get(AUTH_GENERATION))?.version ?? 0;
}
