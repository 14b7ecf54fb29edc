/** The identity directory (admin): identities with last_seen from presence. */
import { iso } from '../clock.js';
import type { Presence } from '../presence/presence.js';
import type { Store } from '../store/port.js';
import { scanDesc, type Scanned } from '../store/scan.js';
import { indexes, keys, type Identity } from './model.js';

export class Identities {
  constructor(
    private store: Store,
    private presence: Presence,
  ) {}

  /** Newest first, like every other paged list. */
  async list(before: string | undefined, limit: number): Promise<Scanned<Identity>> {
    const page = await scanDesc<Identity>(this.store, [indexes.identities], {
      before,
      limit,
      load: async (ids) => (await this.store.getMany<Identity>(ids.map(keys.identity))).map((r) => r?.value),
      keep: () => true,
    });
    const seen = await this.presence.lastSeen(page.items.map((i) => i.id));
    return { ...page, items: page.items.map((i, n) => (seen[n] !== undefined ? { ...i, last_seen: iso(seen[n]) } : i)) };
  }
}
