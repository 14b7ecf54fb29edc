/** One paging rule everywhere: `{<resources>: [...], cursor, has_more}`, meta.cursor = data.cursor, null on the last page. */
import Type from 'typebox';
import { AppError } from '../errors.js';
import type { Reply } from '../http/server.js';

export interface Page<T> {
  items: T[];
  cursor: string | null;
  has_more: boolean;
}

export const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 100 }));
export const After = Type.Optional(Type.String({ minLength: 1 }));
export const DEFAULT_LIMIT = 20;

export const encodeCursor = (member: string) => Buffer.from(member, 'utf8').toString('base64url');
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  const s = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!s || encodeCursor(s) !== cursor) throw new AppError('VALIDATION_INVALID_TYPE', 'after is not a cursor this service issued', { field: 'after', reason: 'cursor' });
  return s;
}

export function page<T>(items: T[], hasMore: boolean, memberOf: (t: T) => string): Page<T> {
  return { items, has_more: hasMore, cursor: hasMore && items.length ? encodeCursor(memberOf(items[items.length - 1])) : null };
}

export function pageReply<T>(name: string, p: Page<T>): Reply {
  return { data: { [name]: p.items, cursor: p.cursor, has_more: p.has_more }, meta: { cursor: p.cursor } };
}
