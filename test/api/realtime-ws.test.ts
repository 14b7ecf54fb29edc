/**
 * The WebSocket push channel at /ws over real sockets (the `ws` package), on both backends: which sockets
 * a signal is pushed to (direct, role, ring, broadcast, target_capabilities), two sockets of one identity,
 * subscribe filters, client ops and their error frames, upgrade refusals, signal.updated frames for claim,
 * ack, lease expiry and dead letter, pushed signals becoming delivered, resume after a disconnect in the
 * middle of a 500-signal burst (by op and by URL), and a slow consumer cut off with 4008 that recovers
 * everything it missed by resuming.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import type { Started } from '../helpers/server.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { expectExactlyOnce, expectIncreasing, pool, PushSocket, refusedUpgrade, SseStream, waitFor, type Frame, type OpenOptions } from '../helpers/push.js';
import { CORE_BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { MAX_PENDING_OPS } from '../../src/realtime/ws.js';
import { REACH_MAX, ReachCache } from '../../src/realtime/audience.js';
import { DELIVERED_MAX, Deliverer } from '../../src/realtime/deliverer.js';
import { Org } from '../../src/org/service.js';
import { emitOk, expectError, expectOk, listAll } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

/** A signal's delivery state as an admin inspects it (a read that marks nothing). */
const stateOf = async (admin: Member, id: string): Promise<string> => expectOk(await admin.client.get(`/admin/actors/signal/${id}`)).state;

/** Waits until every signal is `delivered` (or past it): its push's mark is committed, nothing more is for it. */
async function delivered(admin: Member, ids: string[]): Promise<void> {
  for (const id of ids) await waitFor(async () => (await stateOf(admin, id)) !== 'pending', 5000, `${id} marked delivered`);
}

/** The error frame of an op: same envelope and codes as REST. */
function expectErrorFrame(f: Frame, code: string, id: unknown, field?: string): void {
  expect({ type: f.type, code: f.error?.code, id: f.id }, JSON.stringify(f)).toEqual({ type: 'error', code, id });
  const e = f.error!;
  expect(e.request_id).toMatch(/^req_/);
  expect(e.message.length).toBeGreaterThan(0);
  expect(e).toHaveProperty('details');
  expect(e.docs_url).toMatch(new RegExp(`/docs/errors/${code}$`));
  if (field !== undefined) expect(e.details?.field).toBe(field);
}

