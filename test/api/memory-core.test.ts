/**
 * Memory over real HTTP on both backends (Redis with the RediSearch module loaded): store, get, list with
 * filters and paging, recall across namespaces, update, forget (soft delete), expiry (hidden by every read
 * at expires_at, purged later by the sweeper), the namespace ACL
 * matrix (owner, role filler, ring member, outsider, scoped key) on every read and write, and the quota.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { expectError, expectOk, ULID, waitFor } from './support.js';

const WITH_SEARCH = { args: ['--loadmodule', REDISEARCH_MODULE] };

describe.each(BACKENDS)('memory on %s', (backend) => {
  const servers = serversOn(backend, WITH_SEARCH);
  let svc: Service;
  let root: Member;
  let alice: Member; // fills role Ops, member of ring Core
  let carol: Member; // member of ring Core
  let bob: Member; // outsider: no role, no ring

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    [alice, carol, bob] = await Promise.all([join(root.client, 'alice'), join(root.client, 'carol'), join(root.client, 'bob')]);
    const role = expectOk(await root.client.post('/roles', { name: 'Ops' }), 201);
    expectOk(await root.client.post('/fills', { identity_id: alice.id, role_id: role.id }), 201);
    expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id, carol.id] }), 201);
  });

  const store = async (m: Member | Client, body: Record<string, unknown>) => expectOk(await ('client' in m ? m.client : m).post('/memory/store', body), 201);

  it('stores a memory with every field and reads it back', async () => {
    const body = {
      namespace: `agent:${alice.id}`, content: 'Alice prefers dark roast coffee', memory_type: 'preference', entity: 'alice-coffee', category: 'taste',
      tags: ['coffee', 'morning'], confidence: 0.9, source: 'chat', metadata: { turn: 3 }, expires_at: new Date(Date.now() + 3_600_000).toISOString(),
    };
    const m = await store(alice, body);
    expect(m).toMatchObject({ ...body, owner: alice.id, deleted_at: null, version: 1, source_org: null, source_claw: null });
    expect(m.id).toMatch(ULID);
    expect(m).not.toHaveProperty('embedding');
    expect(m.created_at).toBe(m.updated_at);
    expect(expectOk(await alice.client.get(`/memory/${m.id}`))).toEqual(m);
  });

  it('refuses bad bodies with MEMORY_VALIDATION_FAILED', async () => {
    expectError(await alice.client.post('/memory/store', { content: 'x' }), 400, 'MEMORY_VALIDATION_FAILED', 'namespace');
    expectError(await alice.client.post('/memory/store', { namespace: 'org' }), 400, 'MEMORY_VALIDATION_FAILED', 'content');
    expectError(await alice.client.post('/memory/store', { namespace: 'org', content: '' }), 400, 'MEMORY_VALIDATION_FAILED', 'content');
    expectError(await alice.client.post('/memory/store', { namespace: 'org', content: 'x', memory_type: 'dream' }), 400, 'MEMORY_VALIDATION_FAILED', 'memory_type');
    expectError(await alice.client.post('/memory/store', { namespace: 'org', content: 'x', confidence: 1.5 }), 400, 'MEMORY_VALIDATION_FAILED', 'confidence');
    expectError(await alice.client.post('/memory/store', { namespace: 'project:x', content: 'x' }), 400, 'MEMORY_VALIDATION_FAILED', 'namespace');
    expectError(await alice.client.post('/memory/store', { namespace: 'org', content: 'x', expires_at: '2001-01-01T00:00:00Z' }), 400, 'MEMORY_VALIDATION_FAILED', 'expires_at');
    expectError(await alice.client.post('/memory/store', { namespace: 'org', content: 'x', embedding: [1, 2, 3] }), 400, 'EMBEDDING_DIMENSION_MISMATCH', 'embedding');
    expectError(await alice.client.get('/memory/list'), 400, 'VALIDATION_FIELD_REQUIRED', 'namespace');
    expectError(await alice.client.get('/memory/01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'MEMORY_NOT_FOUND');
  });

  describe('namespace ACL', () => {
    // who may write / read each namespace: owner, role filler, ring member, outsider
    const cases = () => [
      { ns: `agent:${alice.id}`, writers: [alice], readers: [alice], denied: [carol, bob, root] },
      { ns: 'role:Ops', writers: [alice], readers: [alice], denied: [carol, bob, root] },
      { ns: 'ring:core', writers: [alice, carol], readers: [alice, carol], denied: [bob, root] },
      { ns: 'org', writers: [alice, carol, bob, root], readers: [alice, carol, bob, root], denied: [] },
    ];

    it('store, get, list, query, recall, update and forget follow the matrix', async () => {
      for (const c of cases()) {
        const entity = `acl-${c.ns.replace(/\W/g, '')}`;
        const m = await store(c.writers[0], { namespace: c.ns, content: `secret plans of ${entity}`, entity, tags: ['acl'] });
        for (const r of c.readers) {
          expect(expectOk(await r.client.get(`/memory/${m.id}`)).id).toBe(m.id);
          expect(expectOk(await r.client.get(`/memory/list?namespace=${encodeURIComponent(c.ns)}`)).memories.map((x: any) => x.id)).toContain(m.id);
          expect(expectOk(await r.client.post('/memory/query', { namespace: c.ns, query: 'secret plans', mode: 'keyword' })).memories.map((x: any) => x.id)).toContain(m.id);
          expect(expectOk(await r.client.get(`/memory/recall/${entity}`)).memories.map((x: any) => x.id)).toEqual([m.id]);
        }
        for (const d of c.denied) {
          expectError(await d.client.post('/memory/store', { namespace: c.ns, content: 'intrusion' }), 403, 'MEMORY_NAMESPACE_DENIED');
          // existence never leaks: a memory the caller cannot read is simply not found
          expectError(await d.client.get(`/memory/${m.id}`), 404, 'MEMORY_NOT_FOUND');
          expectError(await d.client.get(`/memory/list?namespace=${encodeURIComponent(c.ns)}`), 403, 'MEMORY_NAMESPACE_DENIED');
          expectError(await d.client.post('/memory/query', { namespace: c.ns, query: 'secret plans' }), 403, 'MEMORY_NAMESPACE_DENIED');
          expect(expectOk(await d.client.get(`/memory/recall/${entity}`)).memories).toEqual([]);
          expectError(await d.client.patch(`/memory/${m.id}`, { content: 'changed' }), 404, 'MEMORY_NOT_FOUND');
          expectError(await d.client.post('/memory/forget', { id: m.id }), 404, 'MEMORY_NOT_FOUND');
        }
        const last = c.writers[c.writers.length - 1];
        expect(expectOk(await last.client.post('/memory/forget', { id: m.id })).deleted_at).not.toBeNull();
      }
    });

    it('role and ring names match without regard to case', async () => {
      const m = await store(alice, { namespace: 'role:OPS', content: 'ops runbook lives in the wiki' });
      expect(m.namespace).toBe('role:ops');
      expect(expectOk(await alice.client.get('/memory/list?namespace=role:OPS')).memories.map((x: any) => x.id)).toContain(m.id);
    });

    it('a scoped key is narrowed by permissions.memory_scopes (exact names and prefix:*)', async () => {
      const made = expectOk(await root.client.post('/admin/api-keys', { owner: alice.id, permissions: { memory_scopes: ['ring:*', 'org'] } }), 201);
      const scoped = new Client(svc.url, made.api_key);
      const inRing = await store(scoped, { namespace: 'ring:core', content: 'scoped write', entity: 'scoped-e' });
      await store(scoped, { namespace: 'org', content: 'scoped org write', entity: 'scoped-e' });
      const own = await store(alice, { namespace: `agent:${alice.id}`, content: 'private note', entity: 'scoped-e' });
      expectError(await scoped.post('/memory/store', { namespace: `agent:${alice.id}`, content: 'x' }), 403, 'MEMORY_NAMESPACE_DENIED');
      expectError(await scoped.get(`/memory/list?namespace=agent:${alice.id}`), 403, 'MEMORY_NAMESPACE_DENIED');
      expectError(await scoped.post('/memory/query', { namespace: `agent:${alice.id}`, query: 'private' }), 403, 'MEMORY_NAMESPACE_DENIED');
      expectError(await scoped.get(`/memory/${own.id}`), 404, 'MEMORY_NOT_FOUND');
      expectError(await scoped.post('/memory/store', { namespace: 'role:ops', content: 'x' }), 403, 'MEMORY_NAMESPACE_DENIED');
      const recalled = expectOk(await scoped.get('/memory/recall/scoped-e')).memories.map((x: any) => x.namespace).sort();
      expect(recalled).toEqual(['org', 'ring:core']);
      expect(expectOk(await alice.client.get('/memory/recall/scoped-e')).memories).toHaveLength(3);
      expect(expectOk(await scoped.get(`/memory/${inRing.id}`)).id).toBe(inRing.id);
    });
  });

  it('lists newest first with filters and keyset paging', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const m = await store(carol, { namespace: 'org', content: `list item ${i}`, category: i % 2 ? 'odd' : 'even', tags: i < 3 ? ['early', 'list'] : ['list'], memory_type: 'fact', entity: 'lister', allow_duplicate: true });
      ids.push(m.id);
    }
    const page1 = expectOk(await carol.client.get('/memory/list?namespace=org&entity=lister&limit=2'));
    expect(page1.memories.map((m: any) => m.id)).toEqual([ids[4], ids[3]]);
    expect(page1.has_more).toBe(true);
    const page2 = expectOk(await carol.client.get(`/memory/list?namespace=org&entity=lister&limit=2&after=${page1.cursor}`));
    expect(page2.memories.map((m: any) => m.id)).toEqual([ids[2], ids[1]]);
    const page3 = expectOk(await carol.client.get(`/memory/list?namespace=org&entity=lister&limit=2&after=${page2.cursor}`));
    expect(page3).toMatchObject({ cursor: null, has_more: false });
    expect(page3.memories.map((m: any) => m.id)).toEqual([ids[0]]);
    expect(expectOk(await carol.client.get('/memory/list?namespace=org&category=odd&tags=list')).memories.map((m: any) => m.id)).toEqual([ids[3], ids[1]]);
    expect(expectOk(await carol.client.get('/memory/list?namespace=org&tags=early,list&category=even')).memories.map((m: any) => m.id)).toEqual([ids[2], ids[0]]);
    expect(expectOk(await carol.client.get('/memory/list?namespace=org&memory_type=episodic&entity=lister')).memories).toEqual([]);
    expectError(await carol.client.get('/memory/list?namespace=org&limit=101'), 400, 'VALIDATION_INVALID_TYPE', 'limit');
    expectError(await carol.client.get('/memory/list?namespace=org&after=zzz'), 400, 'VALIDATION_INVALID_TYPE', 'after');
    for (const id of ids) expectOk(await carol.client.post('/memory/forget', { id }));
  });

  it('updates content, tags, metadata and confidence, re-embeds, and counts the version', async () => {
    const m = await store(bob, { namespace: 'org', content: 'the build server is named hopper', tags: ['infra'] });
    const u = expectOk(await bob.client.patch(`/memory/${m.id}`, { content: 'the build server is named lovelace', tags: ['infra', 'ci'], metadata: { moved: true }, confidence: 0.4 }));
    expect(u).toMatchObject({ id: m.id, content: 'the build server is named lovelace', tags: ['infra', 'ci'], metadata: { moved: true }, confidence: 0.4, version: 2, created_at: m.created_at });
    expect(Date.parse(u.updated_at)).toBeGreaterThanOrEqual(Date.parse(m.updated_at));
    expect(expectOk(await bob.client.get(`/memory/${m.id}`))).toEqual(u);
    // the index follows the new content at once
    const q = async (text: string) => expectOk(await bob.client.post('/memory/query', { namespace: 'org', query: text, mode: 'keyword' })).memories.map((x: any) => x.id);
    expect(await q('lovelace')).toContain(m.id);
    expect(await q('hopper')).not.toContain(m.id);
    expectError(await bob.client.patch(`/memory/${m.id}`, { confidence: 2 }), 400, 'MEMORY_VALIDATION_FAILED', 'confidence');
    expectOk(await bob.client.post('/memory/forget', { id: m.id }));
  });

  it('forgotten memories vanish from get, list, query and recall; forgetting twice is not found', async () => {
    const m = await store(bob, { namespace: 'org', content: 'temporary zeppelin fact', entity: 'zeppelin' });
    const f = expectOk(await bob.client.post('/memory/forget', { id: m.id }));
    expect(f.id).toBe(m.id);
    expect(Number.isNaN(Date.parse(f.deleted_at))).toBe(false);
    expectError(await bob.client.get(`/memory/${m.id}`), 404, 'MEMORY_NOT_FOUND');
    expect(expectOk(await bob.client.get('/memory/list?namespace=org&entity=zeppelin')).memories).toEqual([]);
    for (const mode of ['keyword', 'semantic', 'hybrid']) {
      expect(expectOk(await bob.client.post('/memory/query', { namespace: 'org', query: 'temporary zeppelin fact', mode })).memories.map((x: any) => x.id)).not.toContain(m.id);
    }
    expect(expectOk(await bob.client.get('/memory/recall/zeppelin')).memories).toEqual([]);
    expectError(await bob.client.post('/memory/forget', { id: m.id }), 404, 'MEMORY_NOT_FOUND');
    expectError(await bob.client.patch(`/memory/${m.id}`, { content: 'back' }), 404, 'MEMORY_NOT_FOUND');
  });

  it('expired memories vanish from every read at expires_at, before any purge', async () => {
    // the sweeper runs at startup and then hourly here, so only the reads themselves can hide the memory
    const s = await servers.start({ MEMORY_EXPIRY_SWEEP_MS: '3600000' });
    const admin = await bootstrap(s.url);
    const ann = await join(admin.client, 'ann');
    const ns = `agent:${ann.id}`;
    const note = { namespace: ns, content: 'short lived walrus migration note', entity: 'walrus', tags: ['tusk'], allow_duplicate: true };
    const gone = await store(ann, { ...note, expires_at: new Date(Date.now() + 1500).toISOString() });
    // its twin never expires: every read below finds the twin, so the same read would have found the expired one
    const twin = await store(ann, note);
    const hub = await store(ann, { namespace: ns, content: 'arctic hub of notes', entity: 'hub' });
    const toGone = expectOk(await ann.client.post('/memory/relate', { from_id: hub.id, to_id: gone.id, relation: 'mentions' }), 201);
    const toTwin = expectOk(await ann.client.post('/memory/relate', { from_id: hub.id, to_id: twin.id, relation: 'mentions' }), 201);
    expect((await s.store.get<any>(`memory:${gone.id}`))!.value.expires_at).toBe(gone.expires_at);

    await waitFor('expiry', () => ann.client.get(`/memory/${gone.id}`), (r) => r.status === 404, 10_000, 50);
    expectError(await ann.client.get(`/memory/${gone.id}`), 404, 'MEMORY_NOT_FOUND');
    expect(expectOk(await ann.client.get(`/memory/list?namespace=${ns}`)).memories.map((x: any) => x.id)).toEqual([hub.id, twin.id]);
    expect(expectOk(await ann.client.get(`/memory/list?namespace=${ns}&entity=walrus`)).memories.map((x: any) => x.id)).toEqual([twin.id]);
    expect(expectOk(await ann.client.get('/memory/recall/walrus')).memories.map((x: any) => x.id)).toEqual([twin.id]);
    for (const mode of ['semantic', 'keyword', 'hybrid']) {
      const ids = expectOk(await ann.client.post('/memory/query', { namespace: ns, query: 'short lived walrus migration note', mode })).memories.map((x: any) => x.id);
      expect(ids, mode).toContain(twin.id);
      expect(ids, mode).not.toContain(gone.id);
    }
    const graph = expectOk(await ann.client.get(`/memory/graph/${hub.id}`));
    expect(graph.nodes.map((n: any) => n.id).sort()).toEqual([hub.id, twin.id].sort());
    expect(graph.edges.map((e: any) => e.id)).toEqual([toTwin.id]);
    expect(expectOk(await ann.client.get(`/memory/relate/${hub.id}/edges`)).edges.map((e: any) => e.id)).toEqual([toTwin.id]);
    expectError(await ann.client.get(`/memory/graph/${gone.id}`), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await ann.client.get(`/memory/relate/${gone.id}/edges`), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expect(toGone.to_id).toBe(gone.id);
    for (const who of [ann.client, admin.client]) expect(expectOk(await who.get('/memory/stats'))).toMatchObject({ namespaces: [{ namespace: ns, count: 2 }], total: 2 });
    const job = expectOk(await admin.client.post('/memory/admin/export', { namespace: ns }), 202);
    const exported = (await waitFor('the export', () => admin.client.get(`/memory/admin/export/${job.id}`), (r) => r.status === 200 && r.body.data.state !== 'running', 15_000, 50)).body.data;
    expect(exported).toMatchObject({ state: 'completed', result: { exported: 2 } });
    expect(exported.result.ndjson.trim().split('\n').map((l: string) => JSON.parse(l).id).sort()).toEqual([hub.id, twin.id].sort());
    // all of that was the reads: the record is still there, not purged
    expect((await s.store.get<any>(`memory:${gone.id}`))!.value.deleted_at).toBeNull();

    // the purge is the sweeper's, and durable: a restart's first sweep soft-deletes it
    await s.close();
    const again = await startServer({ ...s.env, MEMORY_EXPIRY_SWEEP_MS: '3600000' });
    try {
      await waitFor('purge at startup', async () => (await again.store.get<any>(`memory:${gone.id}`))!.value.deleted_at, (d) => d !== null, 10_000, 50);
      expect((await again.store.get<any>(`memory:${twin.id}`))!.value.deleted_at).toBeNull();
      expect(expectOk(await new Client(again.url, ann.key).get('/memory/stats'))).toMatchObject({ namespaces: [{ namespace: ns, count: 2 }], total: 2 });
    } finally {
      await again.close();
    }
  });

  it('the sweeper purges expired memories while running: the record is soft-deleted and the count drops', async () => {
    const m = await store(bob, { namespace: `agent:${bob.id}`, content: 'short lived walrus note', entity: 'walrus', expires_at: new Date(Date.now() + 1500).toISOString() });
    const bobNs = async () => expectOk(await bob.client.get('/memory/stats')).namespaces.find((n: any) => n.namespace === `agent:${bob.id}`);
    expect(await bobNs()).toMatchObject({ count: 1 });
    // the default sweep runs every second
    await waitFor('purge', async () => (await svc.store.get<any>(`memory:${m.id}`))!.value.deleted_at, (d) => d !== null, 10_000, 100);
    expect(await bobNs()).toBeUndefined();
    expectError(await bob.client.get(`/memory/${m.id}`), 404, 'MEMORY_NOT_FOUND');
  });

  it('holds the namespace quota (429 MEMORY_QUOTA_EXCEEDED) and frees a place on forget', async () => {
    const small = await servers.start({ MEMORY_NAMESPACE_QUOTA: '3' });
    const admin = await bootstrap(small.url);
    const carol = await join(admin.client, 'carol');
    const ns = `agent:${carol.id}`;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await store(carol, { namespace: ns, content: `quota item number ${i} about ${['apples', 'rockets', 'violins'][i]}` }));
    expectError(await carol.client.post('/memory/store', { namespace: ns, content: 'one too many' }), 429, 'MEMORY_QUOTA_EXCEEDED');
    expectOk(await carol.client.post('/memory/forget', { id: made[0].id }));
    await store(carol, { namespace: ns, content: 'fits again' });
    expectError(await carol.client.post('/memory/store', { namespace: ns, content: 'over again' }), 429, 'MEMORY_QUOTA_EXCEEDED');
    // the quota is per namespace
    await store(carol, { namespace: 'org', content: 'another namespace has room' });
  });
});
