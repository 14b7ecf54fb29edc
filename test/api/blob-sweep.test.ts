/**
 * The blob sweep, both backends and both blob stores: content no committed record names (left by an upload
 * whose commit never landed, or by a deleted artifact) is removed once older than BLOB_SWEEP_GRACE_MS;
 * content an artifact or a workspace revision names stays, and so does an orphan younger than the grace.
 */
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { blobStoreOn, download, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectOk, waitFor } from './support.js';

const GRACE_MS = 1500;

describe.each(MATRIX(BACKENDS))('blob sweep on %s with %s blobs', (backend, blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;
  const stored = async () => new Set((await svc.blobs.list(undefined, 10_000)).map((b) => b.sha256));
  /** content put through the blob port with no record naming it: what an upload whose commit never landed leaves */
  const orphan = async (text: string) => (await svc.blobs.put(Readable.from([Buffer.from(text)]), 1 << 20)).sha256;

  beforeAll(async () => {
    svc = await servers.start({ ...(await blobs.env()), BLOB_SWEEP_MS: '100', BLOB_SWEEP_GRACE_MS: String(GRACE_MS) });
    root = await bootstrap(svc.url);
  });

  it('an orphan and a deleted artifact\'s content are swept after the grace; named content stays', async () => {
    const kept = await upload(svc.url, root.key, '/artifacts/upload', 'kept artifact bytes', { fields: { name: 'kept.txt' } });
    expect(kept.status).toBe(201);
    const file = await upload(svc.url, root.key, '/workspace/files/upload', 'kept revision bytes', { fields: { name: 'kept.txt' } });
    expect(file.status).toBe(201);
    const gone = await upload(svc.url, root.key, '/artifacts/upload', 'deleted artifact bytes', { fields: { name: 'gone.txt' } });
    expect(gone.status).toBe(201);
    expectOk(await root.client.del(`/artifacts/${gone.body.data.id}`));
    const lost = await orphan('bytes of an upload whose commit never landed');
    const startedAt = Date.now();
    // younger than the grace: still there, whatever the sweep made of it meanwhile
    expect(await stored()).toContain(lost);
    await waitFor('the unreferenced blobs swept', stored, (s) => !s.has(lost) && !s.has(gone.body.data.sha256), 20_000, 50);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(GRACE_MS - 200);
    const left = await stored();
    expect(left.has(kept.body.data.sha256)).toBe(true);
    expect(left.has(file.body.data.sha256)).toBe(true);
    expect((await download(svc.url, root.key, `/artifacts/${kept.body.data.id}`)).bytes.toString()).toBe('kept artifact bytes');
    expect((await download(svc.url, root.key, `/workspace/files/${file.body.data.id}/content`)).bytes.toString()).toBe('kept revision bytes');
  });

  it('an orphan\'s content uploaded again is named by the new artifact and stays', async () => {
    const text = 'content first orphaned, then uploaded again';
    const sha = await orphan(text);
    const again = await upload(svc.url, root.key, '/artifacts/upload', text, { fields: { name: 'again.txt' } });
    expect(again.body.data.sha256).toBe(sha);
    // another orphan put after it: once it is swept, the re-uploaded content has been past its grace too
    const later = await orphan('a later orphan');
    await waitFor('the later orphan swept', stored, (s) => !s.has(later), 20_000, 50);
    expect((await stored()).has(sha)).toBe(true);
    expect((await download(svc.url, root.key, `/artifacts/${again.body.data.id}`)).bytes.toString()).toBe(text);
  });
});
