/**
 * Artifacts over real HTTP, on both backends and both blob stores: upload (multipart and raw), list filters
 * and paging, download (whole, ranged, ?meta=true), private visibility, delete by owner or admin only,
 * and share links: on the filesystem the service's own signed link (valid, expired, tampered); on S3 a
 * presigned URL that S3 itself serves.
 */
import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { blobStoreOn, download, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, ULID, waitFor } from './support.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe.each(MATRIX(BACKENDS))('artifacts on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let url: string;
  let root: Member;
  let m: Member;
  let other: Member;

  beforeAll(async () => {
    url = (await servers.start(await blobs.env())).url;
    root = await bootstrap(url);
    m = await join(root.client, 'uploader');
    other = await join(root.client, 'bystander');
  });

  const put = async (who: Member, body: Buffer | string, opts: Parameters<typeof upload>[4] = {}) => expectOk(await upload(url, who.key, '/artifacts/upload', body, opts), 201);

  it('POST /artifacts/upload (multipart) answers the record with id, size and sha256; GET downloads it', async () => {
    const body = randomBytes(50_000);
    const a = await put(m, body, { multipart: true, type: 'application/pdf', filename: 'report.pdf', fields: { tags: 'q3,finance', metadata: '{"pages":3}' } });
    expect(a).toMatchObject({ name: 'report.pdf', content_type: 'application/pdf', size: body.length, sha256: sha(body), tags: ['q3', 'finance'], metadata: { pages: 3 }, visibility: 'org', uploaded_by: m.id });
    expect(a.id).toMatch(ULID);
    const d = await download(url, other.key, `/artifacts/${a.id}`);
    expect(d.status).toBe(200);
    expect(d.bytes.equals(body)).toBe(true);
    expect(d.headers.get('content-type')).toBe('application/pdf');
    expect(d.headers.get('etag')).toBe(`"${a.sha256}"`);
    expect(d.headers.get('content-disposition')).toContain('filename="report.pdf"');
    const r = await download(url, other.key, `/artifacts/${a.id}`, { range: 'bytes=100-199' });
    expect([r.status, r.headers.get('content-range')]).toEqual([206, `bytes 100-199/${body.length}`]);
    expect(r.bytes.equals(body.subarray(100, 200))).toBe(true);
    // If-Range: the artifact's tag keeps the range; any other tag (or a weak one, or a date) answers the whole artifact
    const kept = await download(url, other.key, `/artifacts/${a.id}`, { range: 'bytes=100-199', 'if-range': `"${a.sha256}"` });
    expect([kept.status, kept.bytes.equals(body.subarray(100, 200))]).toEqual([206, true]);
    for (const v of ['"0000"', `W/"${a.sha256}"`, new Date().toUTCString()]) {
      const whole = await download(url, other.key, `/artifacts/${a.id}`, { range: 'bytes=100-199', 'if-range': v });
      expect([whole.status, whole.headers.get('content-range'), whole.bytes.equals(body)]).toEqual([200, null, true]);
    }
    expect(expectOk(await other.client.get(`/artifacts/${a.id}?meta=true`))).toEqual(a);
  });

  it('POST /artifacts/upload (raw): name from the query, type from Content-Type; the same bytes twice are two artifacts, one content', async () => {
    const a = await put(m, 'raw artifact', { type: 'text/csv', fields: { name: 'data.csv' } });
    const b = await put(other, 'raw artifact', { type: 'text/csv', fields: { name: 'copy.csv' } });
    expect(a).toMatchObject({ name: 'data.csv', content_type: 'text/csv', size: 12, sha256: sha('raw artifact') });
    expect(b.id).not.toBe(a.id);
    expect(b.sha256).toBe(a.sha256);
    expectError(await upload(url, m.key, '/artifacts/upload', 'x'), 400, 'ARTIFACT_VALIDATION_FAILED', 'name');
    expectError(await upload(url, m.key, '/artifacts/upload', 'x', { fields: { name: 'v', visibility: 'public' } }), 400, 'ARTIFACT_VALIDATION_FAILED', 'visibility');
    expectError(await m.client.get('/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await m.client.get('/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV?meta=true'), 404, 'ARTIFACT_NOT_FOUND');
  });

  it('GET /artifacts/list filters by tag, content type, uploader and since, newest first, paged', async () => {
    const tag = 'list-' + randomBytes(3).toString('hex');
    const made = [
      await put(m, 'one', { type: 'text/plain', fields: { name: 'one', tags: tag } }),
      await put(other, 'two', { type: 'image/png', fields: { name: 'two', tags: tag } }),
      await put(m, 'three', { type: 'text/plain', fields: { name: 'three', tags: tag } }),
    ];
    const names = (r: any) => r.artifacts.map((a: any) => a.name);
    expect(names(expectOk(await m.client.get(`/artifacts/list?tag=${tag}`)))).toEqual(['three', 'two', 'one']);
    expect(names(expectOk(await m.client.get(`/artifacts/list?tag=${tag}&content_type=text/plain`)))).toEqual(['three', 'one']);
    expect(names(expectOk(await m.client.get(`/artifacts/list?tag=${tag}&uploaded_by=${other.id}`)))).toEqual(['two']);
    const byOther = expectOk(await m.client.get(`/artifacts/list?uploaded_by=${other.id}&limit=100`)).artifacts;
    expect(byOther.every((a: any) => a.uploaded_by === other.id)).toBe(true);
    const since = encodeURIComponent(made[2].created_at);
    expect(names(expectOk(await m.client.get(`/artifacts/list?tag=${tag}&since=${since}`)))).toEqual(['three']);
    const p1 = expectOk(await m.client.get(`/artifacts/list?tag=${tag}&limit=2`));
    expect([names(p1), p1.has_more]).toEqual([['three', 'two'], true]);
    const p2 = expectOk(await m.client.get(`/artifacts/list?tag=${tag}&limit=2&after=${p1.cursor}`));
    expect([names(p2), p2.has_more, p2.cursor]).toEqual([['one'], false, null]);
    expectError(await m.client.get('/artifacts/list?since=yesterday'), 400, 'VALIDATION_INVALID_TYPE', 'since');
  });

  it('a private artifact is visible to its uploader and admins only', async () => {
    const tag = 'private-' + randomBytes(3).toString('hex');
    const a = await put(m, 'secret', { fields: { name: 'secret.txt', visibility: 'private', tags: tag } });
    expect(a.visibility).toBe('private');
    expectError(await other.client.get(`/artifacts/${a.id}`), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await other.client.get(`/artifacts/${a.id}?meta=true`), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await other.client.post(`/artifacts/${a.id}/share`, {}), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await other.client.del(`/artifacts/${a.id}`), 404, 'ARTIFACT_NOT_FOUND');
    expect(expectOk(await other.client.get(`/artifacts/list?tag=${tag}`)).artifacts).toEqual([]);
    expect(expectOk(await m.client.get(`/artifacts/list?tag=${tag}`)).artifacts.map((x: any) => x.id)).toEqual([a.id]);
    expect(expectOk(await root.client.get(`/artifacts/list?tag=${tag}`)).artifacts.map((x: any) => x.id)).toEqual([a.id]);
    expect((await download(url, root.key, `/artifacts/${a.id}`)).bytes.toString()).toBe('secret');
  });

  it('DELETE /artifacts/:id: not by another member (403), by the owner, by an admin', async () => {
    const a = await put(m, 'delete me', { fields: { name: 'd1' } });
    const b = await put(m, 'delete me too', { fields: { name: 'd2' } });
    expectError(await other.client.del(`/artifacts/${a.id}`), 403, 'ARTIFACT_DELETE_DENIED');
    expect(expectOk(await m.client.del(`/artifacts/${a.id}`)).id).toBe(a.id);
    expectError(await m.client.get(`/artifacts/${a.id}`), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await m.client.del(`/artifacts/${a.id}`), 404, 'ARTIFACT_NOT_FOUND');
    expect(expectOk(await root.client.del(`/artifacts/${b.id}`)).id).toBe(b.id);
    const listed = expectOk(await m.client.get(`/artifacts/list?uploaded_by=${m.id}&limit=100`)).artifacts.map((x: any) => x.id);
    expect(listed).not.toContain(a.id);
    expect(listed).not.toContain(b.id);
  });

  it('POST /artifacts/:id/share answers a URL that serves the artifact without a key', async () => {
    const body = randomBytes(10_000);
    const a = await put(m, body, { type: 'application/zip', fields: { name: 'bundle.zip' } });
    const before = Date.now();
    const s = expectOk(await other.client.post(`/artifacts/${a.id}/share`, { expires_in: 120 }));
    const expiresAt = Date.parse(s.expires_at);
    expect(expiresAt).toBeGreaterThan(before + 118_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 121_000);
    const res = await fetch(s.url);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(body)).toBe(true);
    const dflt = expectOk(await m.client.post(`/artifacts/${a.id}/share`));
    expect(Date.parse(dflt.expires_at)).toBeGreaterThan(Date.now() + 3_590_000);
    if (blob === 'filesystem') expect(s.url.startsWith(url.replace('127.0.0.1', 'localhost')) || s.url.startsWith(url)).toBe(true);
    else expect(new URL(s.url).searchParams.get('X-Amz-Signature')).toBeTruthy();
    expectError(await m.client.post(`/artifacts/${a.id}/share`, { expires_in: 0 }), 400, 'ARTIFACT_VALIDATION_FAILED', 'expires_in');
    expectError(await m.client.post(`/artifacts/${a.id}/share`, { expires_in: 8 * 24 * 3600 }), 400, 'ARTIFACT_VALIDATION_FAILED', 'expires_in');
    expectError(await m.client.post('/artifacts/01ARZ3NDEKTSV4RRFFQ69G5FAV/share', {}), 404, 'ARTIFACT_NOT_FOUND');
  });

  if (blob === 'filesystem') {
    it('filesystem share links: ranged, tampered (403), for another artifact (403), expired (403), deleted artifact (404)', async () => {
      const a = await put(m, '0123456789', { type: 'text/plain', fields: { name: 'shared.txt' } });
      const b = await put(m, 'other', { fields: { name: 'other.txt' } });
      const s = expectOk(await m.client.post(`/artifacts/${a.id}/share`, { expires_in: 60 }));
      const link = new URL(s.url);
      const path = link.pathname + link.search;
      const part = await download(url, undefined, path, { range: 'bytes=0-3' });
      expect([part.status, part.bytes.toString()]).toEqual([206, '0123']);
      expect((await download(url, undefined, path, { range: 'bytes=0-3', 'if-range': part.headers.get('etag')! })).status).toBe(206);
      const stale = await download(url, undefined, path, { range: 'bytes=0-3', 'if-range': '"another"' });
      expect([stale.status, stale.bytes.toString()]).toEqual([200, '0123456789']);
      const sig = link.searchParams.get('sig')!;
      const expires = Number(link.searchParams.get('expires'));
      const flipped = sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A');
      for (const bad of [
        `/artifacts/${a.id}/shared?expires=${expires}&sig=${flipped}`,
        `/artifacts/${a.id}/shared?expires=${expires + 3600}&sig=${sig}`,
        `/artifacts/${b.id}/shared?expires=${expires}&sig=${sig}`,
        `/artifacts/${a.id}/shared?expires=${expires}`,
        `/artifacts/${a.id}/shared`,
      ]) {
        const r = await download(url, undefined, bad);
        expectError({ status: r.status, body: r.json() }, 403, 'ARTIFACT_SHARE_INVALID');
      }
      const short = expectOk(await m.client.post(`/artifacts/${a.id}/share`, { expires_in: 1 }));
      const shortPath = new URL(short.url).pathname + new URL(short.url).search;
      expect((await download(url, undefined, shortPath)).status).toBe(200);
      const expired = await waitFor('the one-second link to expire', () => download(url, undefined, shortPath), (r) => r.status !== 200, 5000, 100);
      expectError({ status: expired.status, body: expired.json() }, 403, 'ARTIFACT_SHARE_INVALID');
      expect(expired.json().error.message).toMatch(/expired/);
      expectOk(await m.client.del(`/artifacts/${a.id}`));
      const gone = await download(url, undefined, path);
      expectError({ status: gone.status, body: gone.json() }, 404, 'ARTIFACT_NOT_FOUND');
    });
  }
});
