/**
 * One query over what a key may read, for the operator console's search box: recent signals and tasks
 * (text, type, sender, recipient, state), memories in every namespace the key reads (semantic and keyword
 * when an embedding provider is configured, keyword otherwise), identities (admins only) and artifacts.
 * Each source is read through its own service with the key's rights, in bounded pages: a match older than
 * the scanned window is not found here (the per-source routes page further).
 */
import type { Artifacts } from '../artifacts/service.js';
import type { Artifact } from '../artifacts/model.js';
import type { Identity, Principal } from '../identity/model.js';
import type { Identities } from '../identity/identities.js';
import type { Memories } from '../memory/service.js';
import type { Signal } from '../signals/kind.js';
import type { Signals } from '../signals/service.js';
import type { Scanned } from '../store/scan.js';

const PAGE = 100;
/** pages read per scanned source: the window a search covers */
const SCAN_PAGES = 5;
/** namespaces asked per search: each is one index query */
const MAX_NAMESPACES = 20;

export interface SearchResults {
  query: string;
  signals: Signal[];
  tasks: Signal[];
  memories: { id: string; namespace: string; content: string; score: number }[];
  identities: Identity[];
  artifacts: Artifact[];
  /** how far back the signal scan reached (newest first): older matches need the list routes */
  scanned: { signals: number; identities: number; artifacts: number };
}

const text = (...parts: unknown[]) => parts.filter((x) => x !== undefined && x !== null).join(' ').toLowerCase();

/** Up to `want` matches from the newest SCAN_PAGES pages of one source, and how many items were read. */
async function scan<T>(page: (before: string | undefined) => Promise<Scanned<T>>, match: (t: T) => boolean, want: number): Promise<{ found: T[]; read: number }> {
  const found: T[] = [];
  let before: string | undefined;
  let read = 0;
  for (let i = 0; i < SCAN_PAGES && found.length < want; i++) {
    const p = await page(before);
    read += p.items.length;
    found.push(...p.items.filter(match));
    if (p.cursor === null) break;
    before = p.cursor;
  }
  return { found: found.slice(0, want), read };
}

export class Search {
  constructor(private s: { signals: Signals; identities: Identities; memories: Memories; artifacts: Artifacts }) {}

  async find(p: Principal, query: string, limit: number): Promise<SearchResults> {
    const q = query.trim().toLowerCase();
    const has = (...parts: unknown[]) => text(...parts).includes(q);
    const [signals, identities, artifacts, memories] = await Promise.all([
      scan((b) => this.s.signals.list(p, {}, b, PAGE), (s) => has(s.id, s.content, s.signal_type, s.from_identity, s.to_identity, s.to_role, s.to_ring, s.delivery_state, s.task_status, s.tags?.join(' ')), limit * 2),
      p.identity.is_admin ? scan((b) => this.s.identities.list(b, PAGE), (i) => has(i.id, i.name, i.type), limit) : { found: [], read: 0 },
      scan((b) => this.s.artifacts.list(p, {}, b, PAGE), (a) => has(a.id, a.name, a.content_type, a.tags.join(' ')), limit),
      this.memories(p, query.trim(), limit),
    ]);
    return {
      query,
      signals: signals.found.filter((s) => s.signal_type !== 'task').slice(0, limit),
      tasks: signals.found.filter((s) => s.signal_type === 'task').slice(0, limit),
      memories,
      identities: identities.found,
      artifacts: artifacts.found,
      scanned: { signals: signals.read, identities: identities.read, artifacts: artifacts.read },
    };
  }

  private async memories(p: Principal, query: string, limit: number): Promise<SearchResults['memories']> {
    const m = this.s.memories;
    const mode = m.embedder.provider === 'none' ? 'keyword' : 'hybrid';
    const namespaces = (await m.acl.readable(p)).slice(0, MAX_NAMESPACES);
    const found = await Promise.all(namespaces.map((namespace) => m.query(p, { query, namespace, mode, limit }).then((r) => r.memories, () => [])));
    return found
      .flat()
      .sort((a, b) => b.score - a.score)
      .slice(0, limit)
      .map((x) => ({ id: x.id, namespace: x.namespace, content: x.content, score: x.score }));
  }
}
