/**
 * The blob port: immutable content addressed by its SHA-256. `put` streams its input to a temporary object
 * while hashing it, then moves it to its hash name, so the same content twice is stored once and a reader
 * never sees a half-written object under a hash name.
 */
import type { Readable } from 'node:stream';

export interface Stored {
  sha256: string;
  size: number;
}

/** Inclusive byte range, as HTTP Range has it. */
export interface ByteRange {
  start: number;
  end: number;
}

/** A stored object as the sweep sees it: its hash and when an upload last wrote it (ms). */
export interface Listed {
  sha256: string;
  written_at: number;
}

export interface BlobStore {
  readonly kind: 'filesystem' | 's3';
  /**
   * Stores the stream; rejects with PAYLOAD_TOO_LARGE past `maxBytes` (nothing is kept then). The object's
   * write time is now even when the same content was stored before, so a sweep's grace runs from this upload.
   */
  put(content: Readable, maxBytes: number): Promise<Stored>;
  /** The object's bytes (or a range of them); undefined when no object has that hash. */
  get(sha256: string, range?: ByteRange): Promise<Readable | undefined>;
  has(sha256: string): Promise<boolean>;
  /** Objects in hash order after `after`, at most `limit` of them. */
  list(after: string | undefined, limit: number): Promise<Listed[]>;
  /** Removes the object unless an upload wrote it after `writtenBefore` (ms) meanwhile; answers whether it did. */
  remove(sha256: string, writtenBefore: number): Promise<boolean>;
  /** A URL the object store itself serves for `expiresS` seconds, or undefined when it has none (filesystem). */
  presign(sha256: string, expiresS: number, headers: { contentType: string; filename: string }): Promise<string | undefined>;
  close(): Promise<void>;
}

export const isSha256 = (s: string) => /^[0-9a-f]{64}$/.test(s);
