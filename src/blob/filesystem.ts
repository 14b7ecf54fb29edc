/**
 * Filesystem blobs under `<DATA_DIR>/blobs`: `objects/ab/<sha256>` (first two hex digits fan out the
 * directory) and `tmp/<id>` while an upload is in flight. The temporary file is fsynced before it is renamed
 * to its hash name, and a rename within one filesystem is atomic.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { now } from '../clock.js';
import { newId } from '../ids.js';
import { outOfRoom } from '../store/full.js';
import { Meter } from './meter.js';
import { isSha256, type BlobStore, type ByteRange, type Listed, type Stored } from './port.js';

const STALE_TMP_MS = 3600_000;

export class FilesystemBlobs implements BlobStore {
  readonly kind = 'filesystem' as const;
  private tmp: string;
  private objects: string;

  private constructor(private root: string) {
    this.tmp = join(root, 'tmp');
    this.objects = join(root, 'objects');
  }

  /** Creates nothing until the first upload; removes uploads a crash left behind (older than an hour). */
  static async open(root: string): Promise<FilesystemBlobs> {
    const b = new FilesystemBlobs(root);
    const entries = await readdir(b.tmp).catch(() => [] as string[]);
    const stale = now() - STALE_TMP_MS;
    for (const name of entries) {
      const p = join(b.tmp, name);
      const st = await stat(p).catch(() => undefined);
      if (st && st.mtimeMs < stale) await rm(p, { force: true });
    }
    return b;
  }

  private dirs: Promise<unknown> | undefined;

  private path(sha256: string): string {
    return join(this.objects, sha256.slice(0, 2), sha256);
  }

  async put(content: Readable, maxBytes: number): Promise<Stored> {
    await (this.dirs ??= mkdir(this.tmp, { recursive: true }));
    const tmp = join(this.tmp, newId());
    const meter = new Meter(maxBytes);
    try {
      await pipeline(content, meter, createWriteStream(tmp, { flags: 'wx' }));
      const fh = await open(tmp, 'r+');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
      const sha256 = meter.tally.digest();
      await mkdir(join(this.objects, sha256.slice(0, 2)), { recursive: true });
      await rename(tmp, this.path(sha256));
      return { sha256, size: meter.tally.size };
    } catch (e) {
      throw await outOfRoom(e, this.root, 'blobs');
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async get(sha256: string, range?: ByteRange): Promise<Readable | undefined> {
    if (!(await this.has(sha256))) return undefined;
    return createReadStream(this.path(sha256), range ? { start: range.start, end: range.end } : {});
  }

  async has(sha256: string): Promise<boolean> {
    if (!isSha256(sha256)) return false;
    return stat(this.path(sha256)).then(
      () => true,
      () => false,
    );
  }

  async list(after: string | undefined, limit: number): Promise<Listed[]> {
    const out: Listed[] = [];
    const fans = (await readdir(this.objects).catch(() => [] as string[])).filter((d) => after === undefined || d >= after.slice(0, 2)).sort();
    for (const fan of fans) {
      const names = (await readdir(join(this.objects, fan)).catch(() => [] as string[])).filter((n) => isSha256(n) && (after === undefined || n > after)).sort();
      for (const sha256 of names) {
        const st = await stat(this.path(sha256)).catch(() => undefined);
        if (st) out.push({ sha256, written_at: st.mtimeMs });
        if (out.length >= limit) return out;
      }
    }
    return out;
  }

  /**
   * Moves the object aside (an atomic rename) and looks at what it moved: an upload that renamed the same
   * content into place after the sweep read it wrote it just now, and is put back.
   */
  async remove(sha256: string, writtenBefore: number): Promise<boolean> {
    if (!isSha256(sha256)) return false;
    await (this.dirs ??= mkdir(this.tmp, { recursive: true }));
    const aside = join(this.tmp, `swept-${newId()}`);
    if (!(await rename(this.path(sha256), aside).then(() => true, () => false))) return false;
    const st = await stat(aside);
    if (st.mtimeMs > writtenBefore) {
      await rename(aside, this.path(sha256));
      return false;
    }
    await rm(aside, { force: true });
    return true;
  }

  async presign(): Promise<undefined> {
    return undefined;
  }

  async close(): Promise<void> {}
}
