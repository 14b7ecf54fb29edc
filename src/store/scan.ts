/**
 * Keyset scans, most recent (highest member) first, over one index or the merge of several: members are
 * de-duplicated, records loaded in batches and filtered. The cursor is the last member handed out, so a
 * scan never repeats an item and never skips one that existed when paging began. Unpaged collections
 * (roles, rings, fills, a thread, API keys, the places of an identity) are read to their end in pages,
 * never cut at a fixed count.
 */
import type { Store } from './port.js';

const BATCH = 100;

export const scanLimits = {
  /** members examined per filtered-list request before answering a short page with has_more */
  scanCap: 5000,
  /** members per range read when an index is read to its end; tests lower it to walk many pages */
  pageSize: 1000,
};

/** Walks an index in ascending order, one page of members at a time, to its end. */
export async function forEachPage(store: Store, index: string, fn: (members: string[]) => Promise<void> | void): Promise<void> {
  let after: string | undefined;
  for (;;) {
    const size = scanLimits.pageSize;
    const page = await store.range(index, { gt: after, limit: size });
    if (page.length) await fn(page);
    if (page.length < size) return;
    after = page[page.length - 1];
  }
}

/** Every member of an index, ascending. */
export async function readAll(store: Store, index: string): Promise<string[]> {
  const out: string[] = [];
  await forEachPage(store, index, (members) => {
    out.push(...members);
  });
  return out;
}

/** The stored values of every member of an index (members whose record is gone are left out), ascending. */
export async function loadAll<T>(store: Store, index: string, key: (member: string) => string): Promise<T[]> {
  const out: T[] = [];
  await forEachPage(store, index, async (members) => {
    for (const r of await store.getMany<T>(members.map(key))) if (r) out.push(r.value);
  });
  return out;
}

export interface ScanOptions<T> {
  /** exclusive upper bound (the previous page's cursor) */
  before?: string;
  /** exclusive lower bound */
  after?: string;
  limit: number;
  load(members: string[]): Promise<(T | undefined)[]>;
  keep(item: T): boolean;
}

export interface Scanned<T> {
  items: T[];
  /** member to continue below, or null at the end */
  cursor: string | null;
}

export async function scanDesc<T>(store: Store, indexes: string[], o: ScanOptions<T>): Promise<Scanned<T>> {
  const out: { member: string; item: T }[] = [];
  let cursor = o.before;
  let scanned = 0;
  const n = Math.max(BATCH, o.limit + 1);
  for (;;) {
    const lists = await Promise.all(indexes.map((index) => store.range(index, { lt: cursor, gt: o.after, reverse: true, limit: n })));
    const union = [...new Set(lists.flat())].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
    const merged = union.slice(0, n);
    if (!merged.length) return { items: out.map((x) => x.item), cursor: null };
    const items = await o.load(merged);
    for (let i = 0; i < merged.length; i++) {
      const item = items[i];
      if (item !== undefined && o.keep(item)) {
        out.push({ member: merged[i], item });
        if (out.length > o.limit) {
          const page = out.slice(0, o.limit);
          return { items: page.map((x) => x.item), cursor: page[page.length - 1].member };
        }
      }
    }
    scanned += merged.length;
    const exhausted = union.length <= n && lists.every((l) => l.length < n);
    if (exhausted) return { items: out.map((x) => x.item), cursor: null };
    cursor = merged[merged.length - 1];
    if (scanned >= scanLimits.scanCap) return { items: out.map((x) => x.item), cursor };
  }
}
