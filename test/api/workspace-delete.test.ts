/**
 * A folder's deletion against creates, moves and uploads into it and below it, over real HTTP on both
 * backends. The deletion is paged (WORKSPACE_DELETE_PAGE_SIZE=20 here, about 100 pages for 1,937 items) so the
 * requests race many of its commits. Every request either committed before the delete (and its item is
 * then deleted with the rest, counted in the deletion) or is refused: 404 for a folder already deleted,
 * 409 WORKSPACE_FOLDER_DELETING for a folder inside one; none issued after the delete was seen succeeds, and
 * no live item is left below the deleted folder.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { Op } from '../../src/store/port.js';
import { workspaceIndexes, workspaceKeys, type WorkspaceItem } from '../../src/workspace/model.js';
import { upload } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

/** Writes `n` live files into a folder through the store port: what a create writes, minus the blob. */
async function seedFiles(svc: Started, parentId: string, n: number, by: string): Promise<void> {
  const t = new Date().toISOString();
  for (let from = 0; from < n; from += 500) {
    const ops: Op[] = [];
    for (let i = from; i < Math.min(from + 500, n); i++) {
      const item: WorkspaceItem = {
        id: newId(), kind: 'file', name: `seed-${i}`, parent_id: parentId, tags: [], metadata: {}, created_by: by, created_at: t, updated_at: t, deleted_at: null,
        current_revision_id: null, revision_count: 0, content_type: null, size: null, sha256: null,
      };
      ops.push(
        { op: 'put', key: workspaceKeys.name(parentId, item.name), value: { id: item.id }, expect: 0 },
        { op: 'put', key: workspaceKeys.item(item.id), value: item, expect: 0 },
        { op: 'index', index: workspaceIndexes.children(parentId), member: item.id },
      );
    }
    expect((await svc.store.commit(ops)).ok).toBe(true);
  }
}

interface Outcome {
  what: 'create' | 'upload' | 'move';
  /** issued after a GET had shown the folder deleted */
  late: boolean;
  status: number;
  code?: string;
  item?: WorkspaceItem;
}

