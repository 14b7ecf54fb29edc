/**
 * STORE_FULL: the backend has no room for a write (docs/reliability.md, Out of room). Reads go on; nothing of
 * the refused write is kept; writes succeed again by themselves once room returns.
 */
import { statfs } from 'node:fs/promises';
import { AppError } from '../errors.js';

export type Holder = 'embedded' | 'redis' | 'blobs';
export const storeFull = (backend: Holder) => new AppError('STORE_FULL', undefined, { backend });

const MDB_MAP_FULL = -30792;
const ENOSPC = 28;
const EIO = 5;
/** an EIO or an unexplained failed commit counts as a full disk only while the filesystem is this close to full */
const NEARLY_FULL_SHARE = 0.05;
const NEARLY_FULL_CAP = 64 * 1024 * 1024;

const codeOf = (e: unknown): unknown => (e as { code?: unknown } | null)?.code;

async function nearlyFull(dir: string): Promise<boolean> {
  const s = await statfs(dir).catch(() => undefined);
  if (!s) return false;
  return s.bavail * s.bsize < Math.min(NEARLY_FULL_CAP, s.blocks * s.bsize * NEARLY_FULL_SHARE);
}

/**
 * A write error as STORE_FULL when it means "no room" in `dir`'s filesystem: ENOSPC, EDQUOT, LMDB's map full, or
 * an EIO or a failed commit of unknown cause on a nearly full filesystem; any other error as it is.
 */
export async function outOfRoom(e: unknown, dir: string, holder: Holder): Promise<unknown> {
  const code = codeOf(e);
  const message = e instanceof Error ? e.message : '';
  if (code === ENOSPC || code === 'ENOSPC' || code === 'EDQUOT' || code === MDB_MAP_FULL || /No space left on device|MDB_MAP_FULL/.test(message)) return storeFull(holder);
  // LMDB reports a short page write on a full disk as EIO, and lmdb-js a failed batch as "Commit failed" whose cause
  // may not be learnt: on a nearly full filesystem either is the disk being full
  if ((code === EIO || code === 'EIO' || /Input\/output error|Commit failed/.test(message)) && (await nearlyFull(dir))) return storeFull(holder);
  return e;
}
