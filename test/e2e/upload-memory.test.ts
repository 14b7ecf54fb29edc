/**
 * Uploads and downloads stream: a 50 MiB body goes from the socket to the blob store (and back) without the
 * service holding it. The service runs as its own process; its peak resident memory (VmHWM from
 * /proc/<pid>/status, reset at the start of each transfer) after the transfer may exceed its resident memory before it by far less than the
 * file's size; a reader leaving mid-download does not disturb the next. Both blob stores (S3: an s3rver in this process).
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { BLOB_STORES, blobStoreOn } from '../helpers/blobs.js';
import { serversOn, spawnServer, type ChildServer } from '../helpers/server.js';

const MiB = 1024 * 1024;
const SIZE = 50 * MiB;
const CHUNK = 64 * 1024;
/**
 * the warm-up's size: the first transfer of a size grows the heap by a fixed amount that then stays, and a
 * smaller one (16 MiB was tried) left part of that growth to the first measured transfer, 17–32 MiB of it
 */
const WARM = SIZE;
/**
 * well under the file's size (under half of it): the body must never be held whole, nor in large pieces; the
 * margin covers the rest of a live process (webhook dispatcher, timers) allocating while the upload runs
 */
const MAX_GROWTH = 24 * MiB;

/** Deterministic pseudo-random bytes, `size` of them, as a web stream; `hash` holds their SHA-256 once read. */
function source(size: number, prefix = Buffer.alloc(0), suffix = Buffer.alloc(0)) {
  const hash = createHash('sha256');
  let sent = 0;
  let seed = 0x9e3779b9;
  let head = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (!head) {
        head = true;
        if (prefix.length) return c.enqueue(new Uint8Array(prefix));
      }
      if (sent >= size) {
        if (suffix.length) c.enqueue(new Uint8Array(suffix));
        return c.close();
      }
      const n = Math.min(CHUNK, size - sent);
      const b = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i += 4) {
        seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
        b.writeUInt32LE(seed, i);
      }
      hash.update(b);
      sent += n;
      c.enqueue(new Uint8Array(b));
    },
  });
  return { stream, digest: () => hash.digest('hex') };
}

/**
 * The resident memory a transfer starts from, with the peak reset to it ("5" to clear_refs): VmHWM is the
 * process's peak since it started, so without the reset a test's peak is an earlier test's (or the warm-up's)
 * whenever the heap has shrunk since, and the growth measured is that earlier peak's, not this transfer's.
 */
async function baseline(pid: number): Promise<{ rss: number; hwm: number }> {
  await writeFile(`/proc/${pid}/clear_refs`, '5');
  return memory(pid);
}

async function memory(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

describe.each(BLOB_STORES)('50 MiB streamed with bounded memory on %s blobs', (blob) => {
  const blobs = blobStoreOn(blob);
  const servers = serversOn('embedded');
  let server: ChildServer;
  let root: Member;
  let pid: number;

  beforeAll(async () => {
    // V8's memory reducer hands the warm heap back once the process idles a few seconds, and the next transfer
    // grows it again (19–22 MiB after a 15 s pause): that is the heap's working size, not the body held
    server = await spawnServer(await servers.env(await blobs.env()), ['--no-memory-reducer']);
    pid = server.proc.pid!;
    root = await bootstrap(server.url);
    // warm up every path with a smaller upload: code loaded, heap grown to its working size (a first
    // transfer of any size grows it by a fixed amount, then it stays flat)
    for (const path of ['/workspace/files/upload?name=warm', '/artifacts/upload?name=warm']) {
      const r = await fetch(server.url + path, { method: 'POST', headers: { authorization: `Bearer ${root.key}` }, body: source(WARM).stream, duplex: 'half' } as RequestInit);
      expect(r.status).toBe(201);
      if (!path.startsWith('/workspace')) continue;
      // and the download path, read to its end
      const d = await fetch(`${server.url}/workspace/files/${((await r.json()) as { data: { id: string } }).data.id}/content`, { headers: { authorization: `Bearer ${root.key}` } });
      expect(d.status).toBe(200);
      for await (const _ of d.body as unknown as AsyncIterable<Uint8Array>);
    }
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('a raw 50 MiB workspace upload, then its download', async () => {
    const before = await baseline(pid);
    const src = source(SIZE);
    const r = await fetch(server.url + '/workspace/files/upload?name=big.bin', {
      method: 'POST',
      headers: { authorization: `Bearer ${root.key}`, 'content-type': 'application/octet-stream' },
      body: src.stream,
      duplex: 'half',
    } as RequestInit);
    const body = await r.json();
    expect(r.status, JSON.stringify(body)).toBe(201);
    expect(body.data).toMatchObject({ size: SIZE, sha256: src.digest() });
    const up = await memory(pid);
    expect(up.hwm - before.rss, `peak ${up.hwm} vs before ${before.rss}`).toBeLessThan(MAX_GROWTH);

    // the download is a transfer of its own: measured from its own start, not on top of the upload's peak
    const beforeDown = await baseline(pid);
    const d = await fetch(`${server.url}/workspace/files/${body.data.id}/content`, { headers: { authorization: `Bearer ${root.key}` } });
    expect(d.status).toBe(200);
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of d.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      size += chunk.length;
    }
    expect([size, hash.digest('hex')]).toEqual([SIZE, body.data.sha256]);
    const down = await memory(pid);
    expect(down.hwm - beforeDown.rss, `peak ${down.hwm} vs before ${beforeDown.rss}`).toBeLessThan(MAX_GROWTH);

    // a reader that goes away mid-download: the service drops the transfer and serves the next one whole
    const ac = new AbortController();
    const cut = await fetch(`${server.url}/workspace/files/${body.data.id}/content`, { headers: { authorization: `Bearer ${root.key}` }, signal: ac.signal });
    const reader = cut.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    ac.abort();
    await reader.read().catch(() => undefined);
    const again = await fetch(`${server.url}/workspace/files/${body.data.id}/content`, { headers: { authorization: `Bearer ${root.key}`, range: `bytes=${SIZE - 4}-` } });
    expect([again.status, (await again.arrayBuffer()).byteLength]).toEqual([206, 4]);
  }, 120_000);

  it('a multipart 50 MiB artifact upload', async () => {
    const boundary = 'svc-boundary-7d1f';
    const prefix = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\nbig-artifact\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const suffix = Buffer.from(`\r\n--${boundary}--\r\n`);
    const before = await baseline(pid);
    const src = source(SIZE, prefix, suffix);
    const r = await fetch(server.url + '/artifacts/upload', {
      method: 'POST',
      headers: { authorization: `Bearer ${root.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: src.stream,
      duplex: 'half',
    } as RequestInit);
    const body = await r.json();
    expect(r.status, JSON.stringify(body)).toBe(201);
    expect(body.data).toMatchObject({ name: 'big-artifact', size: SIZE, sha256: src.digest() });
    const after = await memory(pid);
    expect(after.hwm - before.rss, `peak ${after.hwm} vs before ${before.rss}`).toBeLessThan(MAX_GROWTH);
  }, 120_000);
});
