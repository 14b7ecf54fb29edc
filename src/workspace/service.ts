/**
 * The workspace: a tree of folders and files, names unique per folder, every write of a file a new
 * immutable revision whose bytes live in the blob store under their SHA-256. Tree changes check the versions
 * of every record they depend on (the target folder and every folder above it, for a move also the folders
 * the item leaves) in the same commit, so concurrent moves cannot build a cycle and a folder being deleted,
 * or anything below it, cannot gain a child.
 */
import type { Readable } from 'node:stream';
import { iso, now } from '../clock.js';
import type { WorkspaceDeleteConfig } from '../config.js';
import type { Logger } from '../log.js';
import { eventOp } from '../journal/journal.js';
import { AppError } from '../errors.js';
import { boundKey } from '../validation.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op, Store, Versioned } from '../store/port.js';
import { forEachPage, loadAll, readAll, scanDesc, type Scanned } from '../store/scan.js';
import { blobRefOp } from '../blob/refs.js';
import { committedEffect, effectOps } from '../store/idempotency.js';
import { openContent, type Content, type RangeAsk } from '../blob/content.js';
import type { BlobStore } from '../blob/port.js';
import { requireMember } from './access.js';
import { workspaceIndexes as ix, workspaceKeys as keys, type Deletion, type DeletionRecord, type ItemKind, type Revision, type WorkspaceItem } from './model.js';

export interface FileFields {
  name: string;
  parent_id?: string | null;
  tags?: string[];
  metadata?: Record<string, unknown>;
}

export interface ItemPatch {
  tags?: string[];
  metadata?: Record<string, unknown>;
}

const DELETE_DEFAULTS: WorkspaceDeleteConfig = { pageSize: 1000, waitMs: 10_000, leaseMs: 15_000 };

export class Workspace {
  /** deletions this process is sweeping */
  private sweeps = new Map<string, Promise<void>>();
  private stopped = false;
  private sweeper?: NodeJS.Timeout;

  constructor(
    private rt: Runtime,
    private blobs: BlobStore,
    private maxUploadBytes: number,
    private deletes: WorkspaceDeleteConfig = DELETE_DEFAULTS,
    private log?: Logger,
  ) {}

  private get store(): Store {
    return this.rt.store;
  }

  private async loadItem(id: string): Promise<Versioned<WorkspaceItem>> {
    const r = await this.store.get<WorkspaceItem>(keys.item(id));
    if (!r || r.value.deleted_at) throw new AppError('WORKSPACE_ITEM_NOT_FOUND', `No workspace item ${id}`);
    return r;
  }

  /** A live folder (or the top level for null), with the check op that pins it for the commit. */
  private async folder(parentId: string | null | undefined): Promise<Op[]> {
    if (parentId == null) return [];
    const r = await this.store.get<WorkspaceItem>(keys.item(parentId));
    if (!r || r.value.deleted_at) throw new AppError('WORKSPACE_ITEM_NOT_FOUND', `No folder ${parentId}`, { field: 'parent_id' });
    if (r.value.kind !== 'folder') throw new AppError('WORKSPACE_NOT_A_FOLDER', `${parentId} is a file`, { field: 'parent_id' });
    return [{ op: 'check', key: keys.item(parentId), expect: r.version }];
  }

  private async nameFree(parentId: string | null, name: string, self?: string): Promise<void> {
    const taken = await this.store.get<{ id: string }>(keys.name(parentId, name));
    if (taken && taken.value.id !== self) throw new AppError('WORKSPACE_NAME_CONFLICT', `"${name}" exists in this folder`, { field: 'name', id: taken.value.id });
  }

  private createOps(item: WorkspaceItem): Op[] {
    return [
      { op: 'put', key: keys.name(item.parent_id, item.name), value: { id: item.id }, expect: 0 },
      { op: 'put', key: keys.item(item.id), value: item, expect: 0 },
      { op: 'index', index: ix.children(item.parent_id), member: item.id },
    ];
  }

