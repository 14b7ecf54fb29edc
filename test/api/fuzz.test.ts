/**
 * Hostile input over every route of the LIVE route table, every WebSocket op and every RPC method:
 * malformed JSON, wrong types, huge strings and arrays, deep nesting, `__proto__`/`constructor` keys,
 * invalid UTF-8, oversized bodies, unknown fields. Every answer is a catalogue error (4xx with the envelope)
 * or a success, never a 500 or a crash, and a refusal changes no state (signal, identity and key counts).
 * CI runs a short pass; `npm run fuzz` sets FUZZ_RUNS for a long one (see docs/reliability.md).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { catalogue } from '../../src/errors.js';
import type { Route } from '../../src/http/server.js';
import { indexes } from '../../src/identity/model.js';
import { proofHeaders } from '../../src/federation/proof.js';
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
const WS_OPS = ['emit', 'claim', 'ack', 'inbox.acknowledge', 'inbox.resolve', 'resume', 'subscribe'];
const RPC_METHODS = Object.keys(methodTable({} as Parameters<typeof methodTable>[0]));
const FIELDS = ['__proto__', 'constructor', 'prototype', 'signal_type', 'content', 'name', 'id', 'signal_id', 'payload', 'metadata', 'tags', 'namespace', 'code', 'type', 'owner', 'permissions', 'is_admin', 'unknown_field'];

const deep = (n: number) => `{"payload":${'['.repeat(n)}${']'.repeat(n)},"metadata":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`;
/** The fixed hostile corpus every body route gets once, whatever the seed. */
const HOSTILE: [string, Buffer][] = [
  ['malformed JSON', Buffer.from('{"signal_type": "task", ')],
  ['a JSON array', Buffer.from('[1,2,3]')],
  ['a JSON string', Buffer.from('"hello"')],
  ['JSON null', Buffer.from('null')],
  ['__proto__ and constructor keys', Buffer.from('{"__proto__":{"is_admin":true,"polluted":1},"constructor":{"prototype":{"polluted":1}},"name":"p","signal_type":"task","content":"x"}')],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xa0, 0xa1]), Buffer.from('","content":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')])],
  ['deep nesting', Buffer.from(deep(20_000))],
  ['a huge string in every field', Buffer.from(JSON.stringify(Object.fromEntries(FIELDS.filter((f) => f !== '__proto__').map((f) => [f, 'x'.repeat(60_000)]))))],
  ['a huge array', Buffer.from(JSON.stringify({ tags: Array.from({ length: 50_000 }, (_, i) => `t${i}`), signals: Array.from({ length: 5_000 }, () => ({})), content: 'x' }))],
  ['wrong types everywhere', Buffer.from(JSON.stringify(Object.fromEntries(FIELDS.filter((f) => f !== '__proto__').map((f, i) => [f, [1, true, null, [], {}, -1.5, 1e308][i % 7]]))))],
  ['an oversized body', Buffer.alloc(1024 * 1024 + 10, 'a')],
];

