/**
 * Hostile input over every route of the LIVE route table (the upload streams included, with garbage
 * multipart), every WebSocket op (the server's own list, WS_OPS), every RPC method, and MCP for real: a
 * session opened by hand (initialize, initialized), then random `tools/call` arguments for every tool of
 * `tools/list`, random `resources/read` URIs and random methods. Malformed JSON, wrong types, huge strings
 * and arrays, deep nesting, `__proto__`/`constructor` keys, invalid UTF-8, oversized bodies and frames,
 * unknown fields, keys past LMDB's key size in every field that may become one (and in uploads' tags and
 * names, queries and path parameters): every answer is a catalogue error (4xx with the envelope, a JSON-RPC error carrying its
 * code) or a success, never a 500 or a crash, and a refusal changes no state (a snapshot of record counts:
 * signals, identities, keys, invites, roles, rings, fills, webhooks, artifacts, workstreams, memories,
 * shares, workspace items and every actor kind). CI runs a short pass; `npm run fuzz` sets FUZZ_RUNS for a
 * long one (see docs/reliability.md).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { catalogue } from '../../src/errors.js';
import type { Route } from '../../src/http/server.js';
import { indexes } from '../../src/identity/model.js';
import { proofHeaders } from '../../src/federation/proof.js';
import { MEMORY_JOB } from '../../src/memory/job-kind.js';
import { actorStateIndex } from '../../src/runtime/runtime.js';
import { MAX_FRAME, MAX_PAYLOAD, WS_OPS } from '../../src/realtime/ws.js';
import { methodTable } from '../../src/surface/methods.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectNoLeak } from './leak.js';
import { emitOk, waitFor } from './support.js';

/** property runs per route (and per op, per method); CI keeps it short */
const RUNS = Number(process.env.FUZZ_RUNS ?? 6);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const label = (r: Route) => `${METHOD[r.method]} ${r.path}`;
const hasBody = (r: Route) => r.method !== 'get' && r.method !== 'del';
const RPC_METHODS = Object.keys(methodTable({} as Parameters<typeof methodTable>[0]));
const FIELDS = ['__proto__', 'constructor', 'prototype', 'signal_type', 'content', 'name', 'id', 'signal_id', 'payload', 'metadata', 'tags', 'namespace', 'code', 'type', 'owner', 'permissions', 'is_admin', 'unknown_field'];