  private newItem(p: Principal, kind: ItemKind, f: FileFields): WorkspaceItem {
    assertName(f.name);
    const t = iso();
    return {
      id: newId(), kind, name: f.name, parent_id: f.parent_id ?? null, tags: f.tags ?? [], metadata: f.metadata ?? {},
      created_by: p.identity.id, created_at: t, updated_at: t, deleted_at: null,
      current_revision_id: null, revision_count: 0, content_type: null, size: null, sha256: null,
    };
  }

  async createFolder(p: Principal, f: FileFields): Promise<WorkspaceItem> {
    requireMember(p);
    const done = committedEffect<WorkspaceItem>(p);
    if (done) return done;
    const item = this.newItem(p, 'folder', f);
    return this.rt.retry(async () => {
      const pins = await this.lineage(item.parent_id);
      await this.nameFree(item.parent_id, item.name);
      return { result: item, ops: [...pins, ...this.createOps(item), ...effectOps(p, item)] };
    });
  }

  async item(p: Principal, id: string): Promise<WorkspaceItem> {
    requireMember(p);
    return (await this.loadItem(id)).value;
  }

  /** The item and, for a file, its current revision. */
  async summary(p: Principal, id: string): Promise<{ item: WorkspaceItem; latest_revision: Revision | null }> {
    const item = await this.item(p, id);
    const rev = item.current_revision_id ? await this.store.get<Revision>(keys.revision(item.current_revision_id)) : undefined;
    return { item, latest_revision: rev?.value ?? null };
  }

  async list(p: Principal, q: { parent_id?: string; kind?: ItemKind }, before: string | undefined, limit: number): Promise<Scanned<WorkspaceItem>> {
    requireMember(p);
    if (q.parent_id !== undefined) await this.folder(q.parent_id);
    return scanDesc(this.store, [ix.children(q.parent_id ?? null)], {
      before,
      limit,
      load: async (ids) => (await this.store.getMany<WorkspaceItem>(ids.map(keys.item))).map((r) => r?.value),
      keep: (i) => !i.deleted_at && (q.kind === undefined || i.kind === q.kind),
    });
  }

  async update(p: Principal, id: string, patch: ItemPatch): Promise<WorkspaceItem> {
    requireMember(p);
    return this.rt.retry(async () => {
      const cur = await this.loadItem(id);
      const next: WorkspaceItem = { ...cur.value, ...definedOf(patch), updated_at: iso() };
      return { result: next, ops: [{ op: 'put', key: keys.item(id), value: next, expect: cur.version }] };
    });
  }

  /** Moves and/or renames. Refuses a move into the item itself or below it, and a name taken in the target folder. */
  async move(p: Principal, id: string, to: { parent_id?: string | null; name?: string }): Promise<WorkspaceItem> {
    requireMember(p);
    if (to.name !== undefined) assertName(to.name);
    return this.rt.retry(async () => {
      const cur = await this.loadItem(id);
      const parentId = to.parent_id === undefined ? cur.value.parent_id : to.parent_id;
      const name = to.name ?? cur.value.name;
      if (parentId === cur.value.parent_id && name === cur.value.name) return { result: cur.value };
      const moving = parentId !== cur.value.parent_id;
      const pins = distinct([...(await this.lineage(parentId, { self: id, holds: !moving })), ...(moving ? await this.lineage(cur.value.parent_id, { holds: true }) : [])]);
      await this.nameFree(parentId, name, id);
      const next: WorkspaceItem = { ...cur.value, parent_id: parentId, name, updated_at: iso() };
      const sameKey = keys.name(parentId, name) === keys.name(cur.value.parent_id, cur.value.name);
      const ops: Op[] = [
        ...pins,
        { op: 'put', key: keys.item(id), value: next, expect: cur.version },
        ...(sameKey ? [] : [{ op: 'del', key: keys.name(cur.value.parent_id, cur.value.name) } as Op, { op: 'put', key: keys.name(parentId, name), value: { id }, expect: 0 } as Op]),
      ];
      if (parentId !== cur.value.parent_id) {
        ops.push({ op: 'index', index: ix.children(cur.value.parent_id), member: id, remove: true }, { op: 'index', index: ix.children(parentId), member: id });
      }
      return { result: next, ops };
    });
  }

