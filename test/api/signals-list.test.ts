/**
 * GET /signals/list over real HTTP, on both backends: every filter (type incl. comma lists, from_identity,
 * to_role, to_ring, task_status, delivery_state, tag, since), combinations, bad values, and cursor paging
 * with and without filters.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Res } from '../helpers/client.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';


describe.each(BACKENDS)('GET /signals/list on %s', (backend) => {
  const servers = serversOn(backend);

  describe('filters', () => {
    let root: Member;
    let a: Member;
    let b: Member;
    let l1: any, l2: any, l3: any, l4: any, l5: any;
    const ids = async (query: string) => expectOk(await a.client.get(`/signals/list?limit=100&${query}`)).signals.map((s: any) => s.id);

    beforeAll(async () => {
      const svc = await servers.start();
      root = await bootstrap(svc.url);
      a = await join(root.client, 'list-a');
      b = await join(root.client, 'list-b');
      const ops = (await root.client.post('/roles', { name: 'ops' })).body.data;
      expect((await root.client.post('/fills', { identity_id: a.id, role_id: ops.id })).status).toBe(201);
      expect((await root.client.post('/rings', { name: 'core', members: [b.id] })).status).toBe(201);

      l1 = await emitOk(root, { signal_type: 'pulse', content: 'l1', to_role: 'ops', tags: ['x'] }); // stays pending
      l2 = await emitOk(a, { signal_type: 'task', content: 'l2', to_ring: 'core', tags: ['y'] }); // claimed by b: leased, open
      // the clock moves past l2's created_at so `since` can split the set
      await waitFor('the clock to pass l2', async () => Date.now(), (t) => t > Date.parse(l2.created_at), 1000, 1);
      l3 = await emitOk(b, { signal_type: 'alert', content: 'l3', to_identity: a.id, tags: ['x', 'y'] }); // read by a: delivered
      l4 = await emitOk(a, { signal_type: 'task', content: 'l4', to_role: 'ops' }); // claimed and acked by a: acked, completed
      l5 = await emitOk(root, { signal_type: 'query', content: 'l5', tags: ['z'] }); // broadcast, acked by b

      expect(expectOk(await b.client.post('/claim', { signal_id: l2.id })).delivery_state).toBe('leased');
      expect(expectOk(await a.client.get(`/inbox/identity/${a.id}?type=alert`)).signals[0]).toMatchObject({ id: l3.id, delivery_state: 'delivered' });
      expect(expectOk(await a.client.post('/claim', { signal_id: l4.id })).delivery_state).toBe('leased');
      expect(expectOk(await a.client.post('/ack', { signal_id: l4.id }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
      expect(expectOk(await b.client.post('/ack', { signal_id: l5.id })).delivery_state).toBe('acked');
    });

    it('no filter: all, newest first', async () => {
      expect(await ids('')).toEqual([l5.id, l4.id, l3.id, l2.id, l1.id]);
    });

    it('type, including comma lists', async () => {
      expect(await ids('type=task')).toEqual([l4.id, l2.id]);
      expect(await ids('type=task,alert')).toEqual([l4.id, l3.id, l2.id]);
      expect(await ids(`type=${encodeURIComponent('pulse, query')}`)).toEqual([l5.id, l1.id]);
      expect(await ids('type=artifact')).toEqual([]);
    });

    it('from_identity', async () => {
      expect(await ids(`from_identity=${a.id}`)).toEqual([l4.id, l2.id]);
      expect(await ids(`from_identity=${b.id}`)).toEqual([l3.id]);
      expect(await ids(`from_identity=${root.id}`)).toEqual([l5.id, l1.id]);
    });

    it('to_role and to_ring', async () => {
      expect(await ids('to_role=ops')).toEqual([l4.id, l1.id]);
      expect(await ids('to_ring=core')).toEqual([l2.id]);
      expect(await ids('to_role=nobody')).toEqual([]);
      expect(await ids('to_ring=nowhere')).toEqual([]);
    });

    it('task_status', async () => {
      expect(await ids('task_status=open')).toEqual([l2.id]);
      expect(await ids('task_status=completed')).toEqual([l4.id]);
    });

    it('delivery_state', async () => {
      expect(await ids('delivery_state=pending')).toEqual([l1.id]);
      expect(await ids('delivery_state=leased')).toEqual([l2.id]);
      expect(await ids('delivery_state=delivered')).toEqual([l3.id]);
      expect(await ids('delivery_state=acked')).toEqual([l5.id, l4.id]);
      expect(await ids('delivery_state=dead_letter')).toEqual([]);
      const shown = expectOk(await a.client.get('/signals/list?delivery_state=leased')).signals[0];
      expect(shown).toMatchObject({ id: l2.id, delivery_state: 'leased', claimed_by: b.id, task_status: 'open' });
    });

    it('tag', async () => {
      expect(await ids('tag=x')).toEqual([l3.id, l1.id]);
      expect(await ids('tag=y')).toEqual([l3.id, l2.id]);
      expect(await ids('tag=z')).toEqual([l5.id]);
      expect(await ids('tag=none')).toEqual([]);
    });

    it('since (inclusive) splits by created_at', async () => {
      expect(await ids(`since=${encodeURIComponent(l3.created_at)}`)).toEqual([l5.id, l4.id, l3.id]);
      expect(await ids(`since=${encodeURIComponent(l1.created_at)}`)).toEqual([l5.id, l4.id, l3.id, l2.id, l1.id]);
      expect(await ids(`since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).toEqual([]);
      expect(await ids('since=2000-01-01T00:00:00Z')).toHaveLength(5);
    });

    it('filters combine', async () => {
      expect(await ids(`type=task&from_identity=${a.id}&task_status=completed`)).toEqual([l4.id]);
      expect(await ids('type=task&delivery_state=leased&to_ring=core')).toEqual([l2.id]);
      expect(await ids('tag=x&to_role=ops')).toEqual([l1.id]);
      expect(await ids(`tag=y&since=${encodeURIComponent(l3.created_at)}`)).toEqual([l3.id]);
      expect(await ids('delivery_state=acked&type=query')).toEqual([l5.id]);
      expect(await ids('type=task,alert&tag=y')).toEqual([l3.id, l2.id]);
    });

    it('refuses bad filter values and limits', async () => {
      expectError(await a.client.get('/signals/list?delivery_state=lost'), 400, 'VALIDATION_INVALID_TYPE', 'delivery_state');
      expectError(await a.client.get('/signals/list?since=yesterday'), 400, 'VALIDATION_INVALID_TYPE', 'since');
      for (const bad of ['0', '101', 'x', '2.5']) expectError(await a.client.get(`/signals/list?limit=${bad}`), 400, 'VALIDATION_INVALID_TYPE', 'limit');
      expectError(await a.client.get('/signals/list?after=%%%'), 400, 'VALIDATION_INVALID_TYPE', 'after');
      expectError(await a.client.as(undefined).get('/signals/list'), 401, 'AUTH_KEY_MISSING');
    });
  });

  describe('cursor paging', () => {
    let root: Member;
    const all: any[] = [];

    beforeAll(async () => {
      const svc = await servers.start();
      root = await bootstrap(svc.url);
      for (let i = 0; i < 37; i++) {
        all.push(await emitOk(root, { signal_type: i % 4 === 0 ? 'task' : 'pulse', content: `p${i}`, tags: i % 5 === 0 ? ['fifth'] : [] }));
      }
    });

    async function walk(query: string, limit: number): Promise<{ ids: string[]; pages: number }> {
      const out: string[] = [];
      let after: string | null = null;
      let pages = 0;
      for (;;) {
        const r: Res = await root.client.get(`/signals/list?limit=${limit}${query}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
        const data = expectOk(r);
        pages++;
        expect(r.body.meta.cursor).toBe(data.cursor);
        expect(data.has_more).toBe(data.cursor !== null);
        expect(data.signals.length).toBeLessThanOrEqual(limit);
        if (data.has_more) expect(data.signals).toHaveLength(limit);
        out.push(...data.signals.map((s: any) => s.id));
        if (data.cursor === null) return { ids: out, pages };
        after = data.cursor;
        expect(pages, 'paging did not end').toBeLessThan(200);
      }
    }

    it('walks every signal once, newest first, at several page sizes', async () => {
      const want = [...all].reverse().map((s) => s.id);
      for (const limit of [1, 5, 10, 36, 37, 100]) {
        const w = await walk('', limit);
        expect(w.ids, `limit ${limit}`).toEqual(want);
        expect(w.pages, `limit ${limit}`).toBe(Math.max(1, Math.ceil(37 / limit)));
      }
    });

    it('pages through a filtered list', async () => {
      const tasks = [...all].reverse().filter((s) => s.signal_type === 'task').map((s) => s.id);
      expect(tasks).toHaveLength(10);
      expect((await walk('&type=task', 3)).ids).toEqual(tasks);
      const fifth = [...all].reverse().filter((s) => s.tags.includes('fifth')).map((s) => s.id);
      expect((await walk('&tag=fifth', 2)).ids).toEqual(fifth);
      const both = [...all].reverse().filter((s) => s.signal_type === 'task' && s.tags.includes('fifth')).map((s) => s.id);
      expect((await walk('&type=task&tag=fifth', 1)).ids).toEqual(both);
      const since = all[20].created_at;
      const recent = [...all].reverse().filter((s) => Date.parse(s.created_at) >= Date.parse(since)).map((s) => s.id);
      expect((await walk(`&since=${encodeURIComponent(since)}`, 4)).ids).toEqual(recent);
    });

    it('a cursor stays valid while new signals arrive: the rest of the walk neither repeats nor skips', async () => {
      const first = expectOk(await root.client.get('/signals/list?limit=10'));
      const before = first.signals.map((s: any) => s.id);
      const newer = await emitOk(root, { signal_type: 'pulse', content: 'late arrival' });
      const rest: string[] = [];
      let after: string | null = first.cursor;
      while (after) {
        const d: any = expectOk(await root.client.get(`/signals/list?limit=10&after=${encodeURIComponent(after)}`));
        rest.push(...d.signals.map((s: any) => s.id));
        after = d.cursor;
      }
      expect([...before, ...rest]).toEqual([...all].reverse().map((s) => s.id));
      expect(rest).not.toContain(newer.id);
      expect(expectOk(await root.client.get('/signals/list?limit=1')).signals[0].id).toBe(newer.id);
    });
  });
});
