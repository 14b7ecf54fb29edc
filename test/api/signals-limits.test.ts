/**
 * No silent truncation, over real HTTP on both backends. Unpaged collections are read to their end in
 * pages: 10,001 roles (beyond the 10,000 an earlier fixed read stopped at; written in bulk through the
 * store port) all come back; with the page
 * size lowered to 2, rings, fills, the roles and rings an identity's inbox merges, a role's fillers, a
 * thread, API keys and the agent count each span many pages and lose nothing. Filtered lists examine at
 * most `scanCap` signals per request and then answer a short page with has_more and a cursor that goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { newId } from '../../src/ids.js';
import { orgIndexes, orgKeys, type Role } from '../../src/org/model.js';
import type { Op } from '../../src/store/port.js';
import { scanLimits } from '../../src/store/scan.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectOk } from './support.js';

/** Runs `fn` over 0..n-1 with at most `width` calls in flight. */
async function pool(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

describe.each(BACKENDS)('lists without silent truncation on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
  });

  it('GET /roles answers all of 10,001 roles', async () => {
    // 10,000 written straight through the store port in a few large commits (the records and index entries
    // POST /roles writes), the 10,001st through the route: the read path is what is under test
    const N = 10_001;
    const t = new Date().toISOString();
    for (let from = 0; from < N - 1; from += 1000) {
      const ops: Op[] = [];
      for (let i = from; i < Math.min(from + 1000, N - 1); i++) {
        const role: Role = { id: newId(), name: `role-${i}`, purpose: null, domains: [], duties: [], created_at: t, updated_at: t };
        ops.push({ op: 'put', key: orgKeys.roleName(role.name), value: { id: role.id }, expect: 0 }, { op: 'put', key: orgKeys.role(role.id), value: role, expect: 0 }, { op: 'index', index: orgIndexes.roles, member: role.id });
      }
      expect((await svc.store.commit(ops)).ok).toBe(true);
    }
    const last = expectOk(await root.client.post('/roles', { name: `role-${N - 1}` }), 201);
    const roles = expectOk(await root.client.get('/roles'));
    expect(roles).toHaveLength(N);
    expect(new Set(roles.map((r: any) => r.name)).size).toBe(N);
    expect(roles.map((r: any) => r.id)).toContain(last.id);
  }, 60_000);

  describe('with a read page size of 2', () => {
    let a: Member;
    let fillers: Member[];
    beforeAll(async () => {
      scanLimits.pageSize = 2;
      a = await join(root.client, 'many-places');
      fillers = [];
      for (let i = 0; i < 5; i++) fillers.push(await join(root.client, `filler-${i}`));
    });
    afterAll(() => {
      scanLimits.pageSize = 1000;
    });

    it('an identity filling 5 roles and in 5 rings sees the signals of every one; /rings and /fills list them all', async () => {
      const sent: string[] = [];
      for (let i = 0; i < 5; i++) {
        const role = expectOk(await root.client.post('/roles', { name: `place-role-${i}` }), 201);
        expectOk(await root.client.post('/fills', { identity_id: a.id, role_id: role.id }), 201);
        expectOk(await root.client.post('/rings', { name: `place-ring-${i}`, members: [a.id] }), 201);
        sent.push((await emitOk(root, { signal_type: 'pulse', content: `to role ${i}`, to_role: `place-role-${i}` })).id);
        sent.push((await emitOk(root, { signal_type: 'pulse', content: `to ring ${i}`, to_ring: `place-ring-${i}` })).id);
      }
      const inbox = expectOk(await a.client.get(`/inbox/identity/${a.id}?limit=100`)).signals.map((s: any) => s.id);
      expect(inbox.filter((id: string) => sent.includes(id)).sort()).toEqual([...sent].sort());
      expect(expectOk(await root.client.get('/rings')).filter((r: any) => r.name.startsWith('place-ring-'))).toHaveLength(5);
      expect(expectOk(await root.client.get(`/fills?identity_id=${a.id}`))).toHaveLength(5);
    });

    it('a role of 5 fillers: the last filler reading the role inbox marks it delivered; deleting the role removes all 5 fills', async () => {
      const role = expectOk(await root.client.post('/roles', { name: 'crowd' }), 201);
      for (const f of fillers) expectOk(await root.client.post('/fills', { identity_id: f.id, role_id: role.id }), 201);
      const s = await emitOk(root, { signal_type: 'pulse', content: 'to the crowd', to_role: 'crowd' });
      const last = fillers[fillers.length - 1];
      expect(expectOk(await last.client.get('/inbox/crowd')).signals.find((x: any) => x.id === s.id)?.delivery_state).toBe('delivered');
      expectOk(await root.client.del(`/roles/${role.id}`));
      expect(expectOk(await root.client.get(`/fills?role_id=${role.id}`))).toEqual([]);
    });

    it('a thread of 6 and 5 API keys are listed whole', async () => {
      const top = await emitOk(root, { signal_type: 'proposal', content: 'long thread' });
      for (let i = 0; i < 5; i++) await emitOk(root, { signal_type: 'pulse', content: `reply ${i}`, parent_id: top.id });
      expect(expectOk(await root.client.get(`/thread/${top.id}`)).signals.map((s: any) => s.sequence)).toEqual([0, 1, 2, 3, 4, 5]);

      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.push(expectOk(await root.client.post('/admin/api-keys', { owner: a.id }), 201).id);
      const listed = expectOk(await root.client.get('/admin/api-keys')).map((k: any) => k.id);
      expect(listed.filter((id: string) => made.includes(id)).sort()).toEqual([...made].sort());
    });

    it('the agent count covers every agent', async () => {
      expect(expectOk(await root.client.get('/stats/overview')).agent_liveness.total).toBe(1 + fillers.length);
    });
  });

  describe('with a scan cap of 50', () => {
    beforeAll(() => {
      scanLimits.scanCap = 50;
    });
    afterAll(() => {
      scanLimits.scanCap = 5000;
    });

    it('a filter matching only an old signal answers a short page with has_more, and the cursor goes on to it', async () => {
      const rare = await emitOk(root, { signal_type: 'pulse', content: 'rare', tags: ['rare-tag'] });
      await pool(120, 16, async (i) => {
        await emitOk(root, { signal_type: 'pulse', content: `common ${i}` });
      });
      const first = expectOk(await root.client.get('/signals/list?tag=rare-tag&limit=5'));
      expect(first).toMatchObject({ signals: [], has_more: true });
      expect(typeof first.cursor).toBe('string');
      const found: string[] = [];
      let cursor: string | null = first.cursor;
      while (cursor) {
        const page = expectOk(await root.client.get(`/signals/list?tag=rare-tag&limit=5&after=${encodeURIComponent(cursor)}`));
        found.push(...page.signals.map((s: any) => s.id));
        cursor = page.cursor;
      }
      expect(found).toEqual([rare.id]);
    });
  });
});
