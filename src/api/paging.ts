/** One paging rule everywhere: `{<resources>: [...], cursor, has_more}`, meta.cursor = data.cursor, null on the last page. */
import Type from 'typebox';
import { AppError } from '../errors.js';
import type { Reply } from '../http/server.js';
import type { Scanned } from '../store/scan.js';

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

export function pageReply<T>(name: string, s: Scanned<T>): Reply {
  const cursor = s.cursor === null ? null : encodeCursor(s.cursor);
  return { data: { [name]: s.items, cursor, has_more: cursor !== null }, meta: { cursor } };
}
