/** Shared by the workspace and artifact routes: downloads as streamed replies, upload fields as values. */
import Type from 'typebox';
import type { Content } from '../blob/content.js';
import { AppError, type ErrorCode } from '../errors.js';
import type { Reply } from '../http/server.js';
import { boundDepth, boundKey, compile, Key, validate } from '../validation.js';

export function contentReply(c: Content, disposition: 'inline' | 'attachment' = 'inline'): Reply {
  const headers: Record<string, string> = {
    'content-type': c.content_type,
    etag: `"${c.etag}"`,
    'accept-ranges': 'bytes',
    'content-disposition': `${disposition}; filename="${c.filename.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(c.filename)}`,
  };
  if (c.range) headers['content-range'] = `bytes ${c.range.start}-${c.range.end}/${c.total}`;
  return { status: c.range ? 206 : 200, data: null, headers, raw: { stream: c.stream, size: c.size } };
}

/** `If-Match: "a", b` as the list of revision ids it names (quotes and weak prefixes dropped). */
export function ifMatch(header: string | undefined): string[] | undefined {
  if (header === undefined) return undefined;
  return header.split(',').map((s) => s.trim().replace(/^W\//, '').replace(/^"(.*)"$/, '$1')).filter(Boolean);
}

const UploadFields = compile(
  Type.Object({
    name: Type.Optional(Key('name')),
    parent_id: Type.Optional(Type.String({ minLength: 1 })),
    tags: Type.Optional(Type.String()),
    metadata: Type.Optional(Type.String()),
    visibility: Type.Optional(Type.Union([Type.Literal('org'), Type.Literal('private')])),
  }),
);

export interface Fields {
  name?: string;
  parent_id?: string;
  tags?: string[];
  metadata?: Record<string, unknown>;
  visibility?: 'org' | 'private';
}

/** Upload fields arrive as text: tags as a JSON array or a comma list, metadata as a JSON object. */
export function uploadFields(raw: Record<string, string>, invalid: ErrorCode): Fields {
  const f = validate(UploadFields, raw, invalid);
  return { ...f, tags: f.tags === undefined ? undefined : tagsOf(f.tags, invalid), metadata: f.metadata === undefined ? undefined : objectOf(f.metadata, invalid) };
}

/** Each tag is a key (an artifact's tag index): bounded here, before a byte of the file is stored. */
function tagsOf(s: string, invalid: ErrorCode): string[] {
  const tags = s.trim().startsWith('[') ? tagList(s, invalid) : s.split(',').map((t) => t.trim()).filter(Boolean);
  if (tags.length > MAX_TAGS) throw new AppError(invalid, `tags holds more than ${MAX_TAGS} items`, { field: 'tags', reason: 'maxItems', limit: MAX_TAGS });
  return tags.map((t, i) => boundKey(t, `tags.${i}`, 'tag', invalid));
}

const MAX_TAGS = 100;

function tagList(s: string, invalid: ErrorCode): string[] {
  const v = parse(s, 'tags', invalid);
  if (!Array.isArray(v) || !v.every((t) => typeof t === 'string')) throw new AppError(invalid, 'tags must be an array of strings', { field: 'tags' });
  return v;
}

function objectOf(s: string, invalid: ErrorCode): Record<string, unknown> {
  const v = parse(s, 'metadata', invalid);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new AppError(invalid, 'metadata must be a JSON object', { field: 'metadata' });
  boundDepth(v, 'metadata');
  return v as Record<string, unknown>;
}

function parse(s: string, field: string, invalid: ErrorCode): unknown {
  try {
    return JSON.parse(s);
  } catch {
    throw new AppError(invalid, `${field} is not valid JSON`, { field });
  }
}
