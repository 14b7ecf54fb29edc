/** Memory records, their keys and indexes in the store. */
export const MEMORY_TYPES = ['semantic', 'episodic', 'procedural', 'fact', 'preference'] as const;
export type MemoryType = (typeof MEMORY_TYPES)[number];

export interface MemoryRecord {
  id: string;
  content: string;
  memory_type: MemoryType | null;
  owner: string;
  namespace: string;
  entity: string | null;
  category: string | null;
  tags: string[];
  confidence: number | null;
  source: string | null;
  metadata: Record<string, unknown>;
  source_org: string | null;
  source_claw: string | null;
  deleted_at: string | null;
  expires_at: string | null;
  created_at: string;
  updated_at: string;
  version: number;
  /** float32 little-endian, base64; null when the provider is none */
  embedding: string | null;
  /** provider and model that made `embedding` (`client` when the caller supplied it) */
  embedding_model: string | null;
}

export type Memory = Omit<MemoryRecord, 'embedding' | 'embedding_model'>;

export const memoryView = ({ embedding: _e, embedding_model: _m, ...rest }: MemoryRecord): Memory => rest;

const enc = encodeURIComponent;

export const memoryKeys = {
  memory: (id: string) => `memory:${id}`,
  /** per-namespace live count, written with a version check so the quota holds under concurrency */
  namespace: (ns: string) => `memory-ns:${enc(ns)}`,
  edge: (id: string) => `memory-edge:${id}`,
  share: (id: string) => `memory-share:${id}`,
  /** the memory an imported line with another system's id became */
  importedId: (foreignId: string) => `memory-imported:${enc(foreignId)}`,
};

export const memoryIndexes = {
  /** live memory ids */
  all: 'mem:all',
  byNamespace: (ns: string) => `mem:ns:${enc(ns)}`,
  byEntity: (ns: string, entity: string) => `mem:nse:${enc(ns)}:${enc(entity)}`,
  /** every namespace ever written */
  namespaces: 'mem:namespaces',
  /** ids committed to the store whose vector index write has not been confirmed yet (reconciled at startup) */
  unindexed: 'mem:unindexed',
  edgesFrom: (memoryId: string) => `mem:edges:from:${memoryId}`,
  edgesTo: (memoryId: string) => `mem:edges:to:${memoryId}`,
  shares: 'mem:shares',
  /** shares made to one grantee (type and id or lower-cased name) */
  sharesTo: (type: string, grantee: string) => `mem:shares:to:${type}:${enc(grantee)}`,
  /** shares of one namespace */
  sharesOf: (ns: string) => `mem:shares:ns:${enc(ns)}`,
  /** live memories by the provider and model that made their vector (`none` without one): the re-embed backlog */
  byModel: (model: string | null) => `mem:model:${enc(model ?? 'none')}`,
  /** live memories with an expiry, by due time: the sweeper purges the due ones */
  expiring: 'mem:expiring',
};

/** Sorts by due time: 15 digits of milliseconds, then the id. */
export const expiringMember = (dueMs: number, id: string) => String(dueMs).padStart(15, '0') + ':' + id;
export const idOfExpiring = (member: string) => member.slice(16);

export interface NamespaceCount {
  namespace: string;
  count: number;
  /** a role:/ring: namespace's owner: the id of the role or ring that wrote its memories (names can be reused) */
  owner_id?: string;
}

/** Index entries a live memory has; a forgotten one has none. */
export function liveIndexes(m: MemoryRecord): [string, string][] {
  const out: [string, string][] = [
    [memoryIndexes.all, m.id],
    [memoryIndexes.byNamespace(m.namespace), m.id],
  ];
  if (m.entity !== null) out.push([memoryIndexes.byEntity(m.namespace, m.entity), m.id]);
  out.push([memoryIndexes.byModel(m.embedding_model), m.id]);
  if (m.expires_at !== null) out.push([memoryIndexes.expiring, expiringMember(Date.parse(m.expires_at), m.id)]);
  return out;
}

/** Index ops that move a live memory's entries from `before` to `after`. */
export function indexDiff(before: MemoryRecord, after: MemoryRecord): { op: 'index'; index: string; member: string; remove?: boolean }[] {
  const key = ([i, m]: [string, string]) => i + '\u0001' + m;
  const a = new Set(liveIndexes(after).map(key));
  const b = new Set(liveIndexes(before).map(key));
  return [
    ...liveIndexes(before).filter((e) => !a.has(key(e))).map(([index, member]) => ({ op: 'index' as const, index, member, remove: true })),
    ...liveIndexes(after).filter((e) => !b.has(key(e))).map(([index, member]) => ({ op: 'index' as const, index, member })),
  ];
}

export const isLive = (m: MemoryRecord | undefined, now: number): m is MemoryRecord =>
  !!m && m.deleted_at === null && (m.expires_at === null || Date.parse(m.expires_at) > now);