describe.each(BACKENDS)('workspace delete racing writes into the tree on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let m: Member;

  beforeAll(async () => {
    svc = await servers.start({ WORKSPACE_DELETE_PAGE_SIZE: '20', WORKSPACE_DELETE_WAIT_MS: '120000' });
    const root = await bootstrap(svc.url);
    m = await join(root.client, 'deleter');
  });

  const folder = async (name: string, parent_id?: string) => expectOk(await m.client.post('/workspace/folders', { name, parent_id }), 201) as WorkspaceItem;

  it('every create, move and upload racing a delete of 1,937 items was before it (and is deleted) or refused; nothing live is left below', async () => {
    const top = await folder('doomed');
    const subs = await Promise.all(Array.from({ length: 8 }, (_, i) => folder(`s${i}`, top.id)));
    const deep = await Promise.all(subs.map((s, i) => folder(`t${i}`, s.id)));
    await seedFiles(svc, top.id, 1_600, m.id);
    for (const f of [...subs, ...deep]) await seedFiles(svc, f.id, 20, m.id);
    const movers = await Promise.all(Array.from({ length: 60 }, (_, i) => folder(`mover-${i}`)));
    const targets = [top, ...subs, ...deep];
    const seeded = 1 + 16 + 1_600 + 16 * 20;

    let seen = false;
    let deleting = true;
    let n = 0;
    const outcomes: Outcome[] = [];
    const record = (what: Outcome['what'], late: boolean, r: { status: number; body: any }) =>
      outcomes.push({ what, late, status: r.status, code: r.body?.error?.code, item: r.status < 300 ? r.body.data : undefined });
    const writer = async (w: number) => {
      while (deleting) {
        const i = n++;
        const target = targets[i % targets.length]!;
        const late = seen;
        if (w === 0 && movers.length) record('move', late, await m.client.post(`/workspace/items/${movers.pop()!.id}/move`, { parent_id: target.id }));
        else if (w === 1) record('upload', late, await upload(svc.url, m.key, '/workspace/files/upload', `racing ${i}`, { fields: { name: `u-${i}`, parent_id: target.id } }));
        else record('create', late, await m.client.post('/workspace/folders', { name: `c-${i}`, parent_id: target.id }));
      }
    };
    const watcher = async () => {
      while (!seen && deleting) seen = (await m.client.get(`/workspace/items/${top.id}`)).status === 404;
    };
    const writers = Promise.all([0, 1, 2].map(writer));
    await waitFor('writes landed before the delete', () => outcomes.filter((o) => o.item).length, (k) => k >= 6, 20_000);
    const [del] = await Promise.all([
      m.client.del(`/workspace/items/${top.id}`).finally(() => {
        deleting = false;
      }),
      watcher(),
      writers,
    ]);

    const done = expectOk(del);
    const ok = outcomes.filter((o) => o.item);
    const refused = outcomes.filter((o) => !o.item);
    expect(done).toEqual(expectOk(await m.client.get(`/workspace/deletions/${top.id}`)));
    expect(done).toMatchObject({ id: top.id, status: 'completed', folders_left: 0, deleted_by: m.id, deleted: seeded + ok.length });
    expect(outcomes.filter((o) => o.late).length).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o.late && o.item)).toEqual([]);
    for (const o of refused) expect([`404 WORKSPACE_ITEM_NOT_FOUND`, `409 WORKSPACE_FOLDER_DELETING`]).toContain(`${o.status} ${o.code}`);
    expect(refused.some((o) => o.code === 'WORKSPACE_FOLDER_DELETING')).toBe(true);

    // every item that made it in is deleted, its name freed; no folder of the tree keeps a child
    const made = ok.map((o) => o.item!);
    const stored = await svc.store.getMany<WorkspaceItem>(made.map((i) => workspaceKeys.item(i.id)));
    expect(stored.filter((r) => !r?.value.deleted_at).map((r) => r?.value)).toEqual([]);
    const names = await svc.store.getMany(made.map((i) => workspaceKeys.name(i.parent_id, i.name)));
    expect(names.filter(Boolean)).toEqual([]);
    for (const f of [...targets, ...made.filter((i) => i.kind === 'folder')]) expect(await svc.store.count(workspaceIndexes.children(f.id))).toBe(0);
    expect(await svc.store.count(workspaceIndexes.deletionFolders(top.id))).toBe(0);
    expect(await svc.store.range(workspaceIndexes.deleting, { limit: 10 })).toEqual([]);
    for (const i of made.slice(0, 20)) expectError(await m.client.get(`/workspace/items/${i.id}`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
  }, 60_000);

  it('a create or move into a live folder below a folder being deleted is refused 409 WORKSPACE_FOLDER_DELETING, as is a move out of it', async () => {
    const top = await folder('going');
    const sub = await folder('sub', top.id);
    const inner = await folder('inner', sub.id);
    const outside = await folder('outside');
    // the folder's own commit, as a stopped sweep leaves it: deleted, its children not reached yet
    const rec = (await svc.store.get<WorkspaceItem>(workspaceKeys.item(top.id)))!;
    const t = new Date().toISOString();
    const ok = await svc.store.commit([
      { op: 'put', key: workspaceKeys.item(top.id), value: { ...rec.value, deleted_at: t, updated_at: t }, expect: rec.version },
      { op: 'del', key: workspaceKeys.name(null, 'going') },
      { op: 'index', index: workspaceIndexes.children(null), member: top.id, remove: true },
    ]);
    expect(ok.ok).toBe(true);
    expectError(await m.client.post('/workspace/folders', { name: 'x', parent_id: top.id }), 404, 'WORKSPACE_ITEM_NOT_FOUND', 'parent_id');
    for (const parent_id of [sub.id, inner.id]) {
      const r = await m.client.post('/workspace/folders', { name: 'x', parent_id });
      expectError(r, 409, 'WORKSPACE_FOLDER_DELETING', 'parent_id');
      expect(r.body.error.details.folder_id).toBe(top.id);
      expectError(await upload(svc.url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'x.txt', parent_id } }), 409, 'WORKSPACE_FOLDER_DELETING', 'parent_id');
      expectError(await m.client.post(`/workspace/items/${outside.id}/move`, { parent_id }), 409, 'WORKSPACE_FOLDER_DELETING', 'parent_id');
    }
    expectError(await m.client.post(`/workspace/items/${inner.id}/move`, { parent_id: null }), 409, 'WORKSPACE_FOLDER_DELETING');
    expectError(await m.client.post(`/workspace/items/${inner.id}/move`, { name: 'renamed' }), 409, 'WORKSPACE_FOLDER_DELETING');
    expect(expectOk(await m.client.get(`/workspace/items/${outside.id}`)).parent_id).toBeNull();
  });
});
