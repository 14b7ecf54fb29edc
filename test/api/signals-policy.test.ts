/**
 * Key scopes and membership policy over real HTTP, on both backends: scoped keys made through
 * POST /admin/api-keys are refused out of scope on every signal route (AUTH_SCOPE_DENIED), work in scope,
 * and lists silently omit what they may not see; a suspended membership is refused on writes; revoked and
 * rotated keys; the admin key list.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, listAll } from './support.js';

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(BACKENDS)('key scopes and policy on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  /** owner of the scoped keys; member of rings allowed and denied, fills role desk */
  let m: Member;
  let other: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    m = await join(root.client, 'scoped');
    other = await join(root.client, 'other');
    for (const name of ['allowed', 'denied']) expect((await root.client.post('/rings', { name, members: [m.id, other.id] })).status).toBe(201);
    const desk = (await root.client.post('/roles', { name: 'desk' })).body.data;
    expect((await root.client.post('/fills', { identity_id: m.id, role_id: desk.id })).status).toBe(201);
  });

  /** A key for `owner` made by the admin, as a client. */
  async function scopedKey(owner: Member, body: Record<string, unknown>): Promise<{ client: Client; id: string; data: any }> {
    const data = expectOk(await root.client.post('/admin/api-keys', { owner: owner.id, ...body }), 201);
    return { client: new Client(svc.url, data.api_key), id: data.id, data };
  }

  describe('scoped keys', () => {
    let byType: Client;
    let byRing: Client;
    let byRingScopes: Client;
    let byTask: Client;
    /** signals emitted by the admin */
    let alert: any;
    let pulseAllowed: any;
    let pulseDenied: any;
    let pulseNoRing: any;
    let taskBuild: any;
    let taskDeploy: any;
    let taskAlertRing: any;

    beforeAll(async () => {
      byType = (await scopedKey(m, { permissions: { signal_types: ['pulse', 'task'] } })).client;
      byRing = (await scopedKey(m, { permissions: { rings: ['allowed'] } })).client;
      byRingScopes = (await scopedKey(m, { ring_scopes: ['allowed'] })).client;
      byTask = (await scopedKey(m, { permissions: { task_types: ['build'] } })).client;
      alert = await emitOk(root.client, { signal_type: 'alert', content: 'alert to m', to_identity: m.id, urgency: 0.9 });
      pulseAllowed = await emitOk(root.client, { signal_type: 'pulse', content: 'allowed ring', to_ring: 'allowed' });
      pulseDenied = await emitOk(root.client, { signal_type: 'pulse', content: 'denied ring', to_ring: 'denied' });
      pulseNoRing = await emitOk(root.client, { signal_type: 'pulse', content: 'direct', to_identity: m.id });
      taskBuild = await emitOk(root.client, { signal_type: 'task', content: 'build', to_ring: 'allowed', payload: { task_type: 'build' } });
      taskDeploy = await emitOk(root.client, { signal_type: 'task', content: 'deploy', to_ring: 'allowed', payload: { task_type: 'deploy' } });
      taskAlertRing = await emitOk(root.client, { signal_type: 'alert', content: 'alert in allowed ring', to_ring: 'allowed' });
    });

    it('the admin answers the key with its scopes and never its hash', async () => {
      const k = await scopedKey(m, { permissions: { signal_types: ['sense'] }, ring_scopes: ['allowed'], rate_limit: 50 });
      expect(k.data).toMatchObject({
        owner: m.id,
        permissions: { signal_types: ['sense'], rings: [], task_types: [], memory_scopes: [] },
        ring_scopes: ['allowed'],
        rate_limit: 50,
        revoked: false,
        expires_at: null,
      });
      expect(typeof k.data.api_key).toBe('string');
      expect(typeof k.data.id).toBe('string');
      expect(k.data).not.toHaveProperty('hash');
      // the key acts as its owner
      expect((await emitOk(k.client, { signal_type: 'sense', content: 'me', to_ring: 'allowed' })).from_identity).toBe(m.id);
      expectError(await root.client.post('/admin/api-keys', { owner: UNKNOWN }), 404, 'IDENTITY_NOT_FOUND');
      expectError(await root.client.post('/admin/api-keys', { permissions: { signal_types: 'pulse' } }), 400, 'VALIDATION_INVALID_TYPE', 'permissions.signal_types');
      // without an owner the key is the admin's own
      const own = expectOk(await root.client.post('/admin/api-keys', {}), 201);
      expect(own.owner).toBe(root.id);
    });

    it('POST /emit: out of scope by type, by ring, by ring_scopes, by task_type → AUTH_SCOPE_DENIED; in scope works', async () => {
      const before = (await listAll(root.client)).length;
      expectError(await byType.post('/emit', { signal_type: 'alert', content: 'x' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byType.post('/emit', { signal_type: 'celebration', content: 'x' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'denied' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.post('/emit', { signal_type: 'pulse', content: 'x' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.post('/emit', { signal_type: 'pulse', content: 'x', to_identity: other.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRingScopes.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'denied' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRingScopes.post('/emit', { signal_type: 'pulse', content: 'x', to_role: 'desk' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byTask.post('/emit', { signal_type: 'task', content: 'x', payload: { task_type: 'deploy' } }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byTask.post('/emit', { signal_type: 'task', content: 'x' }), 403, 'AUTH_SCOPE_DENIED');
      expect((await listAll(root.client)).length).toBe(before);

      expect((await emitOk(byType, { signal_type: 'pulse', content: 'ok' })).from_identity).toBe(m.id);
      expect((await emitOk(byType, { signal_type: 'task', content: 'ok' })).task_status).toBe('open');
      expect((await emitOk(byRing, { signal_type: 'alert', content: 'ok', to_ring: 'allowed' })).to_ring).toBe('allowed');
      expect((await emitOk(byRingScopes, { signal_type: 'pulse', content: 'ok', to_ring: 'allowed' })).to_ring).toBe('allowed');
      expect((await emitOk(byTask, { signal_type: 'task', content: 'ok', payload: { task_type: 'build' } })).payload).toEqual({ task_type: 'build' });
      // task_types restricts tasks only
      expect((await emitOk(byTask, { signal_type: 'alert', content: 'ok' })).signal_type).toBe('alert');
    });

    it('POST /claim and POST /ack: out of scope → AUTH_SCOPE_DENIED; in scope works', async () => {
      expectError(await byTask.post('/claim', { signal_id: taskDeploy.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byType.post('/claim', { signal_id: alert.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.post('/claim', { signal_id: pulseDenied.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRingScopes.post('/claim', { signal_id: pulseNoRing.id }), 403, 'AUTH_SCOPE_DENIED');
      const claimed = expectOk(await byTask.post('/claim', { signal_id: taskBuild.id }));
      expect(claimed).toMatchObject({ id: taskBuild.id, claimed_by: m.id, delivery_state: 'leased' });

      expectError(await byType.post('/ack', { signal_id: alert.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.post('/ack', { signal_id: pulseDenied.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRingScopes.post('/ack', { signal_id: pulseDenied.id }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byTask.post('/ack', { signal_id: taskDeploy.id }), 403, 'AUTH_SCOPE_DENIED');
      expect(expectOk(await byTask.post('/ack', { signal_id: taskBuild.id }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
      expect(expectOk(await byRing.post('/ack', { signal_id: pulseAllowed.id })).delivery_state).toBe('acked');

      // the refused ones were not touched
      const all = await listAll(root.client);
      const state = (id: string) => all.find((s) => s.id === id)?.delivery_state;
      expect([state(taskDeploy.id), state(alert.id), state(pulseDenied.id)]).toEqual(['pending', 'pending', 'pending']);
    });

    it('POST /inbox/acknowledge|resolve|snooze|unsnooze: out of scope → AUTH_SCOPE_DENIED; in scope works', async () => {
      const actions: [string, Record<string, unknown>][] = [
        ['/inbox/acknowledge', {}],
        ['/inbox/resolve', {}],
        ['/inbox/snooze', { until: inAnHour() }],
        ['/inbox/unsnooze', {}],
      ];
      for (const [path, extra] of actions) {
        expectError(await byType.post(path, { signal_id: alert.id, ...extra }), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byRing.post(path, { signal_id: pulseNoRing.id, ...extra }), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byRingScopes.post(path, { signal_id: pulseDenied.id, ...extra }), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byTask.post(path, { signal_id: taskDeploy.id, ...extra }), 403, 'AUTH_SCOPE_DENIED');
      }
      // nothing changed: m's own full key still sees the alert unread
      const mine = expectOk(await m.client.get(`/inbox/identity/${m.id}?limit=100&include_resolved=true&include_snoozed=true`)).signals;
      expect(mine.find((s: any) => s.id === alert.id).receipt_state).toBe('unread');

      expect(expectOk(await byType.post('/inbox/snooze', { signal_id: pulseNoRing.id, until: inAnHour() })).state).toBe('snoozed');
      expect(expectOk(await byType.post('/inbox/unsnooze', { signal_id: pulseNoRing.id })).state).toBe('unread');
      expect(expectOk(await byRing.post('/inbox/acknowledge', { signal_id: pulseAllowed.id })).state).toBe('acknowledged');
      expect(expectOk(await byTask.post('/inbox/resolve', { signal_id: alert.id })).state).toBe('resolved');
    });

    it('GET /thread/:id out of scope → AUTH_SCOPE_DENIED; in scope the thread omits out-of-scope replies', async () => {
      expectError(await byType.get(`/thread/${alert.id}`), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.get(`/thread/${pulseDenied.id}`), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byTask.get(`/thread/${taskDeploy.id}`), 403, 'AUTH_SCOPE_DENIED');
      const rootSig = await emitOk(root.client, { signal_type: 'pulse', content: 'thread root', to_ring: 'allowed' });
      const r1 = await emitOk(root.client, { signal_type: 'alert', content: 'alert reply', parent_id: rootSig.id, to_ring: 'allowed' });
      const r2 = await emitOk(root.client, { signal_type: 'pulse', content: 'pulse reply', parent_id: r1.id, to_ring: 'allowed' });
      expect(expectOk(await byType.get(`/thread/${r2.id}`)).signals.map((s: any) => s.id)).toEqual([rootSig.id, r2.id]);
      expect(expectOk(await byRing.get(`/thread/${rootSig.id}`)).signals.map((s: any) => s.id)).toEqual([rootSig.id, r1.id, r2.id]);
      expect(expectOk(await root.client.get(`/thread/${rootSig.id}`)).signals.map((s: any) => s.id)).toEqual([rootSig.id, r1.id, r2.id]);
    });

    it('GET /signals/list: a filter naming a denied type or ring → AUTH_SCOPE_DENIED; otherwise out-of-scope signals are omitted', async () => {
      expectError(await byType.get('/signals/list?type=alert'), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byType.get('/signals/list?type=pulse,alert'), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRing.get('/signals/list?to_ring=denied'), 403, 'AUTH_SCOPE_DENIED');
      expectError(await byRingScopes.get('/signals/list?to_ring=denied'), 403, 'AUTH_SCOPE_DENIED');

      const typed = await listAll(byType);
      expect(typed.length).toBeGreaterThan(0);
      expect(new Set(typed.map((s) => s.signal_type))).toEqual(new Set(['pulse', 'task']));
      expect(typed.map((s) => s.id)).toEqual(expect.arrayContaining([pulseAllowed.id, pulseDenied.id, pulseNoRing.id, taskBuild.id, taskDeploy.id]));
      expect(expectOk(await byType.get('/signals/list?type=pulse&limit=100')).signals.map((s: any) => s.id)).toContain(pulseDenied.id);

      for (const c of [byRing, byRingScopes]) {
        const ringed = await listAll(c);
        expect(ringed.every((s) => s.to_ring === 'allowed')).toBe(true);
        expect(ringed.map((s) => s.id)).toEqual(expect.arrayContaining([pulseAllowed.id, taskBuild.id, taskDeploy.id, taskAlertRing.id]));
        expect(expectOk(await c.get('/signals/list?to_ring=allowed&limit=100')).signals.map((s: any) => s.id)).toContain(taskAlertRing.id);
      }

      const tasked = (await listAll(byTask)).map((s) => s.id);
      expect(tasked).toContain(taskBuild.id);
      expect(tasked).toContain(alert.id);
      expect(tasked).not.toContain(taskDeploy.id);

      // the unrestricted key sees everything
      const all = (await listAll(root.client)).map((s) => s.id);
      expect(all).toEqual(expect.arrayContaining([alert.id, pulseAllowed.id, pulseDenied.id, pulseNoRing.id, taskBuild.id, taskDeploy.id, taskAlertRing.id]));
    });

    it('GET /inbox: ?type= or ?ring= naming what the key may not read → AUTH_SCOPE_DENIED; otherwise omitted', async () => {
      for (const path of [`/inbox/identity/${m.id}`, `/inbox/@${m.name}`, '/inbox/desk']) {
        expectError(await byType.get(`${path}?type=alert`), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byType.get(`${path}?type=task,alert`), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byRing.get(`${path}?ring=denied`), 403, 'AUTH_SCOPE_DENIED');
        expectError(await byRingScopes.get(`${path}?ring=denied`), 403, 'AUTH_SCOPE_DENIED');
        expect((await byType.get(`${path}?type=pulse`)).status).toBe(200);
        expect((await byRing.get(`${path}?ring=allowed`)).status).toBe(200);
      }
      const q = '?limit=100&include_resolved=true&include_snoozed=true';
      const full = expectOk(await m.client.get(`/inbox/identity/${m.id}${q}`)).signals.map((s: any) => s.id);
      expect(full).toEqual(expect.arrayContaining([alert.id, pulseAllowed.id, pulseDenied.id, pulseNoRing.id, taskDeploy.id, taskAlertRing.id]));

      const typed = expectOk(await byType.get(`/inbox/identity/${m.id}${q}`)).signals;
      expect(typed.every((s: any) => ['pulse', 'task'].includes(s.signal_type))).toBe(true);
      expect(typed.map((s: any) => s.id)).toEqual(expect.arrayContaining([pulseAllowed.id, pulseDenied.id, pulseNoRing.id, taskDeploy.id]));

      const ringed = expectOk(await byRing.get(`/inbox/@${m.name}${q}`)).signals;
      expect(ringed.every((s: any) => s.to_ring === 'allowed')).toBe(true);
      expect(ringed.map((s: any) => s.id)).toEqual(expect.arrayContaining([pulseAllowed.id, taskAlertRing.id, taskDeploy.id]));
      expect(expectOk(await byRing.get(`/inbox/identity/${m.id}${q}&ring=allowed`)).signals.map((s: any) => s.id)).toContain(taskAlertRing.id);

      const tasked = expectOk(await byTask.get(`/inbox/identity/${m.id}${q}`)).signals.map((s: any) => s.id);
      expect(tasked).toContain(alert.id);
      expect(tasked).not.toContain(taskDeploy.id);
    });
  });

  describe('membership', () => {
    it('an identity without an active membership → POLICY_MEMBERSHIP_REQUIRED on emit, claim, ack and inbox actions', async () => {
      const s = await join(root.client, 'suspended');
      const task = await emitOk(root.client, { signal_type: 'task', content: 'for anyone' });
      const note = await emitOk(root.client, { signal_type: 'pulse', content: 'for s', to_identity: s.id });
      // an admin suspends the membership
      const page = (await root.client.get('/org/company/memberships?limit=100')).body.data.memberships as any[];
      const m = page.find((x) => x.identity_id === s.id);
      expect(m?.status).toBe('active');
      expect((await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'suspended' })).status).toBe(200);

      expectError(await s.client.post('/emit', { signal_type: 'pulse', content: 'x' }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/claim', { signal_id: task.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/ack', { signal_id: note.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/inbox/acknowledge', { signal_id: note.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/inbox/resolve', { signal_id: note.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/inbox/snooze', { signal_id: note.id, until: inAnHour() }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.post('/inbox/unsnooze', { signal_id: note.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      const all = await listAll(root.client);
      expect(all.find((x) => x.id === task.id)).toMatchObject({ delivery_state: 'pending', claimed_by: null });
      expect(all.find((x) => x.id === note.id)?.delivery_state).toBe('pending');

      // a scoped key of the same identity is refused the same way
      const k = await scopedKey(s, { permissions: { signal_types: ['pulse'] } });
      expectError(await k.client.post('/emit', { signal_type: 'pulse', content: 'x' }), 403, 'POLICY_MEMBERSHIP_REQUIRED');

      // no membership record at all is refused too
      const gone = await join(root.client, 'no-membership');
      expect((await svc.store.commit([{ op: 'del', key: `actor:membership:${gone.id}` }])).ok).toBe(true);
      expectError(await gone.client.post('/emit', { signal_type: 'pulse', content: 'x' }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await gone.client.post('/inbox/acknowledge', { signal_id: note.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');

      // reactivated, it works again
      expect((await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'active' })).status).toBe(200);
      expect((await s.client.post('/emit', { signal_type: 'pulse', content: 'back' })).status).toBe(201);
      expect(expectOk(await s.client.post('/inbox/acknowledge', { signal_id: note.id })).state).toBe('acknowledged');
    });
  });

  describe('key lifecycle', () => {
    it('a revoked key → 401 AUTH_KEY_REVOKED everywhere', async () => {
      const k = await scopedKey(m, {});
      expect((await k.client.post('/emit', { signal_type: 'pulse', content: 'before revoke' })).status).toBe(201);
      const rev = expectOk(await root.client.post(`/admin/api-keys/${k.id}/revoke`));
      expect(rev).toMatchObject({ id: k.id, owner: m.id, revoked: true });
      expect(rev).not.toHaveProperty('hash');
      expectError(await k.client.post('/emit', { signal_type: 'pulse', content: 'after' }), 401, 'AUTH_KEY_REVOKED');
      expectError(await k.client.get('/signals/list'), 401, 'AUTH_KEY_REVOKED');
      expectError(await k.client.get(`/inbox/identity/${m.id}`), 401, 'AUTH_KEY_REVOKED');
      expectError(await k.client.get('/roles'), 401, 'AUTH_KEY_REVOKED');
      // the owner's other keys are unaffected
      expect((await m.client.post('/emit', { signal_type: 'pulse', content: 'still me' })).status).toBe(201);
    });

    it('a rotated key: the old one is revoked, the new one works with the same permissions', async () => {
      const k = await scopedKey(m, { permissions: { signal_types: ['pulse'], rings: ['allowed'] }, ring_scopes: ['allowed'], rate_limit: 77 });
      const rot = expectOk(await root.client.post(`/admin/api-keys/${k.id}/rotate`));
      expect(Object.keys(rot).sort()).toEqual(['api_key', 'id']);
      expect(rot.id).not.toBe(k.id);
      expect(rot.api_key).not.toBe(k.data.api_key);
      expectError(await k.client.post('/emit', { signal_type: 'pulse', content: 'old', to_ring: 'allowed' }), 401, 'AUTH_KEY_REVOKED');

      const fresh = new Client(svc.url, rot.api_key);
      expect((await emitOk(fresh, { signal_type: 'pulse', content: 'new', to_ring: 'allowed' })).from_identity).toBe(m.id);
      expectError(await fresh.post('/emit', { signal_type: 'alert', content: 'x', to_ring: 'allowed' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await fresh.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'denied' }), 403, 'AUTH_SCOPE_DENIED');
      expectError(await fresh.get('/signals/list?type=alert'), 403, 'AUTH_SCOPE_DENIED');

      const listed = expectOk(await root.client.get('/admin/api-keys'));
      const oldRec = listed.find((x: any) => x.id === k.id);
      const newRec = listed.find((x: any) => x.id === rot.id);
      expect(oldRec.revoked).toBe(true);
      expect(newRec).toMatchObject({ owner: m.id, revoked: false, permissions: k.data.permissions, ring_scopes: ['allowed'], rate_limit: 77 });
      expect((await fresh.get('/roles')).status).toBe(200);
    });

    it('a revoked key cannot be rotated back to life; unknown key ids are 404', async () => {
      const k = await scopedKey(m, {});
      expectOk(await root.client.post(`/admin/api-keys/${k.id}/revoke`));
      expectError(await root.client.post(`/admin/api-keys/${k.id}/rotate`), 403, 'POLICY_DENIED');
      expectError(await k.client.get('/roles'), 401, 'AUTH_KEY_REVOKED');
      expectError(await root.client.post('/admin/api-keys/key_000000000000000000000000/revoke'), 404, 'NOT_FOUND');
      expectError(await root.client.post('/admin/api-keys/key_000000000000000000000000/rotate'), 404, 'NOT_FOUND');
    });

    it('ring scopes and ring filters match ring names without regard to case; signals keep the ring\'s own spelling', async () => {
      const k = await scopedKey(m, { permissions: { rings: ['Allowed'] } });
      const sig = await emitOk(k.client, { signal_type: 'pulse', content: 'case', to_ring: 'ALLOWED' });
      expect(sig.to_ring).toBe('allowed');
      const fromAdmin = await emitOk(root.client, { signal_type: 'pulse', content: 'case admin', to_ring: 'aLLowed' });
      const seen = (await listAll(k.client)).map((x) => x.id);
      expect(seen).toEqual(expect.arrayContaining([sig.id, fromAdmin.id]));
      const filtered = expectOk(await k.client.get('/signals/list?to_ring=ALLOWED&limit=100')).signals.map((x: any) => x.id);
      expect(filtered).toEqual(expect.arrayContaining([sig.id, fromAdmin.id]));
      expectError(await k.client.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'Denied' }), 403, 'AUTH_SCOPE_DENIED');
    });

    it('GET /admin/api-keys lists every key without a hash; non-admins get AUTH_ADMIN_REQUIRED on every key route', async () => {
      const k = await scopedKey(other, { permissions: { task_types: ['x'] } });
      const listed = expectOk(await root.client.get('/admin/api-keys'));
      expect(Array.isArray(listed)).toBe(true);
      expect(listed.length).toBeGreaterThanOrEqual(4);
      for (const rec of listed) {
        expect(rec).not.toHaveProperty('hash');
        expect(rec).not.toHaveProperty('api_key');
        expect(Object.keys(rec)).toEqual(expect.arrayContaining(['id', 'owner', 'permissions', 'ring_scopes', 'created_at', 'expires_at', 'revoked', 'rate_limit']));
      }
      expect(listed.find((x: any) => x.id === k.id)).toMatchObject({ owner: other.id, permissions: { task_types: ['x'] } });
      expect(JSON.stringify(listed)).not.toContain(k.data.api_key);

      for (const c of [m.client, k.client]) {
        expectError(await c.get('/admin/api-keys'), 403, 'AUTH_ADMIN_REQUIRED');
        expectError(await c.post('/admin/api-keys', { owner: m.id }), 403, 'AUTH_ADMIN_REQUIRED');
        expectError(await c.post(`/admin/api-keys/${k.id}/revoke`), 403, 'AUTH_ADMIN_REQUIRED');
        expectError(await c.post(`/admin/api-keys/${k.id}/rotate`), 403, 'AUTH_ADMIN_REQUIRED');
      }
      expectError(await new Client(svc.url).get('/admin/api-keys'), 401, 'AUTH_KEY_MISSING');
      // the refused revoke did nothing
      expect((await k.client.get('/roles')).status).toBe(200);
    });
  });
});
