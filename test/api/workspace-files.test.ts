/**
 * Workspace files over real HTTP, on both backends and both blob stores: upload (raw and multipart),
 * streamed content with Content-Type, ETag and Range, new revisions guarded by If-Match (412 on a stale
 * revision), history newest first, historical content, and the upload cap (413).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join as joinPath } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { blobStoreOn, download, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

const CAP = 256 * 1024;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe.each(MATRIX(BACKENDS))('workspace files on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let svc: Started;
  let url: string;
  let root: Member;
  let m: Member;
  let other: Member;

  beforeAll(async () => {
    svc = await servers.start({ ...(await blobs.env()), MAX_UPLOAD_BYTES: String(CAP) });
    url = svc.url;
    root = await bootstrap(url);
    m = await join(root.client, 'writer');
    other = await join(root.client, 'other-writer');
  });

  it('POST /workspace/files/upload with a raw body: name and parent_id from the query, type from Content-Type', async () => {
    const dir = expectOk(await m.client.post('/workspace/folders', { name: 'raw' }), 201);
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'hello raw', { type: 'text/plain', fields: { name: 'hello.txt', parent_id: dir.id, tags: 'a,b' } }), 201);
    expect(f).toMatchObject({ kind: 'file', name: 'hello.txt', parent_id: dir.id, tags: ['a', 'b'], content_type: 'text/plain', size: 9, sha256: sha('hello raw'), revision_count: 1, created_by: m.id });
    const hist = expectOk(await m.client.get(`/workspace/items/${f.id}/history`));
    expect(hist.revisions).toEqual([expect.objectContaining({ id: f.current_revision_id, item_id: f.id, number: 1, sha256: sha('hello raw'), size: 9, content_type: 'text/plain', created_by: m.id })]);
  });

  it('POST /workspace/files/upload with multipart/form-data: fields, then the file part (its filename is the default name)', async () => {
    const body = randomBytes(70_000);
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', body, { multipart: true, type: 'image/png', filename: 'pic.png', fields: { tags: '["img"]', metadata: '{"w":3}' } }), 201);
    expect(f).toMatchObject({ name: 'pic.png', parent_id: null, tags: ['img'], metadata: { w: 3 }, content_type: 'image/png', size: body.length, sha256: sha(body) });
    const d = await download(url, m.key, `/workspace/files/${f.id}/content`);
    expect(d.status).toBe(200);
    expect(d.bytes.equals(body)).toBe(true);
    expect(d.headers.get('content-type')).toBe('image/png');
    expect(d.headers.get('etag')).toBe(`"${f.current_revision_id}"`);
    expect(d.headers.get('content-length')).toBe(String(body.length));
    expect(d.headers.get('accept-ranges')).toBe('bytes');
  });

  it('refuses uploads without a name, with bad fields, without a file part, or into a missing folder', async () => {
    expectError(await upload(url, m.key, '/workspace/files/upload', 'x'), 400, 'WORKSPACE_VALIDATION_FAILED', 'name');
    expectError(await upload(url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'a', metadata: '[1]' } }), 400, 'WORKSPACE_VALIDATION_FAILED', 'metadata');
    expectError(await upload(url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'a', tags: '[1' } }), 400, 'WORKSPACE_VALIDATION_FAILED', 'tags');
    expectError(await upload(url, m.key, '/workspace/files/upload', 'x', { fields: { name: 'a', parent_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' } }), 404, 'WORKSPACE_ITEM_NOT_FOUND', 'parent_id');
    const fd = new FormData();
    fd.append('name', 'no-file');
    const r = await fetch(url + '/workspace/files/upload', { method: 'POST', headers: { authorization: `Bearer ${m.key}` }, body: fd });
    const body = await r.json();
    expectError({ status: r.status, body }, 400, 'WORKSPACE_VALIDATION_FAILED', 'file');
    const bad = await fetch(url + '/workspace/files/upload?name=b', { method: 'POST', headers: { authorization: `Bearer ${m.key}`, 'content-type': 'multipart/form-data' }, body: 'x' });
    expectError({ status: bad.status, body: await bad.json() }, 400, 'WORKSPACE_VALIDATION_FAILED');
  });

  it('GET content honours Range: a slice (206 with Content-Range), an open end, a suffix, and an unsatisfiable range (416)', async () => {
    const body = Buffer.from('0123456789abcdef');
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', body, { type: 'text/plain', fields: { name: 'ranged.txt' } }), 201);
    const path = `/workspace/files/${f.id}/content`;
    const slice = await download(url, m.key, path, { range: 'bytes=2-5' });
    expect([slice.status, slice.bytes.toString(), slice.headers.get('content-range'), slice.headers.get('etag')]).toEqual([206, '2345', 'bytes 2-5/16', `"${f.current_revision_id}"`]);
    const open = await download(url, m.key, path, { range: 'bytes=10-' });
    expect([open.status, open.bytes.toString(), open.headers.get('content-range')]).toEqual([206, 'abcdef', 'bytes 10-15/16']);
    const suffix = await download(url, m.key, path, { range: 'bytes=-3' });
    expect([suffix.status, suffix.bytes.toString()]).toEqual([206, 'def']);
    const past = await download(url, m.key, path, { range: 'bytes=3-999' });
    expect([past.status, past.bytes.toString(), past.headers.get('content-range')]).toEqual([206, '3456789abcdef', 'bytes 3-15/16']);
    const whole = await download(url, m.key, path, { range: 'bytes=0-1,4-5' });
    expect([whole.status, whole.bytes.toString()]).toEqual([200, body.toString()]);
    const bad = await download(url, m.key, path, { range: 'bytes=16-' });
    expectError({ status: bad.status, body: bad.json() }, 416, 'RANGE_NOT_SATISFIABLE');
  });

  it('If-Range (RFC 9110 13.1.5): a resumed download of a file that changed gets the whole new content (200), never bytes of two revisions', async () => {
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', '0123456789', { type: 'text/plain', fields: { name: 'resumed.txt' } }), 201);
    const path = `/workspace/files/${f.id}/content`;
    const first = await download(url, m.key, path, { range: 'bytes=0-4' });
    const tag = first.headers.get('etag')!;
    expect([first.status, first.bytes.toString(), tag]).toEqual([206, '01234', `"${f.current_revision_id}"`]);
    // unchanged: the range is honoured
    const same = await download(url, m.key, path, { range: 'bytes=5-', 'if-range': tag });
    expect([same.status, same.bytes.toString(), same.headers.get('content-range')]).toEqual([206, '56789', 'bytes 5-9/10']);
    // changed: the whole current content, with its own tag
    const v2 = expectOk(await upload(url, m.key, path, 'ABCDEFGHIJKLMNOP', { method: 'PUT' }));
    const changed = await download(url, m.key, path, { range: 'bytes=5-', 'if-range': tag });
    expect([changed.status, changed.bytes.toString(), changed.headers.get('content-range'), changed.headers.get('etag')]).toEqual([200, 'ABCDEFGHIJKLMNOP', null, `"${v2.current_revision_id}"`]);
    // a weak tag or a date never matches; without If-Range the Range stands
    for (const v of [`W/${tag}`, `W/"${v2.current_revision_id}"`, new Date().toUTCString()]) expect((await download(url, m.key, path, { range: 'bytes=5-', 'if-range': v })).status).toBe(200);
    expect((await download(url, m.key, path, { range: 'bytes=5-', 'if-range': `"${v2.current_revision_id}"` })).bytes.toString()).toBe('FGHIJKLMNOP');
    // a revision's content: its tag is its id; another tag answers the whole revision
    const rev = `/workspace/revisions/${f.current_revision_id}/content`;
    expect((await download(url, m.key, rev, { range: 'bytes=8-', 'if-range': tag })).bytes.toString()).toBe('89');
    const other = await download(url, m.key, rev, { range: 'bytes=8-', 'if-range': `"${v2.current_revision_id}"` });
    expect([other.status, other.bytes.toString()]).toEqual([200, '0123456789']);
  });

  it('PUT /workspace/files/:id/content adds revisions; If-Match with a stale revision is 412 and writes nothing', async () => {
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'v1', { type: 'text/plain', fields: { name: 'doc.md' } }), 201);
    const r1 = f.current_revision_id;
    const v2 = expectOk(await upload(url, m.key, `/workspace/files/${f.id}/content`, 'version two', { method: 'PUT', type: 'text/markdown', headers: { 'if-match': `"${r1}"` } }));
    expect(v2).toMatchObject({ id: f.id, revision_count: 2, size: 11, content_type: 'text/markdown', sha256: sha('version two') });
    expect(v2.current_revision_id).not.toBe(r1);
    // another editor still holding r1 is refused; the content stays v2
    const stale = await upload(url, other.key, `/workspace/files/${f.id}/content`, 'lost update', { method: 'PUT', headers: { 'if-match': `"${r1}"` } });
    expectError(stale, 412, 'WORKSPACE_REVISION_MISMATCH');
    expect(stale.body.error.details.current_revision_id).toBe(v2.current_revision_id);
    expect((await download(url, m.key, `/workspace/files/${f.id}/content`)).bytes.toString()).toBe('version two');
    // no If-Match: last writer wins, still as a revision of its own; an unquoted id and * are accepted
    const v3 = expectOk(await upload(url, other.key, `/workspace/files/${f.id}/content`, 'three', { method: 'PUT' }));
    expect(v3).toMatchObject({ revision_count: 3, content_type: 'text/markdown' });
    const v4 = expectOk(await upload(url, m.key, `/workspace/files/${f.id}/content`, 'four', { method: 'PUT', headers: { 'if-match': v3.current_revision_id } }));
    expectOk(await upload(url, m.key, `/workspace/files/${f.id}/content`, 'five', { method: 'PUT', headers: { 'if-match': '*' } }));
    // history newest first, paged
    const h1 = expectOk(await m.client.get(`/workspace/items/${f.id}/history?limit=2`));
    expect(h1.revisions.map((r: any) => r.number)).toEqual([5, 4]);
    const h2 = expectOk(await m.client.get(`/workspace/items/${f.id}/history?limit=10&after=${h1.cursor}`));
    expect(h2.revisions.map((r: any) => r.number)).toEqual([3, 2, 1]);
    expect(h2.revisions[2].id).toBe(r1);
    expect(h2.revisions[0].created_by).toBe(other.id);
    // every revision's content stays readable
    const old = await download(url, m.key, `/workspace/revisions/${r1}/content`);
    expect([old.status, old.bytes.toString(), old.headers.get('etag'), old.headers.get('content-type')]).toEqual([200, 'v1', `"${r1}"`, 'text/plain']);
    const part = await download(url, m.key, `/workspace/revisions/${v4.current_revision_id}/content`, { range: 'bytes=1-2' });
    expect([part.status, part.bytes.toString()]).toEqual([206, 'ou']);
    expectError(await m.client.get('/workspace/revisions/01ARZ3NDEKTSV4RRFFQ69G5FAV/content'), 404, 'WORKSPACE_REVISION_NOT_FOUND');
  });

  it('concurrent writers holding the same revision: exactly one wins, the other gets 412', async () => {
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'base', { fields: { name: 'contended.txt' } }), 201);
    const h = { 'if-match': `"${f.current_revision_id}"` };
    const [a, b] = await Promise.all([
      upload(url, m.key, `/workspace/files/${f.id}/content`, 'from m', { method: 'PUT', headers: h }),
      upload(url, other.key, `/workspace/files/${f.id}/content`, 'from other', { method: 'PUT', headers: h }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 412]);
    const winner = a.status === 200 ? 'from m' : 'from other';
    expect((await download(url, m.key, `/workspace/files/${f.id}/content`)).bytes.toString()).toBe(winner);
    expect(expectOk(await m.client.get(`/workspace/items/${f.id}`)).revision_count).toBe(2);
  });

  it('content routes refuse folders and unknown ids', async () => {
    const dir = expectOk(await m.client.post('/workspace/folders', { name: 'not-a-file' }), 201);
    expectError(await m.client.get(`/workspace/files/${dir.id}/content`), 422, 'WORKSPACE_NOT_A_FILE');
    expectError(await upload(url, m.key, `/workspace/files/${dir.id}/content`, 'x', { method: 'PUT' }), 422, 'WORKSPACE_NOT_A_FILE');
    expectError(await upload(url, m.key, '/workspace/files/01ARZ3NDEKTSV4RRFFQ69G5FAV/content', 'x', { method: 'PUT' }), 404, 'WORKSPACE_ITEM_NOT_FOUND');
  });

  it('an empty file is a file of size 0', async () => {
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', '', { fields: { name: 'empty' } }), 201);
    expect(f).toMatchObject({ size: 0, sha256: sha(''), content_type: 'application/octet-stream' });
    const d = await download(url, m.key, `/workspace/files/${f.id}/content`);
    expect([d.status, d.bytes.length]).toEqual([200, 0]);
  });

  it('a client that goes away mid-upload leaves no item and no temporary object; the server serves on', async () => {
    const ac = new AbortController();
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        // most of the body, then the client stalls until it gives up
        if (sent >= 192 * 1024) return new Promise<void>(() => {});
        sent += 16 * 1024;
        c.enqueue(new Uint8Array(16 * 1024));
      },
    });
    const pending = fetch(url + '/workspace/files/upload?name=abandoned.bin', { method: 'POST', headers: { authorization: `Bearer ${m.key}` }, body, duplex: 'half', signal: ac.signal } as RequestInit).catch((e) => e);
    const tmp = joinPath(svc.env.DATA_DIR ?? '', 'blobs', 'tmp');
    if (blob === 'filesystem') await waitFor('the server to be writing the upload', () => readdir(tmp).catch(() => []), (names) => names.length === 1);
    else await waitFor('the client to have sent most of the body', async () => sent, (n) => n >= 192 * 1024);
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    if (blob === 'filesystem') await waitFor('the temporary upload to be removed', () => readdir(tmp), (names) => names.length === 0);
    expect(expectOk(await m.client.get('/workspace/items?limit=100')).items.map((x: any) => x.name)).not.toContain('abandoned.bin');
    expectOk(await upload(url, m.key, '/workspace/files/upload', 'after', { fields: { name: 'after-abort.txt' } }), 201);
  });

  it('an upload over MAX_UPLOAD_BYTES is 413 PAYLOAD_TOO_LARGE (raw and multipart) and creates nothing', async () => {
    const big = randomBytes(CAP + 1);
    expectError(await upload(url, m.key, '/workspace/files/upload', big, { fields: { name: 'big.bin' } }), 413, 'PAYLOAD_TOO_LARGE');
    expectError(await upload(url, m.key, '/workspace/files/upload', big, { multipart: true, fields: { name: 'big2.bin' } }), 413, 'PAYLOAD_TOO_LARGE');
    const f = expectOk(await upload(url, m.key, '/workspace/files/upload', 'small', { fields: { name: 'grows.bin' } }), 201);
    expectError(await upload(url, m.key, `/workspace/files/${f.id}/content`, big, { method: 'PUT' }), 413, 'PAYLOAD_TOO_LARGE');
    const names = expectOk(await m.client.get('/workspace/items?limit=100')).items.map((x: any) => x.name);
    expect(names).not.toContain('big.bin');
    expect(names).not.toContain('big2.bin');
    expect(expectOk(await m.client.get(`/workspace/items/${f.id}`)).revision_count).toBe(1);
    // exactly the cap is accepted
    expectOk(await upload(url, m.key, '/workspace/files/upload', big.subarray(0, CAP), { fields: { name: 'at-cap.bin' } }), 201);
  });
});
