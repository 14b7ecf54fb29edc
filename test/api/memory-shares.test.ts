/**
 * Shares over real HTTP on both backends: an admin grants read of a namespace to an identity, a role or a
 * ring (whose members then read a namespace they could not), with an optional expiry; grantees read (get, list, query, recall, graph) but never write; deleting
 * or expiry ends it; admin-only routes and MEMORY_SHARE_NOT_FOUND.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

describe.each(BACKENDS)('memory shares on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
  let root: Member;
  let alice: Member;
  let bob: Member;
  let dan: Member;
  let secret: any;

  beforeAll(async () => {
    const svc = await servers.start();
    root = await bootstrap(svc.url);
    [alice, bob, dan] = await Promise.all([join(root.client, 'alice'), join(root.client, 'bob'), join(root.client, 'dan')]);
    expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id] }), 201);
    const role = expectOk(await root.client.post('/roles', { name: 'Auditor' }), 201);
    expectOk(await root.client.post('/fills', { identity_id: dan.id, role_id: role.id }), 201);
    secret = expectOk(await alice.client.post('/memory/store', { namespace: 'ring:core', content: 'the launch code is banana', entity: 'launch' }), 201);
  });

  const canRead = async (m: Member) => (await m.client.get(`/memory/${secret.id}`)).status === 200;

  it('a share to an identity lets it read everywhere but not write; deleting it ends that', async () => {
    expect(await canRead(bob)).toBe(false);
    const share = expectOk(await root.client.post('/memory/admin/share', { namespace: 'ring:Core', grantee_type: 'identity', grantee: bob.id }), 201);
    expect(share).toMatchObject({ namespace: 'ring:core', grantee_type: 'identity', grantee: bob.id, expires_at: null, created_by: root.id });
    expect(expectOk(await root.client.get('/memory/admin/shares')).shares).toContainEqual(share);
    expect(await canRead(bob)).toBe(true);
    expect(expectOk(await bob.client.get('/memory/list?namespace=ring:core')).memories.map((m: any) => m.id)).toEqual([secret.id]);
    expect(expectOk(await bob.client.post('/memory/query', { namespace: 'ring:core', query: 'launch code' })).memories[0].id).toBe(secret.id);
    expect(expectOk(await bob.client.get('/memory/recall/launch')).memories.map((m: any) => m.id)).toEqual([secret.id]);
    expect(expectOk(await bob.client.get(`/memory/graph/${secret.id}`)).root).toBe(secret.id);
    // read, never write
    expectError(await bob.client.post('/memory/store', { namespace: 'ring:core', content: 'sneaky' }), 403, 'MEMORY_NAMESPACE_DENIED');
    expectError(await bob.client.patch(`/memory/${secret.id}`, { content: 'changed' }), 403, 'MEMORY_NAMESPACE_DENIED');
    expectError(await bob.client.post('/memory/forget', { id: secret.id }), 403, 'MEMORY_NAMESPACE_DENIED');
    const mine = expectOk(await bob.client.post('/memory/store', { namespace: 'org', content: 'bob note' }), 201);
    expectError(await bob.client.post('/memory/relate', { from_id: secret.id, to_id: mine.id, relation: 'x' }), 403, 'MEMORY_NAMESPACE_DENIED');
    expect(expectOk(await bob.client.post('/memory/relate', { from_id: mine.id, to_id: secret.id, relation: 'cites' }), 201).to_id).toBe(secret.id);
    // someone else gets nothing from bob's share
    expect(await canRead(dan)).toBe(false);
    expect(expectOk(await root.client.del(`/memory/admin/share/${share.id}`)).id).toBe(share.id);
    expect(await canRead(bob)).toBe(false);
    expectError(await bob.client.get('/memory/list?namespace=ring:core'), 403, 'MEMORY_NAMESPACE_DENIED');
    expectError(await root.client.del(`/memory/admin/share/${share.id}`), 404, 'MEMORY_SHARE_NOT_FOUND');
  });

  it('a share to a role reaches its fillers, and a share with an expiry ends at expires_at', async () => {
    const share = expectOk(await root.client.post('/memory/admin/share', { namespace: 'ring:core', grantee_type: 'role', grantee: 'AUDITOR', expires_at: new Date(Date.now() + 1500).toISOString() }), 201);
    expect(share.grantee).toBe('auditor');
    expect(await canRead(dan)).toBe(true);
    expect(await canRead(bob)).toBe(false);
    await waitFor('share expiry', () => canRead(dan), (ok) => !ok, 5000, 100);
    const ring = expectOk(await root.client.post('/memory/admin/share', { namespace: 'ring:core', grantee_type: 'ring', grantee: 'core' }), 201);
    expect(ring.grantee_type).toBe('ring');
  });

  it("a share to a ring lets its members read a namespace they could not, others not; deleting it ends that", async () => {
    // role:auditor is dan's (its filler); alice (ring Core) and bob (no ring) cannot read it
    const audit = expectOk(await dan.client.post('/memory/store', { namespace: 'role:auditor', content: 'the ledger audit found a rounding drift', entity: 'ledger-audit' }), 201);
    const reads = async (m: Member) => {
      const get = await m.client.get(`/memory/${audit.id}`);
      const list = await m.client.get('/memory/list?namespace=role:auditor');
      const query = await m.client.post('/memory/query', { namespace: 'role:auditor', query: 'ledger audit rounding drift' });
      const recall = expectOk(await m.client.get('/memory/recall/ledger-audit')).memories.map((x: any) => x.id);
      return { get: get.status, list: list.status === 200 ? list.body.data.memories.map((x: any) => x.id) : list.body.error.code, query: query.status === 200 ? query.body.data.memories.map((x: any) => x.id) : query.body.error.code, recall };
    };
    const denied = { get: 404, list: 'MEMORY_NAMESPACE_DENIED', query: 'MEMORY_NAMESPACE_DENIED', recall: [] };
    const granted = { get: 200, list: [audit.id], query: [audit.id], recall: [audit.id] };
    expect(await reads(alice)).toEqual(denied);
    expect(await reads(bob)).toEqual(denied);

    const share = expectOk(await root.client.post('/memory/admin/share', { namespace: 'role:Auditor', grantee_type: 'ring', grantee: 'Core' }), 201);
    expect(share).toMatchObject({ namespace: 'role:auditor', grantee_type: 'ring', grantee: 'core' });
    expect(await reads(alice)).toEqual(granted);
    expect(await reads(bob)).toEqual(denied);
    expect(await reads(dan)).toEqual(granted);
    // read, never write
    expectError(await alice.client.post('/memory/store', { namespace: 'role:auditor', content: 'ring member writes' }), 403, 'MEMORY_NAMESPACE_DENIED');

    expectOk(await root.client.del(`/memory/admin/share/${share.id}`));
    expect(await reads(alice)).toEqual(denied);
    expect(await reads(dan)).toEqual(granted);
  });

  it('shares are admin-only and validated', async () => {
    expectError(await alice.client.post('/memory/admin/share', { namespace: 'ring:core', grantee_type: 'identity', grantee: bob.id }), 403, 'AUTH_ADMIN_REQUIRED');
    expectError(await alice.client.get('/memory/admin/shares'), 403, 'AUTH_ADMIN_REQUIRED');
    expectError(await root.client.post('/memory/admin/share', { namespace: 'ring:core', grantee_type: 'galaxy', grantee: 'x' }), 400, 'MEMORY_VALIDATION_FAILED', 'grantee_type');
    expectError(await root.client.post('/memory/admin/share', { namespace: 'nowhere', grantee_type: 'identity', grantee: 'x' }), 400, 'MEMORY_VALIDATION_FAILED', 'namespace');
    expectError(await root.client.post('/memory/admin/share', { namespace: 'org', grantee_type: 'identity', grantee: 'x', expires_at: '2001-01-01T00:00:00Z' }), 400, 'MEMORY_VALIDATION_FAILED', 'expires_at');
  });

  it("a role deleted and made again under its old name does not hand the old role's memories or shares to its new fillers", async () => {
    const [amy, ben] = await Promise.all([join(root.client, 'amy'), join(root.client, 'ben')]);
    const old = expectOk(await root.client.post('/roles', { name: 'Ops' }), 201);
    expectOk(await root.client.post('/fills', { identity_id: amy.id, role_id: old.id }), 201);
    const mem = expectOk(await amy.client.post('/memory/store', { namespace: 'role:ops', content: 'the old ops runbook', entity: 'runbook' }), 201);
    const shared = expectOk(await amy.client.post('/memory/store', { namespace: `agent:${amy.id}`, content: 'amy shared this with ops' }), 201);
    expectOk(await root.client.post('/memory/admin/share', { namespace: `agent:${amy.id}`, grantee_type: 'role', grantee: 'ops' }), 201);
    expectOk(await root.client.del(`/roles/${old.id}`));

    const again = expectOk(await root.client.post('/roles', { name: 'ops' }), 201);
    expectOk(await root.client.post('/fills', { identity_id: ben.id, role_id: again.id }), 201);
    expectError(await ben.client.get('/memory/list?namespace=role:ops'), 403, 'MEMORY_NAMESPACE_DENIED');
    expectError(await ben.client.get(`/memory/${mem.id}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await ben.client.get(`/memory/${shared.id}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await ben.client.post('/memory/store', { namespace: 'role:ops', content: 'mine now?' }), 403, 'MEMORY_NAMESPACE_DENIED');
    expect(expectOk(await ben.client.get('/memory/recall/runbook')).memories).toEqual([]);
    expect(expectOk(await ben.client.get('/memory/stats')).namespaces.map((n: any) => n.namespace)).not.toContain('role:ops');

    // the old role's memories belong to the old role: filling the new one does not reach them either
    expectOk(await root.client.post('/fills', { identity_id: amy.id, role_id: again.id }), 201);
    expectError(await amy.client.post('/memory/forget', { id: mem.id }), 404, 'MEMORY_NOT_FOUND');
  });
});
