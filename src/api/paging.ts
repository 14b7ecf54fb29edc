/** One paging rule everywhere (src/surface/paging.ts); REST also puts the cursor in meta.cursor. */
import type { Reply } from '../http/server.js';
import type { Scanned } from '../store/scan.js';
import { page } from '../surface/paging.js';

export { After, decodeCursor, DEFAULT_LIMIT, encodeCursor, Limit } from '../surface/paging.js';

export function pageReply<T>(name: string, s: Scanned<T>): Reply {
  const data = page(name, s);
  return { data, meta: { cursor: data.cursor } };
}
