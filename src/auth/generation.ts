/**
 * The auth generation: one record whose version moves in the same commit as any write to an API key, an
 * identity or a membership. Authentication reads this one record and reuses what it read of the key,
 * identity and membership while the version is unchanged, so a revocation, deletion or suspension takes
 * effect on the very next request, on every instance, without reading those three records each time.
 */
import type { Op, Store } from '../store/port.js';

export const AUTH_GENERATION = 'auth:generation';
const AUTH_PREFIXES = ['apikey:', 'identity:', 'actor:membership:', 'membership:'];

const touchesAuth = (o: Op) => (o.op === 'put' || o.op === 'del') && AUTH_PREFIXES.some((p) => o.key.startsWith(p));

/** The store whose commits bump the auth generation whenever they write an auth record. */
export function withAuthGeneration(store: Store): Store {
  const commit = (ops: Op[]) => store.commit(ops.some(touchesAuth) ? [...ops, { op: 'put', key: AUTH_GENERATION, value: 1 }] : ops);
  return new Proxy(store, {
    get(t, p) {
      if (p === 'commit') return commit;
      const v = Reflect.get(t, p);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

export async function authGeneration(store: Store): Promise<number> {
  return (await store.get(AUTH_GENERATION))?.version ?? 0;
}
