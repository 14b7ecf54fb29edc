/**
 * No internal message ever reaches a client, on both backends and every surface. Two real faults:
 * - a stored blob file deleted under an uploaded artifact and a workspace file: the download meets
 *   `INTERNAL_SERVER_ERROR` "Stored content is missing" with the sha256 (REST, and the public share link);
 * - a signal record written corrupt through the store port: every read of it throws a TypeError inside the
 *   service (REST, WebSocket op, /rpc, MCP tool, A2A).
 * Each answer carries the catalogue message only, no details, no sha256, path, stack or driver text; the
 * service's log gets the internal text.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join as joinPath } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type Service } from '../../src/app.js';
import { readConfig } from '../../src/config.js';
import { catalogue } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { actorKey } from '../../src/runtime/runtime.js';
import { blobStoreOn, download, upload } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectNoLeak } from './leak.js';
import { emitOk, expectOk } from './support.js';

const UNEXPECTED = catalogue.INTERNAL_SERVER_ERROR[1];

/** Nothing of the insides: no hash, no data dir, no stack, no JS error text. */
function expectBare(text: string, dataDir: string, sha?: string): void {
  expect(text).not.toContain(dataDir);
  if (sha) expect(text).not.toContain(sha);
  expect(text).not.toMatch(/Stored content|Cannot (read|destructure)|TypeError|\n\s+at /i);
}

for (const backend of BACKENDS) {
  describe(`internal errors on ${backend}`, () => {
    const blobs = blobStoreOn('filesystem');
    const servers = serversOn(backend);
    let svc: Service;
    let dataDir: string;
    const logged: string[] = [];
    let root: Member;
    let m: Member;

    beforeAll(async () => {
      const env = await servers.env(await blobs.env());
      dataDir = env.DATA_DIR;
      // the real logger, written to a stream the test reads
      const dest = new Writable({ write: (chunk, _enc, done) => void (logged.push(String(chunk)), done()) });
      svc = await startService(readConfig({ PORT: '0', HOST: '127.0.0.1', TIMER_POLL_MS: '20', RATE_LIMIT_DEFAULT: '0', ...env }), createLogger('error', dest));
      root = await bootstrap(svc.url);
      m = await join(root.client, 'worker');
    });
    afterAll(async () => {
      await svc?.close();
    });

    const blobFile = (sha: string) => joinPath(dataDir, 'blobs', 'objects', sha.slice(0, 2), sha);

    it('an artifact whose stored content is gone: 500 with the catalogue message only, over REST and the share link; the log has the sha256', async () => {
      const body = randomBytes(2000);
      const a = expectOk(await upload(svc.url, m.key, '/artifacts/upload', body, { type: 'application/octet-stream', fields: { name: 'gone.bin' } }), 201);
      const share = expectOk(await m.client.post(`/artifacts/${a.id}/share`, { expires_in: 120 }));
      await rm(blobFile(a.sha256));

      for (const d of [await download(svc.url, m.key, `/artifacts/${a.id}`), await download(svc.url, m.key, `/artifacts/${a.id}`, { range: 'bytes=0-9' }), await download('', undefined, share.url)]) {
        const text = d.bytes.toString('utf8');
        expect(d.status, text).toBe(500);
        const err = JSON.parse(text).error;
        expect(err).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: UNEXPECTED, details: null });
        expectBare(text, dataDir, a.sha256);
        expectNoLeak({ status: d.status, body: JSON.parse(text) });
      }
      expect(logged.some((l) => l.includes('Stored content is missing') && l.includes(a.sha256))).toBe(true);
    });

    it('a workspace file whose stored content is gone: the same', async () => {
      const f = expectOk(await upload(svc.url, m.key, '/workspace/files/upload', 'lost bytes', { type: 'text/plain', fields: { name: `lost-${randomBytes(3).toString('hex')}.txt` } }), 201);
      await rm(blobFile(f.sha256));
      for (const path of [`/workspace/files/${f.id}/content`, `/workspace/revisions/${f.current_revision_id}/content`]) {
        const d = await download(svc.url, m.key, path);
        const text = d.bytes.toString('utf8');
        expect(d.status, text).toBe(500);
        expect(JSON.parse(text).error).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: UNEXPECTED, details: null });
        expectBare(text, dataDir, f.sha256);
      }
    });

    it('a corrupt signal record: REST, WebSocket, /rpc, MCP and A2A answer the catalogue message only', async () => {
      const sig = await emitOk(root, { signal_type: 'task', content: 'to be corrupted', to_identity: m.id });
      const key = actorKey('signal', sig.id);
      const rec = (await svc.store.get<Record<string, unknown>>(key))!;
      expect((await svc.store.commit([{ op: 'put', key, value: { ...rec.value, context: null }, expect: rec.version }])).ok).toBe(true);
      logged.length = 0;

      // REST
      for (const res of [await m.client.get(`/thread/${sig.id}`), await m.client.post('/claim', { signal_id: sig.id })]) {
        expect(res.status, JSON.stringify(res.body)).toBe(500);
        expect(res.body.error).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: UNEXPECTED, details: null });
        expectBare(JSON.stringify(res.body), dataDir);
      }

      // WebSocket op
      const ws = await PushSocket.open(svc.url, m.key);
      const f = await ws.op('claim', { signal_id: sig.id });
      expect(f.type).toBe('error');
      expect(f.error).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: UNEXPECTED, details: null });
      expectBare(JSON.stringify(f), dataDir);
      await ws.close();

      // JSON-RPC
      for (const method of ['tasks.claim', 'thread.get']) {
        const res = await m.client.post('/rpc', { jsonrpc: '2.0', id: 1, method, params: { signal_id: sig.id } });
        expect(res.status, JSON.stringify(res.body)).toBe(500);
        expect(res.body.error).toMatchObject({ code: -32603, message: catalogue.RPC_INTERNAL_ERROR[1], data: { code: 'RPC_INTERNAL_ERROR', details: null } });
        expectBare(JSON.stringify(res.body), dataDir);
      }

      // MCP tool, through the SDK's client
      const mcp = new McpClient({ name: 'test', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${m.key}` } } }));
      try {
        for (const name of ['svc_claim_task', 'svc_get_thread']) {
          const r: any = await mcp.callTool({ name, arguments: { signal_id: sig.id } });
          expect(r.isError, JSON.stringify(r)).toBe(true);
          expect(r.structuredContent.error).toEqual({ code: 'INTERNAL_SERVER_ERROR', message: UNEXPECTED, details: null });
          expect(r.content[0].text).toBe(`INTERNAL_SERVER_ERROR: ${UNEXPECTED}`);
        }
      } finally {
        await mcp.close();
      }

      // A2A: the task is the signal
      for (const method of ['GetTask', 'tasks/get']) {
        const res = await fetch(svc.url + '/a2a', { method: 'POST', headers: { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method, params: { id: sig.id } }) });
        const text = await res.text();
        expect(res.status, text).toBe(500);
        expect(JSON.parse(text).error).toMatchObject({ message: UNEXPECTED, data: { code: 'INTERNAL_SERVER_ERROR', details: null } });
        expectBare(text, dataDir);
      }

      // the log has what the clients did not get
      expect(logged.filter((l) => /Cannot (read|destructure)/.test(l)).length).toBeGreaterThanOrEqual(5);
    });
  });
}