const deep = (n: number) => `{"payload":${'['.repeat(n)}${']'.repeat(n)},"metadata":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`;
/** JSON text nested `n` objects deep (JSON.stringify itself overflows on thousands of levels). */
const nested = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
/** Fields most routes accept, so a deep free-form value gets past the schema's other checks to the store. */
const PLAUSIBLE = '"signal_type":"task","content":"deep","name":"deep","namespace":"deep","type":"agent"';
const deepIn = (field: string, n: number) => Buffer.from(`{${PLAUSIBLE},${JSON.stringify(field)}:${field === 'resources' ? `[${nested(n)}]` : nested(n)}}`);
const DEEP_LEVELS = [65, 1_000, 5_000];
/** Past LMDB's key size on its own, and in three-byte characters (the bounds count bytes). */
const OVERLONG = 'k'.repeat(1000) + '中'.repeat(400);
/** Fields that become (part of) store keys or index names somewhere (validation.ts, KEY_LIMITS). */
const KEY_FIELDS = ['signal_type', 'tags', 'tag', 'name', 'namespace', 'entity', 'project', 'paths', 'path', 'to_role', 'to_ring', 'to_identity', 'target_capabilities', 'capabilities', 'idempotency_key', 'task_types', 'task_type', 'type', 'grantee', 'uploaded_by'];
const PLAUSIBLE_BODY = { signal_type: 'task', content: 'keys', name: 'keys', namespace: 'org', type: 'agent', paths: ['a.ts'] };
/** A plausible body with one key field overlong: a list field as a list holding it. */
const LIST_FIELDS = new Set(['tags', 'paths', 'target_capabilities', 'capabilities', 'task_types']);
const overlongIn = (f: string) => ({ ...PLAUSIBLE_BODY, [f]: LIST_FIELDS.has(f) ? ['ok', OVERLONG] : OVERLONG });
/** The fixed hostile corpus every body route gets once, whatever the seed. */
const HOSTILE: [string, Buffer][] = [
  ['malformed JSON', Buffer.from('{"signal_type": "task", ')],
  ['a JSON array', Buffer.from('[1,2,3]')],
  ['a JSON string', Buffer.from('"hello"')],
  ['JSON null', Buffer.from('null')],
  ['__proto__ and constructor keys', Buffer.from('{"__proto__":{"is_admin":true,"polluted":1},"constructor":{"prototype":{"polluted":1}},"name":"p","signal_type":"task","content":"x"}')],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1]), Buffer.from('","content":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')])],
  ['deep nesting', Buffer.from(deep(20_000))],
  // a free-form field too deep in an otherwise plausible body: once stored, 5,000 levels overflowed the record encoder
  ['metadata one level past the limit', deepIn('metadata', 65)],
  ...['metadata', 'payload', 'resources', 'unknown_field'].map((f): [string, Buffer] => [`${f} 5000 levels deep`, deepIn(f, 5_000)]),
  ['an A2A message with a deep payload', Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":{"signal_type":"task","payload":{"d":${nested(5_000)}}}}}}`)],
  ['a JSON-RPC call with deep params', Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"signals.emit","params":${deepIn('metadata', 5_000)}}`)],
  ['a huge string in every field', Buffer.from(JSON.stringify(Object.fromEntries(FIELDS.filter((f) => f !== '__proto__').map((f) => [f, 'x'.repeat(60_000)]))))],
  ['a huge array', Buffer.from(JSON.stringify({ tags: Array.from({ length: 50_000 }, (_, i) => `t${i}`), signals: Array.from({ length: 5_000 }, () => ({})), content: 'x' }))],
  ['wrong types everywhere', Buffer.from(JSON.stringify(Object.fromEntries(FIELDS.filter((f) => f !== '__proto__').map((f, i) => [f, [1, true, null, [], {}, -1.5, 1e308][i % 7]]))))],
  ['an oversized body', Buffer.alloc(1024 * 1024 + 10, 'a')],
  // keys past LMDB's key size (1978 bytes) in every field that may become one, alone in an otherwise plausible body
  ...KEY_FIELDS.map((f): [string, Buffer] => [`${f} an overlong key`, Buffer.from(JSON.stringify(overlongIn(f)))]),
  ['payload.task_type an overlong key', Buffer.from(JSON.stringify({ ...PLAUSIBLE_BODY, payload: { task_type: OVERLONG } }))],
];

const CRLF = '\r\n';
const part = (b: string, headers: string[], body: string | Buffer) => Buffer.concat([Buffer.from(`--${b}${CRLF}${headers.join(CRLF)}${CRLF}${CRLF}`), Buffer.from(body), Buffer.from(CRLF)]);
const disposition = (name: string, filename?: string) => `content-disposition: form-data; name="${name}"${filename === undefined ? '' : `; filename="${filename}"`}`;
const closing = (b: string) => Buffer.from(`--${b}--${CRLF}`);
/** The fixed hostile corpus of the upload (stream) routes: [name, Content-Type, body]. */
const HOSTILE_UPLOADS: [string, string, Buffer][] = [
  ['multipart without a boundary', 'multipart/form-data', Buffer.concat([part('x', [disposition('file', 'a.txt')], 'abc'), closing('x')])],
  ['a boundary the body does not use', 'multipart/form-data; boundary=abc', Buffer.concat([part('xyz', [disposition('file', 'a.txt')], 'abc'), closing('xyz')])],
  ['truncated multipart', 'multipart/form-data; boundary=b', Buffer.from(`--b${CRLF}${disposition('file', 'a.txt')}${CRLF}content-type: text/plain${CRLF}${CRLF}half a fi`)],
  // busboy fails every file stream of a cut body: one the upload ignores once ended the process (uncaught 'error')
  ['truncated inside a file part not named file', 'multipart/form-data; boundary=b', Buffer.from(`--b${CRLF}${disposition('other', 'o.txt')}${CRLF}${CRLF}half an ot`)],
  ['truncated inside a second file part', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('name')], 'two.txt'), part('b', [disposition('file', 'a.txt')], 'a'), Buffer.from(`--b${CRLF}${disposition('file', 'b.txt')}${CRLF}${CRLF}half a se`)])],
  ['fields but no file part', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('name')], 'n'), part('b', [disposition('tags')], 'a,b'), closing('b')])],
  ['__proto__ and constructor fields', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('__proto__')], '{"polluted":1}'), part('b', [disposition('constructor')], 'x'), part('b', [disposition('metadata')], '{"__proto__":{"polluted":1}}'), part('b', [disposition('file', 'p.txt')], 'p'), closing('b')])],
  ['a part without a disposition', 'multipart/form-data; boundary=b', Buffer.concat([part('b', ['content-type: text/plain'], 'orphan'), closing('b')])],
  ['invalid UTF-8 in names and values', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [Buffer.concat([Buffer.from('content-disposition: form-data; name="'), Buffer.from([0xff, 0xfe]), Buffer.from('"')]).toString('latin1')], Buffer.from([0xc3, 0x28])), part('b', [disposition('file', '\udc00.txt')], Buffer.from([0xed, 0xa0, 0x80])), closing('b')])],
  ['more parts than allowed', 'multipart/form-data; boundary=b', Buffer.concat([...Array.from({ length: 200 }, (_, i) => part('b', [disposition(`f${i}`)], 'v')), part('b', [disposition('file', 'late.txt')], 'late'), closing('b')])],
  ['a field over its size cap', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('metadata')], 'x'.repeat(70_000)), part('b', [disposition('file', 'a.txt')], 'a'), closing('b')])],
  ['a metadata field 5,000 levels deep', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('metadata')], nested(5_000)), part('b', [disposition('file', 'a.txt')], 'a'), closing('b')])],
  ['a 100 kB header line', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('file', 'a.txt'), `x-junk: ${'a'.repeat(100_000)}`], 'a'), closing('b')])],
  ['an empty multipart body', 'multipart/form-data; boundary=b', Buffer.alloc(0)],
  ['nested multipart', 'multipart/form-data; boundary=outer', Buffer.concat([part('outer', [disposition('file', 'n.txt'), 'content-type: multipart/mixed; boundary=inner'], Buffer.concat([part('inner', ['content-type: text/plain'], 'in'), closing('inner')])), closing('outer')])],
  ['a quoted boundary never closed', 'multipart/form-data; boundary="', Buffer.from(`--"${CRLF}`)],
  ['a raw body with no name', 'application/octet-stream', Buffer.from([0, 1, 2, 255])],
  ['a raw JSON body', 'application/json', Buffer.from('{"name":"x","__proto__":{"polluted":1}}')],
  // an overlong tag once answered 500 on LMDB, its blob already written
  ...['tags', 'name'].map((f): [string, string, Buffer] => [`an overlong ${f}`, 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition(f)], OVERLONG), part('b', [disposition('file', 'k.txt')], 'k'), closing('b')])]),
  ['an overlong tag in a JSON array', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('tags')], JSON.stringify(['ok', OVERLONG])), part('b', [disposition('file', 'k.txt')], 'k'), closing('b')])],
  ['an overlong file name', 'multipart/form-data; boundary=b', Buffer.concat([part('b', [disposition('file', OVERLONG)], 'k'), closing('b')])],
];

