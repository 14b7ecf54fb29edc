/**
 * The blob sweep: removes objects no committed record names (`refs.ts`) once they are older than the grace.
 * An upload stores its bytes before the commit that names them; its commit lands within the grace, and a
 * store of the same content renews the object's write time (BlobStore.put), so the sweep never removes bytes
 * an upload's commit may still name. Periodic, on every instance (removing twice is harmless); its state is
 * the blob store and the store, so a restart simply sweeps again (docs/storage.md, Blob sweep).
 */
import { now } from '../clock.js';
import type { Logger } from '../log.js';
import type { Store } from '../store/port.js';
import type { BlobStore } from './port.js';
import { BLOB_REFS_INDEXED, blobRefIndex } from './refs.js';

const PAGE = 500;

export interface SweepConfig {
  /** an object younger than this is never removed */
  graceMs: number;
  /** time between sweeps; 0: no periodic sweep */
  everyMs: number;
}

export class BlobSweep {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private store: Store,
    private blobs: BlobStore,
    private config: SweepConfig,
    private log: Logger,
  ) {}

  /** One pass over every object; answers how many it removed. Refuses to run before older records are indexed. */
  async sweep(): Promise<number> {
    if (!(await this.store.get(BLOB_REFS_INDEXED))) return 0;
    const writtenBefore = now() - this.config.graceMs;
    let removed = 0;
    for (let after: string | undefined, page = await this.blobs.list(after, PAGE); page.length; page = await this.blobs.list(after, PAGE)) {
      for (const b of page) {
        if (this.stopped) return removed;
        if (b.written_at > writtenBefore || (await this.store.count(blobRefIndex(b.sha256))) > 0) continue;
        if (await this.blobs.remove(b.sha256, writtenBefore)) removed++;
      }
      after = page[page.length - 1].sha256;
    }
    return removed;
  }

  start(): void {
    if (!this.config.everyMs) return;
    const tick = () => {
      this.running = this.sweep()
        .then((removed) => removed && this.log.info({ removed }, 'unreferenced blobs removed'))
        .catch((err: unknown) => this.log.error({ err }, 'blob sweep failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.config.everyMs);
        });
    };
    this.timer = setTimeout(tick, this.config.everyMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
