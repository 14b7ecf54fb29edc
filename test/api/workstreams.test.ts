/**
 * Workstreams over real HTTP, on both backends and both blob stores: create, list, show, update, links to
 * every kind the service resolves (a missing or invisible target 404s), and the context: each linked
 * resource the caller may see, signals with their thread, files with their latest revision; what a key's
 * scopes or an artifact's privacy hide is counted, never shown.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { blobStoreOn, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, ULID } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(MATRIX(BACKENDS))('workstreams on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let url: string;
  let root: Member;
  let m: Member;
  /** m's key limited to ring "allowed" */
  let scoped: Client;
  let sAllowed: any;
  let sReply: any;
  let sDenied: any;
  let privateArtifact: any;
  let orgArtifact: any;
  let file: any;
  let v2: any;

  beforeAll(async () => {
    url = (await servers.start(await blobs.env())).url;
    root = await bootstrap(url);
    m = await join(root.client, 'planner');
    for (const name of ['allowed', 'denied']) expectOk(await root.client.post('/rings', { name, members: [m.id] }), 201);
    scoped = new Client(url, expectOk(await root.client.post('/admin/api-keys', { owner: m.id, permissions: { rings: ['allowed'] } }), 201).api_key);
    sAllowed = await emitOk(root.client, { signal_type: 'pulse', content: 'in allowed', to_ring: 'allowed' });
    sReply = await emitOk(root.client, { signal_type: 'pulse', content: 'reply', to_ring: 'allowed', parent_id: sAllowed.id });
    sDenied = await emitOk(root.client, { signal_type: 'pulse', content: 'in denied', to_ring: 'denied' });
    privateArtifact = expectOk(await upload(url, root.key, '/artifacts/upload', 'admin only', { fields: { name: 'p.txt', visibility: 'private' } }), 201);
    orgArtifact = expectOk(await upload(url, root.key, '/artifacts/upload', 'for all', { fields: { name: 'o.txt' } }), 201);
    file = expectOk(await upload(url, m.key, '/workspace/files/upload', 'draft 1', { fields: { name: 'plan.md' } }), 201);
    v2 = expectOk(await upload(url, m.key, `/workspace/files/${file.id}/content`, 'draft 2', { method: 'PUT' }));
  });

  it('POST /workstreams creates with defaults; GET and PATCH show and update; bad input is refused', async () => {
    const w = expectOk(await m.client.post('/workstreams', { name: 'launch' }), 201);
    expect(w).toMatchObject({ name: 'launch', description: '', status: 'active', tags: [], links: [], created_by: m.id });
    expect(w.id).toMatch(ULID);
    expect(expectOk(await root.client.get(`/workstreams/${w.id}`))).toEqual(w);
    const p = expectOk(await root.client.patch(`/workstreams/${w.id}`, { status: 'paused', description: 'on hold', tags: ['q4'] }));
    expect(p).toMatchObject({ id: w.id, name: 'launch', status: 'paused', description: 'on hold', tags: ['q4'] });
    expect(expectOk(await m.client.patch(`/workstreams/${w.id}`, { name: 'relaunch' }))).toMatchObject({ name: 'relaunch', status: 'paused' });
    expectError(await m.client.post('/workstreams', {}), 400, 'WORKSTREAM_VALIDATION_FAILED', 'name');
    expectError(await m.client.post('/workstreams', { name: 'x', status: 'archived' }), 400, 'WORKSTREAM_VALIDATION_FAILED', 'status');
    expectError(await m.client.patch(`/workstreams/${w.id}`, { tags: 'q4' }), 400, 'WORKSTREAM_VALIDATION_FAILED', 'tags');
    expectError(await m.client.get(`/workstreams/${UNKNOWN}`), 404, 'WORKSTREAM_NOT_FOUND');
    expectError(await m.client.patch(`/workstreams/${UNKNOWN}`, { status: 'done' }), 404, 'WORKSTREAM_NOT_FOUND');
  });

  it('GET /workstreams lists newest first, filters by status and tag, pages', async () => {
    const tag = 'list-' + Date.now();
    const a = expectOk(await m.client.post('/workstreams', { name: 'a', tags: [tag] }), 201);
    const b = expectOk(await m.client.post('/workstreams', { name: 'b', tags: [tag], status: 'done' }), 201);
    const c = expectOk(await m.client.post('/workstreams', { name: 'c', tags: [tag] }), 201);
    const ids = (r: any) => r.workstreams.map((w: any) => w.id);
    expect(ids(expectOk(await m.client.get(`/workstreams?tag=${tag}`)))).toEqual([c.id, b.id, a.id]);
    expect(ids(expectOk(await m.client.get(`/workstreams?tag=${tag}&status=done`)))).toEqual([b.id]);
    const p1 = expectOk(await m.client.get(`/workstreams?tag=${tag}&limit=2`));
    expect([ids(p1), p1.has_more]).toEqual([[c.id, b.id], true]);
    const p2 = expectOk(await m.client.get(`/workstreams?tag=${tag}&limit=2&after=${p1.cursor}`));
    expect([ids(p2), p2.has_more]).toEqual([[a.id], false]);
    expectError(await m.client.get('/workstreams?status=maybe'), 400, 'VALIDATION_INVALID_TYPE', 'status');
  });

  it('POST /workstreams/:id/links links every resolvable kind once; a missing target, memory, or itself is refused', async () => {
    const w = expectOk(await m.client.post('/workstreams', { name: 'links' }), 201);
    const other = expectOk(await m.client.post('/workstreams', { name: 'neighbour' }), 201);
    for (const [kind, id] of [['signal', sAllowed.id], ['workspace_item', file.id], ['artifact', orgArtifact.id], ['workstream', other.id]]) {
      expectOk(await m.client.post(`/workstreams/${w.id}/links`, { kind, id }), 201);
    }
    const again = expectOk(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'signal', id: sAllowed.id }), 201);
    expect(again.links.map((l: any) => `${l.kind}:${l.id}`)).toEqual([`signal:${sAllowed.id}`, `workspace_item:${file.id}`, `artifact:${orgArtifact.id}`, `workstream:${other.id}`]);
    expect(again.links[0]).toMatchObject({ linked_by: m.id });
    for (const kind of ['signal', 'workspace_item', 'artifact', 'workstream', 'memory']) {
      const r = await m.client.post(`/workstreams/${w.id}/links`, { kind, id: UNKNOWN });
      expectError(r, 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND');
      expect(r.body.error.details).toMatchObject({ kind, id: UNKNOWN });
    }
    expectError(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'workstream', id: w.id }), 400, 'WORKSTREAM_VALIDATION_FAILED');
    expectError(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'thing', id: 'x' }), 400, 'WORKSTREAM_VALIDATION_FAILED', 'kind');
    expectError(await m.client.post(`/workstreams/${UNKNOWN}/links`, { kind: 'signal', id: sAllowed.id }), 404, 'WORKSTREAM_NOT_FOUND');
  });

  it('linking refuses what the caller may not see: a signal outside the key scope, another member\'s private artifact', async () => {
    const w = expectOk(await m.client.post('/workstreams', { name: 'acl links' }), 201);
    expectError(await scoped.post(`/workstreams/${w.id}/links`, { kind: 'signal', id: sDenied.id }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND');
    expectError(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'artifact', id: privateArtifact.id }), 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND');
    expectOk(await scoped.post(`/workstreams/${w.id}/links`, { kind: 'signal', id: sAllowed.id }), 201);
    expect(expectOk(await m.client.get(`/workstreams/${w.id}`)).links).toHaveLength(1);
  });

  it('DELETE /workstreams/:id/links?kind&id removes a link; an absent one is 404', async () => {
    const w = expectOk(await m.client.post('/workstreams', { name: 'unlink' }), 201);
    expectOk(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'artifact', id: orgArtifact.id }), 201);
    expectOk(await m.client.post(`/workstreams/${w.id}/links`, { kind: 'signal', id: sAllowed.id }), 201);
    const after = expectOk(await m.client.del(`/workstreams/${w.id}/links?kind=artifact&id=${orgArtifact.id}`));
    expect(after.links.map((l: any) => l.kind)).toEqual(['signal']);
    expectError(await m.client.del(`/workstreams/${w.id}/links?kind=artifact&id=${orgArtifact.id}`), 404, 'WORKSTREAM_LINK_NOT_FOUND');
    expectError(await m.client.del(`/workstreams/${w.id}/links?kind=artifact`), 400, 'VALIDATION_FIELD_REQUIRED', 'id');
  });

  it('GET /workstreams/:id/context expands what the caller may see and counts what it may not', async () => {
    const w = expectOk(await root.client.post('/workstreams', { name: 'context' }), 201);
    const other = expectOk(await root.client.post('/workstreams', { name: 'upstream', status: 'done' }), 201);
    for (const [kind, id] of [
      ['signal', sAllowed.id],
      ['signal', sDenied.id],
      ['workspace_item', file.id],
      ['artifact', orgArtifact.id],
      ['artifact', privateArtifact.id],
      ['workstream', other.id],
    ]) {
      expectOk(await root.client.post(`/workstreams/${w.id}/links`, { kind, id }), 201);
    }
    const full = expectOk(await root.client.get(`/workstreams/${w.id}/context`));
    expect(full.workstream.id).toBe(w.id);
    expect(full.hidden).toBe(0);
    expect(full.resources.map((r: any) => `${r.kind}:${r.id}`)).toEqual([
      `signal:${sAllowed.id}`, `signal:${sDenied.id}`, `workspace_item:${file.id}`, `artifact:${orgArtifact.id}`, `artifact:${privateArtifact.id}`, `workstream:${other.id}`,
    ]);
    const sig = full.resources[0];
    expect(sig.signal).toMatchObject({ id: sAllowed.id, content: 'in allowed' });
    expect(sig.thread.map((s: any) => s.id)).toEqual([sAllowed.id, sReply.id]);
    const item = full.resources[2];
    expect(item.item).toMatchObject({ id: file.id, name: 'plan.md', revision_count: 2 });
    expect(item.latest_revision).toMatchObject({ id: v2.current_revision_id, number: 2 });
    expect(full.resources[3].artifact).toMatchObject({ id: orgArtifact.id, name: 'o.txt' });
    expect(full.resources[5].workstream).toMatchObject({ id: other.id, status: 'done' });

    // a member: the admin's private artifact is hidden
    const member = expectOk(await m.client.get(`/workstreams/${w.id}/context`));
    expect(member.resources.map((r: any) => r.id)).not.toContain(privateArtifact.id);
    expect(member.hidden).toBe(1);
    // a key scoped to ring "allowed": also the signal in "denied" is hidden
    const narrow = expectOk(await scoped.get(`/workstreams/${w.id}/context`));
    expect(narrow.resources.map((r: any) => r.id)).toEqual([sAllowed.id, file.id, orgArtifact.id, other.id]);
    expect(narrow.hidden).toBe(2);
    expect(JSON.stringify(narrow)).not.toContain('in denied');

    // a deleted file drops out of the context for everyone
    const doomed = expectOk(await upload(url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'doomed.md' } }), 201);
    expectOk(await root.client.post(`/workstreams/${w.id}/links`, { kind: 'workspace_item', id: doomed.id }), 201);
    expectOk(await m.client.del(`/workspace/items/${doomed.id}`));
    const after = expectOk(await root.client.get(`/workstreams/${w.id}/context`));
    expect(after.resources.map((r: any) => r.id)).not.toContain(doomed.id);
    expect(after.hidden).toBe(1);
    expectError(await m.client.get(`/workstreams/${UNKNOWN}/context`), 404, 'WORKSTREAM_NOT_FOUND');
  });
});