/** Bodies: any JSON value, objects over the routes' own field names (plus unknown ones), truncated JSON, random bytes. */
const bodyArb: fc.Arbitrary<Buffer> = fc.oneof(
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
  fc.dictionary(fc.constantFrom(...FIELDS), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 8 }).map((o) => Buffer.from(JSON.stringify(o))),
  fc.json().map((s) => Buffer.from(s.slice(0, Math.max(1, s.length - 1)))),
  fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
);
const paramArb = fc.oneof(fc.constant('x'), fc.string({ maxLength: 40 }), fc.constant('%E0%A4%A'), fc.constant('..%2F..%2Fetc'), fc.constant('__proto__'));
const queryArb = fc.dictionary(fc.constantFrom('limit', 'after', 'type', 'ring', 'role', 'q', 'parent_id', 'since', 'state', 'namespace', '__proto__', 'x'), fc.string({ maxLength: 30 }), { maxKeys: 4 });

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

    const counts = async () => Promise.all([svc.store.count('signals'), svc.store.count(indexes.identities), svc.store.count(indexes.apiKeys)]);

    /** Sends one request and checks the answer: no 5xx, no leak, the envelope on a refusal, and no state change on it. */
    async function probe(r: Route, key: string, body: Buffer | undefined, param = 'x', query: Record<string, string> = {}): Promise<string | undefined> {
      const path = r.path.replace(/:[A-Za-z_]+/g, () => encodeURIComponent(param));
      const qs = new URLSearchParams(query).toString();
      const before = await counts();
      let res: Response;
      const signed = r.auth === 'proof' ? proofHeaders(trust.peer_id, trust.shared_secret, METHOD[r.method], path, hasBody(r) && body ? body : Buffer.alloc(0), Date.now()) : {};
      try {
        res = await fetch(`${svc.url}${path}${qs ? `?${qs}` : ''}`, { method: METHOD[r.method], headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...signed }, body: hasBody(r) && body ? new Uint8Array(body) : undefined });
      } catch (e) {
        return `${label(r)}: no answer (${String(e)})`;
      }
      const text = await res.text();
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      expectNoLeak({ status: res.status, body: json ?? text });
      if (res.status >= 500) return `${label(r)} ${body?.subarray(0, 80).toString()}: ${res.status} ${text.slice(0, 200)}`;
      if (res.status >= 400) {
        // the protocol routes answer in their own envelopes (JSON-RPC, MCP); every other route in ours
        if (!r.raw && !(json?.error?.code in catalogue)) return `${label(r)}: ${res.status} without a catalogue code: ${text.slice(0, 200)}`;
        const after = await counts();
        if (after.join() !== before.join()) return `${label(r)}: refused with ${res.status} yet counts moved ${before} → ${after}`;
      }
      return undefined;
    }

    it('the hostile corpus on every body route of the live table', async () => {
      const failures: string[] = [];
      for (const r of svc.routes.filter((r) => hasBody(r) && !r.stream)) {
        const key = r.auth === 'admin' ? root.key : member.key;
        for (const [name, body] of HOSTILE) {
          const f = await probe(r, key, body);
          if (f) failures.push(`${name}: ${f}`);
        }
      }
      expect(failures).toEqual([]);
    }, 180_000);

    it('random bodies, path parameters and queries on every route of the live table', async () => {
      const failures: string[] = [];
      for (const r of svc.routes.filter((r) => !r.stream)) {
        const key = r.auth === 'admin' ? root.key : member.key;
        await fc.assert(
          fc.asyncProperty(bodyArb, paramArb, queryArb, async (body, param, query) => {
            const f = await probe(r, key, body, param, query);
            if (f) failures.push(f);
            return f === undefined;
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      }
      expect(failures).toEqual([]);
    }, 300_000);

    it('every RPC method with random params answers a JSON-RPC error with a catalogue code, never a 500', async () => {
      const before = await counts();
      for (const method of [...RPC_METHODS, 'no.such.method', '__proto__', 'constructor']) {
        await fc.assert(
          fc.asyncProperty(fc.jsonValue({ maxDepth: 3 }), async (params) => {
            const res = await member.client.post('/rpc', { jsonrpc: '2.0', id: 1, method, params });
            expectNoLeak(res);
            expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
            if (res.body.error) expect(res.body.error.data?.code in catalogue, JSON.stringify(res.body)).toBe(true);
          }),
          { numRuns: RUNS, seed: SEED },
        );
      }
      // params the schemas refuse never write: only signals.emit/batch_emit/handoff could add signals
      const after = await counts();
      expect(after[1]).toBe(before[1]);
      expect(after[2]).toBe(before[2]);
    }, 120_000);

    it('every WebSocket op and garbage frame gets one error or result frame; the socket stays up', async () => {
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
      const before = await counts();
      let sent = 0;
      await fc.assert(
        fc.asyncProperty(frameArb, async (frame) => {
          ws.send(frame);
          sent++;
          await waitFor('an answer frame', async () => answers.length, (n) => n >= sent || closed !== undefined, 5000, 2);
          expect(closed, `closed after ${frame}`).toBeUndefined();
          const a = answers[sent - 1];
          if (a.type === 'error') {
            expect(a.error.code in catalogue, JSON.stringify(a)).toBe(true);
            expect(a.error.code).not.toBe('INTERNAL_SERVER_ERROR');
            expectNoLeak({ status: 400, body: a });
          }
        }),
        { numRuns: RUNS * WS_OPS.length * 3, seed: SEED },
      );
      // binary frames with invalid UTF-8 and a deep frame
      for (const frame of [Buffer.from([0xff, 0xfe, 0x7b, 0x22]), Buffer.from(`{"op":"emit","id":"d",${deep(10_000).slice(1)}`)]) {
        ws.send(frame);
        sent++;
        await waitFor('an answer frame', async () => answers.length, (n) => n >= sent || closed !== undefined, 5000, 2);
        expect(closed).toBeUndefined();
        expect(answers[sent - 1].type).toBe('error');
      }
      const after = await counts();
      expect(after[1]).toBe(before[1]);
      // the socket still works: an op after the garbage is answered
      const sig = await emitOk(root, { signal_type: 'task', content: 'after fuzz' });
      ws.send(JSON.stringify({ op: 'claim', id: 'last', signal_id: sig.id }));
      await waitFor('the claim result', async () => answers.find((a) => a.id === 'last'), (a) => a !== undefined, 5000);
      expect(answers.find((a) => a.id === 'last').type).toBe('result');
      ws.close();
    }, 120_000);
  });
}
