/**
 * Company record, peer organizations, discovery, policy and runtime config over real HTTP on both
 * backends: every route, every code, admin-only refusals and what a member may see.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { createCompany } from '../../src/org/company.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, ULID } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(BACKENDS)('org company, peers, discovery, policy, config on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let alice: Member;

  describe('company', () => {
    it('ORG_NOT_FOUND before the first redemption; then the one org with member counts; a second org is ORG_ALREADY_EXISTS', async () => {
      const empty = await servers.start();
      // nobody can hold a key before the first redemption: read the record through the service's store
      const anon = new Client(empty.url);
      expectError(await anon.get('/org/company'), 401, 'AUTH_KEY_MISSING');
      expect(await empty.store.get('org:company')).toBeUndefined();
      const { CompanyRecord } = await import('../../src/org/company.js');
      await expect(new CompanyRecord(empty.store).get()).rejects.toMatchObject({ code: 'ORG_NOT_FOUND' });

      const first = await bootstrap(empty.url);
      const bob = await join(first.client, 'bob');
      const c = expectOk(await bob.client.get('/org/company'));
      expect(c).toMatchObject({ name: 'default', member_counts: { total: 2, active: 2, suspended: 0, removed: 0 } });
      expect(c.id).toMatch(ULID);
      expect(Number.isNaN(Date.parse(c.created_at))).toBe(false);
      await expect(createCompany(empty.store, 'second')).rejects.toMatchObject({ code: 'ORG_ALREADY_EXISTS' });
      expect(expectOk(await first.client.get('/org/company'))).toEqual(c);
    });
  });

  describe('with an org', () => {
    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      alice = await join(root.client, 'alice', { capabilities: ['review', 'search'] });
      await join(root.client, 'carol', { capabilities: ['search'] });
    });

    it('peers: create, list, show, status moves, establish, delete; duplicates, unknown ids, bad bodies', async () => {
      const p = expectOk(await root.client.post('/org/company/peers', { name: 'Acme', endpoint: 'https://Acme.example/', allowed_scopes: ['task'] }), 201);
      expect(p).toMatchObject({ name: 'Acme', endpoint: 'https://acme.example', allowed_scopes: ['task'], status: 'pending', has_trust: false, expires_at: null });
      expect(p.id).toMatch(ULID);
      expectError(await root.client.post('/org/company/peers', { name: 'Acme again', endpoint: 'https://acme.example' }), 409, 'DISC_PEER_DUPLICATE', 'endpoint');
      expectError(await root.client.post('/org/company/peers', { name: 'x', endpoint: 'not a url' }), 400, 'DISC_VALIDATION_FAILED', 'endpoint');
      expectError(await root.client.post('/org/company/peers', { endpoint: 'https://b.example' }), 400, 'DISC_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/org/company/peers', { name: 'x', endpoint: 'ftp://b.example' }), 400, 'DISC_VALIDATION_FAILED', 'endpoint');

      expect(expectOk(await root.client.get(`/org/company/peers/${p.id}`))).toEqual(p);
      expectError(await root.client.get(`/org/company/peers/${UNKNOWN}`), 404, 'DISC_PEER_NOT_FOUND');
      expectError(await root.client.patch(`/org/company/peers/${UNKNOWN}/status`, { status: 'active' }), 404, 'DISC_PEER_NOT_FOUND');
      expectError(await root.client.post(`/org/company/peers/${UNKNOWN}/establish`), 404, 'DISC_PEER_NOT_FOUND');
      expectError(await root.client.del(`/org/company/peers/${UNKNOWN}`), 404, 'DISC_PEER_NOT_FOUND');

      // establishing issues the trust (its secret shown this once) and makes the pending peer active
      const est = expectOk(await root.client.post(`/org/company/peers/${p.id}/establish`));
      expect(est).toEqual({ peer_id: p.id, shared_secret: expect.stringMatching(/^[0-9a-f]{64}$/), expires_at: expect.any(String) });
      const shown = expectOk(await root.client.get(`/org/company/peers/${p.id}`));
      expect(shown).toMatchObject({ status: 'active', has_trust: true, expires_at: est.expires_at, establish_requested_by: root.id });
      expect(shown).not.toHaveProperty('shared_secret');

      expectError(await root.client.patch(`/org/company/peers/${p.id}/status`, { status: 'active' }), 409, 'DISC_PEER_INVALID_TRANSITION');
      expectError(await root.client.patch(`/org/company/peers/${p.id}/status`, { status: 'pending' }), 400, 'DISC_VALIDATION_FAILED', 'status');
      expect(expectOk(await root.client.patch(`/org/company/peers/${p.id}/status`, { status: 'suspended' })).status).toBe('suspended');
      expectError(await root.client.post(`/org/company/peers/${p.id}/establish`), 409, 'DISC_PEER_INVALID_TRANSITION');

      const q = expectOk(await root.client.post('/org/company/peers', { name: 'Beta', endpoint: 'https://beta.example' }), 201);
      const all = expectOk(await root.client.get('/org/company/peers'));
      expect(all.map((x: any) => x.id)).toEqual([q.id, p.id]);
      // the admin view is the peer list with each peer's outbound delivery counts, its limits in force and its usage
      const none = { delivered: 0, failed: 0, pending: 0, last_error: null };
      const limits = { rate_limit: 600, storage_quota_bytes: 100 * 1024 ** 2 };
      const usage = { stored_bytes: 0, stored_signals: 0, requests: { limit: 600, used: 0, remaining: 600, reset_ms: expect.any(Number) } };
      expect(expectOk(await root.client.get('/admin/peers'))).toEqual(all.map((x: any) => ({ ...x, deliveries: none, limits, usage })));
      expect(expectOk(await root.client.get('/admin/peers?status=suspended')).map((x: any) => x.id)).toEqual([p.id]);
      expect(expectOk(await root.client.get('/org/company/peers?status=pending')).map((x: any) => x.id)).toEqual([q.id]);

      expect(expectOk(await root.client.patch(`/org/company/peers/${p.id}/status`, { status: 'revoked' })).status).toBe('revoked');
      expectError(await root.client.patch(`/org/company/peers/${p.id}/status`, { status: 'active' }), 409, 'DISC_PEER_INVALID_TRANSITION');
      expect(expectOk(await root.client.del(`/org/company/peers/${p.id}`)).id).toBe(p.id);
      expectError(await root.client.get(`/org/company/peers/${p.id}`), 404, 'DISC_PEER_NOT_FOUND');
      expect(expectOk(await root.client.get('/admin/peers')).map((x: any) => x.id)).toEqual([q.id]);
      // the endpoint is free again
      expectOk(await root.client.post('/org/company/peers', { name: 'Acme 2', endpoint: 'https://acme.example' }), 201);
    });

    it('the same endpoint created concurrently: exactly one wins', async () => {
      const rs = await Promise.all([1, 2, 3, 4].map((i) => root.client.post('/org/company/peers', { name: `race ${i}`, endpoint: 'https://race.example' })));
      expect(rs.filter((r) => r.status === 201)).toHaveLength(1);
      for (const r of rs.filter((x) => x.status !== 201)) expectError(r, 409, 'DISC_PEER_DUPLICATE');
    });

    it('members may not manage peers', async () => {
      expectError(await alice.client.post('/org/company/peers', { name: 'x', endpoint: 'https://x.example' }), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await alice.client.get('/admin/peers'), 403, 'AUTH_ADMIN_REQUIRED');
    });

    it('discovery: directory, filters, what a member may see, DISC_VALIDATION_FAILED', async () => {
      const active = expectOk(await root.client.post('/org/company/peers', { name: 'Gamma', endpoint: 'https://gamma.example' }), 201);
      expectOk(await root.client.patch(`/org/company/peers/${active.id}/status`, { status: 'active' }));
      const role = expectOk(await root.client.post('/roles', { name: 'Searcher' }), 201);
      expectOk(await root.client.post('/fills', { identity_id: alice.id, role_id: role.id }), 201);
      const ring = expectOk(await root.client.post('/rings', { name: 'Finders', purpose: 'search things', members: [alice.id] }), 201);

      const d = expectOk(await alice.client.get('/discovery'));
      expect(d.org).toMatchObject({ name: 'default' });
      expect(d.identities.map((i: any) => i.name).sort()).toEqual(['alice', 'carol', 'root']);
      for (const i of d.identities) expect(Object.keys(i).sort()).toEqual(['agent_8004_id', 'capabilities', 'id', 'name', 'tags', 'type', 'wallet_address']);
      expect(d.capabilities).toEqual(['review', 'search']);
      expect(d.roles.map((r: any) => r.name)).toContain('Searcher');
      // rings show their public fields, not their members
      expect(d.rings).toEqual([{ id: ring.id, name: 'Finders', purpose: 'search things' }]);
      expect(d.agent_card_url).toBe(`${svc.url.replace('127.0.0.1', 'localhost')}/.well-known/agent-card.json`);
      expect(d.endpoints.websocket).toMatch(/^ws:\/\/.*\/ws$/);
      expect(d.endpoints).toMatchObject({ sse: expect.stringMatching(/\/signals\/stream$/), mcp: expect.stringMatching(/\/mcp$/), a2a: expect.stringMatching(/\/a2a$/) });
      // a member sees active peers only, and only their public fields
      expect(d.peers).toEqual([{ id: active.id, name: 'Gamma', endpoint: 'https://gamma.example', status: 'active' }]);
      const asAdmin = expectOk(await root.client.get('/discovery'));
      expect(asAdmin.peers.length).toBeGreaterThan(1);
      expect(asAdmin.peers.find((p: any) => p.id === active.id)).toHaveProperty('allowed_scopes');

      expect(expectOk(await alice.client.get('/discovery?capability=review')).identities.map((i: any) => i.name)).toEqual(['alice']);
      expect(expectOk(await alice.client.get('/discovery?capability=search,review')).identities.map((i: any) => i.name)).toEqual(['alice']);
      expect(expectOk(await alice.client.get('/discovery?capability=search')).identities.map((i: any) => i.name).sort()).toEqual(['alice', 'carol']);
      expect(expectOk(await alice.client.get('/discovery?role=searcher')).identities.map((i: any) => i.name)).toEqual(['alice']);
      expect(expectOk(await alice.client.get(`/discovery?role=${role.id}`)).identities.map((i: any) => i.name)).toEqual(['alice']);
      expect(expectOk(await alice.client.get('/discovery?role=nobody')).identities).toEqual([]);
      expect(expectOk(await alice.client.get('/discovery?type=human')).identities.map((i: any) => i.name)).toEqual(['root']);

      expectError(await alice.client.get('/discovery?type=robot'), 400, 'DISC_VALIDATION_FAILED', 'type');
      expectError(await alice.client.get('/discovery?capability='), 400, 'DISC_VALIDATION_FAILED', 'capability');
      expectError(await alice.client.get('/discovery?colour=blue'), 400, 'DISC_VALIDATION_FAILED');
    });

    it('discovery pages its identities (limit, cursor); a filtered page reads on through the index until it is full', async () => {
      const walk = async (query: string) => {
        const names: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const d: any = expectOk(await alice.client.get(`/discovery?${query}${cursor ? `&cursor=${cursor}` : ''}`));
          expect(d.identities.length).toBeLessThanOrEqual(1);
          names.push(...d.identities.map((i: any) => i.name));
          expect(d.has_more).toBe(d.cursor !== null);
          cursor = d.cursor;
          pages++;
        } while (cursor);
        return { names, pages };
      };
      const everyone = expectOk(await alice.client.get('/discovery')).identities.map((i: any) => i.name);
      expect(everyone).toEqual(['carol', 'alice', 'root']); // newest first
      expect(await walk('limit=1')).toEqual({ names: everyone, pages: 3 });
      // root is the oldest: its one-item page is filled by reading past every newer agent
      const human: any = expectOk(await alice.client.get('/discovery?type=human&limit=1'));
      expect({ names: human.identities.map((i: any) => i.name), has_more: human.has_more }).toEqual({ names: ['root'], has_more: false });
      expect((await walk('capability=search&limit=1')).names).toEqual(['carol', 'alice']);
      const first: any = expectOk(await alice.client.get('/discovery?limit=2'));
      expect(first.identities.map((i: any) => i.name)).toEqual(['carol', 'alice']);
      expect(expectOk(await alice.client.get(`/discovery?limit=2&cursor=${first.cursor}`)).identities.map((i: any) => i.name)).toEqual(['root']);

      for (const bad of ['limit=0', 'limit=501', 'limit=2.5', 'limit=many']) expectError(await alice.client.get(`/discovery?${bad}`), 400, 'DISC_VALIDATION_FAILED', 'limit');
      expectError(await alice.client.get('/discovery?cursor=%21%21'), 400, 'DISC_VALIDATION_FAILED', 'cursor');
      expectError(await alice.client.get('/discovery?cursor='), 400, 'DISC_VALIDATION_FAILED', 'cursor');
      expectOk(await alice.client.get('/discovery?limit=500'));
    });

    it('GET /admin/policy: the effective policy', async () => {
      const p = expectOk(await root.client.get('/admin/policy'));
      expect(p).toMatchObject({ strict_signal_types: false, membership_required: true, federation_max_hops: 1, lease: { task_lease_ms: 300_000, max_delivery_attempts: 5 } });
      expect(p.webhooks.retry_window_ms).toBe(24 * 3600_000);
      // the quota memory/store enforces, per namespace, from the one config
      expect(p.memory_quota).toEqual({ per_namespace: 10_000 });
      const rate = expectOk(await root.client.get('/admin/config')).settings.find((x: any) => x.name === 'RATE_LIMIT_DEFAULT');
      expect(p.rate_limit_default).toBe(rate.value);
      expect(typeof rate.value).toBe('number');
      expectError(await alice.client.get('/admin/policy'), 403, 'AUTH_ADMIN_REQUIRED');
    });

    it('GET /admin/config: every setting with value and source, secrets masked', async () => {
      const strict = await servers.start({ STRICT_SIGNAL_TYPES: 'true', MEMORY_NAMESPACE_QUOTA: '7', S3_ENDPOINT: '', LOG_LEVEL: 'silent' });
      const admin = await bootstrap(strict.url);
      const { settings } = expectOk(await admin.client.get('/admin/config'));
      const row = (n: string) => settings.find((s: any) => s.name === n);
      expect(row('STRICT_SIGNAL_TYPES')).toEqual({ name: 'STRICT_SIGNAL_TYPES', value: true, source: 'env', secret: false });
      expect(row('TASK_LEASE_MS')).toEqual({ name: 'TASK_LEASE_MS', value: 300_000, source: 'default', secret: false });
      expect(row('S3_SECRET_KEY')).toEqual({ name: 'S3_SECRET_KEY', value: null, source: 'default', secret: true });
      if (backend === 'redis') expect(row('REDIS_URL').source).toBe('env');
      expect(row('MEMORY_NAMESPACE_QUOTA')).toEqual({ name: 'MEMORY_NAMESPACE_QUOTA', value: 7, source: 'env', secret: false });
      expect(expectOk(await admin.client.get('/admin/policy'))).toMatchObject({ strict_signal_types: true, memory_quota: { per_namespace: 7 } });
      expectError(await alice.client.get('/admin/config'), 403, 'AUTH_ADMIN_REQUIRED');
    });
  });
});
