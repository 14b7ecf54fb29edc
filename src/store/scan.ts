/**
 * Keyset scans, most recent (highest member) first, over one index or the merge of several: members are
 * de-duplicated, records loaded in batches and filtered. The cursor is the last member handed out, so a
 * scan never repeats an item and never skips one that existed when paging began.
 */
import type { Store } from './port.js';

const BATCH = 100;
/** members examined per request before answering a short page with has_more */
const SCAN_CAP = 5000;

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
    if (scanned >= SCAN_CAP) return { items: out.map((x) => x.item), cursor };
  }
}
