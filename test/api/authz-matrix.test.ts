/**
 * The authorization matrix: every route of the LIVE route table (the front end's, as src/app.ts builds it:
 * REST, /rpc, /mcp, /a2a) × every kind of caller that must be refused, with the code each gets. The sweep
 * rows (no key, invalid, revoked, expired, non-admin, suspended) are generated from the table. Scope-denied
 * and another identity's resource depend on what a route does: test/api/authz-table.ts classifies EVERY
 * route (and every /rpc method) with the request that must be refused and its exact code, or `none` with
 * the reason, and this file holds that table to the live tables exactly, so a route or method added later
 * fails the suite until it is classified. Admin-only /rpc methods are generated from the method table. The
 * push entry points (/ws, /signals/stream) are not in the route table and have their own rows, for opening one
 * and for one held open while its key or membership ends. Every
 * answer is checked for leaks: no stack trace or internal message.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { proofHeaders } from '../../src/federation/proof.js';
import type { Route } from '../../src/http/server.js';
import { methodTable } from '../../src/surface/methods.js';
import { upload } from '../helpers/blobs.js';
import { expectHeldEnded, hold } from '../helpers/push.js';
import { bootstrap, join, type Member, type Res } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { NARROWED, ROUTES, RPC_METHODS, rpc, type Fx, type Req, type Scope } from './authz-table.js';
import { emitOk, expectError, expectOk, setMembershipStatus } from './support.js';
import { expectNoLeak } from './leak.js';

const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const pathOf = (r: Route) => r.path.replace(/:[A-Za-z_]+/g, 'x');
const label = (r: Route) => `${METHOD[r.method]} ${r.path}`;
const hasBody = (r: Route) => r.method !== 'get' && r.method !== 'del';

/** The code a refusal carries: the envelope's, JSON-RPC's error.data (/rpc, /a2a, MCP reads), an MCP tool's isError result, a batch item's, or a bare JSON-RPC code. */
function codeOf(body: any): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  if (typeof body.error?.code === 'string') return body.error.code;
  const c = body.error?.data?.code ?? body.result?.structuredContent?.error?.code ?? body.result?.results?.[0]?.error?.code;
  if (typeof c === 'string') return c;
  return typeof body.error?.code === 'number' ? String(body.error.code) : undefined;
}

/** Sends a request with a key, or signed as the trusted peer (proof routes); a non-JSON answer (an MCP or A2A transport error) is kept as text. */
async function send(url: string, q: Req, as: { key?: string; peer?: { peer_id: string; shared_secret: string } }): Promise<Res> {
  const raw = q.body === undefined ? undefined : JSON.stringify(q.body);
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', ...q.headers };
  if (raw !== undefined) headers['content-type'] = 'application/json';
  if (as.key) headers.authorization = `Bearer ${as.key}`;
  if (as.peer) Object.assign(headers, proofHeaders(as.peer.peer_id, as.peer.shared_secret, q.method, q.path.split('?')[0]!, raw ?? '', Date.now()));
  const res = await fetch(url + q.path, { method: q.method, headers, body: raw });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    /* a text answer: checked for leaks as it is */
  }
  return { status: res.status, body };
}

/** A sweep call: the route with placeholder path parameters and an empty JSON object as body. */
const call = (url: string, key: string | undefined, r: Route) => send(url, { method: METHOD[r.method], path: pathOf(r), body: hasBody(r) ? {} : undefined }, { key });

/** Whether a classified request is a call of this route (so a row cannot test some other route instead). */
const addresses = (r: Route, q: Req) => {
  const pattern = r.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z_]+/g, '[^/]+');
  return q.method === METHOD[r.method] && new RegExp(`^${pattern}$`).test(q.path.split('?')[0]!);
};

/** Routes whose service demands an active membership: a suspended member gets POLICY_MEMBERSHIP_REQUIRED with a valid body. */
const MEMBERSHIP_REQUIRED: { label: string; path: string; body: (sig: string) => unknown; method: 'POST' }[] = [
  { label: 'POST /emit', method: 'POST', path: '/emit', body: () => ({ signal_type: 'task', content: 'x' }) },
  { label: 'POST /claim', method: 'POST', path: '/claim', body: (sig) => ({ signal_id: sig }) },
  { label: 'POST /ack', method: 'POST', path: '/ack', body: (sig) => ({ signal_id: sig }) },
  { label: 'POST /workspace/folders', method: 'POST', path: '/workspace/folders', body: () => ({ name: 'f' }) },
];

