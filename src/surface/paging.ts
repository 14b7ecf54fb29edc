/** One paging rule for every transport: `{<resources>: [...], cursor, has_more}`, cursor null on the last page. */
import Type from 'typebox';
import { AppError } from '../errors.js';
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

export function page<T>(name: string, s: Scanned<T>): { cursor: string | null; has_more: boolean } & Record<string, unknown> {
  const cursor = s.cursor === null ? null : encodeCursor(s.cursor);
  return { [name]: s.items, cursor, has_more: cursor !== null };
}