/** Random upload bodies: multipart with random parts (names among the upload fields), a boundary that matches or not, cut anywhere. */
const uploadArb: fc.Arbitrary<[string, Buffer]> = fc
  .record({
    boundary: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
    declared: fc.constantFrom('same', 'other', 'none', 'octets'),
    parts: fc.array(
      fc.record({
        name: fc.oneof(fc.constantFrom('file', 'name', 'tags', 'metadata', 'visibility', 'parent_id', 'description', '__proto__', 'constructor'), fc.string({ maxLength: 12 })),
        filename: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
        type: fc.option(fc.constantFrom('text/plain', 'application/json', '', 'x/y; a=b', 'multipart/mixed'), { nil: undefined }),
        body: fc.oneof(fc.string({ maxLength: 200 }), fc.json(), fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a))),
      }),
      { maxLength: 5 },
    ),
    cut: fc.option(fc.nat(), { nil: undefined }),
  })
  .map(({ boundary, declared, parts, cut }): [string, Buffer] => {
    const full = Buffer.concat([...parts.map((p) => part(boundary, [disposition(p.name, p.filename), ...(p.type === undefined ? [] : [`content-type: ${p.type}`])], p.body)), closing(boundary)]);
    const body = cut === undefined ? full : full.subarray(0, cut % (full.length + 1));
    const type = { same: `multipart/form-data; boundary=${boundary}`, other: 'multipart/form-data; boundary=not-the-one', none: 'multipart/form-data', octets: 'application/octet-stream' }[declared];
    return [type, body];
  });

