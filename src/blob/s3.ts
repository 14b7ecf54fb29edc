/**
 * S3 (or MinIO) blobs through the `minio` client: `objects/<sha256>` and `tmp/<id>` while an upload is in
 * flight. The upload goes up as a multipart upload in PART_SIZE pieces (the client buffers one part, not
 * the body), then a server-side copy gives it its hash name and the temporary object is removed.
 */
import { once } from 'node:events';
import { PassThrough, type Readable } from 'node:stream';
import { Client } from 'minio';
import { newId } from '../ids.js';
import { Tally } from './meter.js';
import { isSha256, type BlobStore, type ByteRange, type Stored } from './port.js';

/** the minimum S3 allows; it bounds what one upload holds in memory */
const PART_SIZE = 5 * 1024 * 1024;

export interface S3Settings {
  endpoint: string;
  accessKey: string;
  secretKey: string;
  bucket: string;
  region: string;
  useSSL: boolean;
}

const objectName = (sha256: string) => `objects/${sha256}`;

export class S3Blobs implements BlobStore {
  readonly kind = 's3' as const;

  private constructor(
    private client: Client,
    private bucket: string,
  ) {}

  static async open(s: S3Settings): Promise<S3Blobs> {
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
    const body = new PassThrough({ highWaterMark: 1024 * 1024 });
    const uploaded = this.client.putObject(this.bucket, tmp, body);
    // the upload failing must end the copy loop below, which may be waiting for 'drain'
    const uploadFailed = uploaded.then(
      () => new Promise<never>(() => {}),
      (e) => Promise.reject(e),
    );
    uploadFailed.catch(() => {});
    let failure: unknown;
    try {
      for await (const chunk of content) {
        tally.add(chunk);
        if (!body.write(chunk)) await Promise.race([once(body, 'drain'), uploadFailed]);
      }
    } catch (e) {
      failure = e;
    }
    // ended in every case, so the client's upload settles (a refused one is removed below)
    body.end();
    try {
      await uploaded;
      if (failure) throw failure;
      const sha256 = tally.digest();
      if (!(await this.has(sha256))) await this.client.copyObject(this.bucket, objectName(sha256), `/${this.bucket}/${tmp}`);
      return { sha256, size: tally.size };
    } finally {
      await this.client.removeObject(this.bucket, tmp).catch(() => {});
      await this.client.removeIncompleteUpload(this.bucket, tmp).catch(() => {});
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

  presign(sha256: string, expiresS: number, h: { contentType: string; filename: string }): Promise<string> {
    return this.client.presignedGetObject(this.bucket, objectName(sha256), expiresS, {
      'response-content-type': h.contentType,
      'response-content-disposition': `attachment; filename="${h.filename.replace(/["\\\r\n]/g, '_')}"`,
    });
  }

  async close(): Promise<void> {}
}
