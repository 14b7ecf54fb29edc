/**
 * Overlong keys on every surface, both backends: a field that becomes (part of) a store key or index name
 * (tags, names, namespaces, entities, signal and task types, projects) past its KEY_LIMITS bound is refused
 * at validation with 400 and the surface's validation code, naming the field and the limit (REST, uploads,
 * WebSocket ops, /rpc, MCP, A2A, federation); a refusal writes nothing and leaves no blob behind. Bounds are
 * bytes of UTF-8: a value within the character count but past the bytes is refused too. An upload's overlong
 * tag once answered 500 on the embedded backend (LMDB's key limit), its blob already written.
 */
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KEY_LIMITS, type KeyField } from '../../src/validation.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { blobStoreOn, upload } from '../helpers/blobs.js';
import { signedPost } from '../helpers/federation.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectOk } from './support.js';

/** One byte past the bound, in ASCII. */
const over = (kind: KeyField) => 'k'.repeat(KEY_LIMITS[kind] + 1);
/** Past the bound in bytes, within it in characters: three bytes a character. */
const wide = (kind: KeyField) => '中'.repeat(Math.floor(KEY_LIMITS[kind] / 3) + 1);
/** Exactly at the bound. */
const at = (kind: KeyField) => 'k'.repeat(KEY_LIMITS[kind]);

/** A refusal on any surface, reduced to what the test compares: status, the validation code, the field and the limit. */
interface Refusal {
  status: number;
  code: string | undefined;
  field: string | undefined;
  limit: unknown;
}
const refusalOf = (status: number, e: any): Refusal => ({ status, code: e?.code, field: e?.details?.field, limit: e?.details?.limit });
const refused = (status: number, code: string, field: string, kind: KeyField): Refusal => ({ status, code, field, limit: KEY_LIMITS[kind] });

