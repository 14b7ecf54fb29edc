/**
 * The workspace: a tree of folders and files, names unique per folder, every write of a file a new
 * immutable revision whose bytes live in the blob store under their SHA-256. Tree changes check the versions
 * of every record they depend on (parent, ancestors) in the same commit, so concurrent moves cannot build a
 * cycle and a folder being deleted cannot gain a child.
 */
import type { Readable } from 'node:stream';
import { iso } from '../clock.js';
import { eventOp } from '../journal/journal.js';
import { AppError } from '../errors.js';
import { boundKey } from '../validation.js';
import { newId } from '../ids.js';
import type { Principal } from '../identity/model.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op, Store, Versioned } from '../store/port.js';
import { forEachPage, loadAll, readAll, scanDesc, scanLimits, type Scanned } from '../store/scan.js';
import { blobRefOp } from '../blob/refs.js';
import { committedEffect, effectOps } from '../store/idempotency.js';
import { openContent, type Content, type RangeAsk } from '../blob/content.js';
import type { BlobStore } from '../blob/port.js';
import { requireMember } from './access.js';
import { workspaceIndexes as ix, workspaceKeys as keys, type ItemKind, type Revision, type WorkspaceItem } from './model.js';

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

export class Workspace {
  constructor(
    private rt: Runtime,
    private blobs: BlobStore,
    private maxUploadBytes: number,
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
    const done = committedEffect<WorkspaceItem>();
    if (done) return done;
    const item = this.newItem(p, 'folder', f);
    return this.rt.retry(async () => {
      const pin = await this.folder(item.parent_id);
      await this.nameFree(item.parent_id, item.name);
      return { result: item, ops: [...pin, ...this.createOps(item), ...effectOps(item)] };
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
      const pins = parentId === cur.value.parent_id ? [] : await this.ancestry(id, parentId);
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

  /** Check ops for the target folder and every ancestor above it; refuses when `id` is among them. */
  private async ancestry(id: string, target: string | null): Promise<Op[]> {
    const pins: Op[] = [];
    const seen = new Set<string>();
    for (let at = target; at !== null; ) {
      if (at === id) throw new AppError('WORKSPACE_MOVE_CYCLE', 'An item cannot move into itself or its own subtree', { field: 'parent_id' });
      if (seen.has(at)) throw new AppError('INTERNAL_SERVER_ERROR', 'Workspace tree has a cycle');
      seen.add(at);
      const r = await this.store.get<WorkspaceItem>(keys.item(at));
      if (!r || r.value.deleted_at) throw new AppError('WORKSPACE_ITEM_NOT_FOUND', `No folder ${at}`, { field: 'parent_id' });
      if (at === target && r.value.kind !== 'folder') throw new AppError('WORKSPACE_NOT_A_FOLDER', `${at} is a file`, { field: 'parent_id' });
      pins.push({ op: 'check', key: keys.item(at), expect: r.version });
      at = r.value.parent_id;
    }
    return pins;
  }

  /**
   * Soft delete of the item and everything below it: records stay (with deleted_at), names are freed. The
   * item goes first, in its own commit, which also records a folder in the `deleting` index; then each
   * folder's children go a page per commit (folders among them recorded in turn), and a folder leaves the
   * index once it has no child left. A create or move into a folder already deleted is refused by its
   * version check, one into a folder not reached yet lands in its index before that folder is read, so the
   * walk misses nothing; a crash mid-way is finished at the next startup (`resumeDeletes`).
   */
  async remove(p: Principal, id: string): Promise<{ id: string; deleted: number }> {
    requireMember(p);
    const root = await this.rt.retry(async () => {
      const r = await this.loadItem(id);
      return { result: r.value, ops: this.deleteOps(r, iso()) };
    });
    const deleted = 1 + (root.kind === 'folder' ? await this.purge([root.id]) : 0);
    return { id, deleted };
  }

  private deleteOps(r: Versioned<WorkspaceItem>, t: string): Op[] {
    const it = r.value;
    return [
      { op: 'put', key: keys.item(it.id), value: { ...it, deleted_at: t, updated_at: t }, expect: r.version },
      { op: 'del', key: keys.name(it.parent_id, it.name) },
      { op: 'index', index: ix.children(it.parent_id), member: it.id, remove: true },
      ...(it.kind === 'folder' ? [{ op: 'index', index: ix.deleting, member: it.id } as Op] : []),
    ];
  }

  /** Deletes every item below these deleted folders, a page of children per commit; answers how many. */
  private async purge(folders: string[]): Promise<number> {
    let deleted = 0;
    for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
      for (;;) {
        const kids = await this.store.range(ix.children(folder), { limit: scanLimits.pageSize });
        if (!kids.length) break;
        const t = iso();
        const recs = await this.store.getMany<WorkspaceItem>(kids.map(keys.item));
        const live = recs.filter((r): r is Versioned<WorkspaceItem> => r !== undefined && !r.value.deleted_at);
        const gone = kids.filter((_, i) => !recs[i] || recs[i]!.value.deleted_at);
        const ops = [...live.flatMap((r) => this.deleteOps(r, t)), ...gone.map((k): Op => ({ op: 'index', index: ix.children(folder!), member: k, remove: true }))];
        // a child changed meanwhile fails the page: it is read again
        if (!(await this.store.commit(ops)).ok) continue;
        deleted += live.length;
        folders.push(...live.filter((r) => r.value.kind === 'folder').map((r) => r.value.id));
      }
      await this.store.commit([{ op: 'index', index: ix.deleting, member: folder, remove: true }]);
    }
    return deleted;
  }

  /** Startup: finishes the deletions a stopped process left part done. */
  async resumeDeletes(): Promise<number> {
    return this.purge(await readAll(this.store, ix.deleting));
  }

  async upload(p: Principal, f: FileFields, content: Readable, contentType: string): Promise<WorkspaceItem> {
    requireMember(p);
    // an earlier attempt of this request that died after its commit: its file is the answer
    const done = committedEffect<WorkspaceItem>();
    if (done) return done;
    const item = this.newItem(p, 'file', f);
    // refuse before reading a byte when the target is wrong; the commit checks again
    await this.folder(item.parent_id);
    await this.nameFree(item.parent_id, item.name);
    const stored = await this.blobs.put(content, this.maxUploadBytes);
    return this.rt.retry(async () => {
      const pin = await this.folder(item.parent_id);
      await this.nameFree(item.parent_id, item.name);
      const rev = this.revision(p, item, stored, contentType);
      const file = withRevision(item, rev);
      return { result: file, ops: [...pin, ...this.createOps(file), ...this.revisionOps(rev), fileUpdated(file), ...effectOps(file)] };
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
