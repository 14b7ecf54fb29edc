/**
 * The memory graph over real HTTP on both backends: relate (and its refusals), edges around a memory with
 * direction and relation filters, update and delete of edges, and breadth-first expansion with the ACL
 * applied to every node and `at` keeping only the edges valid at that time.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const ids = (xs: any[]) => xs.map((x) => x.id).sort();

describe.each(BACKENDS)('memory graph on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
  let alice: Member;
  let bob: Member;
  const m: Record<string, string> = {};
  const e: Record<string, any> = {};

  beforeAll(async () => {
    const svc = await servers.start();
    const root = await bootstrap(svc.url);
    [alice, bob] = await Promise.all([join(root.client, 'alice'), join(root.client, 'bob')]);
    expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id] }), 201);
    const put = async (name: string, namespace: string) => (m[name] = expectOk(await alice.client.post('/memory/store', { namespace, content: `node ${name} of the graph`, allow_duplicate: true }), 201).id);
    await put('A', 'org');
    await put('B', 'org');
    await put('C', 'ring:core');
    await put('D', 'org');
    await put('E', `agent:${alice.id}`);
    const rel = async (name: string, from: string, to: string, relation: string, extra: Record<string, unknown> = {}) =>
      (e[name] = expectOk(await alice.client.post('/memory/relate', { from_id: m[from], to_id: m[to], relation, ...extra }), 201));
    await rel('AB', 'A', 'B', 'knows', { weight: 0.5, metadata: { since: 2020 } });
    await rel('BC', 'B', 'C', 'works_with');
    await rel('CD', 'C', 'D', 'knows');
    await rel('AE', 'A', 'E', 'owns');
    await rel('BD', 'B', 'D', 'replaced_by', { valid_from: '2020-01-01T00:00:00.000Z', valid_to: '2021-01-01T00:00:00.000Z' });
  });

  it('relate answers the edge and refuses self references, unknown or unreadable memories and bad bodies', async () => {
    expect(e.AB).toMatchObject({ from_id: m.A, to_id: m.B, relation: 'knows', weight: 0.5, metadata: { since: 2020 }, valid_from: null, valid_to: null, created_by: alice.id });
    expect(e.BC.weight).toBe(1);
    expectError(await alice.client.post('/memory/relate', { from_id: m.A, to_id: m.A, relation: 'self' }), 400, 'GRAPH_SELF_REFERENCE');
    expectError(await alice.client.post('/memory/relate', { from_id: m.A, to_id: UNKNOWN, relation: 'x' }), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await alice.client.post('/memory/relate', { from_id: UNKNOWN, to_id: m.A, relation: 'x' }), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await bob.client.post('/memory/relate', { from_id: m.A, to_id: m.E, relation: 'x' }), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await bob.client.post('/memory/relate', { from_id: m.C, to_id: m.A, relation: 'x' }), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await alice.client.post('/memory/relate', { from_id: m.A, to_id: m.B }), 400, 'MEMORY_VALIDATION_FAILED', 'relation');
    expectError(await alice.client.post('/memory/relate', { from_id: m.A, to_id: m.B, relation: 'x', valid_from: '2022-01-01T00:00:00Z', valid_to: '2021-01-01T00:00:00Z' }), 400, 'MEMORY_VALIDATION_FAILED', 'valid_to');
  });

  it('edges around a memory, by direction and relation, without edges to memories the caller cannot read', async () => {
    const edges = async (who: Member, id: string, q = '') => expectOk(await who.client.get(`/memory/relate/${id}/edges${q}`)).edges;
    expect(ids(await edges(alice, m.B))).toEqual(ids([e.AB, e.BC, e.BD]));
    expect(ids(await edges(alice, m.B, '?direction=out'))).toEqual(ids([e.BC, e.BD]));
    expect(ids(await edges(alice, m.B, '?direction=in'))).toEqual(ids([e.AB]));
    expect(ids(await edges(alice, m.D, '?relation=knows'))).toEqual(ids([e.CD]));
    expect(ids(await edges(alice, m.A))).toEqual(ids([e.AB, e.AE]));
    expect(ids(await edges(bob, m.A))).toEqual(ids([e.AB]));
    expect(ids(await edges(bob, m.B))).toEqual(ids([e.AB, e.BD]));
    expectError(await bob.client.get(`/memory/relate/${m.C}/edges`), 404, 'GRAPH_MEMORY_NOT_FOUND');
    expectError(await alice.client.get(`/memory/relate/${m.A}/edges?direction=sideways`), 400, 'VALIDATION_INVALID_TYPE', 'direction');
  });

  it('expands breadth-first to depth 1..3 with the ACL on every node', async () => {
    const graph = async (who: Member, q: string) => expectOk(await who.client.get(`/memory/graph/${m.A}${q}`));
    const g1 = await graph(alice, '');
    expect(g1.root).toBe(m.A);
    expect(ids(g1.nodes)).toEqual(ids([{ id: m.A }, { id: m.B }, { id: m.E }]));
    expect(g1.nodes.find((n: any) => n.id === m.B)).toMatchObject({ depth: 1, content: 'node B of the graph' });
    expect(ids(g1.edges)).toEqual(ids([e.AB, e.AE]));
    const g2 = await graph(alice, '?depth=2');
    expect(ids(g2.nodes)).toEqual(ids(['A', 'B', 'C', 'D', 'E'].map((n) => ({ id: m[n] }))));
    expect(ids(g2.edges)).toEqual(ids([e.AB, e.AE, e.BC, e.BD]));
    // bob cannot read C (ring) or E (alice's own): neither they nor their edges appear
    const b3 = await graph(bob, '?depth=3');
    expect(ids(b3.nodes)).toEqual(ids([{ id: m.A }, { id: m.B }, { id: m.D }]));
    expect(ids(b3.edges)).toEqual(ids([e.AB, e.BD]));
    expect(ids((await graph(alice, '?depth=3&relation=knows')).nodes)).toEqual(ids([{ id: m.A }, { id: m.B }]));
    expectError(await alice.client.get(`/memory/graph/${m.A}?depth=4`), 400, 'VALIDATION_INVALID_TYPE', 'depth');
    expectError(await bob.client.get(`/memory/graph/${m.C}`), 404, 'GRAPH_MEMORY_NOT_FOUND');
  });

  it('at keeps only the edges valid at that time', async () => {
    const at = async (who: Member, t: string, depth = 3) => expectOk(await who.client.get(`/memory/graph/${m.A}?depth=${depth}&at=${encodeURIComponent(t)}`));
    const now = await at(bob, new Date().toISOString());
    expect(ids(now.nodes)).toEqual(ids([{ id: m.A }, { id: m.B }]));
    const then = await at(bob, '2020-06-01T00:00:00.000Z');
    expect(ids(then.nodes)).toEqual(ids([{ id: m.A }, { id: m.B }, { id: m.D }]));
    expect(ids(then.edges)).toEqual(ids([e.AB, e.BD]));
    // alice reaches D through C today, at depth 3
    const today = await at(alice, new Date().toISOString());
    expect(today.nodes.find((n: any) => n.id === m.D).depth).toBe(3);
    expect(ids(today.edges)).not.toContain(e.BD.id);
    expectError(await alice.client.get(`/memory/graph/${m.A}?at=yesterday`), 400, 'VALIDATION_INVALID_TYPE', 'at');
  });

  it('updates and deletes edges; unknown or unreadable edges are GRAPH_EDGE_NOT_FOUND', async () => {
    const x = expectOk(await alice.client.post('/memory/relate', { from_id: m.D, to_id: m.E, relation: 'mentions' }), 201);
    const u = expectOk(await alice.client.put(`/memory/relate/${x.id}`, { relation: 'cites', weight: 2, valid_to: '2099-01-01T00:00:00.000Z' }));
    expect(u).toMatchObject({ id: x.id, relation: 'cites', weight: 2, valid_to: '2099-01-01T00:00:00.000Z', from_id: m.D, to_id: m.E, created_at: x.created_at });
    expect(expectOk(await alice.client.get(`/memory/relate/${m.D}/edges?relation=cites`)).edges).toEqual([u]);
    expectError(await alice.client.put(`/memory/relate/${x.id}`, { valid_from: '2100-01-01T00:00:00.000Z' }), 400, 'MEMORY_VALIDATION_FAILED', 'valid_to');
    const y = expectOk(await alice.client.post('/memory/relate', { from_id: m.C, to_id: m.D, relation: 'ring-only' }), 201);
    expectError(await bob.client.put(`/memory/relate/${y.id}`, { weight: 3 }), 404, 'GRAPH_EDGE_NOT_FOUND');
    expectError(await bob.client.del(`/memory/relate/${y.id}`), 404, 'GRAPH_EDGE_NOT_FOUND');
    expectError(await alice.client.put(`/memory/relate/${UNKNOWN}`, { weight: 1 }), 404, 'GRAPH_EDGE_NOT_FOUND');
    expect(expectOk(await alice.client.del(`/memory/relate/${x.id}`)).id).toBe(x.id);
    expectError(await alice.client.del(`/memory/relate/${x.id}`), 404, 'GRAPH_EDGE_NOT_FOUND');
    expect(expectOk(await alice.client.get(`/memory/relate/${m.D}/edges?relation=cites`)).edges).toEqual([]);
  });

  it('a forgotten memory drops out of edges and the graph', async () => {
    const f = expectOk(await alice.client.post('/memory/store', { namespace: 'org', content: 'soon forgotten leaf', allow_duplicate: true }), 201);
    expectOk(await alice.client.post('/memory/relate', { from_id: m.D, to_id: f.id, relation: 'leaf' }), 201);
    expect(ids(expectOk(await alice.client.get(`/memory/graph/${m.D}`)).nodes)).toContain(f.id);
    expectOk(await alice.client.post('/memory/forget', { id: f.id }));
    expect(ids(expectOk(await alice.client.get(`/memory/graph/${m.D}`)).nodes)).not.toContain(f.id);
    expect(expectOk(await alice.client.get(`/memory/relate/${m.D}/edges?relation=leaf`)).edges).toEqual([]);
  });
});