for (const backend of BACKENDS) {
  describe(`overlong keys on ${backend}`, () => {
    const blobs = blobStoreOn('filesystem');
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let alice: Member;
    /** what a refusal must leave alone: signals, memories, workspace items, artifacts, roles, reservations, and the blobs */
    const snapshot = async () => ({
      counts: await Promise.all(['signals', 'mem:all', 'ws:children:~', 'artifacts', 'roles', 'actors:reservation:active'].map((i) => svc.store.count(i))),
      blobs: (await svc.blobs.list(undefined, 10_000)).length,
    });

    beforeAll(async () => {
      svc = await servers.start(await blobs.env());
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice');
    });

    /** [what, kind, send (answers the refusal), expected] */
    type Case = [string, KeyField, () => Promise<Refusal>, string, string];
    const rest = (method: 'post' | 'get', path: string, body?: unknown, admin = false) => async () => {
      const c = admin ? root.client : alice.client;
      const res = method === 'post' ? await c.post(path, body) : await c.get(path);
      return refusalOf(res.status, res.body?.error);
    };
    const restCases = (): Case[] => [
      ['POST /emit signal_type', 'signal_type', rest('post', '/emit', { signal_type: over('signal_type'), content: 'x' }), 'SIGNAL_EMIT_VALIDATION_FAILED', 'signal_type'],
      ['POST /emit tags (bytes)', 'tag', rest('post', '/emit', { signal_type: 'note', content: 'x', tags: ['ok', wide('tag')] }), 'SIGNAL_EMIT_VALIDATION_FAILED', 'tags.1'],
      ['POST /emit payload.task_type', 'task_type', rest('post', '/emit', { signal_type: 'task', content: 'x', payload: { task_type: over('task_type') } }), 'SIGNAL_EMIT_VALIDATION_FAILED', 'payload.task_type'],
      ['POST /emit concurrency_key (bytes)', 'concurrency_key', rest('post', '/emit', { signal_type: 'task', content: 'x', concurrency_key: wide('concurrency_key') }), 'SIGNAL_EMIT_VALIDATION_FAILED', 'concurrency_key'],
      ['POST /memory/store namespace (bytes)', 'namespace', rest('post', '/memory/store', { namespace: wide('namespace'), content: 'x' }), 'MEMORY_VALIDATION_FAILED', 'namespace'],
      ['POST /memory/store entity', 'entity', rest('post', '/memory/store', { namespace: 'org', content: 'x', entity: over('entity') }), 'MEMORY_VALIDATION_FAILED', 'entity'],
      ['POST /memory/store tags', 'tag', rest('post', '/memory/store', { namespace: 'org', content: 'x', tags: [over('tag')] }), 'MEMORY_VALIDATION_FAILED', 'tags.0'],
      ['POST /workspace/folders name (bytes)', 'name', rest('post', '/workspace/folders', { name: wide('name') }), 'WORKSPACE_VALIDATION_FAILED', 'name'],
      ['POST /workspace/folders tags', 'tag', rest('post', '/workspace/folders', { name: 'f', tags: [over('tag')] }), 'WORKSPACE_VALIDATION_FAILED', 'tags.0'],
      ['POST /roles name', 'role_name', rest('post', '/roles', { name: over('role_name') }, true), 'ORG_VALIDATION_FAILED', 'name'],
      ['POST /reservations project', 'project', rest('post', '/reservations', { paths: ['a.ts'], project: over('project') }), 'RESERVATION_VALIDATION_FAILED', 'project'],
      ['GET /signals/list type', 'signal_type', rest('get', `/signals/list?type=${over('signal_type')}`), 'VALIDATION_INVALID_TYPE', 'type'],
      ['GET /artifacts/list tag (bytes)', 'tag', rest('get', `/artifacts/list?tag=${encodeURIComponent(wide('tag'))}`), 'VALIDATION_INVALID_TYPE', 'tag'],
      ['GET /memory/recall/:entity', 'entity', rest('get', `/memory/recall/${over('entity')}`), 'VALIDATION_INVALID_TYPE', 'entity'],
    ];
    const up = (path: string, fields: Record<string, string>, multipart: boolean) => async () => {
      const res = await upload(svc.url, alice.key, path, 'the bytes of a refused upload', { multipart, fields, filename: 'f.txt' });
      return refusalOf(res.status, res.body?.error);
    };
    const uploadCases = (): Case[] => [
      ['artifact upload, raw: a comma-list tag', 'tag', up('/artifacts/upload', { name: 'a.txt', tags: `ok,${over('tag')}` }, false), 'ARTIFACT_VALIDATION_FAILED', 'tags.1'],
      ['artifact upload, multipart: a JSON-array tag (bytes)', 'tag', up('/artifacts/upload', { tags: JSON.stringify([wide('tag')]) }, true), 'ARTIFACT_VALIDATION_FAILED', 'tags.0'],
      ['artifact upload: name', 'name', up('/artifacts/upload', { name: over('name') }, false), 'ARTIFACT_VALIDATION_FAILED', 'name'],
      ['workspace upload, multipart: name', 'name', up('/workspace/files/upload', { name: wide('name') }, true), 'WORKSPACE_VALIDATION_FAILED', 'name'],
    ];

    it('REST and uploads: every key field past its bound is 400 with the route\'s validation code, the field and the limit; nothing is written, no blob is left', async () => {
      const failures: string[] = [];
      for (const [what, kind, send, code, field] of [...restCases(), ...uploadCases()]) {
        const before = await snapshot();
        const got = await send();
        const after = await snapshot();
        if (JSON.stringify(got) !== JSON.stringify(refused(400, code, field, kind))) failures.push(`${what}: ${JSON.stringify(got)}`);
        if (JSON.stringify(after) !== JSON.stringify(before)) failures.push(`${what}: refused, yet ${JSON.stringify(before)} → ${JSON.stringify(after)}`);
      }
      expect(failures).toEqual([]);
    });

    it('a key field exactly at its bound is stored', async () => {
      expectOk(await alice.client.post('/emit', { signal_type: at('signal_type'), content: 'x', tags: [at('tag')], payload: { task_type: at('task_type') } }), 201);
      // a namespace is org, agent:, role: or ring: and a name: the role and ring name bounds keep it far below its own
      expectOk(await alice.client.post('/memory/store', { namespace: 'org', entity: at('entity'), content: 'at the bound', tags: [at('tag')] }), 201);
      expectOk(await alice.client.get(`/memory/recall/${at('entity')}`));
      const a = await upload(svc.url, alice.key, '/artifacts/upload', 'at the bound', { fields: { name: at('name'), tags: at('tag') } });
      expect(a.status, JSON.stringify(a.body)).toBe(201);
      expect(expectOk(await alice.client.get(`/artifacts/list?tag=${at('tag')}`)).artifacts.map((x: any) => x.id)).toEqual([a.body.data.id]);
    });

    it('WebSocket: an emit op with an overlong key field gets an error frame naming the field and the limit; the socket goes on', async () => {
      const ws = await PushSocket.open(svc.url, alice.key);
      const cases: [Record<string, unknown>, KeyField, string][] = [
        [{ signal_type: over('signal_type'), content: 'x' }, 'signal_type', 'signal_type'],
        [{ signal_type: 'note', content: 'x', tags: [wide('tag')] }, 'tag', 'tags.0'],
        [{ signal_type: 'task', content: 'x', payload: { task_type: over('task_type') } }, 'task_type', 'payload.task_type'],
      ];
      const before = await snapshot();
      for (const [body, kind, field] of cases) {
        const f = await ws.op('emit', body);
        expect(refusalOf(400, f.error), JSON.stringify(f)).toEqual(refused(400, 'SIGNAL_EMIT_VALIDATION_FAILED', field, kind));
      }
      expect(await snapshot()).toEqual(before);
      expect((await ws.op('emit', { signal_type: 'note', content: 'after' })).type).toBe('result');
      await ws.close();
    });

    it('/rpc: methods with an overlong key field are invalid params carrying VALIDATION_INVALID_TYPE, the field and the limit', async () => {
      const cases: [string, Record<string, unknown>, KeyField, string, string][] = [
        ['signals.emit', { signal_type: over('signal_type'), content: 'x' }, 'signal_type', 'VALIDATION_INVALID_TYPE', 'signal_type'],
        ['memory.store', { namespace: wide('namespace'), content: 'x' }, 'namespace', 'VALIDATION_INVALID_TYPE', 'namespace'],
        ['workflow.next', { task_types: [over('task_type')] }, 'task_type', 'VALIDATION_INVALID_TYPE', 'task_types.0'],
      ];
      const before = await snapshot();
      for (const [method, params, kind, code, field] of cases) {
        const res = await alice.client.post('/rpc', { jsonrpc: '2.0', id: 1, method, params });
        expect(res.status, JSON.stringify(res.body)).toBe(400);
        expect(res.body.error.data.code).toBe('RPC_INVALID_PARAMS');
        const d = res.body.error.data.details;
        expect({ code: d.code, field: d.field, limit: d.limit }, method).toEqual({ code, field, limit: KEY_LIMITS[kind] });
      }
      expect(await snapshot()).toEqual(before);
    });

    it('MCP: tools with an overlong key field are tool refusals carrying VALIDATION_INVALID_TYPE, the field and the limit', async () => {
      const headers: Record<string, string> = { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const init = await fetch(`${svc.url}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'keys', version: '1.0.0' } } }) });
      expect(init.status).toBe(200);
      const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
      const cases: [string, Record<string, unknown>, KeyField, string, string][] = [
        ['svc_emit_signal', { signal_type: 'note', content: 'x', tags: [over('tag')] }, 'tag', 'VALIDATION_INVALID_TYPE', 'tags.0'],
        ['svc_memory_store', { namespace: 'org', content: 'x', entity: wide('entity') }, 'entity', 'VALIDATION_INVALID_TYPE', 'entity'],
      ];
      const before = await snapshot();
      for (const [name, args, kind, code, field] of cases) {
        const res = await fetch(`${svc.url}/mcp`, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }) });
        expect(res.status).toBe(200);
        const out = await res.json();
        expect(out.result.isError, JSON.stringify(out)).toBe(true);
        const e = out.result.structuredContent.error;
        expect({ code: e.code, inner: e.details.code, field: e.details.field, limit: e.details.limit }, name).toEqual({ code: 'RPC_INVALID_PARAMS', inner: code, field, limit: KEY_LIMITS[kind] });
      }
      expect(await snapshot()).toEqual(before);
    });

    it('A2A: a message whose signal fields carry an overlong key is refused 400 naming the field and the limit', async () => {
      const send = (metadata: Record<string, unknown>) =>
        fetch(`${svc.url}/a2a`, {
          method: 'POST',
          headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/send', params: { message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'keys' }], metadata } } }),
        });
      const cases: [Record<string, unknown>, KeyField, string][] = [
        [{ signal_type: over('signal_type') }, 'signal_type', 'signal_type'],
        [{ signal_type: 'task', tags: [wide('tag')] }, 'tag', 'tags.0'],
        [{ signal_type: 'task', payload: { task_type: over('task_type') } }, 'task_type', 'payload.task_type'],
      ];
      const before = await snapshot();
      for (const [metadata, kind, field] of cases) {
        const res = await send(metadata);
        const body = await res.json();
        expect(refusalOf(res.status, body.error?.data), JSON.stringify(body).slice(0, 300)).toEqual(refused(400, 'SIGNAL_EMIT_VALIDATION_FAILED', field, kind));
      }
      expect(await snapshot()).toEqual(before);
    });

    it('federation: a delivered signal with an overlong key field is 400 VALIDATION_INVALID_TYPE naming signal.<field> and the limit', async () => {
      const trust = expectOk(await root.client.post('/federation/trust', { name: 'keys peer', endpoint: 'https://keys.example', allowed_scopes: ['task'] }), 201);
      const cases: [Record<string, unknown>, KeyField, string][] = [
        [{ signal_type: over('signal_type') }, 'signal_type', 'signal.signal_type'],
        [{ signal_type: 'task', tags: [wide('tag')] }, 'tag', 'signal.tags.0'],
        [{ signal_type: 'task', payload: { task_type: over('task_type') } }, 'task_type', 'signal.payload.task_type'],
      ];
      const before = await snapshot();
      for (const [fields, kind, field] of cases) {
        const signal = { id: `sig-keys-${randomUUID().slice(0, 8)}`, content: 'x', ...fields };
        const res = await signedPost(svc.url, '/federation/deliver', JSON.stringify({ signal, hops: 0 }), { secret: trust.shared_secret, peerId: trust.peer_id });
        expect(refusalOf(res.status, res.body?.error), JSON.stringify(res.body)).toEqual(refused(400, 'VALIDATION_INVALID_TYPE', field, kind));
      }
      expect(await snapshot()).toEqual(before);
    });
  });
}