describe.each(CORE_BACKENDS)('WebSocket push on %s', (backend) => {
  const servers = serversOn(backend);
  let sockets: PushSocket[] = [];

  async function open(svc: Service, m: Member, opts: OpenOptions = {}): Promise<PushSocket> {
    const s = await PushSocket.open(svc.url, m.key, { label: m.name, ...opts });
    sockets.push(s);
    return s;
  }

  afterEach(async () => {
    await Promise.all(sockets.map((s) => s.close()));
    sockets = [];
  });

  describe('one organization', () => {
    let svc: Service;
    let root: Member;
    /** fills builders, has gpu */
    let b1: Member;
    /** fills builders, no capabilities */
    let b2: Member;
    /** member of ring core */
    let c1: Member;
    /** no role, no ring */
    let out: Member;

    /**
     * Emits a sentinel (a broadcast unless `body` targets otherwise) and waits until each socket has it.
     * Pushes follow commit order per socket, so a socket holding the sentinel has been offered everything
     * committed before it: what it has not received by then it will never receive.
     */
    async function settle(socks: PushSocket[], body: Record<string, unknown> = {}): Promise<string> {
      const s = await emitOk(root, { signal_type: 'pulse', content: 'sentinel', tags: ['sentinel'], ...body });
      for (const sock of socks) await sock.waitSignals([s.id]);
      return s.id;
    }

    beforeAll(async () => {
      svc = await servers.start({ MAX_DELIVERY_ATTEMPTS: '2' });
      root = await bootstrap(svc.url);
      b1 = await join(root.client, 'b1', { capabilities: ['gpu'] });
      b2 = await join(root.client, 'b2');
      c1 = await join(root.client, 'c1');
      out = await join(root.client, 'out');
      const role = await root.client.post('/roles', { name: 'builders' });
      expect(role.status, JSON.stringify(role.body)).toBe(201);
      for (const m of [b1, b2]) expect((await root.client.post('/fills', { identity_id: m.id, role_id: role.body.data.id })).status).toBe(201);
      expect((await root.client.post('/rings', { name: 'core', members: [c1.id] })).status).toBe(201);
    });

    it('welcomes a socket with its identity and the journal cursor', async () => {
      const s = await open(svc, c1);
      expect(s.welcome).toEqual({ type: 'welcome', identity_id: c1.id, cursor: expect.stringMatching(/^\d+$/) });
      const q = await open(svc, c1, { via: 'query' });
      expect(q.welcome.identity_id).toBe(c1.id);
    });

    it('pushes each signal to the sockets of the identities it lands on, and to no other', async () => {
      const b1x = await open(svc, b1, { label: 'b1x' });
      const b1y = await open(svc, b1, { label: 'b1y', via: 'query' });
      const sb2 = await open(svc, b2);
      const sc1 = await open(svc, c1);
      const sout = await open(svc, out);
      const direct = await emitOk(root, { signal_type: 'pulse', content: 'to c1', to_identity: c1.id });
      const role = await emitOk(root, { signal_type: 'alert', content: 'to builders', to_role: 'builders' });
      const ring = await emitOk(root, { signal_type: 'sense', content: 'to core', to_ring: 'core' });
      const all = await emitOk(root, { signal_type: 'pulse', content: 'everyone' });
      const gpu = await emitOk(root, { signal_type: 'task', content: 'gpu builders only', to_role: 'builders', target_capabilities: ['gpu'] });
      const gpuAll = await emitOk(root, { signal_type: 'query', content: 'gpu anyone', target_capabilities: ['gpu'] });
      const sentinel = await settle([b1x, b1y, sb2, sc1, sout]);

      const expected: [PushSocket, string[]][] = [
        [b1x, [role.id, all.id, gpu.id, gpuAll.id]],
        [b1y, [role.id, all.id, gpu.id, gpuAll.id]],
        [sb2, [role.id, all.id]],
        [sc1, [direct.id, ring.id, all.id]],
        [sout, [all.id]],
      ];
      for (const [sock, ids] of expected) {
        expectExactlyOnce(sock.signalIds().filter((id) => id !== sentinel), ids, sock.label);
        expectIncreasing(sock.pushes(), sock.label);
        expect(BigInt(sock.pushes()[0].cursor!)).toBeGreaterThan(BigInt(sock.welcome.cursor!));
      }
      const frame = sc1.frames.find((f) => f.type === 'signal' && f.signal.id === direct.id)!;
      expect(Object.keys(frame).sort()).toEqual(['cursor', 'signal', 'type']);
      expect(frame.cursor).toMatch(/^\d+$/);
      expect(frame.signal).toMatchObject({ id: direct.id, signal_type: 'pulse', content: 'to c1', to_identity: c1.id, from_identity: root.id, delivery_state: 'pending', protocol_version: 'svc/1.0' });
      // both sockets of b1 saw the same pushes with the same cursors
      const view = (s: PushSocket) => s.frames.filter((f) => f.type === 'signal').map((f) => `${f.cursor}:${f.signal.id}`);
      expect(view(b1y)).toEqual(view(b1x));
    });

    it('subscribe narrows pushes by signal type and by ring, and an empty subscribe widens them again', async () => {
      const types = await open(svc, c1, { label: 'types' });
      const rings = await open(svc, c1, { label: 'rings' });
      const both = await open(svc, c1, { label: 'both' });
      expect(await types.ok('subscribe', { types: ['alert'] })).toEqual({ rings: [], types: ['alert'] });
      // frames before the answer may still be unfiltered (e.g. late delivered-updates of earlier signals)
      const typesFrom = types.frames.length;
      expect(await rings.ok('subscribe', { rings: ['core'] })).toEqual({ rings: ['core'], types: [] });
      expect(await both.ok('subscribe', { rings: ['core'], types: ['alert'] })).toEqual({ rings: ['core'], types: ['alert'] });

      const pulseDirect = await emitOk(root, { signal_type: 'pulse', content: 'p direct', to_identity: c1.id });
      const alertDirect = await emitOk(root, { signal_type: 'alert', content: 'a direct', to_identity: c1.id });
      const pulseRing = await emitOk(root, { signal_type: 'pulse', content: 'p ring', to_ring: 'core' });
      const alertRing = await emitOk(root, { signal_type: 'alert', content: 'a ring', to_ring: 'core' });
      const s1 = await settle([types, rings, both], { signal_type: 'alert', to_ring: 'core' });
      expectExactlyOnce(types.signalIds().filter((id) => id !== s1), [alertDirect.id, alertRing.id], 'types');
      expectExactlyOnce(rings.signalIds().filter((id) => id !== s1), [pulseRing.id, alertRing.id], 'rings');
      expectExactlyOnce(both.signalIds().filter((id) => id !== s1), [alertRing.id], 'both');
      // filters narrow signal.updated frames too: c1 acks both direct signals, the types socket is pushed the alert's
      for (const id of [pulseDirect.id, alertDirect.id]) expect((await c1.client.post('/ack', { signal_id: id })).status).toBe(200);
      await types.waitUpdate(alertDirect.id, (x) => x.delivery_state === 'acked', 'acked');
      await settle([types], { signal_type: 'alert', to_identity: c1.id });
      const typesUpdates = types.frames.slice(typesFrom).filter((f) => f.type === 'signal.updated');
      for (const f of typesUpdates) expect(f.signal.signal_type).toBe('alert');
      expect(types.updates(pulseDirect.id)).toEqual([]);

      expect(await types.ok('subscribe', {})).toEqual({ rings: [], types: [] });
      const later = await emitOk(root, { signal_type: 'pulse', content: 'after reset', to_identity: c1.id });
      await types.waitSignals([later.id]);
      expect(types.signalIds()).not.toContain(pulseDirect.id);

      expectErrorFrame(await types.op('subscribe', { rings: 'core' }), 'VALIDATION_INVALID_TYPE', expect.any(String), 'rings');
      expectErrorFrame(await types.op('subscribe', { types: [1] }), 'VALIDATION_INVALID_TYPE', expect.any(String), 'types');
    });

    it('answers ops with result frames and refusals with error frames carrying the REST codes', async () => {
      const sb1 = await open(svc, b1);
      const sb2 = await open(svc, b2);
      const sc1 = await open(svc, c1);

      const emitted = await sb1.ok('emit', { signal_type: 'pulse', content: 'over the socket', to_identity: c1.id, tags: ['ws'] });
      expect(emitted).toMatchObject({ signal_type: 'pulse', content: 'over the socket', from_identity: b1.id, to_identity: c1.id, tags: ['ws'], delivery_state: 'pending' });
      await sc1.waitSignals([emitted.id]);
      const f = await sb1.op('emit', { signal_type: 'pulse' });
      expectErrorFrame(f, 'SIGNAL_EMIT_VALIDATION_FAILED', f.id, 'content');
      expectErrorFrame(await sb1.op('emit', { signal_type: 'pulse', content: 'x', from_identity: b2.id }), 'POLICY_IDENTITY_MISMATCH', expect.any(String));
      expectErrorFrame(await sb1.op('emit', { signal_type: 'pulse', content: 'x', to_role: 'nobody' }), 'SIGNAL_NOT_FOUND', expect.any(String), 'to_role');

      const task = await emitOk(root, { signal_type: 'task', content: 'build it', to_role: 'builders' });
      const claimed = await sb1.ok('claim', { signal_id: task.id });
      expect(claimed).toMatchObject({ id: task.id, delivery_state: 'leased', claimed_by: b1.id, task_status: 'open' });
      expect(Date.parse(claimed.claim_expires_at)).toBeGreaterThan(Date.parse(claimed.claimed_at));
      expectErrorFrame(await sb2.op('claim', { signal_id: task.id }), 'SIGNAL_CLAIM_CONFLICT', expect.any(String));
      expectErrorFrame(await sb2.op('ack', { signal_id: task.id }), 'SIGNAL_ACK_UNAUTHORIZED', expect.any(String));
      expect(await sb1.ok('ack', { signal_id: task.id })).toMatchObject({ id: task.id, delivery_state: 'acked', task_status: 'completed' });
      expectErrorFrame(await sb1.op('claim', { signal_id: task.id }), 'SIGNAL_CLAIM_INVALID_STATUS', expect.any(String));
      expectErrorFrame(await sb1.op('ack', { signal_id: task.id }), 'SIGNAL_DELIVERY_INVALID_TRANSITION', expect.any(String));
      expectErrorFrame(await sb1.op('claim', { signal_id: emitted.id }), 'SIGNAL_CLAIM_NOT_TASK', expect.any(String));
      expectErrorFrame(await sb1.op('claim', { signal_id: UNKNOWN }), 'SIGNAL_NOT_FOUND', expect.any(String));
      expectErrorFrame(await sb1.op('ack', { signal_id: UNKNOWN }), 'SIGNAL_ACK_NOT_FOUND', expect.any(String));
      expectErrorFrame(await sb1.op('claim', {}), 'VALIDATION_FIELD_REQUIRED', expect.any(String), 'signal_id');
      expectErrorFrame(await sb1.op('claim', { signal_id: task.id, lease_ms: 'long' }), 'VALIDATION_INVALID_TYPE', expect.any(String), 'lease_ms');

      // a failed outcome releases the task back to pending for another attempt
      const retry = await emitOk(root, { signal_type: 'task', content: 'try again', to_role: 'builders' });
      await sb2.ok('claim', { signal_id: retry.id });
      expect(await sb2.ok('ack', { signal_id: retry.id, outcome: 'failed' })).toMatchObject({ delivery_state: 'pending', claimed_by: null, delivery_count: 1 });

      const note = await emitOk(root, { signal_type: 'pulse', content: 'note for c1', to_identity: c1.id });
      expect(await sc1.ok('inbox.acknowledge', { signal_id: note.id })).toMatchObject({ signal_id: note.id, identity_id: c1.id, state: 'acknowledged' });
      expect(await sc1.ok('inbox.resolve', { signal_id: note.id })).toMatchObject({ signal_id: note.id, identity_id: c1.id, state: 'resolved' });
      expectErrorFrame(await sc1.op('inbox.acknowledge', { signal_id: note.id }), 'SIGNAL_DELIVERY_INVALID_TRANSITION', expect.any(String));
      expectErrorFrame(await sc1.op('inbox.resolve', { signal_id: UNKNOWN }), 'SIGNAL_NOT_FOUND', expect.any(String));

      expectErrorFrame(await sc1.op('frobnicate'), 'RPC_METHOD_NOT_FOUND', expect.any(String), 'op');
      // frames that are not JSON objects are refused with a null id, and the socket stays usable
      for (const raw of ['not json', '[1,2]', '"text"']) {
        const before = sc1.frames.length;
        sc1.send(raw);
        await waitFor(() => sc1.frames.slice(before).some((x) => x.type === 'error'), 5000, `error frame for ${raw}`);
        expectErrorFrame(sc1.frames.slice(before).find((x) => x.type === 'error')!, 'VALIDATION_INVALID_TYPE', null, 'frame');
      }
      expect(await sc1.ok('subscribe', {})).toEqual({ rings: [], types: [] });
      expect(sc1.closeInfo).toBeUndefined();
    });

    it('refuses upgrades without a valid key with the 401 JSON error body, and cuts a socket whose key is revoked', async () => {
      expectError(await refusedUpgrade(svc.url, undefined), 401, 'AUTH_KEY_MISSING');
      expectError(await refusedUpgrade(svc.url, 'svc_not_a_key'), 401, 'AUTH_KEY_INVALID');
      expectError(await refusedUpgrade(svc.url, 'svc_not_a_key', { via: 'query' }), 401, 'AUTH_KEY_INVALID');
      expectError(await refusedUpgrade(svc.url, c1.key, { after: 'yesterday' }), 400, 'VALIDATION_INVALID_TYPE', 'after');

      const made = await root.client.post('/admin/api-keys', { owner: c1.id });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      const key: string = made.body.data.api_key;
      const live = await PushSocket.open(svc.url, key, { label: 'soon revoked' });
      sockets.push(live);
      expect(live.welcome.identity_id).toBe(c1.id);
      expect((await root.client.post(`/admin/api-keys/${made.body.data.id}/revoke`)).status).toBe(200);

      expectError(await refusedUpgrade(svc.url, key), 401, 'AUTH_KEY_REVOKED');
      expectError(await refusedUpgrade(svc.url, key, { via: 'query' }), 401, 'AUTH_KEY_REVOKED');
      // the open socket learns of it on its next op: an error frame, then close 4401
      live.send(JSON.stringify({ op: 'subscribe', id: 'after-revoke' }));
      const closed = await live.closed();
      expect(closed.code).toBe(4401);
      const err = live.frames.find((f) => f.type === 'error');
      expect(err?.error?.code, JSON.stringify(live.frames)).toBe('AUTH_KEY_REVOKED');
    });

    it('sends signal.updated for claim and ack to recipients, the sender and a claimer outside the audience', async () => {
      const sroot = await open(svc, root);
      const sb1 = await open(svc, b1);
      const sb2 = await open(svc, b2);
      const sc1 = await open(svc, c1);
      const sout = await open(svc, out);
      const task = await emitOk(root, { signal_type: 'task', content: 'role task', to_role: 'builders' });
      await sb1.waitSignals([task.id]);
      await sb2.waitSignals([task.id]);

      // out neither fills builders nor is the sender; as claimer it is told about the task from then on
      expect(await sout.ok('claim', { signal_id: task.id })).toMatchObject({ delivery_state: 'leased', claimed_by: out.id });
      for (const s of [sroot, sb1, sb2, sout]) await s.waitUpdate(task.id, (x) => x.delivery_state === 'leased' && x.claimed_by === out.id, 'leased');
      await sout.ok('ack', { signal_id: task.id });
      for (const s of [sroot, sb1, sb2, sout]) await s.waitUpdate(task.id, (x) => x.delivery_state === 'acked' && x.task_status === 'completed', 'acked');
      await settle([sroot, sb1, sb2, sc1, sout]);
      expect(sout.signalIds()).not.toContain(task.id);
      expect(sroot.signalIds()).not.toContain(task.id);
      expect(sc1.frames.filter((f) => f.signal?.id === task.id)).toEqual([]);
      for (const s of [sroot, sb1, sb2, sout]) expectIncreasing(s.pushes(), s.label);
    });

    it('sends signal.updated when a lease ends (back to pending) and when attempts run out (dead letter)', async () => {
      const sroot = await open(svc, root);
      const sb1 = await open(svc, b1);
      const task = await emitOk(root, { signal_type: 'task', content: 'will time out', to_identity: b1.id });
      await sb1.waitSignals([task.id]);

      await sb1.ok('claim', { signal_id: task.id, lease_ms: 200 });
      const released = await sb1.waitUpdate(task.id, (x) => x.delivery_state === 'pending' && x.delivery_count === 1, 'released to pending');
      expect(released.signal).toMatchObject({ claimed_by: null, task_status: 'open' });
      await sroot.waitUpdate(task.id, (x) => x.delivery_state === 'pending' && x.delivery_count === 1, 'released to pending');

      await sb1.ok('claim', { signal_id: task.id, lease_ms: 200 });
      const dead = await sb1.waitUpdate(task.id, (x) => x.delivery_state === 'dead_letter', 'dead letter');
      expect(dead.signal.delivery_count).toBe(2);
      await sroot.waitUpdate(task.id, (x) => x.delivery_state === 'dead_letter', 'dead letter');
      expectErrorFrame(await sb1.op('claim', { signal_id: task.id }), 'SIGNAL_DEAD_LETTER', expect.any(String));
      expectErrorFrame(await sb1.op('ack', { signal_id: task.id }), 'SIGNAL_DEAD_LETTER', expect.any(String));
      expectIncreasing(sb1.pushes(), 'b1');
    });

    it('marks a pending signal delivered once it is pushed to a recipient socket; its sender is pushed the mark', async () => {
      const sc1 = await open(svc, c1);
      const sender = await open(svc, root, { label: 'sender' });
      const pushed = await emitOk(root, { signal_type: 'pulse', content: 'pushed', to_identity: c1.id });
      const unseen = await emitOk(root, { signal_type: 'pulse', content: 'nobody listening', to_identity: b2.id });
      await sc1.waitSignals([pushed.id]);
      expect(sc1.frames.find((f) => f.type === 'signal' && f.signal.id === pushed.id)!.signal.delivery_state).toBe('pending');
      await sender.waitUpdate(pushed.id, (x) => x.delivery_state === 'delivered', 'delivered');
      const byId = new Map((await listAll(root.client)).map((s) => [s.id, s]));
      expect(byId.get(pushed.id)?.delivery_state).toBe('delivered');
      expect(byId.get(unseen.id)?.delivery_state).toBe('pending');
      const marked = await root.client.get('/signals/list?delivery_state=delivered&limit=100');
      expect(marked.body.data.signals.map((s: any) => s.id)).toContain(pushed.id);
    });

    it('pushes a direct signal to its recipient socket as one frame, the created entry, and its delivered mark only to the sender', async () => {
      const sc1 = await open(svc, c1, { label: 'recipient' });
      const sender = await open(svc, root, { label: 'sender' });
      const direct = await emitOk(root, { signal_type: 'pulse', content: 'one frame', to_identity: c1.id });
      await sc1.waitSignals([direct.id]);
      const mark = await sender.waitUpdate(direct.id, (x) => x.delivery_state === 'delivered', 'delivered');
      // the recipient reads the state it needs: its inbox shows the signal delivered
      const inbox = expectOk(await c1.client.get(`/inbox/identity/${c1.id}?limit=100`));
      expect(inbox.signals.find((x: any) => x.id === direct.id)?.delivery_state).toBe('delivered');
      // a push committed after the mark reaches the socket after anything the mark could have sent it
      const after = await settle([sc1], { to_identity: c1.id });
      expect(BigInt(sc1.frames.find((f) => f.type === 'signal' && f.signal.id === after)!.cursor!)).toBeGreaterThan(BigInt(mark.cursor!));
      const mine = sc1.pushes().filter((f) => f.signal.id === direct.id);
      expect(mine.map((f) => `${f.type}:${f.signal.delivery_state}`)).toEqual(['signal:pending']);
      expect(sender.signalIds()).not.toContain(direct.id);
    });

    it('a socket that resumes from before a signal it was not sent gets the signal and then its delivered mark, in journal order', async () => {
      const live = await open(svc, c1, { label: 'live' });
      const from = live.welcome.cursor!;
      const sig = await emitOk(root, { signal_type: 'pulse', content: 'seen live, replayed later', to_identity: c1.id });
      await live.waitSignals([sig.id]);
      await delivered(root, [sig.id]);
      await settle([live], { to_identity: c1.id });
      expect(live.updates(sig.id)).toEqual([]);
      const byUrl = await open(svc, c1, { label: 'resumed by URL', after: from });
      const byOp = await open(svc, c1, { label: 'resumed by op' });
      expect(await byOp.ok('resume', { after: from })).toMatchObject({ resumed_from: from });
      for (const s of [byUrl, byOp]) {
        await s.waitUpdate(sig.id, (x) => x.delivery_state === 'delivered', 'delivered', 10_000);
        const frames = s.pushes().filter((f) => f.signal.id === sig.id);
        expect(frames.map((f) => `${f.type}:${f.signal.delivery_state}`), s.label).toEqual(['signal:pending', 'signal.updated:delivered']);
        expectIncreasing(frames, s.label);
      }
    });
    it("applies the key's scopes to pushes: a key limited to signal types or rings is pushed nothing outside them", async () => {
      const mint = async (permissions: Record<string, unknown>) => {
        const made = await root.client.post('/admin/api-keys', { owner: c1.id, permissions });
        expect(made.status, JSON.stringify(made.body)).toBe(201);
        return made.body.data.api_key as string;
      };
      const alerts = await PushSocket.open(svc.url, await mint({ signal_types: ['alert'] }), { label: 'alerts only' });
      const core = await PushSocket.open(svc.url, await mint({ rings: ['core'] }), { label: 'ring core only' });
      const full = await open(svc, c1, { label: 'unscoped' });
      sockets.push(alerts, core);
      const pulseDirect = await emitOk(root, { signal_type: 'pulse', content: 'p direct', to_identity: c1.id });
      const alertDirect = await emitOk(root, { signal_type: 'alert', content: 'a direct', to_identity: c1.id });
      const pulseRing = await emitOk(root, { signal_type: 'pulse', content: 'p ring', to_ring: 'core' });
      const alertAll = await emitOk(root, { signal_type: 'alert', content: 'a everyone' });
      const s = await settle([alerts, core, full], { signal_type: 'alert', to_ring: 'core' });
      expectExactlyOnce(alerts.signalIds(), [alertDirect.id, alertAll.id, s], alerts.label);
      expectExactlyOnce(core.signalIds(), [pulseRing.id, s], core.label);
      expectExactlyOnce(full.signalIds(), [pulseDirect.id, alertDirect.id, pulseRing.id, alertAll.id, s], full.label);
      // updates are scoped the same way
      for (const f of alerts.updates()) expect(f.signal.signal_type).toBe('alert');
      for (const f of core.updates()) expect(f.signal.to_ring).toBe('core');
    });
  });

  /** Ops on one socket run one at a time in arrival order, at most MAX_PENDING_OPS waiting; a resume overlaps live commits without a gap. */
  describe('ops on one socket', () => {
    let svc: Started;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
    });

    const emitTo = (m: Member, n: number, label: string) => pool(n, 4, async (i) => (await emitOk(root, { signal_type: 'pulse', content: `${label} ${i}`, to_identity: m.id })).id as string);

    /** Waits until every pushed signal is marked delivered: after that nothing more is committed for them. */
    const quiesce = (_s: PushSocket, ids: string[]): Promise<void> => delivered(root, ids);

    it('a resume op that overlaps live commits rewinds once, then every change after its cursor arrives once, in order', async () => {
      const t = await join(root.client, 'overlap');
      const s = await open(svc, t, { label: 'overlap' });
      const first = await emitTo(t, 30, 'first');
      await s.waitSignals(first);
      await quiesce(s, first);
      const before = s.pushes();
      const k = 9;
      const after = before[k].cursor!;
      const replayHead = before[k + 1].cursor!;
      const owed = before.slice(k + 1).filter((f) => f.type === 'signal').map((f) => f.signal.id);

      const live = emitTo(t, 120, 'live');
      await waitFor(() => s.signalIds().length >= first.length + 20, 10_000, 'live pushes to flow');
      const sentAt = s.frames.length;
      const answer = await s.op('resume', { after }, 20_000);
      expect(answer.type, JSON.stringify(answer)).toBe('result');
      expect(answer.data.resumed_from).toBe(after);
      const liveIds = await live;
      const sentinel = await emitOk(root, { signal_type: 'pulse', content: 'sentinel', to_identity: t.id });

      const pushes = () => s.frames.slice(sentAt).filter((f) => f.type === 'signal' || f.type === 'signal.updated');
      // the one rewind: the only place a cursor does not rise
      const rewind = () => {
        const p = pushes();
        const drops = p.map((f, i) => i).filter((i) => i > 0 && BigInt(p[i].cursor!) <= BigInt(p[i - 1].cursor!));
        expect(drops.length, 'cursor rewinds after one resume').toBeLessThanOrEqual(1);
        return p.slice(drops[0] ?? 0);
      };
      const expected = [...owed, ...liveIds.filter((id) => !owed.includes(id)), sentinel.id];
      await waitFor(() => expected.every((id) => rewind().some((f) => f.type === 'signal' && f.signal.id === id)), 20_000, 'every change after the cursor, after the rewind');
      const segment = rewind();
      expect(segment[0].cursor).toBe(replayHead);
      expectIncreasing(segment, 'after the rewind');
      expectExactlyOnce(segment.filter((f) => f.type === 'signal').map((f) => f.signal.id), expected, 'after the rewind');
    });

    it('runs two resume ops one after the other: each replays from its own cursor, answered in order', async () => {
      const t = await join(root.client, 'two-resumes');
      const s = await open(svc, t, { label: 'two resumes' });
      const ids = await emitTo(t, 20, 'r');
      await s.waitSignals(ids);
      await quiesce(s, ids);
      const before = s.pushes().map((f) => f.cursor!);
      const [a, b] = [before[4], before[14]];
      const sentAt = s.frames.length;
      const [r1, r2] = await Promise.all([s.op('resume', { after: a }, 20_000), s.op('resume', { after: b }, 20_000)]);
      expect([r1.data?.resumed_from, r2.data?.resumed_from]).toEqual([a, b]);
      const i1 = s.frames.indexOf(r1);
      const i2 = s.frames.indexOf(r2);
      expect(i1).toBeLessThan(i2);
      const cursors = (from: number, to: number) => s.frames.slice(from, to).filter((f) => f.cursor !== undefined && f.type !== 'welcome').map((f) => f.cursor);
      expect(cursors(sentAt, i1)).toEqual(before.slice(5));
      expect(cursors(i1 + 1, i2)).toEqual(before.slice(15));
    });

    it(`answers ops beyond ${MAX_PENDING_OPS} waiting on one socket with RATE_LIMIT_EXCEEDED, runs none of those, and keeps the socket`, async () => {
      const t = await join(root.client, 'flood');
      const s = await open(svc, t, { label: 'flood' });
      const N = 400;
      const idsSent = Array.from({ length: N }, (_, i) => `flood-${i}`);
      // all in one go: the server receives them faster than it can commit them
      for (const id of idsSent) s.send(JSON.stringify({ op: 'emit', id, signal_type: 'pulse', content: id, to_identity: t.id }));
      const answered = () => s.frames.filter((f) => (f.type === 'result' || f.type === 'error') && typeof f.id === 'string' && f.id.startsWith('flood-'));
      await waitFor(() => answered().length >= N, 60_000, () => `answers to ${N} ops (have ${answered().length})`);
      const answers = answered();
      expect(new Set(answers.map((f) => f.id)).size, 'one answer per op').toBe(N);
      const refused = answers.filter((f) => f.type === 'error');
      const done = answers.filter((f) => f.type === 'result');
      expect(refused.length, 'some ops refused').toBeGreaterThan(0);
      expect(done.length).toBeGreaterThanOrEqual(MAX_PENDING_OPS);
      for (const f of refused) expectErrorFrame(f, 'RATE_LIMIT_EXCEEDED', f.id);
      // the refused ops did not run: only the answered emits exist
      const contents = new Set((await listAll(root.client)).filter((x) => x.to_identity === t.id).map((x) => x.content));
      expect([...contents].sort()).toEqual(done.map((f) => f.id as string).sort());
      // results came in the order the ops were sent
      const order = done.map((f) => idsSent.indexOf(f.id as string));
      expect(order).toEqual([...order].sort((x, y) => x - y));
      expect(s.closeInfo).toBeUndefined();
      expect(await s.ok('subscribe', {})).toEqual({ rings: [], types: [] });
    });

    it('leaves nothing behind in the hub for a socket closed while its resume op waits', async () => {
      const t = await join(root.client, 'gone');
      const w = await join(root.client, 'watcher');
      const watcher = await open(svc, w, { label: 'watcher' });
      const baseline = svc.realtime.hub.positions().length;
      const s = await PushSocket.open(svc.url, t.key, { label: 'closing' });
      expect(svc.realtime.hub.positions().length).toBe(baseline + 1);
      // the close frame follows the op on the wire: the server has the op when the socket closes
      s.send(JSON.stringify({ op: 'resume', id: 'late', after: s.welcome.cursor }));
      s.ws.close();
      await s.closed();
      await waitFor(() => svc.realtime.hub.positions().length === baseline, 5000, 'the closed socket to leave the hub');
      // a full round trip later (a commit pushed to another identity's socket, which the closed socket
      // would not be shown), the resume has had its turn: still nothing left of it
      const later = await emitOk(root, { signal_type: 'pulse', content: 'later', to_identity: w.id });
      await watcher.waitSignals([later.id]);
      await delivered(root, [later.id]);
      expect(svc.realtime.hub.positions().length).toBe(baseline);
    });
  });

  /** The per-process maps of the push layer keyed by identities and signals are bounded (least recently used goes). */
  describe('bounded memory', () => {
    let svc: Started;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
    });

    it('the reach cache keeps at most its bound of identities, dropping the least recently asked-for', async () => {
      const org = new Org(svc.runtime);
      const reach = new ReachCache(org, 3);
      const ms = await pool(5, 2, (i) => join(root.client, `reach-${i}`));
      expect((await root.client.post('/rings', { name: 'reachers', members: ms.map((m) => m.id) })).status).toBe(201);
      for (const m of ms.slice(0, 3)) await reach.load(m.id);
      expect(reach.size).toBe(3);
      reach.get(ms[0].id); // used again: ms[1] is now the least recently used
      for (const m of ms.slice(3)) await reach.load(m.id);
      expect(reach.size).toBe(3);
      for (const m of [ms[0], ms[3], ms[4]]) expect(reach.get(m.id).rings, m.name).toHaveLength(1);
      // a dropped identity is loaded again on demand, still within the bound
      expect(reach.get(ms[1].id).rings).toEqual([]);
      await waitFor(() => reach.get(ms[1].id).rings.length === 1, 5000, 'the dropped identity to be loaded again');
      expect(reach.size).toBe(3);
      expect(svc.realtime.reach.size).toBeLessThanOrEqual(REACH_MAX);
    });

    it('the deliverer remembers at most its bound of signals and still marks each pushed signal delivered', async () => {
      const deliverer = new Deliverer(svc.realtime.signals, 3);
      const to = await join(root.client, 'delivered-to');
      const ids = await pool(8, 4, async (i) => (await emitOk(root, { signal_type: 'pulse', content: `d${i}`, to_identity: to.id })).id as string);
      for (const id of ids) deliverer.pushed(id, 0);
      expect(deliverer.size).toBe(3);
      await waitFor(async () => (await listAll(root.client)).filter((x) => ids.includes(x.id) && x.delivery_state === 'delivered').length === ids.length, 5000, 'every pushed signal delivered');
      expect(svc.realtime.deliverer.size).toBeLessThanOrEqual(DELIVERED_MAX);
    });
  });

  /**
   * A burst of 500 direct signals; socket A stops processing and closes once it has ~100 (emits are held
   * back past #300 until it has closed, so it closes while emits are in flight), the burst finishes, then
   * a new socket resumes from the last cursor A processed.
   */
  describe('resume after a disconnect during a burst', () => {
    const BURST = 500;
    let svc: Service;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
    });

    async function burstWithDisconnect(target: Member): Promise<{ ids: string[]; before: string[]; lastCursor: string; a: PushSocket }> {
      const a = await open(svc, target, { label: 'A' });
      let aClosed = false;
      let emitted = 0;
      const closing = (async () => {
        await waitFor(() => a.signalIds().length >= 100, 10_000, 'A to receive 100 signals');
        a.recording = false;
        await a.close();
        aClosed = true;
      })();
      const emittedAtClose: number[] = [];
      void closing.then(() => emittedAtClose.push(emitted));
      const ids = await pool(BURST, 8, async (i) => {
        if (i >= 300) await waitFor(() => aClosed, 10_000, 'A to close');
        const s = await emitOk(root, { signal_type: 'pulse', content: `burst ${i}`, to_identity: target.id });
        emitted++;
        return s.id as string;
      });
      await closing;
      expect(emittedAtClose[0], 'A closed before the burst ended').toBeLessThan(BURST);
      const before = a.signalIds();
      expect(before.length).toBeGreaterThanOrEqual(100);
      expect(before.length).toBeLessThan(BURST);
      expectIncreasing(a.pushes(), 'A');
      return { ids, before, lastCursor: a.lastCursor()!, a };
    }

    it('a resume op replays everything after the cursor exactly once, then live pushes continue', async () => {
      const target = await join(root.client, 'burst-op');
      const { ids, before, lastCursor } = await burstWithDisconnect(target);

      // Quiesce first: pushes to A marked signals delivered asynchronously, and a socket that is already
      // live sees those commits before its resume op is handled. Reading the whole inbox marks every
      // signal delivered, after which nothing more is committed for them.
      let page: string | null = null;
      do {
        const r: { status: number; body: any } = await target.client.get(`/inbox/identity/${target.id}?limit=100${page ? `&after=${encodeURIComponent(page)}` : ''}`);
        expect(r.status).toBe(200);
        page = r.body.data.has_more ? r.body.data.cursor : null;
      } while (page);
      // (read by the admin, which marks nothing delivered)
      await waitFor(async () => (await root.client.get(`/inbox/identity/${target.id}?delivery_state=pending&limit=1`)).body.data.signals.length === 0, 10_000, 'no burst signal left pending');

      const b = await open(svc, target, { label: 'B' });
      const frame = await b.op('resume', { after: lastCursor }, 20_000);
      expect(frame.type, JSON.stringify(frame)).toBe('result');
      expect(frame.data.resumed_from).toBe(lastCursor);
      const resultAt = b.frames.indexOf(frame);
      const replayed = b.frames.slice(0, resultAt).filter((f) => f.type === 'signal').map((f) => f.signal.id);
      expectExactlyOnce([...before, ...replayed], ids, 'A then B');
      expect(b.frames.slice(resultAt + 1).filter((f) => f.type === 'signal')).toEqual([]);
      const pushes = b.pushes();
      expect(BigInt(pushes[0].cursor!)).toBeGreaterThan(BigInt(lastCursor));
      expectIncreasing(pushes, 'B');
      expect(BigInt(frame.data.cursor)).toBeGreaterThanOrEqual(BigInt(pushes[pushes.length - 1].cursor!));

      const live = await emitOk(root, { signal_type: 'pulse', content: 'after resume', to_identity: target.id });
      await b.waitSignals([live.id]);
      expectIncreasing(b.pushes(), 'B live');
      expect(b.signalIds().filter((id) => id === live.id)).toHaveLength(1);
    });

    it('?after= on the URL replays everything after the cursor exactly once before live pushes', async () => {
      const target = await join(root.client, 'burst-url');
      const { ids, before, lastCursor } = await burstWithDisconnect(target);
      const b = await open(svc, target, { label: 'B', after: lastCursor });
      const missed = ids.filter((id) => !before.includes(id));
      await b.waitSignals(missed, 20_000);
      const live = await emitOk(root, { signal_type: 'pulse', content: 'after resume', to_identity: target.id });
      await b.waitSignals([live.id]);
      expectExactlyOnce([...before, ...b.signalIds()], [...ids, live.id], 'A then B');
      expect(BigInt(b.pushes()[0].cursor!)).toBeGreaterThan(BigInt(lastCursor));
      expectIncreasing(b.pushes(), 'B');
    });
  });

  /**
   * A reader that stops reading. Pushes past PUSH_MAX_BUFFER_BYTES wait for it (the socket catches up from
   * the journal once it drains); one that makes no room for PUSH_DRAIN_TIMEOUT_MS is cut off with 4008 at
   * the cursor of the last push the server handed over, and a resume from there gets the rest.
   */
  describe('a slow consumer', () => {
    const COUNT = 200;
    const DRAIN_MS = 2500;
    /** the drain timeout of the cut-off test's own server */
    const CUT_MS = 300;
    const big = 'x'.repeat(40 * 1024);
    let svc: Started;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start({ PUSH_MAX_BUFFER_BYTES: '65536', PUSH_DRAIN_TIMEOUT_MS: String(DRAIN_MS) });
      root = await bootstrap(svc.url);
    });

    // readers pause with ws's own pause(): pausing its TCP socket directly is undone by ws's receiver when it drains a large frame
    const burst = (to: Member) => pool(COUNT, 4, async (i) => (await emitOk(root, { signal_type: 'pulse', content: `${i} ${big}`, to_identity: to.id })).id as string);
    const waiting = () => svc.realtime.hub.positions().some((p) => p.waitingForRoom);

    it('waits for a reader that pauses for less than PUSH_DRAIN_TIMEOUT_MS: every push arrives once, in order, on one socket', async () => {
      const slow = await join(root.client, 'paused');
      const s = await open(svc, slow, { label: 'paused' });
      s.ws.pause();
      const emitting = burst(slow);
      // the server's buffer for this socket is full: its pushes wait for the reader
      await waitFor(waiting, 20_000, 'the paused socket to be held back');
      s.ws.resume();
      const ids = await emitting;
      await s.waitSignals(ids, 20_000);
      expect(s.closeInfo).toBeUndefined();
      expectExactlyOnce(s.signalIds(), ids, 'paused');
      expectIncreasing(s.pushes(), 'paused');

      // a replay waits for a slow reader the same way
      const r = await open(svc, slow, { label: 'replay', after: s.welcome.cursor });
      r.ws.pause();
      await waitFor(waiting, 10_000, 'the replay to wait for the paused reader');
      r.ws.resume();
      await r.waitSignals(ids, 20_000);
      expect(r.closeInfo).toBeUndefined();
      expectExactlyOnce(r.signalIds(), ids, 'replay');
      expectIncreasing(r.pushes(), 'replay');
    });

    it('cuts off a reader that makes no room for PUSH_DRAIN_TIMEOUT_MS with 4008, and a resume from its cursor gets the rest', async () => {
      // a server of its own with a short drain timeout: the cut-off comes soon after the buffer fills
      const quick = await servers.start({ PUSH_MAX_BUFFER_BYTES: '65536', PUSH_DRAIN_TIMEOUT_MS: String(CUT_MS) });
      const admin = await bootstrap(quick.url);
      const slow = await join(admin.client, 'slow');
      const s = await open(quick, slow, { label: 'slow' });
      const attached = quick.realtime.hub.positions().length;
      const cut = () => quick.realtime.hub.positions().length === attached - 1;
      s.ws.pause();
      // emit until the server gives up on the socket and lets go of it (at most COUNT)
      const ids = (await pool(COUNT, 4, async (i) => (cut() ? undefined : ((await emitOk(admin, { signal_type: 'pulse', content: `${i} ${big}`, to_identity: slow.id })).id as string)))).filter((id): id is string => id !== undefined);
      await waitFor(cut, CUT_MS + 10_000, 'the server to cut the socket off');
      s.ws.resume();
      const closed = await s.closed();
      expect(closed.code).toBe(4008);
      const got = s.signalIds();
      expect(got.length).toBeLessThan(ids.length);
      const err = s.frames[s.frames.length - 1];
      expect(err.type, JSON.stringify({ ...err, signal: undefined })).toBe('error');
      expect(err.error?.code).toBe('PUSH_CONSUMER_TOO_SLOW');
      const lastCursor = s.lastCursor() ?? s.welcome.cursor!;
      // every push the server handed over arrived before the error frame: none was dropped
      expect(err.error?.details?.cursor).toBe(lastCursor);
      expectIncreasing(s.pushes(), 'slow');

      const r = await open(quick, slow, { label: 'resumed', after: lastCursor });
      await r.waitSignals(ids.filter((id) => !got.includes(id)), 20_000);
      expect(r.closeInfo).toBeUndefined();
      expect(BigInt(r.pushes()[0].cursor!)).toBeGreaterThan(BigInt(lastCursor));
      expectExactlyOnce([...got, ...r.signalIds()], ids, 'slow, then resumed');
      expectIncreasing(r.pushes(), 'resumed');
    });
  });
});

