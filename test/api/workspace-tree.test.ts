/**
 * The workspace tree over real HTTP, on both backends and both blob stores: folders, listing with paging and
 * kind filter, metadata updates, move and rename (cycles and name clashes refused), and soft delete of a
 * whole subtree (names freed, content gone with it).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { blobStoreOn, download, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk, ULID } from './support.js';

describe.each(MATRIX(BACKENDS))('workspace tree on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let svc: Started;
  let url: string;
  let root: Member;
  let m: Member;

  beforeAll(async () => {
    svc = await servers.start(await blobs.env());
    url = svc.url;
    root = await bootstrap(url);
    m = await join(root.client, 'editor');
  });

  const folder = async (name: string, parent_id?: string | null) => expectOk(await m.client.post('/workspace/folders', { name, parent_id }), 201);

  it('POST /workspace/folders makes folders at the top level and inside folders; GET shows them', async () => {
    const top = await folder('projects');
    expect(top).toMatchObject({ kind: 'folder', name: 'projects', parent_id: null, tags: [], metadata: {}, created_by: m.id, deleted_at: null });
    expect(top.id).toMatch(ULID);
    const inner = expectOk(await m.client.post('/workspace/folders', { name: 'alpha', parent_id: top.id, tags: ['t1'], metadata: { owner: 'x' } }), 201);
    expect(inner).toMatchObject({ parent_id: top.id, tags: ['t1'], metadata: { owner: 'x' } });
    expect(expectOk(await root.client.get(`/workspace/items/${inner.id}`))).toEqual(inner);
  });

  it('refuses a missing name, a bad name, a missing parent, a file as parent, and a name taken in the folder (any case)', async () => {
    expectError(await m.client.post('/workspace/folders', {}), 400, 'WORKSPACE_VALIDATION_FAILED', 'name');
    for (const name of ['a/b', '..', ' padded', 'tab\there']) expectError(await m.client.post('/workspace/folders', { name }), 400, 'WORKSPACE_VALIDATION_FAILED', 'name');
    expectError(await m.client.post('/workspace/folders', { name: 'x', parent_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }), 404, 'WORKSPACE_ITEM_NOT_FOUND', 'parent_id');
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'plain', { fields: { name: 'leaf.txt' } }), 201);
    expectError(await m.client.post('/workspace/folders', { name: 'x', parent_id: f.id }), 422, 'WORKSPACE_NOT_A_FOLDER', 'parent_id');
    await folder('Unique');
    expectError(await m.client.post('/workspace/folders', { name: 'unique' }), 409, 'WORKSPACE_NAME_CONFLICT', 'name');
    expectError(await upload(url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'UNIQUE' } }), 409, 'WORKSPACE_NAME_CONFLICT', 'name');
    expectError(await m.client.get('/workspace/items/01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'WORKSPACE_ITEM_NOT_FOUND');
  });

  it('GET /workspace/items lists a folder newest first, pages, and filters by kind', async () => {
    const dir = await folder('listing');
    const made: any[] = [];
    for (let i = 0; i < 3; i++) made.push(await folder(`sub${i}`, dir.id));
    for (let i = 0; i < 2; i++) made.push(expectOk(await upload(url, m.key, '/workspace/files/upload', `file ${i}`, { fields: { name: `f${i}.txt`, parent_id: dir.id } }), 201));
    const ids = made.map((x) => x.id).reverse();
    const p1 = expectOk(await m.client.get(`/workspace/items?parent_id=${dir.id}&limit=2`));
    expect(p1.items.map((x: any) => x.id)).toEqual(ids.slice(0, 2));
    expect(p1.has_more).toBe(true);
    const p2 = expectOk(await m.client.get(`/workspace/items?parent_id=${dir.id}&limit=2&after=${p1.cursor}`));
    const p3 = expectOk(await m.client.get(`/workspace/items?parent_id=${dir.id}&limit=2&after=${p2.cursor}`));
    expect([...p2.items, ...p3.items].map((x: any) => x.id)).toEqual(ids.slice(2));
    expect(p3).toMatchObject({ has_more: false, cursor: null });
    expect(expectOk(await m.client.get(`/workspace/items?parent_id=${dir.id}&kind=file`)).items.map((x: any) => x.name)).toEqual(['f1.txt', 'f0.txt']);
    expect(expectOk(await m.client.get(`/workspace/items?parent_id=${dir.id}&kind=folder`)).items).toHaveLength(3);
    // the top level holds the folder, not its children
    const top = expectOk(await m.client.get('/workspace/items?limit=100')).items.map((x: any) => x.id);
    expect(top).toContain(dir.id);
    expect(top).not.toContain(made[0].id);
    expectError(await m.client.get('/workspace/items?kind=link'), 400, 'VALIDATION_INVALID_TYPE', 'kind');
    expectError(await m.client.get('/workspace/items?parent_id=01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'WORKSPACE_ITEM_NOT_FOUND');
  });

  it('PATCH /workspace/items/:id updates tags and metadata only', async () => {
    const f = await folder('patched');
    const p = expectOk(await m.client.patch(`/workspace/items/${f.id}`, { tags: ['a', 'b'], metadata: { k: 1 } }));
    expect(p).toMatchObject({ id: f.id, name: 'patched', tags: ['a', 'b'], metadata: { k: 1 } });
    expect(Date.parse(p.updated_at)).toBeGreaterThanOrEqual(Date.parse(f.updated_at));
    expect(expectOk(await m.client.patch(`/workspace/items/${f.id}`, { metadata: {} }))).toMatchObject({ tags: ['a', 'b'], metadata: {} });
    expectError(await m.client.patch(`/workspace/items/${f.id}`, { tags: 'a' }), 400, 'WORKSPACE_VALIDATION_FAILED', 'tags');
    expectError(await m.client.patch('/workspace/items/01ARZ3NDEKTSV4RRFFQ69G5FAV', { tags: [] }), 404, 'WORKSPACE_ITEM_NOT_FOUND');
  });

  it('POST /workspace/items/:id/move moves and renames; the old name is free, the new one taken', async () => {
    const a = await folder('move-a');
    const b = await folder('move-b');
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'moving', { fields: { name: 'doc.txt', parent_id: a.id } }), 201);
    const moved = expectOk(await m.client.post(`/workspace/items/${f.id}/move`, { parent_id: b.id, name: 'renamed.txt' }));
    expect(moved).toMatchObject({ id: f.id, parent_id: b.id, name: 'renamed.txt', current_revision_id: f.current_revision_id });
    expect(expectOk(await m.client.get(`/workspace/items?parent_id=${a.id}`)).items).toEqual([]);
    expect(expectOk(await m.client.get(`/workspace/items?parent_id=${b.id}`)).items.map((x: any) => x.id)).toEqual([f.id]);
    // the old name in a is free again; the new name in b is taken
    expectOk(await upload(url, m.key, '/workspace/files/upload', 'new', { fields: { name: 'doc.txt', parent_id: a.id } }), 201);
    expectError(await m.client.post('/workspace/folders', { name: 'Renamed.TXT', parent_id: b.id }), 409, 'WORKSPACE_NAME_CONFLICT');
    // rename in place, then a case-only rename of itself
    expect(expectOk(await m.client.post(`/workspace/items/${f.id}/move`, { name: 'final.txt' }))).toMatchObject({ parent_id: b.id, name: 'final.txt' });
    expect(expectOk(await m.client.post(`/workspace/items/${f.id}/move`, { name: 'FINAL.txt' }))).toMatchObject({ name: 'FINAL.txt' });
    // to the top level
    expect(expectOk(await m.client.post(`/workspace/items/${f.id}/move`, { parent_id: null }))).toMatchObject({ parent_id: null, name: 'FINAL.txt' });
    await expect(download(url, m.key, `/workspace/files/${f.id}/content`).then((d) => d.bytes.toString())).resolves.toBe('moving');
  });

  it('move refuses a name clash in the target folder and changes nothing', async () => {
    const a = await folder('clash-a');
    const b = await folder('clash-b');
    const x = await folder('same', a.id);
    await folder('same', b.id);
    expectError(await m.client.post(`/workspace/items/${x.id}/move`, { parent_id: b.id }), 409, 'WORKSPACE_NAME_CONFLICT', 'name');
    expect(expectOk(await m.client.get(`/workspace/items/${x.id}`))).toMatchObject({ parent_id: a.id, name: 'same' });
  });

  it('move refuses cycles: into itself, its child, its grandchild; into a file; to a missing folder', async () => {
    const top = await folder('cycle-top');
    const child = await folder('child', top.id);
    const grandchild = await folder('grandchild', child.id);
    for (const target of [top.id, child.id, grandchild.id]) {
      expectError(await m.client.post(`/workspace/items/${top.id}/move`, { parent_id: target }), 422, 'WORKSPACE_MOVE_CYCLE', 'parent_id');
    }
    expectError(await m.client.post(`/workspace/items/${child.id}/move`, { parent_id: grandchild.id }), 422, 'WORKSPACE_MOVE_CYCLE');
    const file = expectOk(await upload(url, m.key, '/workspace/files/upload', 'f', { fields: { name: 'f', parent_id: top.id } }), 201);
    expectError(await m.client.post(`/workspace/items/${child.id}/move`, { parent_id: file.id }), 422, 'WORKSPACE_NOT_A_FOLDER');
    expectError(await m.client.post(`/workspace/items/${child.id}/move`, { parent_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }), 404, 'WORKSPACE_ITEM_NOT_FOUND');
    // a legal move of the grandchild up to the top level still works, and the tree is unchanged otherwise
    expect(expectOk(await m.client.post(`/workspace/items/${grandchild.id}/move`, { parent_id: null }))).toMatchObject({ parent_id: null });
    expect(expectOk(await m.client.get(`/workspace/items/${child.id}`)).parent_id).toBe(top.id);
  });

  it('concurrent crossing moves (a into b, b into a) never both succeed', async () => {
    for (let round = 0; round < 5; round++) {
      const a = await folder(`race-a${round}`);
      const b = await folder(`race-b${round}`);
      const [ra, rb] = await Promise.all([m.client.post(`/workspace/items/${a.id}/move`, { parent_id: b.id }), m.client.post(`/workspace/items/${b.id}/move`, { parent_id: a.id })]);
      expect([ra.status, rb.status].sort()).toEqual([200, 422]);
      const [ga, gb] = [expectOk(await m.client.get(`/workspace/items/${a.id}`)), expectOk(await m.client.get(`/workspace/items/${b.id}`))];
      expect(ga.parent_id === b.id && gb.parent_id === a.id).toBe(false);
    }
  });

  it('DELETE /workspace/items/:id soft-deletes the whole subtree and frees its names', async () => {
    const top = await folder('doomed');
    const sub = await folder('sub', top.id);
    const file = expectOk(await upload(url, m.key, '/workspace/files/upload', 'bye', { fields: { name: 'f.txt', parent_id: sub.id } }), 201);
    const out = expectOk(await m.client.del(`/workspace/items/${top.id}`));
    expect(out).toMatchObject({ id: top.id, status: 'completed', deleted: 3, folders_left: 0, deleted_by: m.id });
    expect(expectOk(await root.client.get(`/workspace/deletions/${top.id}`))).toEqual(out);
    for (const id of [top.id, sub.id, file.id]) expectError(await m.client.get(`/workspace/items/${id}`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
    expectError(await m.client.get(`/workspace/files/${file.id}/content`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
    expectError(await m.client.get(`/workspace/revisions/${file.current_revision_id}/content`), 404, 'WORKSPACE_REVISION_NOT_FOUND');
    expectError(await m.client.get(`/workspace/items/${file.id}/history`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
    expectError(await m.client.del(`/workspace/items/${top.id}`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
    expect(expectOk(await m.client.get('/workspace/items?limit=100')).items.map((x: any) => x.id)).not.toContain(top.id);
    // the name is free again at the top level
    expect((await folder('doomed')).id).not.toBe(top.id);
  });

  it('an identity without an active membership is refused on every workspace route', async () => {
    const s = await join(root.client, 'suspended-ws');
    const f = await folder('members-only');
    const ms = ((await root.client.get('/org/company/memberships?limit=100')).body.data.memberships as any[]).find((x) => x.identity_id === s.id);
    expect((await root.client.patch(`/org/company/memberships/${ms.id}/status`, { status: 'suspended' })).status).toBe(200);
    const refused = [
      await s.client.post('/workspace/folders', { name: 'nope' }),
      await s.client.get('/workspace/items'),
      await s.client.get(`/workspace/items/${f.id}`),
      await s.client.patch(`/workspace/items/${f.id}`, { tags: [] }),
      await s.client.post(`/workspace/items/${f.id}/move`, { name: 'x' }),
      await s.client.del(`/workspace/items/${f.id}`),
      await s.client.get(`/workspace/deletions/${f.id}`),
      await upload(url, s.key, '/workspace/files/upload', 'x', { fields: { name: 'nope.txt' } }),
    ];
    for (const r of refused) expectError(r, 403, 'POLICY_MEMBERSHIP_REQUIRED');
    expect(expectOk(await m.client.get(`/workspace/items/${f.id}`)).deleted_at).toBeNull();
  });
});
