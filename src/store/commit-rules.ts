/**
 * Ops a commit gains from what it writes: each rule looks at a commit's ops and answers what to add, in the
 * same atomic commit (the auth generation and its `auth.changed` entry, the `reach.changed` entry). One proxy
 * for all rules, so a store call pays for one wrapper however many rules there are.
 */
import type { Op, Store } from './port.js';

/** the ops to append to this commit; empty when the rule has nothing to say */
export type CommitRule = (ops: Op[]) => Op[];

export function withCommitRules(store: Store, rules: CommitRule[]): Store {
  const commit = (ops: Op[]) => {
    let extra: Op[] | undefined;
    for (const rule of rules) {
      const more = rule(ops);
      if (more.length) (extra ??= []).push(...more);
    }
    return store.commit(extra ? [...ops, ...extra] : ops);
  };
  return new Proxy(store, {
    get(t, p) {
      if (p === 'commit') return commit;
      const v = Reflect.get(t, p);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}