/** Bodies: any JSON value, objects over the routes' own field names (plus unknown ones), truncated JSON, random bytes. */
const bodyArb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
  fc.dictionary(fc.constantFrom(...FIELDS), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 8 }).map((o) => Buffer.from(JSON.stringify(o))),
  fc.json().map((s) => Buffer.from(s.slice(0, Math.max(1, s.length - 1)))),
  fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
);
const paramArb = fc.oneof(fc.constant('x'), fc.string({ maxLength: 40 }), fc.constant('%E0%A4%A'), fc.constant('..%2F..%2Fetc'), fc.constant('__proto__'), fc.constant(OVERLONG));
const queryArb = fc.dictionary(fc.constantFrom('limit', 'after', 'type', 'ring', 'role', 'q', 'parent_id', 'since', 'state', 'namespace', 'tag', 'entity', 'uploaded_by', 'project', '__proto__', 'x'), fc.oneof(fc.string({ maxLength: 30 }), fc.constant(OVERLONG)), { maxKeys: 4 });

for (const backend of BACKENDS) {
  describe(`fuzzing on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let member: Member;
    /** proof routes are signed with a real trust, so hostile bodies reach their validation and handlers */
    let trust: { peer_id: string; shared_secret: string };

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      member = await join(root.client, 'member');
      const t = await root.client.post('/federation/trust', { name: 'fuzz peer', endpoint: 'https://fuzz.example', allowed_scopes: ['task'] });
      expect(t.status).toBe(201);
      trust = t.body.data;
    });
    afterAll(() => {
      expect(({} as any).polluted).toBeUndefined();
      expect(({} as any).is_admin).toBeUndefined();
    });

    /** Record counts a refusal must leave alone: plain record indexes and, per actor kind, its actors in every state. */
    const PLAIN = ['signals', indexes.identities, indexes.apiKeys, indexes.invites, 'roles', 'rings', 'fills', 'webhooks', 'artifacts', 'workstreams', 'mem:all', 'mem:shares', 'ws:children:~'];
    async function counts(): Promise<Record<string, number>> {
      const kinds = svc.runtime.kindNames().map((k) => [k, svc.runtime.statesOf(k).map((s) => actorStateIndex(k, s))] as const);
      const [plain, perKind] = await Promise.all([
        Promise.all(PLAIN.map((i) => svc.store.count(i))),
        Promise.all(kinds.map(async ([, ix]) => (await Promise.all(ix.map((i) => svc.store.count(i)))).reduce((a, b) => a + b, 0))),
      ]);
      return Object.fromEntries([...PLAIN.map((i, n) => [i, plain[n]]), ...kinds.map(([k], n) => [`kind:${k}`, perKind[n]])]);
    }
    const moved = (a: Record<string, number>, b: Record<string, number>) =>
      Object.keys({ ...a, ...b })
        .filter((k) => a[k] !== b[k])
        .map((k) => `${k} ${a[k]} → ${b[k]}`);
    /** A memory job a fuzzed request started writes memories or an artifact later: let it end before the next snapshot. */
    const jobsIdle = () => waitFor('memory jobs to end', () => svc.store.count(actorStateIndex(MEMORY_JOB, 'running')), (n) => n === 0, 20_000, 20);

    /** A refusal: a 4xx, or a JSON-RPC error a protocol route (/rpc, /mcp, /a2a) answered with 200. */
    const refused = (r: Route, status: number, json: any) => status >= 400 || (!!r.raw && json !== null && typeof json === 'object' && !Array.isArray(json) && json.error !== undefined);

    /** Sends one request and checks the answer: no 5xx, no leak, the envelope on a refusal, and no state change on it. */
    async function probe(r: Route, key: string, body: Buffer | undefined, param = 'x', query: Record<string, string> = {}, contentType = 'application/json'): Promise<string | undefined> {
      const path = r.path.replace(/:[A-Za-z_]+/g, () => encodeURIComponent(param));
      const qs = new URLSearchParams(query).toString();
      await jobsIdle();
      const before = await counts();
      let res: Response;
      const signed = r.auth === 'proof' ? proofHeaders(trust.peer_id, trust.shared_secret, METHOD[r.method], path, hasBody(r) && body ? body : Buffer.alloc(0), Date.now()) : {};
      try {
        res = await fetch(`${svc.url}${path}${qs ? `?${qs}` : ''}`, { method: METHOD[r.method], headers: { authorization: `Bearer ${key}`, 'content-type': contentType, accept: 'application/json, text/event-stream', ...signed }, body: hasBody(r) && body ? new Uint8Array(body) : undefined });
      } catch (e) {
        return `${label(r)}: no answer (${String(e)})`;
      }
      const text = await res.text();
      const json = jsonOrUndefined(text);
      expectNoLeak({ status: res.status, body: json ?? text });
      if (res.status >= 500) return `${label(r)} ${body?.subarray(0, 80).toString()}: ${res.status} ${text.slice(0, 200)}`;
      if (refused(r, res.status, json)) {
        // the protocol routes answer in their own envelopes (JSON-RPC, MCP); every other route in ours
        if (!r.raw && !(json?.error?.code in catalogue)) return `${label(r)}: ${res.status} without a catalogue code: ${text.slice(0, 200)}`;
        await jobsIdle();
        const diff = moved(before, await counts());
        if (diff.length) return `${label(r)}: refused with ${res.status} (${text.slice(0, 120)}) yet counts moved: ${diff.join(', ')}`;
      }
      return undefined;
    }

    it('the hostile corpus on every body route of the live table, and garbage multipart on the upload routes', async () => {
      const failures: string[] = [];
      for (const r of svc.routes.filter((r) => hasBody(r))) {
        const key = r.auth === 'admin' ? root.key : member.key;
        for (const [name, type, body] of r.stream ? HOSTILE_UPLOADS : HOSTILE.map(([n, b]) => [n, 'application/json', b] as const)) {
          const f = await probe(r, key, body, 'x', {}, type);
          if (f) failures.push(`${name}: ${f}`);
        }
      }
      expect(failures).toEqual([]);
    }, 360_000);

    it('random bodies, path parameters and queries on every route of the live table (random multipart on the upload routes)', async () => {
      const failures: string[] = [];
      for (const r of svc.routes) {
        const key = r.auth === 'admin' ? root.key : member.key;
        const bodies: fc.Arbitrary<[string, Buffer]> = r.stream ? uploadArb : bodyArb.map((b): [string, Buffer] => ['application/json', b]);
        await fc.assert(
          fc.asyncProperty(bodies, paramArb, queryArb, async ([type, body], param, query) => {
            const f = await probe(r, key, body, param, query, type);
            if (f) failures.push(f);
            return f === undefined;
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      }
      expect(failures).toEqual([]);
    }, 300_000);

    it('every RPC method with random params answers a JSON-RPC error with a catalogue code, never a 500; a refused call writes nothing', async () => {
      const failures: string[] = [];
      for (const method of [...RPC_METHODS, 'no.such.method', '__proto__', 'constructor']) {
        for (const n of DEEP_LEVELS) {
          const before = await counts();
          const res = await member.client.post('/rpc', `{"jsonrpc":"2.0","id":1,"method":${JSON.stringify(method)},"params":${deepIn('metadata', n)}}`);
          expect(res.status, `${method} with metadata ${n} deep: ${JSON.stringify(res.body).slice(0, 200)}`).toBeLessThan(500);
          if (res.body.error) expect(moved(before, await counts())).toEqual([]);
        }
        for (const f of KEY_FIELDS) {
          const res = await member.client.post('/rpc', { jsonrpc: '2.0', id: 1, method, params: overlongIn(f) });
          if (res.status >= 500 || (res.body.error && !(res.body.error.data?.code in catalogue))) failures.push(`${method} with an overlong ${f}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        }
        await fc.assert(
          fc.asyncProperty(fc.jsonValue({ maxDepth: 3 }), async (params) => {
            const before = await counts();
            const res = await member.client.post('/rpc', { jsonrpc: '2.0', id: 1, method, params });
            expectNoLeak(res);
            expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
            if (res.body.error) {
              expect(res.body.error.data?.code in catalogue, JSON.stringify(res.body)).toBe(true);
              const diff = moved(before, await counts());
              if (diff.length) failures.push(`${method} ${JSON.stringify(params).slice(0, 80)}: refused yet counts moved: ${diff.join(', ')}`);
            }
          }),
          { numRuns: RUNS, seed: SEED },
        );
      }
      expect(failures).toEqual([]);
    }, 120_000);

    /** MCP by hand over HTTP: initialize, then notifications/initialized; answers JSON (the server's enableJsonResponse). */
    async function mcpSession(key: string) {
      const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const init = await fetch(`${svc.url}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'fuzz', version: '1.0.0' } } }) });
      expect(init.status, await init.clone().text()).toBe(200);
      expect((await init.json()).result.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
      const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
      const ready = await fetch(`${svc.url}/mcp`, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
      expect(ready.status).toBe(202);
      let id = 0;
      /** `rawParams`: params as JSON text (thousands of levels deep overflow JSON.stringify) */
      return async (method: string, params: unknown, rawParams?: string): Promise<{ status: number; id: number; text: string; json: any }> => {
        const n = ++id;
        const body = rawParams === undefined ? JSON.stringify({ jsonrpc: '2.0', id: n, method, params }) : `{"jsonrpc":"2.0","id":${n},"method":${JSON.stringify(method)},"params":${rawParams}}`;
        const res = await fetch(`${svc.url}/mcp`, { method: 'POST', headers: session, body });
        const text = await res.text();
        const json = jsonOrUndefined(text);
        return { status: res.status, id: n, text, json };
      };
    }

    /** JSON-RPC codes of the protocol itself an MCP answer may carry besides a domain error (-32000 with data.code) */
    const MCP_PROTOCOL_CODES = new Set([-32700, -32600, -32601, -32602, -32002]);

    /** One MCP answer: a JSON-RPC result (a tool refusal inside it carries its catalogue code) or error with a known code, never a 5xx; a refusal writes nothing. */
    function mcpVerdict(what: string, a: { status: number; id: number; text: string; json: any }): { failure?: string; refusal: boolean } {
      expectNoLeak({ status: a.status, body: a.json ?? a.text });
      if (a.status >= 500) return { failure: `${what}: ${a.status} ${a.text.slice(0, 200)}`, refusal: true };
      const m = a.json;
      // a message the transport cannot read as JSON-RPC at all is answered with id null (-32700/-32600)
      const unread = m?.id === null && (m?.error?.code === -32700 || m?.error?.code === -32600);
      if (!m || m.jsonrpc !== '2.0' || (m.id !== a.id && !unread) || ('result' in m) === ('error' in m)) return { failure: `${what}: not a JSON-RPC answer: ${a.status} ${a.text.slice(0, 200)}`, refusal: true };
      if (m.error) {
        const known = MCP_PROTOCOL_CODES.has(m.error.code) || (m.error.code === -32000 && m.error.data?.code in catalogue);
        return known ? { refusal: true } : { failure: `${what}: JSON-RPC error without a known code: ${a.text.slice(0, 200)}`, refusal: true };
      }
      if (m.result?.isError) {
        const code = m.result.structuredContent?.error?.code;
        // a tool's internal error is the 500 of this surface
        return code in catalogue && code !== 'INTERNAL_SERVER_ERROR' && m.result.content?.[0]?.text?.startsWith(`${code}: `) ? { refusal: true } : { failure: `${what}: a tool refusal without a catalogue code: ${a.text.slice(0, 200)}`, refusal: true };
      }
      return { refusal: false };
    }

    it('MCP: random tools/call arguments for every listed tool, random resources/read URIs and random methods', async () => {
      const call = await mcpSession(member.key);
      const listed = await call('tools/list', {});
      expect(listed.status).toBe(200);
      const tools: { name: string; inputSchema: { properties?: Record<string, unknown> } }[] = listed.json.result.tools;
      expect(tools.length).toBeGreaterThan(10);
      const failures: string[] = [];
      const check = async (what: string, method: string, params: unknown, rawParams?: string) => {
        const before = await counts();
        const v = mcpVerdict(what, await call(method, params, rawParams));
        if (v.failure) failures.push(v.failure);
        else if (v.refusal) {
          const diff = moved(before, await counts());
          if (diff.length) failures.push(`${what}: refused yet counts moved: ${diff.join(', ')}`);
        }
      };
      for (const tool of [...tools, { name: 'svc_no_such_tool', inputSchema: {} }, { name: '__proto__', inputSchema: {} }]) {
        for (const n of DEEP_LEVELS) await check(`tools/call ${tool.name} with metadata ${n} deep`, 'tools/call', undefined, `{"name":${JSON.stringify(tool.name)},"arguments":${deepIn('metadata', n)}}`);
        const own = Object.keys(tool.inputSchema.properties ?? {});
        for (const f of own.filter((k) => KEY_FIELDS.includes(k))) await check(`tools/call ${tool.name} with an overlong ${f}`, 'tools/call', { name: tool.name, arguments: overlongIn(f) });
        const keys = fc.constantFrom(...new Set([...own, ...FIELDS]));
        const args = fc.oneof(
          // the tool's own fields (and hostile ones) with any JSON values
          fc.dictionary(keys, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 8 }),
          // plausible values: strings, numbers, booleans and small arrays under the tool's field names
          fc.dictionary(keys, fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.double(), fc.boolean(), fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 })), { maxKeys: 6 }),
          // arguments that are not an object at all
          fc.jsonValue({ maxDepth: 2 }),
        );
        await fc.assert(
          fc.asyncProperty(args, (a) => check(`tools/call ${tool.name} ${JSON.stringify(a).slice(0, 80)}`, 'tools/call', { name: tool.name, arguments: a })),
          { numRuns: RUNS, seed: SEED },
        );
      }
      const seg = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom(member.id, root.id, '__proto__', '..', '%00', '%E0%A4%A', 'x'.repeat(3000)));
      const uri = fc.oneof(
        fc.tuple(seg, fc.string({ maxLength: 10 }), fc.string({ maxLength: 20 })).map(([who, limit, scope]) => `svc://inbox/${who}?limit=${limit}&scope=${scope}`),
        seg.map((s) => `svc://thread/${s}`),
        fc.constantFrom('svc://whoami', 'svc://tasks/mine', 'svc://reservations', 'svc://reservations?project=__proto__&limit=-1', 'svc://', 'svc:', 'file:///etc/passwd', 'http://127.0.0.1/', 'javascript:alert(1)'),
        seg.map((s) => `svc://${s}`),
        fc.webUrl(),
        fc.string({ maxLength: 60 }),
      );
      const readParams = fc.oneof(uri.map((u) => ({ uri: u })), fc.jsonValue({ maxDepth: 2 }));
      await fc.assert(
        fc.asyncProperty(readParams, (p) => check(`resources/read ${JSON.stringify(p).slice(0, 80)}`, 'resources/read', p)),
        { numRuns: RUNS * 6, seed: SEED },
      );
      // other message types: known ones with random params, unknown names, notifications
      const methods = fc.constantFrom('tools/list', 'resources/list', 'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe', 'prompts/list', 'prompts/get', 'completion/complete', 'logging/setLevel', 'ping', 'initialize', 'sampling/createMessage', 'no/such/method', '__proto__', '');
      await fc.assert(
        fc.asyncProperty(methods, fc.jsonValue({ maxDepth: 2 }), (m, p) => check(`${m} ${JSON.stringify(p).slice(0, 80)}`, m, p)),
        { numRuns: RUNS * 4, seed: SEED },
      );
      // the session still works
      expect((await call('ping', {})).json.result).toEqual({});
      expect(failures).toEqual([]);
    }, 120_000);

    it('every WebSocket op (the server list, WS_OPS) and garbage frame gets one error or result frame; a refusal writes nothing; the socket stays up', async () => {
      const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/ws?token=${member.key}`);
      const answers: any[] = [];
      let closed: number | undefined;
      ws.on('message', (m) => {
        const f = JSON.parse(m.toString());
        if (f.type === 'result' || f.type === 'error') answers.push(f);
      });
      ws.on('close', (code) => (closed = code));
      await new Promise((r) => ws.once('open', r));
      const frameArb = fc.oneof(
        fc.record({ op: fc.constantFrom(...WS_OPS, 'nope', '__proto__', 'constructor'), id: fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.constant(null)) }).chain((head) => fc.dictionary(fc.constantFrom(...FIELDS.filter((f) => f !== 'id')), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 }).map((rest) => JSON.stringify({ ...rest, ...head }))),
        fc.string({ maxLength: 100 }),
        fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null'),
      );
      let sent = 0;
      const failures: string[] = [];
      const exchange = async (frame: string | Buffer) => {
        const before = await counts();
        ws.send(frame);
        sent++;
        await waitFor('an answer frame', async () => answers.length, (n) => n >= sent || closed !== undefined, 5000, 2);
        expect(closed, `closed after ${frame.slice(0, 100)}`).toBeUndefined();
        const a = answers[sent - 1];
        if (a.type === 'error') {
          expect(a.error.code in catalogue, JSON.stringify(a)).toBe(true);
          expect(a.error.code).not.toBe('INTERNAL_SERVER_ERROR');
          expectNoLeak({ status: catalogue[a.error.code as keyof typeof catalogue][0], body: a });
          const diff = moved(before, await counts());
          if (diff.length) failures.push(`${frame.slice(0, 100)}: refused with ${a.error.code} yet counts moved: ${diff.join(', ')}`);
        }
        return a;
      };
      await fc.assert(
        fc.asyncProperty(frameArb, async (frame) => void (await exchange(frame))),
        { numRuns: RUNS * WS_OPS.length * 3, seed: SEED },
      );
      // binary frames with invalid UTF-8 and a deep frame
      for (const frame of [Buffer.from([0xff, 0xfe, 0x7b, 0x22]), Buffer.from(`{"op":"emit","id":"d",${deep(10_000).slice(1)}`)]) {
        expect((await exchange(frame)).type).toBe('error');
      }
      // every op with a free-form field too deep, in an otherwise plausible frame
      for (const op of WS_OPS) for (const n of DEEP_LEVELS) await exchange(Buffer.from(`{"op":${JSON.stringify(op)},"id":"deep",${deepIn('metadata', n).subarray(1)}`));
      // every op with each key field overlong
      for (const op of WS_OPS) for (const f of KEY_FIELDS) await exchange(JSON.stringify({ ...overlongIn(f), op, id: 'keys' }));
      expect(failures).toEqual([]);
      // the socket still works: an op after the garbage is answered
      const sig = await emitOk(root, { signal_type: 'task', content: 'after fuzz' });
      ws.send(JSON.stringify({ op: 'claim', id: 'last', signal_id: sig.id }));
      await waitFor('the claim result', async () => answers.find((a) => a.id === 'last'), (a) => a !== undefined, 5000);
      expect(answers.find((a) => a.id === 'last').type).toBe('result');
      ws.close();
    }, 120_000);

    it('a WebSocket frame over MAX_PAYLOAD gets a PAYLOAD_TOO_LARGE error frame and the socket goes on; one over MAX_FRAME drops only its connection', async () => {
      const open = async () => {
        const ws = new WebSocket(`${svc.url.replace('http', 'ws')}/ws?token=${member.key}`);
        const frames: any[] = [];
        ws.on('message', (m) => frames.push(JSON.parse(m.toString())));
        const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
        ws.on('error', () => {});
        await new Promise((r) => ws.once('open', r));
        return { ws, frames, closed };
      };
      const answer = (s: Awaited<ReturnType<typeof open>>, what: (f: any) => boolean) => waitFor('an answer frame', async () => s.frames.find(what), (f) => f !== undefined, 10_000);
      const sock = await open();
      const before = await counts();
      sock.ws.send(JSON.stringify({ op: 'emit', id: 'big', signal_type: 'task', content: 'x'.repeat(MAX_PAYLOAD) }));
      const refusedFrame = await answer(sock, (f) => f.type === 'error');
      expect(refusedFrame).toMatchObject({ id: null, error: { code: 'PAYLOAD_TOO_LARGE', details: { limit: MAX_PAYLOAD } } });
      expect(moved(before, await counts())).toEqual([]);
      // the socket goes on: a frame just under the cap is an op like any other
      sock.ws.send(JSON.stringify({ op: 'subscribe', id: 'under', types: ['x'.repeat(MAX_PAYLOAD - 100)] }));
      expect((await answer(sock, (f) => f.id === 'under')).type).toBe('result');
      // past what uWS reads at all: that connection is dropped, the service and other sockets are not
      const huge = await open();
      huge.ws.send(Buffer.alloc(MAX_FRAME + 1, 0x20));
      expect(await huge.closed).toBe(1006);
      sock.ws.send(JSON.stringify({ op: 'subscribe', id: 'after', types: [] }));
      expect((await answer(sock, (f) => f.id === 'after')).type).toBe('result');
      expect((await fetch(`${svc.url}/health`)).status).toBe(200);
      sock.ws.close();
    }, 60_000);
  });
}

function jsonOrUndefined(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