  /**
   * Check ops for a folder and every folder above it, so the commit fails when any of them changes (is deleted
   * above all). Refuses a target folder that is missing or deleted (404) or a file, one inside a folder being
   * deleted (409 `WORKSPACE_FOLDER_DELETING`) and, for a move of `self`, one inside `self`. `holds`: the folder
   * an item already sits in, refused as being deleted when it is deleted itself.
   */
  private async lineage(folder: string | null, o: { self?: string; holds?: boolean } = {}): Promise<Op[]> {
    const pins: Op[] = [];
    const seen = new Set<string>();
    for (let at = folder; at !== null; ) {
      if (at === o.self) throw new AppError('WORKSPACE_MOVE_CYCLE', 'An item cannot move into itself or its own subtree', { field: 'parent_id' });
      if (seen.has(at)) throw new AppError('INTERNAL_SERVER_ERROR', 'Workspace tree has a cycle');
      seen.add(at);
      const r = await this.store.get<WorkspaceItem>(keys.item(at));
      const target = at === folder;
      if (!r || (r.value.deleted_at && target && !o.holds)) throw new AppError('WORKSPACE_ITEM_NOT_FOUND', `No folder ${at}`, { field: 'parent_id' });
      if (r.value.deleted_at) throw new AppError('WORKSPACE_FOLDER_DELETING', `Folder ${at} is being deleted with everything below it`, { field: 'parent_id', folder_id: at });
      if (target && r.value.kind !== 'folder') throw new AppError('WORKSPACE_NOT_A_FOLDER', `${at} is a file`, { field: 'parent_id' });
      pins.push({ op: 'check', key: keys.item(at), expect: r.version });
      at = r.value.parent_id;
    }
    return pins;
  }

  /**
   * Soft delete of the item and everything below it: records stay (with deleted_at), names are freed. The item
   * goes first, in its own commit with its deletion record; a create, move or upload into it or anything below
   * it that read the tree before fails its version checks (`lineage`) and is refused when planned again. Then
   * each deleted folder's children go a page per commit, each commit also moving the deletion record on (how
   * many deleted, how many folders left, the sweep's lease). Answers the deletion once it completed, or when
   * `waitMs` passed, running: the sweep goes on, and another instance takes it over when its lease lapses.
   */
  async remove(p: Principal, id: string): Promise<Deletion> {
    requireMember(p);
    const d = await this.rt.retry(async () => {
      const r = await this.loadItem(id);
      const t = iso();
      const folder = r.value.kind === 'folder';
      const rec: DeletionRecord = {
        id, status: folder ? 'running' : 'completed', deleted: 1, folders_left: folder ? 1 : 0, deleted_by: p.identity.id,
        started_at: t, updated_at: t, completed_at: folder ? null : t, lease_until: now() + this.deletes.leaseMs,
      };
      const ops: Op[] = [...this.deleteOps(r, t, id), { op: 'put', key: keys.deletion(id), value: rec }];
      if (folder) ops.push({ op: 'index', index: ix.deleting, member: id });
      return { result: rec, ops };
    });
    if (d.status === 'running') await settledWithin(this.sweep(id), this.deletes.waitMs);
    return this.deletion(p, id);
  }

  /** A deletion's progress, by the deleted item's id. */
  async deletion(p: Principal, id: string): Promise<Deletion> {
    requireMember(p);
    const r = await this.store.get<DeletionRecord>(keys.deletion(id));
    if (!r) throw new AppError('WORKSPACE_ITEM_NOT_FOUND', `No deletion of ${id}`);
    const { lease_until: _, ...d } = r.value;
    return d;
  }

