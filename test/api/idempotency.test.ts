/**
 * Idempotency-Key on the create routes: a retry with the same key and body answers the first reply and makes
 * no second record; the same key with another body is 409 IDEMPOTENCY_KEY_REUSED; keys are per identity;
 * concurrent retries create exactly one record; a refused request keeps no record; records expire after 24 h
 * (IDEMPOTENCY_TTL_MS); a reservation's `idempotency_key` is kept in the same store with the same expiry.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Idempotency } from '../../src/http/idempotency.js';
import { committedEffect, effectOps, type Claim } from '../../src/store/idempotency.js';
import { upload } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

interface Answer {
  status: number;
  body: any;
  replayed: string | null;
}

async function post(m: Member, path: string, body: unknown, key?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const r = await fetch(m.client.url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json(), replayed: r.headers.get('idempotent-replayed') };
}

const CREATE_ROUTES = [
  'POST /emit', 'POST /invite/create', 'POST /admin/api-keys', 'POST /memory/store', 'POST /workspace/folders', 'POST /workstreams', 'POST /roles', 'POST /rings', 'POST /fills',
  'POST /org/company/memberships', 'POST /org/company/peers', 'POST /federation/trust', 'POST /admin/webhooks', 'POST /admin/webhooks/deliveries/:id/replay',
  'POST /memory/relate', 'POST /memory/admin/share', 'POST /memory/admin/re-embed', 'POST /memory/admin/export', 'POST /memory/admin/import',
  'POST /workstreams/:id/links', 'POST /admin/api-keys/:id/rotate',
  // streamed uploads: the fingerprint is route, query, Content-Type (no boundary) and declared Content-Length
  'POST /artifacts/upload', 'POST /workspace/files/upload',
];

for (const backend of BACKENDS) {
  describe(`Idempotency-Key on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let member: Member;
    const signals = () => svc.store.count('signals');

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      member = await join(root.client, 'member');
    });

    it('the create routes of the live table carry the flag', () => {
      const flagged = svc.routes.filter((r) => r.idempotent).map((r) => `${r.method.toUpperCase()} ${r.path}`);
      expect(flagged.sort()).toEqual([...CREATE_ROUTES].sort());
    });

    it('POST /emit: a retry answers the first reply and makes no second signal; another body is 409', async () => {
      const before = await signals();
      const body = { signal_type: 'task', content: 'once' };
      const first = await post(member, '/emit', body, 'k-emit-1');
      expect(first.status).toBe(201);
      expect(first.replayed).toBeNull();
      const again = await post(member, '/emit', body, 'k-emit-1');
      expect(again.status).toBe(201);
      expect(again.replayed).toBe('true');
      expect(again.body.data).toEqual(first.body.data);
      expect(await signals()).toBe(before + 1);
      const other = await post(member, '/emit', { ...body, content: 'twice' }, 'k-emit-1');
      expectError(other, 409, 'IDEMPOTENCY_KEY_REUSED');
      expect(await signals()).toBe(before + 1);
      // without the header every request is its own
      expectOk(await member.client.post('/emit', body), 201);
      expect(await signals()).toBe(before + 2);
    });

    it('keys are per identity: the same key from another identity is its own request', async () => {
      const a = await post(member, '/emit', { signal_type: 'task', content: 'mine' }, 'shared-key');
      const b = await post(root, '/emit', { signal_type: 'task', content: 'yours' }, 'shared-key');
      expect([a.status, b.status]).toEqual([201, 201]);
      expect(a.body.data.id).not.toBe(b.body.data.id);
    });

    it('concurrent retries with one key create exactly one record', async () => {
      const before = await signals();
      const body = { signal_type: 'task', content: 'race' };
      const answers = await Promise.all(Array.from({ length: 12 }, () => post(member, '/emit', body, 'k-race')));
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
      expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
      expect(await signals()).toBe(before + 1);
    });

    it('a refused request keeps no record: its retry runs afresh', async () => {
      const refused = await post(member, '/emit', { signal_type: 'task', content: 'x', to_role: 'no-such-role' }, 'k-refused');
      expect(refused.status).toBeGreaterThanOrEqual(400);
      const fixed = await post(member, '/emit', { signal_type: 'task', content: 'x' }, 'k-refused');
      expect(fixed.status).toBe(201);
      expect(fixed.replayed).toBeNull();
    });

    it('the other create routes replay instead of creating twice (or conflicting)', async () => {
      const cases: [Member, string, unknown][] = [
        [root, '/invite/create', { name: 'idem-invitee', type: 'agent' }],
        [root, '/admin/api-keys', { owner: member.id }],
        [member, '/memory/store', { content: 'remember once', namespace: `agent:${member.id}` }],
        [member, '/workspace/folders', { name: 'idem-folder' }],
        [member, '/workstreams', { name: 'idem-stream' }],
        [root, '/roles', { name: 'idem-role' }],
        [root, '/rings', { name: 'idem-ring' }],
      ];
      for (const [who, path, body] of cases) {
        const first = await post(who, path, body, `k-${path}`);
        expect(first.status, `${path}: ${JSON.stringify(first.body)}`).toBe(201);
        const again = await post(who, path, body, `k-${path}`);
        expect({ path, status: again.status, replayed: again.replayed }).toEqual({ path, status: 201, replayed: 'true' });
        expect(again.body.data).toEqual(first.body.data);
      }
      const role = (await root.client.get('/roles')).body.data.find((r: any) => r.name === 'idem-role');
      const fill = { identity_id: member.id, role_id: role.id };
      const f1 = await post(root, '/fills', fill, 'k-fill');
      expect(f1.status).toBe(201);
      expect((await post(root, '/fills', fill, 'k-fill')).body.data).toEqual(f1.body.data);
    });

    it('the newer create routes replay: a memory edge, an export job, a peer, a key rotation, a workstream link', async () => {
      const mem = async (content: string) => expectOk(await member.client.post('/memory/store', { namespace: `agent:${member.id}`, content, allow_duplicate: true }), 201).id;
      const [a, b] = [await mem('edge from'), await mem('edge to')];
      const w = expectOk(await member.client.post('/workstreams', { name: 'idem-links' }), 201);
      const created = expectOk(await root.client.post('/admin/api-keys', { owner: member.id }), 201);
      const cases: [Member, string, unknown, number][] = [
        [member, '/memory/relate', { from_id: a, to_id: b, relation: 'knows' }, 201],
        [root, '/memory/admin/export', { namespace: `agent:${member.id}` }, 202],
        [root, '/org/company/peers', { name: 'Idem peer', endpoint: 'https://idem-peer.example' }, 201],
        [root, `/admin/api-keys/${created.id}/rotate`, {}, 200],
        [member, `/workstreams/${w.id}/links`, { kind: 'memory', id: a }, 201],
      ];
      for (const [who, path, body, status] of cases) {
        const first = await post(who, path, body, `k-new-${path}`);
        expect(first.status, `${path}: ${JSON.stringify(first.body)}`).toBe(status);
        const again = await post(who, path, body, `k-new-${path}`);
        expect({ path, status: again.status, replayed: again.replayed }).toEqual({ path, status, replayed: 'true' });
        expect(again.body.data).toEqual(first.body.data);
      }
      // one edge, one peer, one rotation: without the key the peer is a duplicate and the old key is spent
      expect(expectOk(await member.client.get(`/memory/relate/${a}/edges`)).edges).toHaveLength(1);
      expectError(await root.client.post('/org/company/peers', { name: 'Idem peer', endpoint: 'https://idem-peer.example' }), 409, 'DISC_PEER_DUPLICATE');
      expectError(await root.client.post(`/admin/api-keys/${created.id}/rotate`), 403, 'POLICY_DENIED');
      // another body under a used key is refused
      expectError(await post(member, '/memory/relate', { from_id: b, to_id: a, relation: 'knows' }, 'k-new-/memory/relate'), 409, 'IDEMPOTENCY_KEY_REUSED');
    });

    it('uploads: a retry with the same key, query, type and length replays without a second artifact; another length is 409', async () => {
      const artifacts = () => svc.store.count('artifacts');
      const send = (body: string, name: string, key: string, multipart = false) => upload(svc.url, member.key, '/artifacts/upload', body, { type: 'text/plain', multipart, filename: name, fields: multipart ? {} : { name }, headers: { 'idempotency-key': key } });
      // big enough that the replay answers while the retry's body is still arriving (it is dropped unread)
      const big = 'upload once '.repeat(40_000);
      const first = await send(big, 'once.txt', 'k-up');
      expect(first.status).toBe(201);
      const n = await artifacts();
      const again = await send(big, 'once.txt', 'k-up');
      expect([again.status, again.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
      expect(again.body.data).toEqual(first.body.data);
      expect(await artifacts()).toBe(n);
      expectError(await send(big + '!', 'once.txt', 'k-up'), 409, 'IDEMPOTENCY_KEY_REUSED');
      expectError(await send(big, 'renamed.txt', 'k-up'), 409, 'IDEMPOTENCY_KEY_REUSED');
      // multipart: each attempt has its own boundary, which the fingerprint leaves out
      const mp = await send('multipart once', 'mp.txt', 'k-up-mp', true);
      expect(mp.status).toBe(201);
      const mpAgain = await send('multipart once', 'mp.txt', 'k-up-mp', true);
      expect([mpAgain.status, mpAgain.headers.get('idempotent-replayed'), mpAgain.body.data.id]).toEqual([201, 'true', mp.body.data.id]);
      // the connection served the replay although its body was not read: the next request on it works
      expect((await send('after replay', 'after.txt', 'k-up-after')).status).toBe(201);
      expect(await artifacts()).toBe(n + 2);
      const f = await upload(svc.url, member.key, '/workspace/files/upload', 'ws file', { type: 'text/plain', fields: { name: 'idem.txt' }, headers: { 'idempotency-key': 'k-ws-up' } });
      expect(f.status).toBe(201);
      const g = await upload(svc.url, member.key, '/workspace/files/upload', 'ws file', { type: 'text/plain', fields: { name: 'idem.txt' }, headers: { 'idempotency-key': 'k-ws-up' } });
      expect([g.status, g.headers.get('idempotent-replayed'), g.body.data.id]).toEqual([201, 'true', f.body.data.id]);
    });

    it("an emit's idempotency_key: the WebSocket op, /rpc signals.emit and the REST body share one record per identity and key", async () => {
      const before = await signals();
      const body = { signal_type: 'task', content: 'emit once', idempotency_key: 'k-body-1' };
      const ws = await PushSocket.open(svc.url, member.key);
      try {
        const first = await ws.ok('emit', body);
        expect(await ws.ok('emit', body)).toEqual(first);
        const rpc = await member.client.post('/rpc', { jsonrpc: '2.0', id: 1, method: 'signals.emit', params: body });
        expect(rpc.body.result).toEqual(first);
        expect(expectOk(await member.client.post('/emit', body), 201)).toEqual(first);
        expect(await signals()).toBe(before + 1);
        // the same key with another body: refused everywhere, nothing written
        const other = { ...body, content: 'emit twice' };
        expect((await ws.op('emit', other)).error).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', details: { field: 'idempotency_key' } });
        const refused = await member.client.post('/rpc', { jsonrpc: '2.0', id: 2, method: 'signals.emit', params: other });
        expect(refused.body.error.data).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
        expect(await signals()).toBe(before + 1);
        // concurrent retries over /rpc elect one runner: one signal
        const race = { signal_type: 'task', content: 'emit race', idempotency_key: 'k-body-race' };
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => member.client.post('/rpc', { jsonrpc: '2.0', id: i, method: 'signals.emit', params: race })));
        expect(new Set(answers.map((a) => a.body.result?.id)).size).toBe(1);
        expect(await signals()).toBe(before + 2);
        // per identity: root's own key of the same text is its own emit; a refused emit keeps no record
        expect(expectOk(await root.client.post('/emit', body), 201).id).not.toBe(first.id);
        expect((await ws.op('emit', { signal_type: 'task', content: 'x', to_role: 'no-such-role', idempotency_key: 'k-body-refused' })).type).toBe('error');
        expect((await ws.ok('emit', { signal_type: 'task', content: 'x', idempotency_key: 'k-body-refused' })).content).toBe('x');
      } finally {
        await ws.close();
      }
    });

    it('a record expires after its TTL and the sweep removes it', async () => {
      let t = Date.now();
      const idem = new Idempotency(svc.store, 1000, undefined, () => t);
      let runs = 0;
      const exec = async () => ({ status: 201, data: { run: ++runs } });
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 1 });
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 1 });
      t += 1001;
      expect((await idem.once('someone', 'k', 'other request', exec)).data).toEqual({ run: 2 });
      t += 1001;
      expect(await idem.sweep(t)).toBeGreaterThanOrEqual(1);
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 3 });
    });

    it("an attempt that stopped past its effect: the retry takes the claim over and answers that effect; a dead attempt's claim is taken over after its lease and fenced", async () => {
      const idem = new Idempotency(svc.store, 60_000, 300);
      const effect = { id: 'made-once' };
      let ran = 0;
      const first = idem.once('someone', 'k-effect', 'req', async (claim) => {
        await svc.store.commit(effectOps({ claim }, effect));
        throw new Error('the attempt ends after its effect committed');
      });
      await expect(first).rejects.toThrow('after its effect');
      // the retry re-enters the handler, which answers the committed effect instead of acting again
      const retry = await idem.once('someone', 'k-effect', 'req', async (claim) => ({ status: 201, data: committedEffect({ claim }) ?? { ran: ++ran } }));
      expect(retry).toEqual({ status: 201, data: effect });
      expect(ran).toBe(0);
      expect((await idem.once('someone', 'k-effect', 'req', async () => ({ status: 201, data: { ran: ++ran } }))).data).toEqual(effect);

      // a claim whose attempt stopped renewing (a dead process) is taken over once its lease lapsed
      const dead = await idem.begin('someone', '', 'k-dead', 'req', () => new Error('mismatch') as never);
      expect('claim' in dead).toBe(true);
      const t0 = Date.now();
      expect((await idem.once('someone', 'k-dead', 'req', async () => ({ status: 201, data: { ran: ++ran } }))).data).toEqual({ ran: 1 });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
      expect((await svc.store.commit([idem.keepOp((dead as { claim: Claim }).claim, { late: true })])).ok).toBe(false);
    });

    it("a reservation's idempotency_key rides on the same store: replay, its own 409, and expiry with IDEMPOTENCY_TTL_MS", async () => {
      const short = await servers.start({ IDEMPOTENCY_TTL_MS: '1500' });
      const admin = await bootstrap(short.url);
      const agent = await join(admin.client, 'idem-agent');
      const body = { project: 'idem', paths: ['lib/**'], idempotency_key: 'r1' };
      const first = expectOk(await agent.client.post('/reservations', body));
      expect(first.granted).toHaveLength(1);
      expect(expectOk(await agent.client.post('/reservations', body))).toEqual(first);
      expectError(await agent.client.post('/reservations', { ...body, paths: ['lib/x'] }), 409, 'RESERVATION_IDEMPOTENCY_MISMATCH', 'idempotency_key');
      // the header on an idempotent route, in the same store with the same expiry
      const emit = await post(agent, '/emit', { signal_type: 'pulse', content: 'idem ttl' }, 'h1');
      expect((await post(agent, '/emit', { signal_type: 'pulse', content: 'idem ttl' }, 'h1')).replayed).toBe('true');
      expectOk(await agent.client.post(`/reservations/${first.granted[0].id}/release`, {}));
      await new Promise((r) => setTimeout(r, 1600));
      // expired: the same key runs afresh (a new grant), and another request is no longer refused
      const again = expectOk(await agent.client.post('/reservations', body));
      expect(again.granted).toHaveLength(1);
      expect(again.granted[0].id).not.toBe(first.granted[0].id);
      const fresh = await post(agent, '/emit', { signal_type: 'pulse', content: 'another body' }, 'h1');
      expect(fresh.status).toBe(emit.status);
      expect(fresh.replayed).toBeNull();
      expect(fresh.body.data.id).not.toBe(emit.body.data.id);
    });
  });
}
