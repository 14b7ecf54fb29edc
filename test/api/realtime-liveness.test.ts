/**
 * Liveness and delivery counts over real HTTP and a real socket, on both backends: an agent that makes a
 * request or holds a socket open counts as active in /stats/overview and /admin/health-metrics, one that
 * never showed up is disconnected; delivery-state counts in both follow emitted, pushed, claimed, acked
 * and dead-lettered signals; /admin/health-metrics is admin-only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { PushSocket, waitFor } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk } from './support.js';

describe.each(BACKENDS)('liveness and delivery stats on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  /** makes REST requests */
  let talker: Member;
  /** only opens a socket */
  let listener: Member;
  /** never shows up */
  let absent: Member;
  const sockets: PushSocket[] = [];

  const overview = async () => expectOk(await root.client.get('/stats/overview'));
  const metrics = async () => expectOk(await root.client.get('/admin/health-metrics'));

  /** before the server was started: its uptime cannot exceed the time since */
  let startedBefore: number;

  beforeAll(async () => {
    startedBefore = Date.now();
    svc = await servers.start({ MAX_DELIVERY_ATTEMPTS: '1' });
    root = await bootstrap(svc.url);
    talker = await join(root.client, 'talker');
    listener = await join(root.client, 'listener');
    absent = await join(root.client, 'absent');
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
  });

  it('counts agents active after a request or an open socket, and disconnected when never seen', async () => {
    // joining is not being seen: no agent has made a request or held a connection yet
    expect((await overview()).agent_liveness).toEqual({ total: 3, active: 0, idle: 0, disconnected: 3 });
    expect((await metrics()).agents).toEqual({ total: 3, active: 0, idle: 0, disconnected: 3 });

    expect((await talker.client.get('/roles')).status).toBe(200);
    await waitFor(async () => (await overview()).agent_liveness.active === 1, 5000, 'the agent that made a request to count as active');

    const s = await PushSocket.open(svc.url, listener.key, { label: 'listener' });
    sockets.push(s);
    const want = { total: 3, active: 2, idle: 0, disconnected: 1 };
    let last: unknown;
    await waitFor(async () => JSON.stringify((last = (await overview()).agent_liveness)) === JSON.stringify(want), 5000, () => `overview liveness ${JSON.stringify(want)}, last ${JSON.stringify(last)}`);
    expect((await metrics()).agents).toEqual(want);

    // closing the socket leaves it recently seen: still active (within five minutes)
    await s.close();
    await waitFor(async () => JSON.stringify((await overview()).agent_liveness) === JSON.stringify(want), 5000, 'liveness unchanged after the socket closed');
    // the admin is human and not counted
    expect((await metrics()).agents.total).toBe(3);
  });

  it('counts signals by delivery state the same way in /stats/overview and /admin/health-metrics', async () => {
    const before = await overview();
    expect(before.signal_count).toBe(0);
    const s = await PushSocket.open(svc.url, listener.key, { label: 'listener' });
    sockets.push(s);

    const pending = await emitOk(root, { signal_type: 'task', content: 'nobody looks', to_identity: absent.id });
    const pushed = await emitOk(root, { signal_type: 'pulse', content: 'pushed to a socket', to_identity: listener.id });
    await s.waitSignals([pushed.id]);
    // the push marks it delivered; the recipient's socket is not sent the mark (it has the signal), the state shows it
    await waitFor(async () => expectOk(await root.client.get(`/admin/actors/signal/${pushed.id}`)).state === 'delivered', 5000, 'the pushed signal marked delivered');
    const leased = await emitOk(root, { signal_type: 'task', content: 'claimed', to_identity: absent.id });
    expect((await talker.client.post('/claim', { signal_id: leased.id })).status).toBe(200);
    const done = await emitOk(root, { signal_type: 'task', content: 'claimed and acked', to_identity: absent.id });
    expect((await talker.client.post('/claim', { signal_id: done.id })).status).toBe(200);
    expect((await talker.client.post('/ack', { signal_id: done.id })).body.data.delivery_state).toBe('acked');
    const note = await emitOk(root, { signal_type: 'pulse', content: 'acked without a claim', to_identity: talker.id });
    expect((await talker.client.post('/ack', { signal_id: note.id })).body.data.delivery_state).toBe('acked');
    // one attempt allowed: a failed outcome dead-letters the task
    const dead = await emitOk(root, { signal_type: 'task', content: 'fails', to_identity: absent.id });
    expect((await talker.client.post('/claim', { signal_id: dead.id })).status).toBe(200);
    expect((await talker.client.post('/ack', { signal_id: dead.id, outcome: 'failed' })).body.data.delivery_state).toBe('dead_letter');
    expect(pending.delivery_state).toBe('pending');

    const want = { pending: 1, delivered: 1, leased: 1, acked: 2, failed: 0, dead_letter: 1 };
    const o = await overview();
    expect(o.signal_count).toBe(6);
    expect(o.delivery_stats).toMatchObject(want);
    const m = await metrics();
    expect(m.signals).toEqual({ total: 6, by_delivery_state: want });
    // whole seconds since this server started (not since some other epoch)
    const upper = Math.ceil((Date.now() - startedBefore) / 1000);
    for (const u of [m.uptime_seconds, o.uptime_seconds]) {
      expect(Number.isInteger(u)).toBe(true);
      expect(u).toBeLessThanOrEqual(upper);
    }
    expect(o).toMatchObject({ identity_count: 4, role_count: 0, ring_count: 0, version: expect.any(String) });
    await s.close();
  });

  it('refuses /admin/health-metrics to non-admin keys and to requests without a key', async () => {
    expectError(await talker.client.get('/admin/health-metrics'), 403, 'AUTH_ADMIN_REQUIRED');
    expectError(await new Client(svc.url).get('/admin/health-metrics'), 401, 'AUTH_KEY_MISSING');
    expectError(await new Client(svc.url).get('/stats/overview'), 401, 'AUTH_KEY_MISSING');
    // any member may read the overview
    expect((await talker.client.get('/stats/overview')).status).toBe(200);
  });
});