  private deleteOps(r: Versioned<WorkspaceItem>, t: string, deletion: string): Op[] {
    const it = r.value;
    return [
      { op: 'put', key: keys.item(it.id), value: { ...it, deleted_at: t, updated_at: t }, expect: r.version },
      { op: 'del', key: keys.name(it.parent_id, it.name) },
      { op: 'index', index: ix.children(it.parent_id), member: it.id, remove: true },
      ...(it.kind === 'folder' ? [{ op: 'index', index: ix.deletionFolders(deletion), member: it.id } as Op] : []),
    ];
  }

  /** Sweeps a deletion in this process, one sweep per deletion; a failed one is left to the lease. */
  private sweep(id: string): Promise<void> {
    let run = this.sweeps.get(id);
    if (!run) {
      run = this.purge(id)
        .catch((err: unknown) => this.log?.warn({ err, deletion: id }, 'workspace deletion paused; taken over once its lease lapses'))
        .finally(() => this.sweeps.delete(id));
      this.sweeps.set(id, run);
    }
    return run;
  }

  /** Deletes what is below a deletion's folders, a page of one folder's children per commit, to the end. */
  private async purge(id: string): Promise<void> {
    while (!this.stopped) {
      const d = await this.store.get<DeletionRecord>(keys.deletion(id));
      if (!d || d.value.status !== 'running') return;
      const [folder] = await this.store.range(ix.deletionFolders(id), { limit: 1 });
      // a lost race (another sweep of it, a child changed since it was read) is simply read again
      await this.store.commit(folder === undefined ? completeOps(d) : await this.pageOps(d, folder));
    }
  }

  private async pageOps(d: Versioned<DeletionRecord>, folder: string): Promise<Op[]> {
    const t = iso();
    const kids = await this.store.range(ix.children(folder), { limit: this.deletes.pageSize });
    const recs = await this.store.getMany<WorkspaceItem>(kids.map(keys.item));
    // only children still in this folder: an index entry read just before its item moved away is dropped
    const live = recs.filter((r): r is Versioned<WorkspaceItem> => !!r && !r.value.deleted_at && r.value.parent_id === folder);
    const kept = new Set(live.map((r) => r.value.id));
    const stale = kids.filter((k) => !kept.has(k));
    const folders = live.filter((r) => r.value.kind === 'folder').length;
    const next: DeletionRecord = {
      ...d.value,
      deleted: d.value.deleted + live.length,
      folders_left: d.value.folders_left + folders - (kids.length ? 0 : 1),
      updated_at: t,
      lease_until: now() + this.deletes.leaseMs,
    };
    return [
      { op: 'put', key: keys.deletion(d.value.id), value: next, expect: d.version },
      ...live.flatMap((r) => this.deleteOps(r, t, d.value.id)),
      ...stale.map((k): Op => ({ op: 'index', index: ix.children(folder), member: k, remove: true })),
      ...(kids.length ? [] : [{ op: 'index', index: ix.deletionFolders(d.value.id), member: folder, remove: true } as Op]),
    ];
  }

  /**
   * Takes over running deletions nobody sweeps (their process stopped): at startup, then every half lease.
   * A member of the deleting index without a record (left by an older version) becomes a deletion of its own.
   */
  startSweeper(): void {
    const tick = async () => {
      try {
        await this.takeOver();
      } catch (err) {
        this.log?.warn({ err }, 'workspace deletion take-over failed');
      }
      if (!this.stopped) this.sweeper = setTimeout(tick, this.deletes.leaseMs / 2);
    };
    this.sweeper = setTimeout(tick, 0);
  }

  private async takeOver(): Promise<void> {
    for (const id of await readAll(this.store, ix.deleting)) {
      if (this.stopped || this.sweeps.has(id)) continue;
      const d = await this.store.get<DeletionRecord>(keys.deletion(id));
      if (d && (d.value.status !== 'running' || d.value.lease_until > now())) continue;
      const lease = now() + this.deletes.leaseMs;
      const ops: Op[] = d ? [{ op: 'put', key: keys.deletion(id), value: { ...d.value, lease_until: lease }, expect: d.version }] : legacyOps(id, lease);
      if ((await this.store.commit(ops)).ok) void this.sweep(id);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sweeper);
    await Promise.allSettled([...this.sweeps.values()]);
  }

