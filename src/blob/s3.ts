/**
 * S3 (or MinIO) blobs through the `minio` client: `objects/<sha256>` and `tmp/<id>` while an upload is in
 * flight. The upload goes up as a multipart upload in PART_SIZE pieces (one part held in memory, never the
 * body), then a server-side copy gives it its hash name and the temporary object is removed.
 */
import type { Readable } from 'node:stream';
import { Client } from 'minio';
import { newId } from '../ids.js';
import { Tally } from './meter.js';
import type { S3Config } from '../config.js';
import { isSha256, type BlobStore, type ByteRange, type Listed, type Stored } from './port.js';

/** the minimum S3 allows; it bounds what one upload holds in memory */
const PART_SIZE = 5 * 1024 * 1024;

/**
 * One object written in PART_SIZE parts as the bytes arrive (awaiting each part is the back-pressure on the
 * source); content smaller than one part goes up in a single PUT.
 */
class PartUpload {
  /** one part's bytes, reused for every part: each is sent (and awaited) before the next is filled */
  private part: Buffer | undefined;
  private held = 0;
  private uploadId: string | undefined;
  private parts: { part: number; etag: string }[] = [];

  constructor(
    private client: Client,
    private bucket: string,
    private name: string,
  ) {}

  async add(chunk: Buffer): Promise<void> {
    this.part ??= Buffer.allocUnsafe(PART_SIZE);
    for (let at = 0; at < chunk.length; ) {
      const n = Math.min(PART_SIZE - this.held, chunk.length - at);
      chunk.copy(this.part, this.held, at, at + n);
      this.held += n;
      at += n;
      if (this.held === PART_SIZE) {
        await this.sendPart(this.part);
        this.held = 0;
      }
    }
  }

  private async sendPart(part: Buffer): Promise<void> {
    this.uploadId ??= await this.client.initiateNewMultipartUpload(this.bucket, this.name, {});
    const n = this.parts.length + 1;
    const r = await this.client.uploadPart({ bucketName: this.bucket, objectName: this.name, uploadID: this.uploadId, partNumber: n, headers: { 'Content-Length': part.length } }, part);
    this.parts.push({ part: n, etag: r.etag });
  }

  async finish(): Promise<void> {
    const rest = this.part ? this.part.subarray(0, this.held) : Buffer.alloc(0);
    if (this.uploadId === undefined) return void (await this.client.putObject(this.bucket, this.name, rest, rest.length));
    if (rest.length) await this.sendPart(rest);
    await this.client.completeMultipartUpload(this.bucket, this.name, this.uploadId, this.parts);
  }

  async abort(): Promise<void> {
    if (this.uploadId !== undefined) await this.client.abortMultipartUpload(this.bucket, this.name, this.uploadId).catch(() => {});
  }
}

const objectName = (sha256: string) => `objects/${sha256}`;

export class S3Blobs implements BlobStore {
  readonly kind = 's3' as const;

  private constructor(
    private client: Client,
    private bucket: string,
  ) {}

  static async open(s: S3Config): Promise<S3Blobs> {
    const url = new URL(s.endpoint.includes('://') ? s.endpoint : `${s.useSSL ? 'https' : 'http'}://${s.endpoint}`);
    const client = new Client({
      endPoint: url.hostname,
      port: url.port ? Number(url.port) : undefined,
      useSSL: s.useSSL,
      accessKey: s.accessKey,
      secretKey: s.secretKey,
      region: s.region,
      partSize: PART_SIZE,
      pathStyle: true,
    });
    if (!(await client.bucketExists(s.bucket))) {
      await client.makeBucket(s.bucket, s.region).catch(async (e) => {
        // another instance created it meanwhile
        if (!(await client.bucketExists(s.bucket))) throw e;
      });
    }
    return new S3Blobs(client, s.bucket);
  }

  async put(content: Readable, maxBytes: number): Promise<Stored> {
    const tmp = `tmp/${newId()}`;
    const tally = new Tally(maxBytes);
    const upload = new PartUpload(this.client, this.bucket, tmp);
    try {
      for await (const chunk of content) {
        tally.add(chunk);
        await upload.add(chunk);
      }
      await upload.finish();
      const sha256 = tally.digest();
      // copied even when the hash exists: the copy renews its write time, which the sweep's grace runs from
      await this.client.copyObject(this.bucket, objectName(sha256), `/${this.bucket}/${tmp}`);
      return { sha256, size: tally.size };
    } catch (e) {
      await upload.abort();
      throw e;
    } finally {
      await this.client.removeObject(this.bucket, tmp).catch(() => {});
    }
  }

  async get(sha256: string, range?: ByteRange): Promise<Readable | undefined> {
    if (!(await this.has(sha256))) return undefined;
    return range
      ? this.client.getPartialObject(this.bucket, objectName(sha256), range.start, range.end - range.start + 1)
      : this.client.getObject(this.bucket, objectName(sha256));
  }

  async has(sha256: string): Promise<boolean> {
    if (!isSha256(sha256)) return false;
    try {
      await this.client.statObject(this.bucket, objectName(sha256));
      return true;
    } catch (e) {
      if ((e as { code?: string }).code === 'NotFound' || (e as { code?: string }).code === 'NoSuchKey') return false;
      throw e;
    }
  }

  async list(after: string | undefined, limit: number): Promise<Listed[]> {
    const out: Listed[] = [];
    const stream = this.client.listObjectsV2(this.bucket, 'objects/', true, after === undefined ? '' : objectName(after));
    for await (const o of stream as AsyncIterable<{ name?: string; lastModified?: Date }>) {
      const sha256 = o.name?.slice('objects/'.length) ?? '';
      if (isSha256(sha256) && o.lastModified) out.push({ sha256, written_at: o.lastModified.getTime() });
      if (out.length >= limit) {
        stream.destroy();
        break;
      }
    }
    return out;
  }

  /** S3 has no conditional delete here: the write time is read again just before the removal. */
  async remove(sha256: string, writtenBefore: number): Promise<boolean> {
    if (!isSha256(sha256)) return false;
    const st = await this.client.statObject(this.bucket, objectName(sha256)).catch(() => undefined);
    if (!st || st.lastModified.getTime() > writtenBefore) return false;
    await this.client.removeObject(this.bucket, objectName(sha256));
    return true;
  }

  presign(sha256: string, expiresS: number, h: { contentType: string; filename: string }): Promise<string> {
    return this.client.presignedGetObject(this.bucket, objectName(sha256), expiresS, {
      'response-content-type': h.contentType,
      'response-content-disposition': `attachment; filename="${h.filename.replace(/["\\\r\n]/g, '_')}"`,
    });
  }

  async close(): Promise<void> {}
}
