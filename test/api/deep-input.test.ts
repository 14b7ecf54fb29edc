/**
 * Deep input on every surface, both backends: a free-form field (metadata, payload, resources, ...) nested
 * past MAX_JSON_DEPTH is refused at validation with VALIDATION_INVALID_TYPE naming the field (REST, WebSocket
 * ops, /rpc, MCP, A2A, federation), one at the limit is stored and read back, and a refusal writes nothing.
 * 5,000 levels once answered 500 (the record encoder overflowed the stack).
 */
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../src/validation.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { upload } from '../helpers/blobs.js';
import { signedPost } from '../helpers/federation.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

/** JSON text of an object `levels` deep: `{"a":{"a":...1}}` (1 level is `{"a":1}`); text, as a hostile client sends it (JSON.stringify itself overflows on 5,000). */
const nest = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
/** JSON text of arrays `levels` deep. */
const nestedArrays = (levels: number): string => `${'['.repeat(levels)}${']'.repeat(levels)}`;
/** A JSON object's text from fields whose values are JSON text. */
const obj = (fields: Record<string, string>): string => `{${Object.entries(fields).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
const str = (s: string) => JSON.stringify(s);
const note = (extra: Record<string, string>) => obj({ signal_type: str('note'), content: str('x'), ...extra });
const HOSTILE = 5000;

for (const backend of BACKENDS) {
  describe(`deep input on ${backend}`, () => {
    // memory import embeds: RediSearch on Redis
    const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
    let svc: Started;
    let root: Member;
    let alice: Member;
    const count = () => svc.store.count('signals');

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice');
    });

    it(`REST: a free-form field ${MAX_JSON_DEPTH} levels deep is stored and read back; one level more, or ${HOSTILE}, is 400 naming the field`, async () => {
      const stored = expectOk(await alice.client.post('/emit', note({ metadata: nest(MAX_JSON_DEPTH) })), 201);
      const listed = expectOk(await alice.client.get('/signals/list?limit=10')).signals.find((s: any) => s.id === stored.id);
      expect(listed.metadata).toMatchObject(JSON.parse(nest(MAX_JSON_DEPTH)));
      const before = await count();
      expectError(await alice.client.post('/emit', note({ metadata: nest(MAX_JSON_DEPTH + 1) })), 400, 'VALIDATION_INVALID_TYPE', 'metadata');
      expectError(await alice.client.post('/emit', note({ metadata: nest(HOSTILE) })), 400, 'VALIDATION_INVALID_TYPE', 'metadata');
      expectError(await alice.client.post('/emit', note({ payload: obj({ list: nestedArrays(HOSTILE) }) })), 400, 'VALIDATION_INVALID_TYPE', 'payload');
      expectError(await alice.client.post('/emit', note({ resources: `[{"ok":1},${nest(HOSTILE)}]` })), 400, 'VALIDATION_INVALID_TYPE', 'resources.1');
      // an undeclared field is free-form too
      expectError(await alice.client.post('/emit', note({ extra: nest(HOSTILE) })), 400, 'VALIDATION_INVALID_TYPE', 'extra');
      expectError(await alice.client.post('/workspace/folders', obj({ name: str('deep'), metadata: nest(HOSTILE) })), 400, 'VALIDATION_INVALID_TYPE', 'metadata');
      expectError(await alice.client.post('/memory/store', obj({ namespace: str('deep'), content: str('x'), metadata: nest(HOSTILE) })), 400, 'VALIDATION_INVALID_TYPE', 'metadata');
      expect(await count()).toBe(before);
    });

    it('upload fields and memory import lines, parsed outside a request schema, hold the same bound', async () => {
      const up = await upload(svc.url, alice.key, '/artifacts/upload', 'deep', { multipart: true, filename: 'd.txt', fields: { metadata: nest(HOSTILE) } });
      expectError(up as never, 400, 'VALIDATION_INVALID_TYPE', 'metadata');
      expect((await upload(svc.url, alice.key, '/artifacts/upload', 'ok', { multipart: true, filename: 'd.txt', fields: { metadata: nest(MAX_JSON_DEPTH) } })).status).toBe(201);
      const ndjson = [obj({ namespace: str('org'), content: str('deep line'), metadata: nest(HOSTILE) }), obj({ namespace: str('org'), content: str('a line at the limit'), metadata: nest(MAX_JSON_DEPTH) })].join('\n');
      const job = expectOk(await root.client.post('/memory/admin/import', { ndjson }), 202);
      const done = (await waitFor('the import job', () => root.client.get(`/memory/admin/import/${job.id}`), (r) => r.status === 200 && r.body.data.state !== 'running', 15_000, 50)).body.data;
      expect(done).toMatchObject({ state: 'completed', counts: { imported: 1, failed: 1 } });
      expect(done.errors).toEqual([expect.objectContaining({ line: 1, error: expect.stringMatching(/^VALIDATION_INVALID_TYPE/) })]);
    });

    it('WebSocket: an emit op with deep metadata gets a VALIDATION_INVALID_TYPE error frame naming the field, and the socket goes on', async () => {
      const ws = await PushSocket.open(svc.url, alice.key);
      const before = await count();
      ws.send(obj({ op: str('emit'), id: str('deep'), signal_type: str('note'), content: str('x'), metadata: nest(HOSTILE) }));
      await waitFor('the answer frame', async () => ws.frames.find((x) => x.id === 'deep'), (x) => x !== undefined);
      const f = ws.frames.find((x) => x.id === 'deep');
      expect(f).toMatchObject({ type: 'error', error: { code: 'VALIDATION_INVALID_TYPE', details: { field: 'metadata', limit: MAX_JSON_DEPTH } } });
      expect(await count()).toBe(before);
      expect((await ws.op('emit', { signal_type: 'note', content: 'after', metadata: JSON.parse(nest(MAX_JSON_DEPTH)) })).type).toBe('result');
      await ws.close();
    });

    it('/rpc: signals.emit with deep metadata is invalid params carrying VALIDATION_INVALID_TYPE and the field', async () => {
      const before = await count();
      const res = await alice.client.post('/rpc', obj({ jsonrpc: str('2.0'), id: '1', method: str('signals.emit'), params: note({ metadata: nest(HOSTILE) }) }));
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.error.data).toMatchObject({ code: 'RPC_INVALID_PARAMS', details: { code: 'VALIDATION_INVALID_TYPE', field: 'metadata' } });
      expect(await count()).toBe(before);
    });

    it('MCP: svc_emit_signal with deep metadata is a tool refusal carrying VALIDATION_INVALID_TYPE and the field', async () => {
      const headers: Record<string, string> = { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const init = await fetch(`${svc.url}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'deep', version: '1.0.0' } } }) });
      expect(init.status).toBe(200);
      const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
      const before = await count();
      const res = await fetch(`${svc.url}/mcp`, { method: 'POST', headers: session, body: obj({ jsonrpc: str('2.0'), id: '1', method: str('tools/call'), params: obj({ name: str('svc_emit_signal'), arguments: note({ metadata: nest(HOSTILE) }) }) }) });
      expect(res.status).toBe(200);
      const out = await res.json();
      expect(out.result.isError).toBe(true);
      expect(out.result.structuredContent.error).toMatchObject({ code: 'RPC_INVALID_PARAMS', details: { code: 'VALIDATION_INVALID_TYPE', field: 'metadata' } });
      expect(await count()).toBe(before);
    });

    it('A2A: a message whose payload is too deep is refused 400 with VALIDATION_INVALID_TYPE naming the field', async () => {
      const before = await count();
      const send = (levels: number) =>
        fetch(`${svc.url}/a2a`, {
          method: 'POST',
          headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
          body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"${randomUUID()}","role":"user","parts":[{"kind":"text","text":"deep"}],"metadata":{"signal_type":"task","payload":{"d":${nest(levels)}}}}}}`,
        });
      // past the limit: the signal's payload is refused; thousands of levels: the message, before the SDK reads it
      for (const [levels, field] of [[MAX_JSON_DEPTH, 'payload'], [HOSTILE, 'params']] as const) {
        const res = await send(levels);
        const body = await res.json();
        expect(res.status, JSON.stringify(body).slice(0, 300)).toBe(400);
        expect(body.error.data).toMatchObject({ code: 'VALIDATION_INVALID_TYPE', details: { field } });
      }
      expect(await count()).toBe(before);
      // a payload field at the limit is a task: payload itself is one level above it
      expect((await send(MAX_JSON_DEPTH - 1)).status).toBe(200);
    });

    it('federation: a delivered signal with deep metadata is 400 VALIDATION_INVALID_TYPE naming signal.metadata', async () => {
      const trust = expectOk(await root.client.post('/federation/trust', { name: 'deep peer', endpoint: 'https://deep.example', allowed_scopes: ['task'] }), 201);
      const before = await count();
      const signal = obj({ id: str('sig-deep-1'), signal_type: str('task'), content: str('x'), metadata: nest(HOSTILE) });
      const res = await signedPost(svc.url, '/federation/deliver', obj({ signal, hops: '0' }), { secret: trust.shared_secret, peerId: trust.peer_id });
      expectError(res, 400, 'VALIDATION_INVALID_TYPE', 'signal.metadata');
      expect(await count()).toBe(before);
    });
  });
}
