/**
 * The authorization matrix: every route of the LIVE route table (the front end's, as src/app.ts builds it:
 * REST, /rpc, /mcp, /a2a) × every kind of caller that must be refused, with the code each gets. The rows are
 * generated from the table, so a route added later is swept without anyone writing a row for it. Cases that
 * depend on what a route does (a key's scopes, another identity's resource, a suspended membership) are in
 * the explicit tables below; a suspended membership is refused on every authenticated route. The push entry points (/ws, /signals/stream) are not in the route
 * table and have their own rows. Every answer is checked for leaks: no stack trace or internal message.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Route } from '../../src/http/server.js';
import { bootstrap, Client, join, type Member, type Res } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectError, expectOk, setMembershipStatus } from './support.js';
import { expectNoLeak } from './leak.js';

const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const pathOf = (r: Route) => r.path.replace(/:[A-Za-z_]+/g, 'x');
const label = (r: Route) => `${METHOD[r.method]} ${r.path}`;
const hasBody = (r: Route) => r.method !== 'get' && r.method !== 'del';

/** A fetch that keeps a non-JSON answer (an MCP or A2A transport error) as text instead of throwing. */
async function call(url: string, key: string | undefined, r: Route): Promise<Res> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(url + pathOf(r), { method: METHOD[r.method], headers, body: hasBody(r) ? '{}' : undefined });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    /* a text answer: checked for leaks as it is */
  }
  return { status: res.status, body };
}

/** Routes whose service demands an active membership: a suspended member gets POLICY_MEMBERSHIP_REQUIRED with a valid body. */
const MEMBERSHIP_REQUIRED: { label: string; path: string; body: (sig: string) => unknown; method: 'POST' }[] = [
  { label: 'POST /emit', method: 'POST', path: '/emit', body: () => ({ signal_type: 'task', content: 'x' }) },
  { label: 'POST /claim', method: 'POST', path: '/claim', body: (sig) => ({ signal_id: sig }) },
  { label: 'POST /ack', method: 'POST', path: '/ack', body: (sig) => ({ signal_id: sig }) },
  { label: 'POST /workspace/folders', method: 'POST', path: '/workspace/folders', body: () => ({ name: 'f' }) },
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
    const k = { revoked: '', expired: '', scoped: '' };
    let table: readonly Route[];

    beforeAll(async () => {
      svc = await servers.start();
      url = svc.url;
      table = svc.routes;
      root = await bootstrap(url);
      member = await join(root.client, 'member');
      other = await join(root.client, 'other');
      suspended = await join(root.client, 'suspended');
      const revoked = expectOk(await root.client.post('/admin/api-keys', { owner: member.id }), 201);
      expectOk(await root.client.post(`/admin/api-keys/${revoked.id}/revoke`));
      k.revoked = revoked.api_key;
      k.expired = expectOk(await root.client.post('/admin/api-keys', { owner: member.id, expires_at: new Date(Date.now() - 60_000).toISOString() }), 201).api_key;
      k.scoped = expectOk(await root.client.post('/admin/api-keys', { owner: member.id, permissions: { signal_types: ['pulse'] } }), 201).api_key;
      await setMembershipStatus(root.client, suspended.id, 'suspended');
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
        // a suspended membership is refused on every authenticated route, whatever the route would answer an active member
        if (r.auth === 'key') check(r, 'suspended', await call(url, suspended.key, r), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      }
      expect(failures).toEqual([]);
    }, 120_000);

    it.each(MEMBERSHIP_REQUIRED.map((c) => [c.label, c] as const))('%s: a suspended membership → 403 POLICY_MEMBERSHIP_REQUIRED', async (_, c) => {
      const sig = (await emitOk(root, { signal_type: 'task', content: 'for claim' })).id;
      const res = await suspended.client.req(c.method, c.path, c.body(sig));
      expectError(res, 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectNoLeak(res);
    });

    it('scope-denied: a key scoped to signal type "pulse" may emit that type only (REST and RPC)', async () => {
      const scoped = new Client(url, k.scoped);
      expectOk(await scoped.post('/emit', { signal_type: 'pulse', content: 'ok' }), 201);
      expectError(await scoped.post('/emit', { signal_type: 'alert', content: 'no' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await scoped.get('/signals/list?type=alert'), 403, 'AUTH_SCOPE_DENIED');
      const rpc = await scoped.post('/rpc', { jsonrpc: '2.0', id: 1, method: 'signals.emit', params: { signal_type: 'alert', content: 'no' } });
      expect(rpc.body.error, JSON.stringify(rpc.body)).toBeDefined();
      expect(JSON.stringify(rpc.body.error)).toContain('AUTH_SCOPE_DENIED');
    });

    it("another identity's resource: inbox and memory refuse, the owner still reads", async () => {
      expect((await other.client.get(`/inbox/identity/${member.id}`)).status).toBe(403);
      const mem = expectOk(await member.client.post('/memory/store', { content: 'mine', namespace: `agent:${member.id}` }), 201);
      const peek = await other.client.get(`/memory/${mem.id}`);
      expect([403, 404]).toContain(peek.status);
      expectNoLeak(peek);
      const forget = await other.client.post('/memory/forget', { id: mem.id });
      expect([403, 404]).toContain(forget.status);
      expectOk(await member.client.get(`/memory/${mem.id}`));
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
  });
}
