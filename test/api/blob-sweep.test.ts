/**
 * The blob sweep, both backends and both blob stores: content no committed record names (left by an upload
 * whose commit never landed, or by a deleted artifact) is removed once older than BLOB_SWEEP_GRACE_MS;
 * content an artifact or a workspace revision names stays, and so does an orphan younger than the grace;
 * a data dir from before the reference index is indexed once at startup, before any sweep.
 */
import { Readable } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { blobStoreOn, download, MATRIX, upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { BLOB_REFS_INDEXED, blobRefIndex, blobRefOp } from '../../src/blob/refs.js';
import { expectOk, waitFor } from './support.js';

const GRACE_MS = 3000;
/** S3 keeps write times in whole seconds (rounded down): an object may look up to a second older than it is */
const CLOCK_SLACK_MS = 1200;

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
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(GRACE_MS - CLOCK_SLACK_MS);
    const left = await stored();
    expect(left.has(kept.body.data.sha256)).toBe(true);
    expect(left.has(file.body.data.sha256)).toBe(true);
    expect((await download(svc.url, root.key, `/artifacts/${kept.body.data.id}`)).bytes.toString()).toBe('kept artifact bytes');
    expect((await download(svc.url, root.key, `/workspace/files/${file.body.data.id}/content`)).bytes.toString()).toBe('kept revision bytes');
  });

  it('a data dir from before the reference index has its artifacts\' and revisions\' content indexed at startup, so the sweep keeps it', async () => {
    const old = await servers.start({ ...(await blobs.env()), BLOB_SWEEP_MS: '0' });
    const owner = await bootstrap(old.url);
    const art = await upload(old.url, owner.key, '/artifacts/upload', 'an artifact from before', { fields: { name: 'before.txt' } });
    const file = await upload(old.url, owner.key, '/workspace/files/upload', 'a revision from before', { fields: { name: 'before.txt' } });
    expect([art.status, file.status]).toEqual([201, 201]);
    // what such a data dir holds: the records, no reference index, no marker
    const refs = [blobRefOp(art.body.data.sha256, `artifact:${art.body.data.id}`, true), blobRefOp(file.body.data.sha256, `ws:rev:${file.body.data.current_revision_id}`, true)];
    expect((await old.store.commit([...refs, { op: 'del', key: BLOB_REFS_INDEXED }])).ok).toBe(true);
    await old.close();
    const again = await startServer({ ...old.env, BLOB_SWEEP_MS: '100', BLOB_SWEEP_GRACE_MS: '1' });
    try {
      expect(await again.store.get(BLOB_REFS_INDEXED)).toBeDefined();
      expect([await again.store.count(blobRefIndex(art.body.data.sha256)), await again.store.count(blobRefIndex(file.body.data.sha256))]).toEqual([1, 1]);
      const lost = (await again.blobs.put(Readable.from([Buffer.from('an orphan beside them')]), 1 << 20)).sha256;
      await waitFor('the orphan swept', async () => new Set((await again.blobs.list(undefined, 10_000)).map((b) => b.sha256)), (s) => !s.has(lost), 20_000, 50);
      const left = new Set((await again.blobs.list(undefined, 10_000)).map((b) => b.sha256));
      expect([left.has(art.body.data.sha256), left.has(file.body.data.sha256)]).toEqual([true, true]);
    } finally {
      await again.close();
    }
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
