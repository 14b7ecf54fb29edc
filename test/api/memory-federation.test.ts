/**
 * Cross-org memory reads over real HTTP on both backends: a peer org signs its calls with the trust's secret
 * (test/helpers/federation.ts) and reads only namespaces shared to it (grantee_type org); anything else is
 * MEMORY_ORG_DENIED for a namespace and MEMORY_NOT_FOUND for an id; deleted or expired shares stop access at
 * once; a peer writes nothing; a suspended peer is refused by proof auth.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { signedGet, signedPost } from '../helpers/federation.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

interface Issued {
  peer_id: string;
  shared_secret: string;
}

let endpoints = 0;

describe.each(BACKENDS)('memory read by a federation peer on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
  let svc: Started;
  let root: Member;
  let alice: Member;
  let bob: Member;
  let peer: Issued;
  let other: Issued;
  let shared: any;
  let unshared: any;
  let mine: any;

  const trustWith = async (): Promise<Issued> =>
    expectOk(await root.client.post('/federation/trust', { name: 'Peer org', endpoint: `https://memfed${++endpoints}.example`, allowed_scopes: ['task'] }), 201);
  const query = (body: Record<string, unknown>, t: Issued = peer) => signedPost(svc.url, '/federation/memory/query', body, { peerId: t.peer_id, secret: t.shared_secret });
  const get = (path: string, t: Issued = peer) => signedGet(svc.url, path, { peerId: t.peer_id, secret: t.shared_secret });
  const share = async (namespace: string, grantee = peer.peer_id, expires_at?: string) =>
    expectOk(await root.client.post('/memory/admin/share', { namespace, grantee_type: 'org', grantee, ...(expires_at ? { expires_at } : {}) }), 201);
  const ids = (res: any) => expectOk(res).memories.map((m: any) => m.id);

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    [alice, bob] = await Promise.all([join(root.client, 'alice'), join(root.client, 'bob')]);
    expectOk(await root.client.post('/rings', { name: 'Research', members: [alice.id] }), 201);
    shared = expectOk(await alice.client.post('/memory/store', { namespace: 'ring:research', content: 'the comet returns in spring', entity: 'comet' }), 201);
    unshared = expectOk(await alice.client.post('/memory/store', { namespace: 'org', content: 'the comet budget is secret', entity: 'comet' }), 201);
    mine = expectOk(await alice.client.post('/memory/store', { namespace: `agent:${alice.id}`, content: 'my comet diary', entity: 'comet' }), 201);
    [peer, other] = [await trustWith(), await trustWith()];
  });

  it('without a share a peer reads nothing: MEMORY_ORG_DENIED for a namespace, MEMORY_NOT_FOUND for an id', async () => {
    for (const namespace of ['ring:research', 'org', `agent:${alice.id}`, 'ring:nowhere']) expectError(await query({ namespace, query: 'comet' }), 403, 'MEMORY_ORG_DENIED');
    for (const id of [shared.id, unshared.id, '01JNOSUCHMEMORY00000000000']) expectError(await get(`/federation/memory/${id}`), 404, 'MEMORY_NOT_FOUND');
    expect(ids(await get('/federation/memory/recall/comet'))).toEqual([]);
  });

  it('a share to the peer org lets that peer (only) query, get and recall that namespace, and nothing else', async () => {
    const s = await share('ring:Research');
    expect(s).toMatchObject({ namespace: 'ring:research', grantee_type: 'org', grantee: peer.peer_id });
    for (const mode of ['hybrid', 'semantic', 'keyword']) expect(ids(await query({ namespace: 'ring:research', query: 'comet', mode }))).toEqual([shared.id]);
    expect(expectOk(await get(`/federation/memory/${shared.id}`))).toMatchObject({ id: shared.id, content: 'the comet returns in spring', namespace: 'ring:research' });
    expect(ids(await get('/federation/memory/recall/comet?limit=10'))).toEqual([shared.id]);
    // the other namespaces stay closed to it, and the other peer sees nothing
    expectError(await query({ namespace: 'org', query: 'comet' }), 403, 'MEMORY_ORG_DENIED');
    expectError(await get(`/federation/memory/${unshared.id}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await get(`/federation/memory/${mine.id}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await query({ namespace: 'ring:research', query: 'comet' }, other), 403, 'MEMORY_ORG_DENIED');
    expectError(await get(`/federation/memory/${shared.id}`, other), 404, 'MEMORY_NOT_FOUND');
    // a share to a peer org grants no local member anything
    expectError(await bob.client.post('/memory/query', { namespace: 'ring:research', query: 'comet' }), 403, 'MEMORY_NAMESPACE_DENIED');
    expectError(await bob.client.get(`/memory/${shared.id}`), 404, 'MEMORY_NOT_FOUND');
    // deleting the share stops the very next read
    expectOk(await root.client.del(`/memory/admin/share/${s.id}`));
    expectError(await query({ namespace: 'ring:research', query: 'comet' }), 403, 'MEMORY_ORG_DENIED');
    expectError(await get(`/federation/memory/${shared.id}`), 404, 'MEMORY_NOT_FOUND');
    expect(ids(await get('/federation/memory/recall/comet'))).toEqual([]);
  });

  it('a share with an expiry ends at expires_at', async () => {
    const s = await share('org', peer.peer_id, new Date(Date.now() + 3000).toISOString());
    expect(ids(await query({ namespace: 'org', query: 'budget' }))).toEqual([unshared.id]);
    await waitFor('peer share expiry', async () => (await query({ namespace: 'org', query: 'budget' })).status, (status) => status === 403, 20_000, 200);
    expectError(await query({ namespace: 'org', query: 'budget' }), 403, 'MEMORY_ORG_DENIED');
    expectError(await get(`/federation/memory/${unshared.id}`), 404, 'MEMORY_NOT_FOUND');
    expectOk(await root.client.del(`/memory/admin/share/${s.id}`));
  });

  it('a peer writes nothing: a signed call is no API key on the memory write routes', async () => {
    const s = await share('ring:research');
    const before = ids(await alice.client.get('/memory/list?namespace=ring:research'));
    const signed = { peerId: peer.peer_id, secret: peer.shared_secret };
    expectError(await signedPost(svc.url, '/memory/store', { namespace: 'ring:research', content: 'forged' }, signed), 401, 'AUTH_KEY_MISSING');
    expectError(await signedPost(svc.url, '/memory/forget', { id: shared.id }, signed), 401, 'AUTH_KEY_MISSING');
    expect(ids(await alice.client.get('/memory/list?namespace=ring:research'))).toEqual(before);
    expect(expectOk(await alice.client.get(`/memory/${shared.id}`)).deleted_at).toBeNull();
    expectOk(await root.client.del(`/memory/admin/share/${s.id}`));
  });

  it('bad bodies are MEMORY_VALIDATION_FAILED; a suspended peer is FED_PEER_DENIED even with a share', async () => {
    expectError(await query({ namespace: 'ring:research' }), 400, 'MEMORY_VALIDATION_FAILED');
    const s = await share('ring:research', other.peer_id);
    expect(ids(await query({ namespace: 'ring:research', query: 'comet' }, other))).toEqual([shared.id]);
    expectOk(await root.client.patch(`/org/company/peers/${other.peer_id}/status`, { status: 'suspended' }));
    expectError(await query({ namespace: 'ring:research', query: 'comet' }, other), 403, 'FED_PEER_DENIED');
    expectError(await get(`/federation/memory/${shared.id}`, other), 403, 'FED_PEER_DENIED');
    expectOk(await root.client.del(`/memory/admin/share/${s.id}`));
  });
});
