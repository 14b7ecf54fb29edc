/**
 * The blob port's contract, on both adapters: the filesystem under a temp dir, and S3 through the minio
 * client against an s3rver this file starts. Content is addressed by SHA-256 and stored once; an upload
 * over its cap, or one whose source fails, leaves nothing behind.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { Client } from 'minio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FilesystemBlobs } from '../../src/blob/filesystem.js';
import type { BlobStore } from '../../src/blob/port.js';
import { S3Blobs } from '../../src/blob/s3.js';
import { isAppError } from '../../src/errors.js';
import { tempDir } from '../helpers/redis.js';
import { startS3, type S3Server } from '../helpers/s3.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const chunks = (...parts: (Buffer | string)[]) => Readable.from(parts.map((p) => Buffer.from(p)));
const bytes = async (s: Readable | undefined) => Buffer.concat(await s!.toArray());

interface Fixture {
  blobs: BlobStore;
  /** object names under objects/ and tmp/ */
  listing(): Promise<{ objects: string[]; tmp: string[] }>;
}

const ADAPTERS = ['filesystem', 's3'] as const;

describe.each(ADAPTERS)('blob store contract on %s', (adapter) => {
  let f: Fixture;
  let s3: S3Server | undefined;
  let dir: string | undefined;

  beforeAll(async () => {
    if (adapter === 'filesystem') {
      dir = await tempDir('svc-blobs-');
      const root = join(dir, 'blobs');
      const blobs = await FilesystemBlobs.open(root);
      const walk = async (d: string): Promise<string[]> => (await readdir(d, { recursive: true, withFileTypes: true }).catch(() => [])).filter((e) => e.isFile()).map((e) => e.name);
      f = { blobs, listing: async () => ({ objects: await walk(join(root, 'objects')), tmp: await walk(join(root, 'tmp')) }) };
    } else {
      s3 = await startS3();
      const env = s3.env('contract-bucket');
      const client = new Client({ endPoint: '127.0.0.1', port: Number(new URL(s3.endpoint).port), useSSL: false, accessKey: env.S3_ACCESS_KEY, secretKey: env.S3_SECRET_KEY });
      expect(await client.bucketExists('contract-bucket')).toBe(false);
      const blobs = await S3Blobs.open({ endpoint: s3.endpoint, accessKey: env.S3_ACCESS_KEY, secretKey: env.S3_SECRET_KEY, bucket: 'contract-bucket', region: 'us-east-1', useSSL: false });
      expect(await client.bucketExists('contract-bucket')).toBe(true);
      const names = async (prefix: string) => (await client.listObjectsV2('contract-bucket', prefix, true).toArray()).map((o: { name?: string }) => o.name!.slice(prefix.length));
      f = { blobs, listing: async () => ({ objects: await names('objects/'), tmp: await names('tmp/') }) };
    }
  });

  afterAll(async () => {
    await f?.blobs.close();
    await s3?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('stores content under its SHA-256 and reads it back whole and in ranges', async () => {
    const stored = await f.blobs.put(chunks('hello ', 'blob ', 'world'), 1000);
    expect(stored).toEqual({ sha256: sha('hello blob world'), size: 16 });
    expect(await f.blobs.has(stored.sha256)).toBe(true);
    expect(await text((await f.blobs.get(stored.sha256))!)).toBe('hello blob world');
    expect(await text((await f.blobs.get(stored.sha256, { start: 6, end: 9 }))!)).toBe('blob');
    expect(await text((await f.blobs.get(stored.sha256, { start: 15, end: 15 }))!)).toBe('d');
    expect((await f.listing()).objects).toContain(stored.sha256);
  });

  it('stores the same content once, however it was chunked', async () => {
    const body = 'same bytes ' + randomBytes(8).toString('hex');
    const a = await f.blobs.put(chunks(body), 1000);
    const b = await f.blobs.put(chunks(body.slice(0, 3), body.slice(3)), 1000);
    expect(b).toEqual(a);
    expect((await f.listing()).objects.filter((n) => n.endsWith(a.sha256))).toHaveLength(1);
    expect((await f.listing()).tmp).toEqual([]);
  });

  it('an unknown or malformed hash has no object', async () => {
    expect(await f.blobs.has(sha('never stored'))).toBe(false);
    expect(await f.blobs.get(sha('never stored'))).toBeUndefined();
    expect(await f.blobs.has('../../etc/passwd')).toBe(false);
  });

  it('refuses content past the cap with PAYLOAD_TOO_LARGE and keeps nothing', async () => {
    const before = await f.listing();
    const body = randomBytes(3000);
    const err = await f.blobs.put(chunks(body.subarray(0, 1500), body.subarray(1500)), 2000).catch((e) => e);
    expect(isAppError(err) && err.code).toBe('PAYLOAD_TOO_LARGE');
    const after = await f.listing();
    expect(after.objects).toEqual(before.objects);
    expect(after.tmp).toEqual([]);
    expect(await f.blobs.has(sha(body))).toBe(false);
  });

  it('a source that fails midway stores nothing', async () => {
    const before = await f.listing();
    const failing = new Readable({ read() {} });
    failing.push(randomBytes(100));
    setImmediate(() => failing.destroy(new Error('client went away')));
    await expect(f.blobs.put(failing, 10_000)).rejects.toThrow('client went away');
    const after = await f.listing();
    expect(after.objects).toEqual(before.objects);
    expect(after.tmp).toEqual([]);
  });

  it('streams content larger than one S3 part intact', async () => {
    const body = randomBytes(12 * 1024 * 1024 + 123);
    const parts = Array.from({ length: Math.ceil(body.length / 65536) }, (_, i) => body.subarray(i * 65536, (i + 1) * 65536));
    const stored = await f.blobs.put(Readable.from(parts), 20 * 1024 * 1024);
    expect(stored).toEqual({ sha256: sha(body), size: body.length });
    expect(sha(await bytes(await f.blobs.get(stored.sha256)))).toBe(sha(body));
    const tail = await bytes(await f.blobs.get(stored.sha256, { start: body.length - 10, end: body.length - 1 }));
    expect(tail.equals(body.subarray(body.length - 10))).toBe(true);
  }, 60_000);

  it('lists objects in hash order with their write times, a page at a time', async () => {
    const shas = await Promise.all(['list a', 'list b', 'list c'].map(async (t) => (await f.blobs.put(chunks(t), 1024)).sha256));
    const all = await f.blobs.list(undefined, 10_000);
    expect(all.map((b) => b.sha256)).toEqual([...all.map((b) => b.sha256)].sort());
    expect(all.map((b) => b.sha256)).toEqual(expect.arrayContaining(shas));
    for (const b of all) expect(Math.abs(b.written_at - Date.now())).toBeLessThan(120_000);
    const first = await f.blobs.list(undefined, 2);
    const rest = await f.blobs.list(first[1].sha256, 10_000);
    expect([...first, ...rest].map((b) => b.sha256)).toEqual(all.map((b) => b.sha256));
  });

  it('removes an object only when it was written before the bound', async () => {
    const { sha256 } = await f.blobs.put(chunks('to be removed'), 1024);
    const writtenAt = (await f.blobs.list(undefined, 10_000)).find((b) => b.sha256 === sha256)!.written_at;
    expect(await f.blobs.remove(sha256, writtenAt - 60_000)).toBe(false);
    expect(await f.blobs.has(sha256)).toBe(true);
    expect(await f.blobs.remove(sha256, Date.now() + 60_000)).toBe(true);
    expect(await f.blobs.has(sha256)).toBe(false);
    expect(await f.blobs.remove(sha256, Date.now() + 60_000)).toBe(false);
    expect(await f.blobs.remove('not-a-hash', Date.now())).toBe(false);
  });

  // S3 removes its temporary object in the same call that made it; only the filesystem can be left with one
  if (adapter === 'filesystem') {
    it('filesystem: storing content already there renews its write time', async () => {
      const { sha256 } = await f.blobs.put(chunks('stored twice'), 1024);
      const old = new Date(Date.now() - 2 * 3600_000);
      await utimes(join(dir!, 'blobs', 'objects', sha256.slice(0, 2), sha256), old, old);
      const before = (await f.blobs.list(undefined, 10_000)).find((b) => b.sha256 === sha256)!.written_at;
      expect(before).toBeLessThan(Date.now() - 3600_000);
      await f.blobs.put(chunks('stored twice'), 1024);
      const after = (await f.blobs.list(undefined, 10_000)).find((b) => b.sha256 === sha256)!.written_at;
      expect(after).toBeGreaterThan(Date.now() - 60_000);
      expect(await f.blobs.remove(sha256, Date.now() - 3600_000)).toBe(false);
    });

    it('filesystem: opening removes uploads a crash left behind an hour ago, not ones in flight', async () => {
      const tmp = join(dir!, 'blobs', 'tmp');
      await writeFile(join(tmp, 'stale'), 'x');
      await writeFile(join(tmp, 'fresh'), 'y');
      const old = new Date(Date.now() - 2 * 3600_000);
      await utimes(join(tmp, 'stale'), old, old);
      await FilesystemBlobs.open(join(dir!, 'blobs'));
      expect((await f.listing()).tmp).toEqual(['fresh']);
      await rm(join(tmp, 'fresh'));
    });
  }

  it('presigns on S3 only: the URL serves the object', async () => {
    const stored = await f.blobs.put(chunks('presigned bytes'), 1000);
    const url = await f.blobs.presign(stored.sha256, 60, { contentType: 'text/plain', filename: 'p.txt' });
    if (adapter === 'filesystem') return expect(url).toBeUndefined();
    const res = await fetch(url!);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('presigned bytes');
  });
});