  async upload(p: Principal, f: FileFields, content: Readable, contentType: string): Promise<WorkspaceItem> {
    requireMember(p);
    // an earlier attempt of this request that died after its commit: its file is the answer
    const done = committedEffect<WorkspaceItem>(p);
    if (done) return done;
    const item = this.newItem(p, 'file', f);
    // refuse before reading a byte when the target is wrong; the commit checks again
    await this.lineage(item.parent_id);
    await this.nameFree(item.parent_id, item.name);
    const stored = await this.blobs.put(content, this.maxUploadBytes);
    return this.rt.retry(async () => {
      const pins = await this.lineage(item.parent_id);
      await this.nameFree(item.parent_id, item.name);
      const rev = this.revision(p, item, stored, contentType);
      const file = withRevision(item, rev);
      return { result: file, ops: [...pins, ...this.createOps(file), ...this.revisionOps(rev), fileUpdated(file), ...effectOps(p, file)] };
    });
  }

  /** A new revision. `ifMatch` (revision ids) refuses a write based on a revision that is no longer current. */
  async write(p: Principal, id: string, ifMatch: string[] | undefined, content: Readable, contentType: string | undefined): Promise<WorkspaceItem> {
    requireMember(p);
    const check = (it: WorkspaceItem) => {
      if (it.kind !== 'file') throw new AppError('WORKSPACE_NOT_A_FILE');
      if (ifMatch && !ifMatch.includes('*') && !ifMatch.includes(it.current_revision_id!)) {
        throw new AppError('WORKSPACE_REVISION_MISMATCH', `The current revision is ${it.current_revision_id}`, { current_revision_id: it.current_revision_id });
      }
    };
    check((await this.loadItem(id)).value);
    const stored = await this.blobs.put(content, this.maxUploadBytes);
    return this.rt.retry(async () => {
      const cur = await this.loadItem(id);
      check(cur.value);
      const rev = this.revision(p, cur.value, stored, contentType ?? cur.value.content_type ?? 'application/octet-stream');
      const file = withRevision(cur.value, rev);
      return { result: file, ops: [{ op: 'put', key: keys.item(id), value: file, expect: cur.version }, ...this.revisionOps(rev), fileUpdated(file)] };
    });
  }

  private revision(p: Principal, item: WorkspaceItem, stored: { sha256: string; size: number }, contentType: string): Revision {
    return { id: newId(), item_id: item.id, number: item.revision_count + 1, sha256: stored.sha256, size: stored.size, content_type: contentType, created_by: p.identity.id, created_at: iso() };
  }

  private revisionOps(rev: Revision): Op[] {
    return [
      { op: 'put', key: keys.revision(rev.id), value: rev, expect: 0 },
      { op: 'index', index: ix.revisions(rev.item_id), member: rev.id },
      blobRefOp(rev.sha256, keys.revision(rev.id)),
    ];
  }

  /** Names, in the blob reference index, the content of every revision of the live tree (records from before that index). */
  async indexBlobRefs(): Promise<number> {
    let n = 0;
    for (const folders: (string | null)[] = [null]; folders.length; ) {
      await forEachPage(this.store, ix.children(folders.pop()!), async (ids) => {
        const items = (await this.store.getMany<WorkspaceItem>(ids.map(keys.item))).flatMap((r) => (r ? [r.value] : []));
        folders.push(...items.filter((it) => it.kind === 'folder').map((it) => it.id));
        for (const file of items.filter((it) => it.kind === 'file')) {
          const revs = await loadAll<Revision>(this.store, ix.revisions(file.id), keys.revision);
          if (revs.length) await this.store.commit(revs.map((r) => blobRefOp(r.sha256, keys.revision(r.id))));
          n += revs.length;
        }
      });
    }
    return n;
  }

