/**
 * Workstream links of kind `memory` on both backends: a memory is linkable and expanded in the context only
 * for a caller who may read it (namespace ACL, memory_scopes); a missing, unreadable or forgotten memory is
 * refused on link and counted as hidden in the context.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(BACKENDS)('workstream memory links on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let alice: Member;
  let bob: Member;
  let scoped: Client; // alice's key narrowed to the org namespace

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    [alice, bob] = await Promise.all([join(root.client, 'wsm-alice'), join(root.client, 'wsm-bob')]);
    scoped = new Client(svc.url, expectOk(await root.client.post('/admin/api-keys', { owner: alice.id, permissions: { memory_scopes: ['org'] } }), 201).api_key);
  });

  const store = async (m: Member, namespace: string, content: string) => expectOk(await m.client.post('/memory/store', { namespace, content }), 201);

  it('links a readable memory and expands it in the context of those who may read it', async () => {
    const w = expectOk(await alice.client.post('/workstreams', { name: 'memory links' }), 201);
    const own = await store(alice, `agent:${alice.id}`, 'alice notes on the migration plan');
    const shared = await store(bob, 'org', 'org notes on the migration plan');
    const linked = expectOk(await alice.client.post(`/workstreams/${w.id}/links`, { kind: 'memory', id: own.id }), 201);
    expect(linked.links).toEqual([expect.objectContaining({ kind: 'memory', id: own.id, linked_by: alice.id })]);
    expectOk(await bob.client.post(`/workstreams/${w.id}/links`, { kind: 'memory', id: shared.id }), 201);

    const mine = expectOk(await alice.client.get(`/workstreams/${w.id}/context`));
    expect(mine.resources.map((r: any) => [r.kind, r.id, r.memory.id, r.memory.content])).toEqual([
      ['memory', own.id, own.id, own.content],
      ['memory', shared.id, shared.id, shared.content],
    ]);
    expect(mine.resources[0].memory).not.toHaveProperty('embedding');
    expect(mine.hidden).toBe(0);

    const bobs = expectOk(await bob.client.get(`/workstreams/${w.id}/context`));
    expect(bobs.resources.map((r: any) => r.id)).toEqual([shared.id]);
    expect(bobs.hidden).toBe(1);
    const narrowed = expectOk(await scoped.get(`/workstreams/${w.id}/context`));
    expect(narrowed.resources.map((r: any) => r.id)).toEqual([shared.id]);
    expect(narrowed.hidden).toBe(1);

    expectOk(await alice.client.post('/memory/forget', { id: own.id }));
    const after = expectOk(await alice.client.get(`/workstreams/${w.id}/context`));
    expect(after.resources.map((r: any) => r.id)).toEqual([shared.id]);
    expect(after.hidden).toBe(1);
  });

  it('refuses to link a memory that is missing, unreadable, out of the key scope or forgotten', async () => {
    const w = expectOk(await bob.client.post('/workstreams', { name: 'refused memory links' }), 201);
    const own = await store(alice, `agent:${alice.id}`, 'alice private thought');
    const gone = await store(bob, 'org', 'a memory soon forgotten');
    expectOk(await bob.client.post('/memory/forget', { id: gone.id }));
    for (const [c, id] of [[bob.client, UNKNOWN], [bob.client, own.id], [scoped, own.id], [bob.client, gone.id]] as const) {
      const r = await c.post(`/workstreams/${w.id}/links`, { kind: 'memory', id });
      expectError(r, 404, 'WORKSTREAM_LINK_TARGET_NOT_FOUND');
      expect(r.body.error.details).toMatchObject({ kind: 'memory', id });
    }
    expect(expectOk(await bob.client.get(`/workstreams/${w.id}`)).links).toEqual([]);
    expectOk(await alice.client.post(`/workstreams/${w.id}/links`, { kind: 'memory', id: own.id }), 201);
  });
});
