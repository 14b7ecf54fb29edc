/**
 * The blob stores API tests run on: the filesystem (default) and S3 against an s3rver this file starts.
 * Call `blobStoreOn` in a describe body BEFORE `serversOn`, so its afterAll runs after the servers closed.
 * Its env goes last (`servers.start(await blobs.env())`): on the embedded backend its DATA_DIR replaces the
 * backend's, so each server still has a directory of its own.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { rm } from 'node:fs/promises';
import { tempDir } from './redis.js';
import { startS3, type S3Server } from './s3.js';

export type BlobKind = 'filesystem' | 's3';
export const BLOB_STORES: BlobKind[] = ['filesystem', 's3'];

export interface BlobEnv {
  /** env for a service on this blob store: a fresh data dir (filesystem: also where blobs go, whatever the backend) or a fresh bucket */
  env(): Promise<Record<string, string>>;
}

export function blobStoreOn(kind: BlobKind): BlobEnv {
  let s3: S3Server | undefined;
  const dirs: string[] = [];
  beforeAll(async () => {
    if (kind === 's3') s3 = await startS3();
  });
  afterAll(async () => {
    await s3?.stop();
    await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });
  return {
    async env() {
      if (kind === 's3') return s3!.env('svc-' + randomBytes(6).toString('hex'));
      const dir = await tempDir('svc-blobs-');
      dirs.push(dir);
      return { DATA_DIR: dir };
    },
  };
}

/** Every backend × blob store pair, for describe.each. */
export const MATRIX = (backends: readonly string[]) => backends.flatMap((b) => BLOB_STORES.map((k) => [b, k] as [any, BlobKind]));

/** An upload request: the raw body, or multipart with fields first and the file part last. */
export async function upload(url: string, key: string, path: string, body: Buffer | string, opts: { multipart?: boolean; fields?: Record<string, string>; type?: string; filename?: string; method?: string; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, ...opts.headers };
  let payload: BodyInit;
  let query = '';
  if (opts.multipart) {
    const fd = new FormData();
    for (const [k, v] of Object.entries(opts.fields ?? {})) fd.append(k, v);
    fd.append('file', new Blob([new Uint8Array(Buffer.from(body))], { type: opts.type ?? 'application/octet-stream' }), opts.filename ?? 'upload.bin');
    payload = fd;
  } else {
    payload = new Uint8Array(Buffer.from(body));
    if (opts.type) headers['content-type'] = opts.type;
    query = new URLSearchParams(opts.fields ?? {}).toString();
  }
  const r = await fetch(url + path + (query ? (path.includes('?') ? '&' : '?') + query : ''), { method: opts.method ?? 'POST', headers, body: payload });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : undefined, headers: r.headers };
}

/** A GET that keeps the body as bytes (downloads). */
export async function download(url: string, key: string | undefined, path: string, headers: Record<string, string> = {}) {
  const r = await fetch(url + path, { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } });
  const bytes = Buffer.from(await r.arrayBuffer());
  return { status: r.status, bytes, headers: r.headers, json: () => JSON.parse(bytes.toString('utf8')) };
}
