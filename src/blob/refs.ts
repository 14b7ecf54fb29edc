/**
 * Which committed records name a blob: the index `blob:refs:<sha256>`, one member per record (its store
 * key), written in the same commit as the record and removed in the commit that deletes it. A blob whose
 * index is empty is named by no committed record: the sweep may collect it once its grace has passed.
 */
import type { Op } from '../store/port.js';

export const blobRefIndex = (sha256: string) => `blob:refs:${sha256}`;

/** The op naming (or, with `remove`, no longer naming) blob `sha256` from the record stored under `ref`. */
export const blobRefOp = (sha256: string, ref: string, remove?: boolean): Op => ({ op: 'index', index: blobRefIndex(sha256), member: ref, ...(remove ? { remove } : {}) });

/** Marks a store whose records from before the reference index have been indexed (`indexBlobRefsOnce`). */
export const BLOB_REFS_INDEXED = 'blob:refs-indexed-v1';
