/** GET /memory/stats: counts per namespace (only those the caller may read, all for admins), index, embedding and jobs. */
import type { Principal } from '../identity/model.js';
import type { Store } from '../store/port.js';
import type { Jobs } from './jobs.js';
import { memoryIndexes } from './model.js';
import type { Memories } from './service.js';

export class MemoryStats {
  constructor(
    private store: Store,
    private memories: Memories,
    private jobs: Jobs,
  ) {}

  async stats(p: Principal) {
    const [counts, places, unindexed, reembed, size, jobs] = await Promise.all([
      this.memories.namespaceCounts(),
      this.memories.acl.places(p),
      this.store.count(memoryIndexes.unindexed),
      this.memories.reembedBacklog(),
      this.memories.index.size(),
      this.jobs.countsByState(),
    ]);
    const visible = [];
    for (const c of counts) if (c.count > 0 && (p.identity.is_admin || (await this.memories.acl.canRead(p, c.namespace, places)))) visible.push(c);
    const e = this.memories.embedder;
    return {
      namespaces: visible,
      total: visible.reduce((s, c) => s + c.count, 0),
      embedding: { provider: e.provider, model: e.model, dim: e.dim, backlog: { reembed, unindexed } },
      index: { ...this.memories.index.info, size },
      jobs,
    };
  }
}
