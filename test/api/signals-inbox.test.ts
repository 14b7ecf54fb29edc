/**
 * Inboxes over real HTTP, on both backends: ordering, every filter, summary view, receipt filters, the
 * `@name` form, who may read whose inbox, limit bounds, cursor paging while signals arrive, and the
 * delivery moves a read and an ack make. No broadcasts are emitted here, so a fresh identity's inbox holds
 * exactly what a test sent it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import type { Res } from '../helpers/client.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, findSignal } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(CORE_BACKENDS)('inbox on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let other: Member;
  let n = 0;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    other = await join(root.client, 'other');
  });

  const ids = (r: Res): string[] => expectOk(r).signals.map((s: any) => s.id);

  /** A fresh identity with its own role and ring. */
  async function fresh(prefix: string) {
    const m = await join(root.client, `${prefix}-${++n}`);
    const role = (await root.client.post('/roles', { name: `role-${m.name}` })).body.data;
    expect((await root.client.post('/fills', { identity_id: m.id, role_id: role.id })).status).toBe(201);
    const ring = (await root.client.post('/rings', { name: `ring-${m.name}`, members: [m.id] })).body.data;
    return { m, role: role.name as string, ring: ring.name as string };
  }

  /** Four signals reaching F by every route: direct, ring, role. */
  async function seed(prefix: string) {
    const f = await fresh(prefix);
    const s1 = await emitOk(root, { signal_type: 'task', content: 'one', urgency: 0.9, tags: ['project:apollo', 'red'], payload: { task_type: 'build' }, to_identity: f.m.id });
    const s2 = await emitOk(root, { signal_type: 'pulse', content: 'two', urgency: 0.3, tags: ['blue'], to_ring: f.ring });
    const s3 = await emitOk(other, { signal_type: 'alert', content: 'three', urgency: 0.6, tags: ['project:zeus', 'red'], to_role: f.role });
    const s4 = await emitOk(other, { signal_type: 'query', content: 'four', urgency: 0.1, to_identity: f.m.id });
    return { ...f, s1, s2, s3, s4 };
  }

  it('orders by urgency (most urgent first), then newest first', async () => {
    const { m } = await fresh('order');
    const urgencies = [0.2, 0.9, 0.5, 0.9, 0.2, 0.5, 1, 0];
    const sent = [];
    for (const [i, u] of urgencies.entries()) sent.push(await emitOk(root, { signal_type: 'pulse', content: `o${i}`, urgency: u, to_identity: m.id }));
    const want = sent
      .map((s, i) => ({ id: s.id, u: urgencies[i], i }))
      .sort((a, b) => b.u - a.u || b.i - a.i)
      .map((x) => x.id);
    expect(ids(await m.client.get(`/inbox/identity/${m.id}`))).toEqual(want);
    expect(ids(await m.client.get(`/inbox/@${m.name}`))).toEqual(want);
    // the same order across pages
    const p1 = expectOk(await m.client.get(`/inbox/identity/${m.id}?limit=3`));
    const p2 = expectOk(await m.client.get(`/inbox/identity/${m.id}?limit=3&after=${p1.cursor}`));
    const p3 = expectOk(await m.client.get(`/inbox/identity/${m.id}?limit=3&after=${p2.cursor}`));
    expect([...p1.signals, ...p2.signals, ...p3.signals].map((s: any) => s.id)).toEqual(want);
    expect([p1.has_more, p2.has_more, p3.has_more]).toEqual([true, true, false]);
    expect(p3.cursor).toBeNull();
  });

  it('role inbox: ordered, readable by any member, reached by role name case-insensitively', async () => {
    const { role } = await fresh('roleinbox');
    const lo = await emitOk(root, { signal_type: 'pulse', content: 'lo', urgency: 0.1, to_role: role });
    const hi = await emitOk(root, { signal_type: 'pulse', content: 'hi', urgency: 0.8, to_role: role });
    const mid = await emitOk(root, { signal_type: 'pulse', content: 'mid', urgency: 0.5, to_role: role });
    expect(ids(await other.client.get(`/inbox/${role}`))).toEqual([hi.id, mid.id, lo.id]);
    expect(ids(await other.client.get(`/inbox/${encodeURIComponent(role.toUpperCase())}`))).toEqual([hi.id, mid.id, lo.id]);
    expect(ids(await other.client.get(`/inbox/${role}?min_urgency=0.5&limit=1`))).toEqual([hi.id]);
    expectError(await other.client.get('/inbox/no-such-role'), 404, 'SIGNAL_NOT_FOUND');
  });

  describe('filters', () => {
    let d: Awaited<ReturnType<typeof seed>>;
    /** read by the admin: reading someone else's inbox marks nothing delivered */
    const q = async (query: string) => ids(await root.client.get(`/inbox/identity/${d.m.id}?limit=100&${query}`));
    beforeAll(async () => {
      d = await seed('filters');
    });

    it('no filter: all four, urgency order', async () => {
      expect(await q('')).toEqual([d.s1.id, d.s3.id, d.s2.id, d.s4.id]);
    });

    it('type, including a comma list', async () => {
      expect(await q('type=task')).toEqual([d.s1.id]);
      expect(await q('type=task,alert')).toEqual([d.s1.id, d.s3.id]);
      expect(await q(`type=${encodeURIComponent('query, pulse')}`)).toEqual([d.s2.id, d.s4.id]);
      expect(await q('type=artifact')).toEqual([]);
    });

    it('ring, tag, project_tag, min_urgency, and combinations', async () => {
      expect(await q(`ring=${d.ring}`)).toEqual([d.s2.id]);
      expect(await q('ring=elsewhere')).toEqual([]);
      expect(await q('tag=red')).toEqual([d.s1.id, d.s3.id]);
      expect(await q('tag=blue')).toEqual([d.s2.id]);
      expect(await q(`tag=${encodeURIComponent('project:zeus')}`)).toEqual([d.s3.id]);
      expect(await q('project_tag=apollo')).toEqual([d.s1.id]);
      expect(await q('project_tag=zeus')).toEqual([d.s3.id]);
      expect(await q('project_tag=red')).toEqual([]);
      expect(await q('min_urgency=0.5')).toEqual([d.s1.id, d.s3.id]);
      expect(await q('min_urgency=0.6')).toEqual([d.s1.id, d.s3.id]);
      expect(await q('min_urgency=0.95')).toEqual([]);
      expect(await q('min_urgency=0')).toHaveLength(4);
      expect(await q('tag=red&type=alert')).toEqual([d.s3.id]);
      expect(await q('tag=red&min_urgency=0.7')).toEqual([d.s1.id]);
    });

    it('refuses malformed filter values', async () => {
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?min_urgency=2`), 400, 'VALIDATION_INVALID_TYPE', 'min_urgency');
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?view=tiny`), 400, 'VALIDATION_INVALID_TYPE', 'view');
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?receipt_state=gone`), 400, 'VALIDATION_INVALID_TYPE', 'receipt_state');
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?delivery_state=lost`), 400, 'VALIDATION_INVALID_TYPE', 'delivery_state');
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?include_resolved=maybe`), 400, 'VALIDATION_INVALID_TYPE', 'include_resolved');
      expectError(await root.client.get(`/inbox/identity/${d.m.id}?after=***`), 400, 'VALIDATION_INVALID_TYPE', 'after');
    });

    it('view=summary drops content and payload; view=full (default) keeps them', async () => {
      const sum = expectOk(await root.client.get(`/inbox/identity/${d.m.id}?view=summary&type=task`)).signals;
      expect(sum).toHaveLength(1);
      expect(sum[0]).not.toHaveProperty('content');
      expect(sum[0]).not.toHaveProperty('payload');
      expect(sum[0]).toMatchObject({ id: d.s1.id, signal_type: 'task', urgency: 0.9, tags: ['project:apollo', 'red'], receipt_state: 'unread', snoozed_until: null });
      for (const view of ['', '&view=full']) {
        const full = expectOk(await root.client.get(`/inbox/identity/${d.m.id}?type=task${view}`)).signals;
        expect(full[0]).toMatchObject({ id: d.s1.id, content: 'one', payload: { task_type: 'build' }, receipt_state: 'unread', snoozed_until: null });
      }
    });

    it('delivery_state', async () => {
      expect(await q('delivery_state=pending')).toEqual([d.s1.id, d.s3.id, d.s2.id, d.s4.id]);
      // F reads only the task: that one becomes delivered
      const read = expectOk(await d.m.client.get(`/inbox/identity/${d.m.id}?type=task`)).signals;
      expect(read.map((s: any) => [s.id, s.delivery_state])).toEqual([[d.s1.id, 'delivered']]);
      expect(expectOk(await d.m.client.post('/ack', { signal_id: d.s4.id })).delivery_state).toBe('acked');
      expect(await q('delivery_state=delivered')).toEqual([d.s1.id]);
      expect(await q('delivery_state=acked')).toEqual([d.s4.id]);
      expect(await q('delivery_state=pending')).toEqual([d.s3.id, d.s2.id]);
    });

    it('receipt_state, include_resolved and include_snoozed', async () => {
      expectOk(await d.m.client.post('/inbox/acknowledge', { signal_id: d.s1.id }));
      expectOk(await d.m.client.post('/inbox/resolve', { signal_id: d.s2.id }));
      const until = new Date(Date.now() + 3_600_000).toISOString();
      expectOk(await d.m.client.post('/inbox/snooze', { signal_id: d.s3.id, until }));

      const all = expectOk(await root.client.get(`/inbox/identity/${d.m.id}?include_resolved=true&include_snoozed=true`)).signals;
      expect(all.map((s: any) => [s.id, s.receipt_state, s.snoozed_until])).toEqual([
        [d.s1.id, 'acknowledged', null],
        [d.s3.id, 'snoozed', until],
        [d.s2.id, 'resolved', null],
        [d.s4.id, 'unread', null],
      ]);
      // by default resolved and snoozed items are hidden
      expect(await q('')).toEqual([d.s1.id, d.s4.id]);
      expect(await q('include_resolved=false&include_snoozed=false')).toEqual([d.s1.id, d.s4.id]);
      expect(await q('include_resolved=true')).toEqual([d.s1.id, d.s2.id, d.s4.id]);
      expect(await q('include_snoozed=true')).toEqual([d.s1.id, d.s3.id, d.s4.id]);
      // receipt_state picks exactly that state
      expect(await q('receipt_state=unread')).toEqual([d.s4.id]);
      expect(await q('receipt_state=acknowledged')).toEqual([d.s1.id]);
      expect(await q('receipt_state=resolved')).toEqual([d.s2.id]);
      expect(await q('receipt_state=snoozed')).toEqual([d.s3.id]);
      // receipts are the inbox owner's: another reader of the role inbox still sees the alert unread
      const roleView = expectOk(await other.client.get(`/inbox/${d.role}`)).signals;
      expect(roleView.map((s: any) => [s.id, s.receipt_state])).toEqual([[d.s3.id, 'unread']]);
      const ownRoleView = expectOk(await d.m.client.get(`/inbox/${d.role}?include_snoozed=true`)).signals;
      expect(ownRoleView.map((s: any) => [s.id, s.receipt_state])).toEqual([[d.s3.id, 'snoozed']]);
    });
  });

  describe('who may read', () => {
    it('an identity inbox is readable by that identity (by id or @name) and an admin; others get POLICY_DENIED', async () => {
      const { m, s1 } = await seed('owner');
      const byId = ids(await m.client.get(`/inbox/identity/${m.id}`));
      expect(byId).toHaveLength(4);
      expect(byId).toContain(s1.id);
      expect(ids(await m.client.get(`/inbox/@${m.name}`))).toEqual(byId);
      expect(ids(await m.client.get(`/inbox/@${m.name.toUpperCase()}`))).toEqual(byId);
      expect(ids(await root.client.get(`/inbox/identity/${m.id}`))).toEqual(byId);
      expect(ids(await root.client.get(`/inbox/@${m.name}`))).toEqual(byId);
      expectError(await other.client.get(`/inbox/identity/${m.id}`), 403, 'POLICY_DENIED');
      expectError(await other.client.get(`/inbox/@${m.name}`), 403, 'POLICY_DENIED');
      expectError(await m.client.get(`/inbox/identity/${other.id}`), 403, 'POLICY_DENIED');
    });

    it('an unknown identity or name → 404 SIGNAL_NOT_FOUND; no key → AUTH_KEY_MISSING', async () => {
      expectError(await root.client.get(`/inbox/identity/${UNKNOWN}`), 404, 'SIGNAL_NOT_FOUND');
      expectError(await root.client.get('/inbox/@nobody-here'), 404, 'SIGNAL_NOT_FOUND');
      expectError(await other.client.get('/inbox/@nobody-here'), 404, 'SIGNAL_NOT_FOUND');
      expectError(await other.client.as(undefined).get(`/inbox/identity/${other.id}`), 401, 'AUTH_KEY_MISSING');
      expectError(await other.client.as(undefined).get(`/inbox/@${other.name}`), 401, 'AUTH_KEY_MISSING');
    });
  });

  it('refuses limit outside 1..100 or not an integer with VALIDATION_INVALID_TYPE field limit, on every inbox form', async () => {
    const { m, role } = await fresh('limits');
    for (const path of [`/inbox/identity/${m.id}`, `/inbox/@${m.name}`, `/inbox/${role}`]) {
      for (const bad of ['0', '101', 'x', '-3', '']) expectError(await m.client.get(`${path}?limit=${bad}`), 400, 'VALIDATION_INVALID_TYPE', 'limit');
      for (const good of ['1', '100']) expect((await m.client.get(`${path}?limit=${good}`)).status).toBe(200);
    }
  });

  it('default limit is 20, data.cursor equals meta.cursor, and it is null on the last page', async () => {
    const { m } = await fresh('deflimit');
    await Promise.all(Array.from({ length: 25 }, (_, i) => emitOk(root, { signal_type: 'pulse', content: `d${i}`, to_identity: m.id })));
    const first = await m.client.get(`/inbox/identity/${m.id}`);
    expect(expectOk(first).signals).toHaveLength(20);
    expect(first.body.data.has_more).toBe(true);
    expect(typeof first.body.data.cursor).toBe('string');
    expect(first.body.meta.cursor).toBe(first.body.data.cursor);
    const last = await m.client.get(`/inbox/identity/${m.id}?after=${first.body.data.cursor}`);
    expect(expectOk(last).signals).toHaveLength(5);
    expect(last.body.data).toMatchObject({ has_more: false, cursor: null });
    expect(last.body.meta.cursor).toBeNull();
    expect(new Set([...first.body.data.signals, ...last.body.data.signals].map((s: any) => s.id)).size).toBe(25);
  });

  it('paging at limit 1 while 200 signals arrive: nothing twice, nothing that existed before paging skipped', async () => {
    const { m } = await fresh('paging');
    const urgency = (i: number) => (i % 11) / 10; // 0.0 .. 1.0
    const pre = await Promise.all(Array.from({ length: 30 }, (_, i) => emitOk(root, { signal_type: 'pulse', content: `pre${i}`, urgency: urgency(i * 7), to_identity: m.id })));
    const existed = new Set<string>(pre.map((s) => s.id));
    const done = new Set<string>();
    let firstPageSent = false;

    const storm = Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const s = await emitOk(other, { signal_type: 'sense', content: `live${i}`, urgency: urgency(i), to_identity: m.id });
        done.add(s.id);
        if (!firstPageSent) existed.add(s.id);
        return s;
      }),
    );

    const seen: any[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      if (!firstPageSent) firstPageSent = true;
      const r: Res = await m.client.get(`/inbox/identity/${m.id}?limit=1${after ? `&after=${after}` : ''}`);
      const data = expectOk(r);
      expect(r.body.meta.cursor).toBe(data.cursor);
      expect(data.signals.length).toBeLessThanOrEqual(1);
      seen.push(...data.signals);
      pages++;
      if (data.cursor === null) {
        expect(data.has_more).toBe(false);
        break;
      }
      expect(data.has_more).toBe(true);
      after = data.cursor;
      expect(pages, 'paging did not end').toBeLessThan(1000);
    }
    const emitted = await storm;
    expect(emitted).toHaveLength(200);

    const seenIds = seen.map((s) => s.id);
    expect(new Set(seenIds).size, 'an item was seen twice').toBe(seenIds.length);
    const missing = [...existed].filter((id) => !seenIds.includes(id));
    expect(missing, 'items that existed before paging began were skipped').toEqual([]);
    // pages walk strictly down the (urgency, id) order
    for (let i = 1; i < seen.length; i++) {
      const [a, b] = [seen[i - 1], seen[i]];
      expect(a.urgency > b.urgency || (a.urgency === b.urgency && a.id > b.id), `order at ${i}`).toBe(true);
    }
    // everything seen is this identity's
    const all = new Set([...pre, ...emitted].map((s) => s.id));
    for (const id of seenIds) expect(all.has(id)).toBe(true);
    expect(seenIds.length).toBeGreaterThanOrEqual(pre.length);
  });

  describe('delivery', () => {
    it('pending → delivered when the recipient reads its inbox, then acked by POST /ack', async () => {
      const { m } = await fresh('deliver');
      const s = await emitOk(other, { signal_type: 'alert', content: 'read me', to_identity: m.id });
      expect(s.delivery_state).toBe('pending');
      // the admin reading it, or the sender listing it, delivers nothing
      expect(expectOk(await root.client.get(`/inbox/identity/${m.id}`)).signals[0]).toMatchObject({ id: s.id, delivery_state: 'pending' });
      expect((await findSignal(other.client, s.id)).delivery_state).toBe('pending');

      const read = expectOk(await m.client.get(`/inbox/@${m.name}`)).signals;
      expect(read.map((x: any) => [x.id, x.delivery_state])).toEqual([[s.id, 'delivered']]);
      expect((await findSignal(root.client, s.id)).delivery_state).toBe('delivered');
      // reading again leaves it delivered
      expect(expectOk(await m.client.get(`/inbox/identity/${m.id}`)).signals[0].delivery_state).toBe('delivered');

      const ack = await m.client.post('/ack', { signal_id: s.id });
      expect(expectOk(ack)).toMatchObject({ id: s.id, delivery_state: 'acked' });
      expect((await findSignal(root.client, s.id)).delivery_state).toBe('acked');
      expect(expectOk(await m.client.get(`/inbox/identity/${m.id}`)).signals[0].delivery_state).toBe('acked');
      expectError(await m.client.post('/ack', { signal_id: s.id }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
    });

    it('reading a role inbox delivers for a filler, not for a non-filler', async () => {
      const { m, role } = await fresh('roledeliver');
      const s = await emitOk(root, { signal_type: 'pulse', content: 'role mail', to_role: role });
      expect(expectOk(await other.client.get(`/inbox/${role}`)).signals[0]).toMatchObject({ id: s.id, delivery_state: 'pending' });
      expect((await findSignal(root.client, s.id)).delivery_state).toBe('pending');
      expect(expectOk(await m.client.get(`/inbox/${role}`)).signals[0]).toMatchObject({ id: s.id, delivery_state: 'delivered' });
      expect((await findSignal(root.client, s.id)).delivery_state).toBe('delivered');
    });

    it('only the page that was read is delivered', async () => {
      const { m } = await fresh('partial');
      const lo = await emitOk(root, { signal_type: 'pulse', content: 'lo', urgency: 0.1, to_identity: m.id });
      const hi = await emitOk(root, { signal_type: 'pulse', content: 'hi', urgency: 0.9, to_identity: m.id });
      expect(ids(await m.client.get(`/inbox/identity/${m.id}?limit=1`))).toEqual([hi.id]);
      expect((await findSignal(root.client, hi.id)).delivery_state).toBe('delivered');
      expect((await findSignal(root.client, lo.id)).delivery_state).toBe('pending');
    });
  });
});