  async history(p: Principal, id: string, before: string | undefined, limit: number): Promise<Scanned<Revision>> {
    requireMember(p);
    await this.loadItem(id);
    return scanDesc(this.store, [ix.revisions(id)], {
      before,
      limit,
      load: async (ids) => (await this.store.getMany<Revision>(ids.map(keys.revision))).map((r) => r?.value),
      keep: () => true,
    });
  }

  async content(p: Principal, id: string, range: RangeAsk | undefined): Promise<Content> {
    requireMember(p);
    const it = (await this.loadItem(id)).value;
    if (it.kind !== 'file') throw new AppError('WORKSPACE_NOT_A_FILE');
    return openContent(this.blobs, { sha256: it.sha256!, size: it.size!, content_type: it.content_type!, filename: it.name, etag: it.current_revision_id! }, range);
  }

  /** A revision of a live file (revisions of deleted files are gone with them). */
  async revisionOf(p: Principal, revisionId: string): Promise<{ revision: Revision; item: WorkspaceItem }> {
    requireMember(p);
    const rev = await this.store.get<Revision>(keys.revision(revisionId));
    const item = rev ? await this.store.get<WorkspaceItem>(keys.item(rev.value.item_id)) : undefined;
    if (!rev || !item || item.value.deleted_at) throw new AppError('WORKSPACE_REVISION_NOT_FOUND', `No revision ${revisionId}`);
    return { revision: rev.value, item: item.value };
  }

  async revisionContent(p: Principal, revisionId: string, range: RangeAsk | undefined): Promise<Content> {
    const { revision: r, item } = await this.revisionOf(p, revisionId);
    return openContent(this.blobs, { sha256: r.sha256, size: r.size, content_type: r.content_type, filename: item.name, etag: r.id }, range);
  }
}

/** The deletion's last commit: every folder of it swept. */
function completeOps(d: Versioned<DeletionRecord>): Op[] {
  const t = iso();
  return [
    { op: 'put', key: keys.deletion(d.value.id), value: { ...d.value, status: 'completed', folders_left: 0, updated_at: t, completed_at: t }, expect: d.version },
    { op: 'index', index: ix.deleting, member: d.value.id, remove: true },
  ];
}

/** A folder an older version left in the deleting index (itself deleted, its children maybe not): its own deletion. */
function legacyOps(id: string, lease: number): Op[] {
  const t = iso();
  const rec: DeletionRecord = { id, status: 'running', deleted: 0, folders_left: 1, deleted_by: '', started_at: t, updated_at: t, completed_at: null, lease_until: lease };
  return [
    { op: 'put', key: keys.deletion(id), value: rec, expect: 0 },
    { op: 'index', index: ix.deletionFolders(id), member: id },
  ];
}

/** Waits for `p` at most `ms`. */
function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void p.finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** One check per key (the ancestors of a move's target and source meet). */
const distinct = (pins: Op[]): Op[] => [...new Map(pins.map((o) => [(o as { key: string }).key, o])).values()];

function withRevision(item: WorkspaceItem, rev: Revision): WorkspaceItem {
  return { ...item, current_revision_id: rev.id, revision_count: rev.number, content_type: rev.content_type, size: rev.size, sha256: rev.sha256, updated_at: rev.created_at };
}

function assertName(name: string): void {
  boundKey(name, 'name', 'name', 'WORKSPACE_VALIDATION_FAILED');
  if ( /[/\\\u0000-\u001f]/.test(name) || name === '.' || name === '..' || name.trim() !== name) {
    throw new AppError('WORKSPACE_VALIDATION_FAILED', 'name must be 1-255 bytes, without slashes or control characters, not . or .., no leading or trailing spaces', { field: 'name' });
  }
}

const definedOf = <T extends object>(o: T): Partial<T> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** A file's new revision, pushed to every member (the workspace is the org's). */
const fileUpdated = (file: WorkspaceItem) => eventOp({ type: 'workspace.file_updated', subject: 'workspace_item', data: file, audience: { members: true } });
