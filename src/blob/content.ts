/** Stored content as a download: the whole object or one byte range of it, with what HTTP needs to describe it. */
import { Readable } from 'node:stream';
import { AppError } from '../errors.js';
import type { BlobStore, ByteRange } from './port.js';

export interface Content {
  stream: Readable;
  /** bytes in this answer */
  size: number;
  total: number;
  /** set when a Range was honoured */
  range?: ByteRange;
  content_type: string;
  etag: string;
  filename: string;
}

export interface Described {
  sha256: string;
  size: number;
  content_type: string;
  filename: string;
  etag: string;
}

/**
 * A single `bytes=` range against `total`, or undefined to answer the whole object (no header, several
 * ranges, or another unit: a server may ignore Range). Unsatisfiable: RANGE_NOT_SATISFIABLE.
 */
export function parseRange(header: string | undefined, total: number): ByteRange | undefined {
  const m = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw unsatisfiable(total);
    start = Math.max(0, total - suffix);
    end = total - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? total - 1 : Math.min(Number(m[2]), total - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined;
  }
  if (start >= total) throw unsatisfiable(total);
  return { start, end };
}

const unsatisfiable = (total: number) => new AppError('RANGE_NOT_SATISFIABLE', `Range outside 0-${Math.max(0, total - 1)}`, { size: total });

/** What a download request asks: `Range`, and `If-Range`, which keeps the Range only while it names the current ETag. */
export interface RangeAsk {
  range?: string;
  'if-range'?: string;
}

/**
 * The Range header to honour (RFC 9110 §13.1.5): with `If-Range`, only when it is the content's current entity
 * tag, compared strongly (a weak tag or a date never matches: no Last-Modified is sent), so a resumed download
 * of content that changed gets the whole new content (200), never bytes of two versions.
 */
export function rangeToHonour(ask: RangeAsk | undefined, etag: string): string | undefined {
  const ifRange = ask?.['if-range']?.trim();
  return ifRange === undefined || ifRange === `"${etag}"` ? ask?.range : undefined;
}

export async function openContent(blobs: BlobStore, d: Described, ask: RangeAsk | undefined): Promise<Content> {
  const range = parseRange(rangeToHonour(ask, d.etag), d.size);
  const stream = d.size === 0 ? undefined : await blobs.get(d.sha256, range);
  if (d.size > 0 && !stream) throw new AppError('INTERNAL_SERVER_ERROR', 'Stored content is missing', { sha256: d.sha256 });
  return {
    stream: stream ?? Readable.from([]),
    size: range ? range.end - range.start + 1 : d.size,
    total: d.size,
    range,
    content_type: d.content_type,
    etag: d.etag,
    filename: d.filename,
  };
}