/** What ends a held socket and stream (docs/realtime.md, Rights follow the key); demotion, scope changes and expiry: test/api/realtime-credential.test.ts. */
const STREAMS_HELD: { what: string; end: (root: Member, who: Member, keyId: string) => Promise<unknown>; close: number; status: number; code: string }[] = [
  { what: 'key revoked', end: async (root, _who, keyId) => expectOk(await root.client.post(`/admin/api-keys/${keyId}/revoke`)), close: 4401, status: 401, code: 'AUTH_KEY_REVOKED' },
  { what: 'membership suspended', end: (root, who) => setMembershipStatus(root.client, who.id, 'suspended'), close: 4403, status: 403, code: 'POLICY_MEMBERSHIP_REQUIRED' },
  { what: 'identity deleted', end: async (root, who) => expectOk(await root.client.del(`/admin/identity/${who.id}`)), close: 4401, status: 401, code: 'AUTH_KEY_REVOKED' },
];

for (const backend of BACKENDS) {
  describe(`authorization matrix on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let url: string;
    let root: Member;
    let member: Member;
    let other: Member;
    let suspended: Member;
    const k = { revoked: '', expired: '' };
    /** member's keys, each narrowed to one scope (NARROWED; memory_scopes to member's own namespace) */
    const scopedKeys = {} as Record<Exclude<Scope, 'allowed_scopes'>, string>;
    let peer: { peer_id: string; shared_secret: string };
    let f: Fx;
    let table: readonly Route[];

    beforeAll(async () => {
      svc = await servers.start();
      url = svc.url;
      table = svc.routes;
      root = await bootstrap(url);
      member = await join(root.client, 'member');
      other = await join(root.client, 'other');
      suspended = await join(root.client, 'suspended');
      const key = async (body: Record<string, unknown>) => expectOk(await root.client.post('/admin/api-keys', { owner: member.id, ...body }), 201);
      const revoked = await key({});
      expectOk(await root.client.post(`/admin/api-keys/${revoked.id}/revoke`));
      k.revoked = revoked.api_key;
      k.expired = (await key({ expires_at: new Date(Date.now() - 60_000).toISOString() })).api_key;
      scopedKeys.signal_types = (await key({ permissions: { signal_types: NARROWED.signal_types } })).api_key;
      scopedKeys.rings = (await key({ permissions: { rings: NARROWED.rings } })).api_key;
      scopedKeys.task_types = (await key({ permissions: { task_types: NARROWED.task_types } })).api_key;
      scopedKeys.ring_scopes = (await key({ ring_scopes: NARROWED.ring_scopes })).api_key;
      scopedKeys.memory_scopes = (await key({ permissions: { memory_scopes: [`agent:${member.id}`] } })).api_key;
      await setMembershipStatus(root.client, suspended.id, 'suspended');

      // what `other` owns (and org-level things the narrowed keys fall outside of)
      const roleId = expectOk(await root.client.post('/roles', { name: 'Builder' }), 201).id;
      for (const name of ['alpha', 'beta']) expectOk(await root.client.post('/rings', { name }), 201);
      const task = (await emitOk(other, { signal_type: 'task', content: 'deploy it', payload: { task_type: 'deploy' } })).id;
      const held = (await emitOk(other, { signal_type: 'task', content: 'mine', payload: { task_type: 'deploy' } })).id;
      expectOk(await other.client.post('/claim', { signal_id: held, lease_ms: 3_600_000 }));
      const remember = async (who: Member, namespace: string, content: string) => expectOk(await who.client.post('/memory/store', { namespace, content, allow_duplicate: true }), 201).id as string;
      const relate = async (who: Member, from_id: string, to_id: string) => expectOk(await who.client.post('/memory/relate', { from_id, to_id, relation: 'about' }), 201).id as string;
      const orgMem = await remember(root, 'org', 'org memory one');
      const orgMem2 = await remember(root, 'org', 'org memory two');
      const otherMem = await remember(other, `agent:${other.id}`, 'other secret one');
      const otherMem2 = await remember(other, `agent:${other.id}`, 'other secret two');
      const lender = await join(root.client, 'lender');
      const lentMem = await remember(lender, `agent:${lender.id}`, 'lent one');
      const lentMem2 = await remember(lender, `agent:${lender.id}`, 'lent two');
      expectOk(await root.client.post('/memory/admin/share', { namespace: `agent:${lender.id}`, grantee_type: 'identity', grantee: member.id }), 201);
      const artifact = async (visibility: string) => expectOk(await upload(url, other.key, '/artifacts/upload', 'bytes', { fields: { name: `${visibility}.txt`, visibility } }), 201).id as string;
      const reservation = expectOk(await other.client.post('/reservations', { paths: ['src/**'], project: 'authz', ttl_s: 3600 })).granted[0].id;
      const otherMembership = (expectOk(await root.client.get('/org/company/memberships?limit=100')).memberships as any[]).find((m) => m.identity_id === other.id).id;
      peer = expectOk(await root.client.post('/federation/trust', { name: 'authz peer', endpoint: 'https://peer.example', allowed_scopes: ['pulse'] }), 201);
      const mcpSession = async (who: Member) => {
        const headers = { authorization: `Bearer ${who.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
        const init = await fetch(url + '/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'authz', version: '1' } } }) });
        expect(init.status, await init.text()).toBe(200);
        const sid = init.headers.get('mcp-session-id')!;
        const ready = await fetch(url + '/mcp', { method: 'POST', headers: { ...headers, 'mcp-session-id': sid }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
        expect(ready.status).toBe(202);
        return sid;
      };
      f = {
        root,
        member,
        other,
        task,
        held,
        roleId,
        orgMem,
        orgMem2,
        orgEdge: await relate(root, orgMem, orgMem2),
        otherMem,
        otherMem2,
        otherEdge: await relate(other, otherMem, otherMem2),
        lentMem,
        lentMem2,
        lentEdge: await relate(lender, lentMem, lentMem2),
        lenderId: lender.id,
        privateArtifact: await artifact('private'),
        orgArtifact: await artifact('org'),
        workstream: expectOk(await root.client.post('/workstreams', { name: 'authz' }), 201).id,
        reservation,
        otherKeyId: expectOk(await root.client.post('/admin/api-keys', { owner: other.id }), 201).id,
        otherMembership,
        mcp: { member: await mcpSession(member), other: await mcpSession(other) },
      };
      // the refusals below mean something only if the owner (or an unnarrowed key) is let in
      expectOk(await other.client.get(`/memory/${otherMem}`));
      expectOk(await member.client.get(`/memory/${orgMem}`));
      expectOk(await member.client.get(`/memory/${lentMem}`));
      expectOk(await member.client.get(`/memory/relate/${lentMem}/edges`));
      expectOk(await other.client.get(`/artifacts/${f.privateArtifact}?meta=true`));
      expectOk(await other.client.get(`/inbox/identity/${other.id}`));
      expectOk(await other.client.get(`/signals/${task}/receipts`));
    });

    it('the live table holds every auth mode and the protocol entry points', () => {
      expect(new Set(table.map((r) => r.auth))).toEqual(new Set(['public', 'optional', 'key', 'admin', 'proof']));
      for (const p of ['POST /rpc', 'POST /mcp', 'POST /a2a']) expect(table.map(label)).toContain(p);
    });

    it('every route × {no key, invalid, revoked, expired, non-admin, suspended}', async () => {
      const failures: string[] = [];
      const check = (r: Route, who: string, res: Res, status: number, code?: string) => {
        expectNoLeak(res);
        const got = res.body?.error?.code;
        if (res.status !== status || (code && got !== code)) failures.push(`${label(r)} as ${who}: want ${status} ${code ?? ''}, got ${res.status} ${got ?? JSON.stringify(res.body).slice(0, 120)}`);
      };
      for (const r of table) {
        if (r.auth === 'key' || r.auth === 'admin') {
          check(r, 'no key', await call(url, undefined, r), 401, 'AUTH_KEY_MISSING');
          check(r, 'invalid', await call(url, 'svc_not-a-key', r), 401, 'AUTH_KEY_INVALID');
          check(r, 'revoked', await call(url, k.revoked, r), 401, 'AUTH_KEY_REVOKED');
          check(r, 'expired', await call(url, k.expired, r), 401, 'AUTH_KEY_EXPIRED');
        }
        if (r.auth === 'optional') {
          check(r, 'invalid', await call(url, 'svc_not-a-key', r), 401, 'AUTH_KEY_INVALID');
          check(r, 'revoked', await call(url, k.revoked, r), 401, 'AUTH_KEY_REVOKED');
          check(r, 'expired', await call(url, k.expired, r), 401, 'AUTH_KEY_EXPIRED');
        }
        if (r.auth === 'admin') {
          check(r, 'non-admin', await call(url, member.key, r), 403, 'AUTH_ADMIN_REQUIRED');
          check(r, 'suspended', await call(url, suspended.key, r), 403, 'POLICY_MEMBERSHIP_REQUIRED');
        }
        if (r.auth === 'proof') {
          // a peer's signed call: no API key of any kind stands in for the proof
          for (const [who, key] of [['no key', undefined], ['invalid', 'svc_not-a-key'], ['revoked', k.revoked], ['non-admin', member.key], ['admin', root.key]] as const) check(r, who, await call(url, key, r), 401, 'FED_PEER_MISSING');
        }
        if (r.auth === 'public') {
          // a public route ignores the key: a bad one neither refuses nor crashes it
          const res = await call(url, 'svc_not-a-key', r);
          expectNoLeak(res);
          if (res.status >= 500) failures.push(`${label(r)} with a bad key: ${res.status}`);
        }
        // a suspended membership is refused on every route that reads a key, whatever the route would answer an
        // active member: an optional route authenticates a key that is presented like any other
        if (r.auth === 'key' || r.auth === 'optional') check(r, 'suspended', await call(url, suspended.key, r), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      }
      expect(failures).toEqual([]);
    }, 120_000);

    it('every route refuses a browser Origin other than its own with 403 ORIGIN_NOT_ALLOWED, even with an admin key (docs/auth.md)', async () => {
      const failures: string[] = [];
      for (const r of table) {
        const res = await send(url, { method: METHOD[r.method], path: pathOf(r), body: hasBody(r) ? {} : undefined, headers: { origin: 'http://rebound.example' } }, { key: root.key });
        if (res.status !== 403 || res.body?.error?.code !== 'ORIGIN_NOT_ALLOWED') failures.push(`${label(r)}: ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`);
      }
      expect(failures).toEqual([]);
    }, 120_000);

    it.each(MEMBERSHIP_REQUIRED.map((c) => [c.label, c] as const))('%s: a suspended membership → 403 POLICY_MEMBERSHIP_REQUIRED', async (_, c) => {
      const sig = (await emitOk(root, { signal_type: 'task', content: 'for claim' })).id;
      const res = await suspended.client.req(c.method, c.path, c.body(sig));
      expectError(res, 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectNoLeak(res);
    });

    it('the classification table has a row for exactly every route of the live table, and /rpc for every method', () => {
      expect(Object.keys(ROUTES).sort()).toEqual(table.map(label).sort());
      expect(Object.keys(RPC_METHODS).sort()).toEqual(Object.keys(methodTable({} as Parameters<typeof methodTable>[0])).sort());
      // a case must call the route of its row (a typo cannot test another route instead)
      const astray: string[] = [];
      for (const r of table) {
        const row = ROUTES[label(r)]!;
        for (const c of [...('none' in row.scope ? [] : row.scope), ...('none' in row.other ? [] : row.other)]) {
          const q = c.req(f);
          if (!addresses(r, q)) astray.push(`${label(r)}: a case calls ${q.method} ${q.path}`);
        }
      }
      expect(astray).toEqual([]);
    });

    /** Runs cases, collecting every mismatch (and checking each answer for leaks). */
    const runner = () => {
      const failures: string[] = [];
      const expectRefused = async (what: string, q: Req, as: Parameters<typeof send>[2], status: number, code: string) => {
        const res = await send(url, q, as);
        expectNoLeak(res);
        const got = codeOf(res.body);
        if (res.status !== status || got !== code) failures.push(`${what}: want ${status} ${code}, got ${res.status} ${got ?? JSON.stringify(res.body).slice(0, 160)}`);
      };
      return { failures, expectRefused };
    };
    const scopedCaller = (s: Scope) => (s === 'allowed_scopes' ? { peer } : { key: scopedKeys[s] });

    it('scope-denied: on every route a key can be narrowed for, each narrowed key is refused with the exact code', async () => {
      const { failures, expectRefused } = runner();
      let cases = 0;
      for (const r of table) {
        const row = ROUTES[label(r)];
        if (!row || 'none' in row.scope) continue;
        for (const c of row.scope) for (const s of c.scopes) {
          cases++;
          await expectRefused(`${label(r)} with a key narrowed by ${s}`, c.req(f), scopedCaller(s), c.status, c.code);
        }
      }
      expect(failures).toEqual([]);
      expect(cases).toBeGreaterThan(40);
    });

    it("another identity's resource: on every route that names one, member (or the peer, or no one on a public route) is refused with the exact code", async () => {
      const { failures, expectRefused } = runner();
      let cases = 0;
      for (const r of table) {
        const row = ROUTES[label(r)];
        if (!row || 'none' in row.other) continue;
        const as = r.auth === 'proof' ? { peer } : r.auth === 'public' ? {} : { key: member.key };
        for (const c of row.other) {
          cases++;
          await expectRefused(`${label(r)} on another's resource`, c.req(f), as, c.status, c.code);
        }
      }
      expect(failures).toEqual([]);
      expect(cases).toBeGreaterThan(40);
      // the refusals changed nothing of other's
      expectOk(await other.client.get(`/memory/${f.otherMem}`));
      expect(expectOk(await member.client.get(`/memory/${f.lentMem}`)).content).toBe('lent one');
      expect(expectOk(await other.client.get(`/reservations/${f.reservation}`)).state).toBe('active');
      expect(expectOk(await other.client.get(`/thread/${f.held}`)).signals[0]).toMatchObject({ claimed_by: other.id, delivery_state: 'leased' });
      expect(expectOk(await other.client.get(`/thread/${f.task}`)).signals[0]).toMatchObject({ task_status: 'open' });
    });

    it('/rpc, per method of the method table: admin-only methods refuse a member, scoped methods a narrowed key, and methods on another identity’s resource refuse a member', async () => {
      const { failures, expectRefused } = runner();
      const methods = methodTable({} as Parameters<typeof methodTable>[0]);
      const admins = Object.entries(methods).filter(([, m]) => m.admin).map(([name]) => name);
      expect(admins.length).toBeGreaterThan(0);
      for (const name of admins) await expectRefused(`rpc ${name} as a member`, rpc(name, {}), { key: member.key }, 403, 'AUTH_ADMIN_REQUIRED');
      for (const [name, row] of Object.entries(RPC_METHODS)) {
        if (!('none' in row.scope)) for (const c of row.scope) for (const s of c.scopes) await expectRefused(`rpc ${name} with a key narrowed by ${s}`, rpc(name, c.params(f)), scopedCaller(s), c.status, c.code);
        if (!('none' in row.other)) for (const c of row.other) await expectRefused(`rpc ${name} on another's resource`, rpc(name, c.params(f)), { key: member.key }, c.status, c.code);
      }
      expect(failures).toEqual([]);
    });

    it('/ws and /signals/stream: no key, invalid, revoked and expired are refused at the upgrade', async () => {
      const wsUrl = url.replace('http', 'ws') + '/ws';
      const refused = (token?: string) =>
        new Promise<number>((resolve, reject) => {
          const ws = new WebSocket(token ? `${wsUrl}?token=${encodeURIComponent(token)}` : wsUrl);
          ws.on('unexpected-response', (_req, res) => {
            resolve(res.statusCode ?? 0);
            ws.terminate();
          });
          ws.on('open', () => {
            ws.close();
            reject(new Error('socket opened'));
          });
          ws.on('error', () => undefined);
        });
      for (const token of [undefined, 'svc_not-a-key', k.revoked, k.expired]) expect(await refused(token)).toBe(401);
      const codes: string[] = [];
      for (const token of [undefined, 'svc_not-a-key', k.revoked, k.expired]) {
        const res = await fetch(`${url}/signals/stream${token ? `?token=${encodeURIComponent(token)}` : ''}`);
        expect(res.status).toBe(401);
        const body = await res.json();
        expectNoLeak({ status: res.status, body });
        codes.push(body.error.code);
      }
      expect(codes).toEqual(['AUTH_KEY_MISSING', 'AUTH_KEY_INVALID', 'AUTH_KEY_REVOKED', 'AUTH_KEY_EXPIRED']);
    });

    it('/ws and /signals/stream held: a key revoked, a membership suspended, an identity deleted end the open socket and stream with the code a new upgrade now gets', async () => {
      for (const c of STREAMS_HELD) {
        const who = await join(root.client, `held-${c.what.replace(/\W/g, '-')}`);
        const minted = expectOk(await root.client.post('/admin/api-keys', { owner: who.id }), 201);
        const h = await hold(url, minted.api_key, c.what);
        await c.end(root, who, minted.id);
        await expectHeldEnded(h, c.close, c.code);
        const res = await fetch(`${url}/signals/stream?token=${encodeURIComponent(minted.api_key)}`);
        expect({ status: res.status, code: (await res.json()).error.code }, c.what).toEqual({ status: c.status, code: c.code });
      }
    });
  });
}
