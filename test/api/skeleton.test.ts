/**
 * The walking skeleton over real HTTP, on both backends: bootstrap and invites, the envelope, auth refusals,
 * emit, claim and ack with the task lease, lease expiry up to dead letter, paging, and health.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { issueKey } from '../../src/auth/keys.js';
import { unrestricted } from '../../src/auth/standing.js';
import type { Op } from '../../src/store/port.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, findSignal, ULID, waitFor } from './support.js';

describe.each(CORE_BACKENDS)('walking skeleton on %s', (backend) => {
  /** Each describe's server is on a fresh data dir / Redis prefix of this backend. */
  const servers = serversOn(backend);

  describe('bootstrap and invites', () => {
    let svc: Service;
    let anon: Client;
    beforeAll(async () => {
      svc = await servers.start();
      anon = new Client(svc.url);
    });
    afterAll(() => svc.close());

    it('bootstraps once without a key, then needs an admin key; a second bootstrap invite is dead', async () => {
      const first = await anon.post('/invite/create', { name: 'root', type: 'human' });
      expect(first.status, JSON.stringify(first.body)).toBe(201);
      expect(first.body.data).toMatchObject({ name: 'root', type: 'human' });
      expect(typeof first.body.data.code).toBe('string');
      expect(first.body.meta.request_id).toMatch(/^req_/);

      // minted while still empty: allowed, but only one bootstrap invite can ever be redeemed
      const second = await anon.post('/invite/create', { name: 'other-root', type: 'human' });
      expect(second.status).toBe(201);
      expect(second.body.data.code).not.toBe(first.body.data.code);

      const red = await anon.post('/invite', { code: first.body.data.code, name: 'root', type: 'human' });
      expect(red.status, JSON.stringify(red.body)).toBe(201);
      const { identity, api_key } = red.body.data;
      expect(identity).toMatchObject({ name: 'root', type: 'human', is_admin: true });
      expect(identity.id).toMatch(ULID);
      expect(typeof api_key).toBe('string');

      expectError(await anon.post('/invite', { code: second.body.data.code, name: 'other-root', type: 'human' }), 409, 'INVITE_ALREADY_REDEEMED');
      expectError(await anon.post('/invite/create', { name: 'late', type: 'agent' }), 401, 'AUTH_KEY_MISSING');

      // the returned key works as Bearer, and it is an admin key
      const admin = anon.as(api_key);
      const inv = await admin.post('/invite/create', { name: 'worker', type: 'agent' });
      expect(inv.status, JSON.stringify(inv.body)).toBe(201);
      expect(inv.body.data).toMatchObject({ name: 'worker', type: 'agent' });
      const emitted = await admin.post('/emit', { signal_type: 'pulse', content: 'hello' });
      expect(emitted.status).toBe(201);
      expect(emitted.body.data.from_identity).toBe(identity.id);

      const worker = await anon.post('/invite', { code: inv.body.data.code, name: 'worker', type: 'agent' });
      expect(worker.status).toBe(201);
      expect(worker.body.data.identity.is_admin).toBe(false);
      expectError(await anon.as(worker.body.data.api_key).post('/invite/create', { name: 'x', type: 'agent' }), 403, 'AUTH_ADMIN_REQUIRED');
    });
  });

  describe('redemption errors', () => {
    let svc: Service;
    let root: Member;
    let anon: Client;
    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      anon = new Client(svc.url);
    });
    afterAll(() => svc.close());

    it('refuses bad redemptions with the invite codes', async () => {
      const inv = await root.client.post('/invite/create', { name: 'r1', type: 'agent' });
      expect(inv.status).toBe(201);
      const code = inv.body.data.code;

      expectError(await anon.post('/invite', { code: 'inv_does-not-exist', name: 'r1', type: 'agent' }), 404, 'INVITE_NOT_FOUND');
      expectError(await anon.post('/invite', { code, type: 'agent' }), 400, 'INVITE_VALIDATION_FAILED', 'name');
      expectError(await anon.post('/invite', { code, name: 'r1' }), 400, 'INVITE_VALIDATION_FAILED', 'type');
      expectError(await anon.post('/invite', { code, name: 'r1', type: 'robot' }), 400, 'INVITE_VALIDATION_FAILED', 'type');
      expectError(await anon.post('/invite', { name: 'r1', type: 'agent' }), 400, 'INVITE_VALIDATION_FAILED', 'code');
      expectError(await root.client.post('/invite/create', { name: 'r2', type: 'robot' }), 400, 'INVITE_VALIDATION_FAILED', 'type');

      const ok = await anon.post('/invite', { code, name: 'r1', type: 'agent' });
      expect(ok.status, JSON.stringify(ok.body)).toBe(201);
      expect(ok.body.data.identity).toMatchObject({ name: 'r1', type: 'agent', is_admin: false });
      expectError(await anon.post('/invite', { code, name: 'r1-again', type: 'agent' }), 409, 'INVITE_ALREADY_REDEEMED');
    });
  });

  describe('a running instance', () => {
    let svc: Service;
    let root: Member;
    let alice: Member;
    let bob: Member;
    /** before the server was started: its uptime cannot exceed the time since */
    let startedBefore: number;
    beforeAll(async () => {
      startedBefore = Date.now();
      svc = await servers.start({ TASK_LEASE_MS: '60000' });
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice');
      bob = await join(root.client, 'bob');
    });
    afterAll(() => svc.close());

    describe('envelope', () => {
      it('wraps success as {data, meta:{request_id}}', async () => {
        const r = await root.client.post('/emit', { signal_type: 'pulse', content: 'envelope' });
        expect(r.status).toBe(201);
        expect(Object.keys(r.body).sort()).toEqual(['data', 'meta']);
        expect(r.body.meta.request_id).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
        expect(r.body.data.content).toBe('envelope');
      });

      it('wraps errors with code, message, request_id, details and a fetchable docs_url', async () => {
        const r = await root.client.post('/claim', {});
        expectError(r, 400, 'VALIDATION_FIELD_REQUIRED', 'signal_id');
        expect(Object.keys(r.body.error).sort()).toEqual(['code', 'details', 'docs_url', 'message', 'request_id']);
        const doc = await fetch(r.body.error.docs_url);
        expect(doc.status).toBe(200);
        const page = (await doc.json()) as any;
        expect(page.data.code).toBe('VALIDATION_FIELD_REQUIRED');
        expect(page.data.status).toBe(400);
      });

      it('answers an unknown route with 404 NOT_FOUND, details null', async () => {
        const r = await root.client.get('/no/such/route');
        expectError(r, 404, 'NOT_FOUND');
        expect(r.body.error.details).toBeNull();
        expectError(await new Client(svc.url).post('/nope', {}), 404, 'NOT_FOUND');
      });

      it('refuses a body that is not JSON, or not an object', async () => {
        expectError(await root.client.req('POST', '/emit', '{"signal_type": "pulse", content'), 400, 'VALIDATION_INVALID_TYPE', 'body');
        expectError(await root.client.req('POST', '/claim', '[1,2]'), 400, 'VALIDATION_INVALID_TYPE', 'body');
        expectError(await new Client(svc.url).req('POST', '/invite', 'not json'), 400, 'VALIDATION_INVALID_TYPE', 'body');
      });

      it('validates fields: required, wrong type, and the emit domain code', async () => {
        expectError(await root.client.post('/claim', { lease_ms: 10 }), 400, 'VALIDATION_FIELD_REQUIRED', 'signal_id');
        expectError(await root.client.post('/claim', { signal_id: 42 }), 400, 'VALIDATION_INVALID_TYPE', 'signal_id');
        expectError(await root.client.post('/claim', { signal_id: 'x', lease_ms: 'long' }), 400, 'VALIDATION_INVALID_TYPE', 'lease_ms');
        expectError(await root.client.post('/ack', { signal_id: 'x', outcome: 'maybe' }), 400, 'VALIDATION_INVALID_TYPE', 'outcome');
        expectError(await root.client.post('/emit', { signal_type: 'pulse' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'content');
        expectError(await root.client.post('/emit', { content: 'no type' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'signal_type');
        expectError(await root.client.post('/emit', { signal_type: '', content: 'empty type' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'signal_type');
        expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 7 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'content');
      });
    });

    describe('auth refusals', () => {
      const protectedCalls: [string, string, unknown][] = [
        ['POST', '/emit', { signal_type: 'pulse', content: 'x' }],
        ['GET', '/signals/list', undefined],
        ['POST', '/claim', { signal_id: 'x' }],
        ['POST', '/ack', { signal_id: 'x' }],
      ];

      it('no header → AUTH_KEY_MISSING; unknown key → AUTH_KEY_INVALID; malformed header → AUTH_KEY_MISSING', async () => {
        const anon = new Client(svc.url);
        for (const [method, path, body] of protectedCalls) {
          expectError(await anon.req(method, path, body), 401, 'AUTH_KEY_MISSING');
          expectError(await anon.as('svc_not-a-real-key').req(method, path, body), 401, 'AUTH_KEY_INVALID');
          expectError(await anon.req(method, path, body, { authorization: 'Basic x' }), 401, 'AUTH_KEY_MISSING');
          expectError(await anon.req(method, path, body, { authorization: 'Bearer' }), 401, 'AUTH_KEY_MISSING');
        }
      });

      it('an expired key → AUTH_KEY_EXPIRED, a revoked key → AUTH_KEY_REVOKED', async () => {
        // An expired key: seeded through the service's own store (a key record as issueKey makes it).
        const expired = issueKey(alice.id, unrestricted(), { expires_at: new Date(Date.now() - 60_000).toISOString() });
        expect((await svc.store.commit(expired.ops)).ok).toBe(true);
        // A revoked key: one seeded revoked, and one made and revoked through the admin routes.
        const seeded = issueKey(alice.id, unrestricted());
        const seededOps = seeded.ops.map((op): Op => (op.op === 'put' ? { ...op, value: { ...seeded.record, revoked: true } } : op));
        expect((await svc.store.commit(seededOps)).ok).toBe(true);
        const made = await root.client.post('/admin/api-keys', { owner: alice.id });
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        const anon = new Client(svc.url);
        expect((await anon.as(made.body.data.api_key).post('/emit', { signal_type: 'pulse', content: 'before revoke' })).status).toBe(201);
        const revoked = await root.client.post(`/admin/api-keys/${made.body.data.id}/revoke`, {});
        expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
        expect(revoked.body.data.revoked).toBe(true);

        for (const [method, path, body] of protectedCalls) {
          expectError(await anon.as(expired.plain).req(method, path, body), 401, 'AUTH_KEY_EXPIRED');
          expectError(await anon.as(seeded.plain).req(method, path, body), 401, 'AUTH_KEY_REVOKED');
          expectError(await anon.as(made.body.data.api_key).req(method, path, body), 401, 'AUTH_KEY_REVOKED');
        }
        // the same owner with a live key still gets in
        const ok = await alice.client.post('/emit', { signal_type: 'pulse', content: 'still here' });
        expect(ok.status).toBe(201);
        expect(ok.body.data.from_identity).toBe(alice.id);
      });
    });

    describe('emit', () => {
      it('returns the Signal with the service defaults', async () => {
        const task = await emitOk(alice, { signal_type: 'task', content: 'do it', urgency: 0.8, tags: ['a'], metadata: { k: 1 } });
        expect(task).toMatchObject({
          signal_type: 'task',
          base_type: 'task',
          content: 'do it',
          urgency: 0.8,
          tags: ['a'],
          metadata: { k: 1 },
          protocol_version: 'svc/1.0',
          delivery_state: 'pending',
          delivery_count: 0,
          task_status: 'open',
          claimed_by: null,
          claimed_at: null,
          claim_expires_at: null,
          from_identity: alice.id,
          source_org: null,
          federation: null,
        });
        expect(task.id).toMatch(ULID);
        expect(Number.isNaN(Date.parse(task.created_at))).toBe(false);
        expect(task).not.toHaveProperty('max_attempts');

        const pulse = await emitOk(alice, { signal_type: 'pulse', content: 'hi', from_identity: alice.id });
        expect(pulse).toMatchObject({ task_status: null, delivery_state: 'pending', protocol_version: 'svc/1.0', from_identity: alice.id, urgency: 0.5 });
      });

      it('refuses from_identity of someone else', async () => {
        expectError(await alice.client.post('/emit', { signal_type: 'pulse', content: 'spoof', from_identity: bob.id }), 403, 'POLICY_IDENTITY_MISMATCH');
      });

      it('gives ULID ids that increase', async () => {
        const ids: string[] = [];
        for (let i = 0; i < 10; i++) ids.push((await emitOk(bob, { signal_type: 'sense', content: `n${i}` })).id);
        for (const id of ids) expect(id).toMatch(ULID);
        expect([...ids].sort()).toEqual(ids);
        expect(new Set(ids).size).toBe(ids.length);
      });

      it('refuses urgency outside 0..1', async () => {
        expectError(await alice.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: 1.5 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'urgency');
        expectError(await alice.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: -0.1 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'urgency');
        expect((await alice.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: 1 })).status).toBe(201);
        expect((await alice.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: 0 })).status).toBe(201);
      });
    });

    describe('claim and ack', () => {
      it('claim leases the task for TASK_LEASE_MS, or body lease_ms; the claimer renews', async () => {
        const task = await emitOk(root, { signal_type: 'task', content: 'lease me' });
        const before = Date.now();
        const c = await alice.client.post('/claim', { signal_id: task.id });
        const after = Date.now();
        expect(c.status, JSON.stringify(c.body)).toBe(200);
        const s = c.body.data;
        expect(s).toMatchObject({ id: task.id, claimed_by: alice.id, delivery_state: 'leased', task_status: 'open' });
        const claimedAt = Date.parse(s.claimed_at);
        expect(claimedAt).toBeGreaterThanOrEqual(before - 5);
        expect(claimedAt).toBeLessThanOrEqual(after + 5);
        expect(Date.parse(s.claim_expires_at) - claimedAt).toBe(60_000);

        const renewed = await alice.client.post('/claim', { signal_id: task.id, lease_ms: 120_000 });
        expect(renewed.status).toBe(200);
        expect(renewed.body.data).toMatchObject({ claimed_by: alice.id, claimed_at: s.claimed_at, delivery_state: 'leased' });
        expect(Date.parse(renewed.body.data.claim_expires_at)).toBeGreaterThan(Date.parse(s.claim_expires_at));

        const other = await emitOk(root, { signal_type: 'task', content: 'short lease' });
        const short = await bob.client.post('/claim', { signal_id: other.id, lease_ms: 5000 });
        expect(short.status).toBe(200);
        expect(Date.parse(short.body.data.claim_expires_at) - Date.parse(short.body.data.claimed_at)).toBe(5000);

        // the list shows the same lease
        expect(await findSignal(root.client, task.id)).toMatchObject({ claimed_by: alice.id, delivery_state: 'leased', claim_expires_at: renewed.body.data.claim_expires_at });
      });

      it('refuses claims with the rule codes', async () => {
        const task = await emitOk(root, { signal_type: 'task', content: 'contested' });
        expect((await alice.client.post('/claim', { signal_id: task.id })).status).toBe(200);
        expectError(await bob.client.post('/claim', { signal_id: task.id }), 409, 'SIGNAL_CLAIM_CONFLICT');

        const pulse = await emitOk(root, { signal_type: 'pulse', content: 'not a task' });
        expectError(await alice.client.post('/claim', { signal_id: pulse.id }), 422, 'SIGNAL_CLAIM_NOT_TASK');
        expectError(await alice.client.post('/claim', { signal_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }), 404, 'SIGNAL_NOT_FOUND');

        expect((await alice.client.post('/ack', { signal_id: task.id })).status).toBe(200);
        expectError(await alice.client.post('/claim', { signal_id: task.id }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');
        expectError(await bob.client.post('/claim', { signal_id: task.id }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');
      });

      it('a task its recipient has read (delivered) is still open for a claim (docs/decisions.md, 24.9)', async () => {
        const task = await emitOk(root, { signal_type: 'task', content: 'read first', to_identity: alice.id });
        const seen = expectOk(await alice.client.get(`/inbox/identity/${alice.id}?limit=100`)).signals.find((s: any) => s.id === task.id);
        expect(seen).toMatchObject({ delivery_state: 'delivered', task_status: 'open' });
        expect(expectOk(await alice.client.post('/claim', { signal_id: task.id }))).toMatchObject({ delivery_state: 'leased', claimed_by: alice.id, task_status: 'open' });
      });

      it('ack by the claimer completes the task; others and repeats are refused', async () => {
        const task = await emitOk(root, { signal_type: 'task', content: 'finish me' });
        expectError(await alice.client.post('/ack', { signal_id: task.id }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION'); // unclaimed task
        expect((await alice.client.post('/claim', { signal_id: task.id })).status).toBe(200);
        expectError(await bob.client.post('/ack', { signal_id: task.id }), 403, 'SIGNAL_ACK_UNAUTHORIZED');

        const ack = await alice.client.post('/ack', { signal_id: task.id });
        expect(ack.status, JSON.stringify(ack.body)).toBe(200);
        expect(ack.body.data).toMatchObject({ id: task.id, task_status: 'completed', delivery_state: 'acked', claimed_by: alice.id });

        expectError(await alice.client.post('/ack', { signal_id: task.id }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
        expectError(await alice.client.post('/ack', { signal_id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }), 404, 'SIGNAL_ACK_NOT_FOUND');
        expect(await findSignal(bob.client, task.id)).toMatchObject({ task_status: 'completed', delivery_state: 'acked' });
      });

      it('ack of a non-task moves it from pending to acked, once', async () => {
        const alert = await emitOk(root, { signal_type: 'alert', content: 'seen?' });
        const ack = await bob.client.post('/ack', { signal_id: alert.id });
        expect(ack.status).toBe(200);
        expect(ack.body.data).toMatchObject({ id: alert.id, delivery_state: 'acked', task_status: null });
        expectError(await bob.client.post('/ack', { signal_id: alert.id }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
      });

      it("ack outcome 'failed' releases the task for another claim", async () => {
        const task = await emitOk(root, { signal_type: 'task', content: 'might fail' });
        expect((await alice.client.post('/claim', { signal_id: task.id })).status).toBe(200);
        const failed = await alice.client.post('/ack', { signal_id: task.id, outcome: 'failed' });
        expect(failed.status, JSON.stringify(failed.body)).toBe(200);
        expect(failed.body.data).toMatchObject({ delivery_state: 'pending', claimed_by: null, claimed_at: null, claim_expires_at: null, delivery_count: 1, task_status: 'open' });

        const again = await bob.client.post('/claim', { signal_id: task.id });
        expect(again.status, JSON.stringify(again.body)).toBe(200);
        expect(again.body.data).toMatchObject({ claimed_by: bob.id, delivery_state: 'leased', delivery_count: 1 });
      });

      it('20 concurrent claims by 20 identities: exactly one wins', async () => {
        const members = await Promise.all(Array.from({ length: 20 }, (_, i) => join(root.client, `racer-${i}`)));
        const task = await emitOk(root, { signal_type: 'task', content: 'race' });
        const results = await Promise.all(members.map((m) => m.client.post('/claim', { signal_id: task.id })));
        const winners = results.filter((r) => r.status === 200);
        const losers = results.filter((r) => r.status !== 200);
        expect(winners).toHaveLength(1);
        expect(losers).toHaveLength(19);
        for (const r of losers) expectError(r, 409, 'SIGNAL_CLAIM_CONFLICT');
        const winner = members[results.indexOf(winners[0])];
        expect(winners[0].body.data.claimed_by).toBe(winner.id);
        expect(await findSignal(root.client, task.id)).toMatchObject({ claimed_by: winner.id, delivery_state: 'leased' });
      });
    });

    describe('health', () => {
      it('GET /health is public and ok', async () => {
        const r = await new Client(svc.url).get('/health');
        expect(r.status).toBe(200);
        expect(r.body.data.status).toBe('ok');
        expect(r.body.meta.request_id).toMatch(/^req_/);
      });

      it('GET /health/detailed names the backend and its reachability', async () => {
        const sent = performance.now();
        const r = await new Client(svc.url).get('/health/detailed');
        const answered = performance.now();
        expect(r.status).toBe(200);
        const d = r.body.data;
        // a cluster is the Redis backend on REDIS_CLUSTER_NODES
        expect(d).toMatchObject({ status: 'ok', backend: backend === 'cluster' ? 'redis' : backend, database: { reachable: true } });
        // the ping is part of this request: it cannot take longer than the whole round trip
        expect(typeof d.database.latency_ms).toBe('number');
        expect(d.database.latency_ms).toBeLessThanOrEqual(answered - sent);
        // whole seconds since this server started, not since some other epoch
        expect(Number.isInteger(d.uptime_seconds)).toBe(true);
        expect(d.uptime_seconds).toBeLessThanOrEqual(Math.ceil((Date.now() - startedBefore) / 1000));
        expect(d.version).toMatch(/^\d+\.\d+\.\d+/);
      });
    });
  });

  describe('body size cap', () => {
    let svc: Service;
    let root: Member;
    beforeAll(async () => {
      svc = await servers.start({ BODY_LIMIT_BYTES: '1024' });
      root = await bootstrap(svc.url);
    });
    afterAll(() => svc.close());

    it('a body over BODY_LIMIT_BYTES → 413 PAYLOAD_TOO_LARGE; one under it passes', async () => {
      expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 'x'.repeat(4096) }), 413, 'PAYLOAD_TOO_LARGE');
      const ok = await root.client.post('/emit', { signal_type: 'pulse', content: 'x'.repeat(900) });
      expect(ok.status).toBe(201);
      expect(ok.body.data.content).toHaveLength(900);
    });
  });

  describe('GET /signals/list', () => {
    let svc: Service;
    let root: Member;
    const ids: string[] = [];
    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      for (let i = 0; i < 23; i++) {
        const r = await root.client.post('/emit', { signal_type: i % 3 === 0 ? 'task' : 'pulse', content: `s${i}` });
        expect(r.status).toBe(201);
        ids.push(r.body.data.id);
      }
    });
    afterAll(() => svc.close());

    it('lists newest first, defaulting to 20', async () => {
      const r = await root.client.get('/signals/list');
      expect(r.status).toBe(200);
      expect(r.body.data.signals.map((s: any) => s.id)).toEqual([...ids].reverse().slice(0, 20));
      expect(r.body.data.has_more).toBe(true);
      expect(typeof r.body.data.cursor).toBe('string');
      expect(r.body.meta.cursor).toBe(r.body.data.cursor);
    });

    it('pages with limit/after through every signal exactly once', async () => {
      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      for (;;) {
        const r: any = await root.client.get(`/signals/list?limit=5${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        expect(r.status).toBe(200);
        expect(r.body.meta.cursor).toBe(r.body.data.cursor);
        pages++;
        seen.push(...r.body.data.signals.map((s: any) => s.id));
        if (!r.body.data.has_more) {
          expect(r.body.data.cursor).toBeNull();
          expect(r.body.meta.cursor).toBeNull();
          break;
        }
        expect(r.body.data.signals).toHaveLength(5);
        after = r.body.data.cursor;
        expect(pages).toBeLessThan(10);
      }
      expect(pages).toBe(5);
      expect(seen).toEqual([...ids].reverse());
    });

    it('an exact last page has has_more false and cursor null', async () => {
      const r = await root.client.get('/signals/list?limit=100');
      expect(r.body.data.signals).toHaveLength(23);
      expect(r.body.data).toMatchObject({ has_more: false, cursor: null });
      const first = await root.client.get('/signals/list?limit=22');
      expect(first.body.data.has_more).toBe(true);
      const last = await root.client.get(`/signals/list?limit=1&after=${first.body.data.cursor}`);
      expect(last.body.data.signals.map((s: any) => s.id)).toEqual([ids[0]]);
      expect(last.body.data).toMatchObject({ has_more: false, cursor: null });
    });

    it('refuses limit outside 1..100 and non-numbers, and foreign cursors', async () => {
      for (const bad of ['0', '101', 'abc', '-1', '2.5', '']) expectError(await root.client.get(`/signals/list?limit=${bad}`), 400, 'VALIDATION_INVALID_TYPE', 'limit');
      expectError(await root.client.get('/signals/list?after=***'), 400, 'VALIDATION_INVALID_TYPE', 'after');
      expect((await root.client.get('/signals/list?limit=1')).status).toBe(200);
      expect((await root.client.get('/signals/list?limit=100')).status).toBe(200);
    });
  });

  describe('lease expiry and redelivery', () => {
    let svc: Service;
    let root: Member;
    let worker: Member;
    beforeAll(async () => {
      svc = await servers.start({ TASK_LEASE_MS: '150', MAX_DELIVERY_ATTEMPTS: '3' });
      root = await bootstrap(svc.url);
      worker = await join(root.client, 'worker');
    });
    afterAll(() => svc.close());

    it('an expired lease goes back to pending, and after MAX_DELIVERY_ATTEMPTS to dead_letter', async () => {
      const emitted = await root.client.post('/emit', { signal_type: 'task', content: 'flaky' });
      expect(emitted.status).toBe(201);
      const id = emitted.body.data.id;

      for (let attempt = 1; attempt <= 2; attempt++) {
        const c = await worker.client.post('/claim', { signal_id: id });
        expect(c.status, JSON.stringify(c.body)).toBe(200);
        expect(c.body.data).toMatchObject({ delivery_state: 'leased', claimed_by: worker.id, delivery_count: attempt - 1 });
        expect(Date.parse(c.body.data.claim_expires_at) - Date.parse(c.body.data.claimed_at)).toBe(150);
        const back = await waitFor(
          `lease ${attempt} to expire`,
          () => findSignal(root.client, id),
          (s) => s?.delivery_state !== 'leased',
        );
        expect(back).toMatchObject({ delivery_state: 'pending', delivery_count: attempt, claimed_by: null, claimed_at: null, claim_expires_at: null, task_status: 'open' });
      }

      expect((await worker.client.post('/claim', { signal_id: id })).status).toBe(200);
      const dead = await waitFor('the last lease to expire', () => findSignal(root.client, id), (s) => s?.delivery_state !== 'leased');
      expect(dead).toMatchObject({ delivery_state: 'dead_letter', delivery_count: 3, claimed_by: null });

      expectError(await worker.client.post('/claim', { signal_id: id }), 422, 'SIGNAL_DEAD_LETTER');
      expectError(await root.client.post('/claim', { signal_id: id }), 422, 'SIGNAL_DEAD_LETTER');
      expectError(await worker.client.post('/ack', { signal_id: id }), 422, 'SIGNAL_DEAD_LETTER');
    });

    it('a claim renewed by its claimer does not expire at the old deadline', async () => {
      const emitted = await root.client.post('/emit', { signal_type: 'task', content: 'kept alive' });
      const id = emitted.body.data.id;
      const first = await worker.client.post('/claim', { signal_id: id, lease_ms: 300 });
      expect(first.status).toBe(200);
      const renewed = await worker.client.post('/claim', { signal_id: id, lease_ms: 30_000 });
      expect(renewed.status).toBe(200);
      // wait past the first deadline, as measured by the store's own timestamps, then check it is still leased
      const oldDeadline = Date.parse(first.body.data.claim_expires_at);
      await waitFor('the first deadline to pass', async () => Date.now(), (t) => t > oldDeadline + 200);
      const s = await findSignal(root.client, id);
      expect(s).toMatchObject({ delivery_state: 'leased', claimed_by: worker.id, delivery_count: 0, claim_expires_at: renewed.body.data.claim_expires_at });
      const ack = await worker.client.post('/ack', { signal_id: id });
      expect(ack.body.data).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
    });
  });
});