/**
 * The delivered mark names the journal position of the push that caused it, which every instance shares: a
 * recipient's socket or stream on B that was pushed the signal by B's hub skips the mark whichever instance
 * committed it, while the sender's socket on A is pushed it.
 */
describe('the delivered mark across two instances on one Redis', () => {
  const servers = serversOn('redis');
  let a: Service;
  let b: Service;
  let root: Member;
  const sockets: PushSocket[] = [];
  const streams: SseStream[] = [];

  beforeAll(async () => {
    const env = await servers.env();
    [a, b] = await Promise.all([startServer(env), startServer(env)]);
    root = await bootstrap(a.url);
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.all(sockets.map((s) => s.close()));
    await Promise.all([a?.close(), b?.close()]);
  });

  const open = async (svc: Service, m: Member, label: string) => {
    const s = await PushSocket.open(svc.url, m.key, { label });
    sockets.push(s);
    return s;
  };

  it('a recipient on B is pushed a signal emitted on A once, without the mark; the sender on A is pushed the mark', async () => {
    const onB = await join(root.client, 'recipient-b');
    const onBoth = await join(root.client, 'recipient-ab');
    const sender = await open(a, root, 'sender@A');
    const rB = await open(b, onB, 'recipient@B');
    const sseB = await SseStream.open(b.url, { token: onB.key }, 'recipient SSE@B');
    streams.push(sseB);
    // a recipient with a socket on each instance: whichever instance commits the mark, neither socket is sent it
    const bothA = await open(a, onBoth, 'recipient@A');
    const bothB = await open(b, onBoth, 'recipient2@B');

    const fromA = new Client(a.url, root.key);
    const toB = await emitOk(fromA, { signal_type: 'pulse', content: 'marked on B', to_identity: onB.id });
    const toBoth = await emitOk(fromA, { signal_type: 'pulse', content: 'marked on A or B', to_identity: onBoth.id });
    for (const id of [toB.id, toBoth.id]) await sender.waitUpdate(id, (x) => x.delivery_state === 'delivered', 'delivered', 10_000);

    // sentinels committed after the marks: each socket and stream has been offered both marks once it has its sentinel
    const [sB, sBoth] = [await emitOk(fromA, { signal_type: 'pulse', content: 'sentinel', to_identity: onB.id }), await emitOk(fromA, { signal_type: 'pulse', content: 'sentinel', to_identity: onBoth.id })];
    await rB.waitSignals([sB.id]);
    await sseB.waitSignals([sB.id]);
    for (const s of [bothA, bothB]) await s.waitSignals([sBoth.id]);

    const only = (frames: { type: string; signal?: any }[], id: string) => frames.filter((f) => f.signal?.id === id).map((f) => `${f.type}:${f.signal.delivery_state}`);
    expect(only(rB.pushes(), toB.id)).toEqual(['signal:pending']);
    expect(only(sseB.events, toB.id)).toEqual(['signal:pending']);
    for (const s of [bothA, bothB]) expect(only(s.pushes(), toBoth.id), s.label).toEqual(['signal:pending']);
    expect(only(sender.pushes(), toB.id)).toEqual(['signal.updated:delivered']);
  });
});
