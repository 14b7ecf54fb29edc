/**
 * GET /memory/stats: counts per namespace, index, embedding and jobs. A member sees the namespaces it may
 * read (its own places and the shares made to them, so the work follows its grants, not the org's data);
 * an admin pages through every namespace. Counts are the per-namespace records kept on commit, and the
 * admin's `total` is the live index's own count.
 */
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

  async stats(p: Principal, after: string | undefined, limit: number) {
    const [page, unindexed, reembed, size, jobs] = await Promise.all([
      p.identity.is_admin ? this.everyNamespace(after, limit) : this.readable(p),
      this.store.count(memoryIndexes.unindexed),
      this.memories.reembedBacklog(),
      this.memories.index.size(),
      this.jobs.countsByState(),
    ]);
    const e = this.memories.embedder;
    return {
      namespaces: page.namespaces,
      total: page.total,
      embedding: { provider: e.provider, model: e.model, dim: e.dim, backlog: { reembed, unindexed } },
      index: { ...this.memories.index.info, size },
      jobs,
      cursor: page.cursor,
    };
  }

  private async readable(p: Principal) {
    const names = (await this.memories.acl.readable(p)).sort();
    const namespaces = (await this.memories.namespaceCounts(names)).filter((c) => c.count > 0);
    return { namespaces, total: namespaces.reduce((s, c) => s + c.count, 0), cursor: null };
  }

  private async everyNamespace(after: string | undefined, limit: number) {
    const [names, total] = await Promise.all([this.store.range(memoryIndexes.namespaces, { gt: after, limit: limit + 1 }), this.memories.liveTotal()]);
    const shown = names.slice(0, limit);
    const namespaces = (await this.memories.namespaceCounts(shown)).filter((c) => c.count > 0);
    return { namespaces, total, cursor: names.length > limit ? shown[shown.length - 1] : null };
  }
}
