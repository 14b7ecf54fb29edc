/**
 * Acknowledgement tracking over real HTTP, WebSocket and a webhook receiver, on both backends: an
 * ack_required signal to a role of three, one acknowledges, the due time passes; the other two see it
 * overdue, the overdue filter pages exactly those items, the receipts route lists all three, and the
 * sender hears signal.ack_overdue once (push and webhook). Refusals: non-sender, unknown id, bad fields.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket, type Frame } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const FAST = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
// long enough for the acknowledgement before it on a loaded machine
const DUE_S = 6;

/** a signal.ack_overdue frame carries its data under `ack` */
const ackOf = (f: Frame): any => (f as Frame & { ack?: unknown }).ack;
const inbox = async (m: Member, query: string) => expectOk(await m.client.get(`/inbox/identity/${m.id}?${query}`));
const overdueIds = async (m: Member) => (await inbox(m, 'ack_overdue=true&limit=100')).signals.map((s: any) => s.id);

describe.each(BACKENDS)('acknowledgement tracking on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let sender: Member;
  let r: Member[];
  let rx: Receiver;
  let socket: PushSocket;

  beforeAll(async () => {
    svc = await servers.start(FAST);
    root = await bootstrap(svc.url);
    sender = await join(root.client, 'ack-sender');
    r = [await join(root.client, 'ack-r1'), await join(root.client, 'ack-r2'), await join(root.client, 'ack-r3')];
    const role = expectOk(await root.client.post('/roles', { name: 'ackers' }), 201);
    for (const m of r) expectOk(await root.client.post('/fills', { identity_id: m.id, role_id: role.id }), 201);
    rx = await startReceiver();
    rx.secret = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.ack_overdue'] }), 201).secret;
    socket = await PushSocket.open(svc.url, sender.key, { label: 'sender' });
  });
  afterAll(async () => {
    await socket?.close();
    await rx?.close();
  });

  const overdueFrames = (signalId: string) => socket.frames.filter((f) => f.type === 'signal.ack_overdue' && ackOf(f)?.signal_id === signalId);
  const overdueHooks = (signalId: string) => [...rx.unique().values()].filter((x) => x.body.type === 'signal.ack_overdue' && x.body.data.signal_id === signalId);

  it('one of three acknowledges; past the due time the other two are overdue, filtered, listed and reported to the sender once', async () => {
    const [r1, r2, r3] = r;
    const a = await emitOk(sender, { signal_type: 'query', content: 'confirm the freeze', to_role: 'ackers', ack_required: true, ack_due_in_s: DUE_S });
    expect(a).toMatchObject({ ack_required: true });
    expect(Date.parse(a.ack_due_at)).toBe(Date.parse(a.created_at) + DUE_S * 1000);
    expect(a).not.toHaveProperty('ack_recipients');
    const before = (await inbox(r1, 'limit=100')).signals.find((s: any) => s.id === a.id);
    expect(before).toMatchObject({ ack_required: true, ack_due_at: a.ack_due_at, ack_overdue: false });
    expectOk(await r1.client.post('/inbox/acknowledge', { signal_id: a.id }));
    // any_one: the first recipient to acknowledge takes it, and then nobody owes it
    const c = await emitOk(sender, { signal_type: 'query', content: 'one of you', to_role: 'ackers', routing_policy: 'any_one', ack_required: true, ack_due_in_s: DUE_S });
    expectOk(await r1.client.post('/inbox/acknowledge', { signal_id: c.id }));
    const b = await emitOk(sender, { signal_type: 'query', content: 'and this one', to_identity: r2.id, ack_required: true, ack_due_in_s: DUE_S });
    // newer plain signals in r2's inbox: the overdue filter must page past none of them
    for (let i = 0; i < 25; i++) await emitOk(sender, { signal_type: 'pulse', content: `noise ${i}`, to_identity: r2.id });

    await waitFor('both signals overdue in r2 inbox', () => overdueIds(r2), (ids) => ids.length === 2, 20_000);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(a.ack_due_at));

    // the filter reads the overdue index: pages of one fill, in inbox order, and end
    const p1 = await inbox(r2, 'ack_overdue=true&limit=1');
    expect(p1.signals.map((s: any) => s.id)).toEqual([b.id]);
    expect(p1.has_more).toBe(true);
    const p2 = await inbox(r2, `ack_overdue=true&limit=1&after=${encodeURIComponent(p1.cursor)}`);
    expect(p2.signals.map((s: any) => s.id)).toEqual([a.id]);
    expect(p2.signals[0]).toMatchObject({ ack_required: true, ack_due_at: a.ack_due_at, ack_overdue: true, receipt_state: 'unread' });
    const p3 = p2.has_more ? await inbox(r2, `ack_overdue=true&limit=1&after=${encodeURIComponent(p2.cursor)}`) : { signals: [], has_more: false };
    expect(p3).toMatchObject({ signals: [], has_more: false });
    const notOverdue = (await inbox(r2, 'ack_overdue=false&limit=100')).signals.map((s: any) => s.id);
    expect(notOverdue).toHaveLength(25);
    expect(notOverdue).not.toContain(a.id);

    await waitFor('r3 overdue', () => overdueIds(r3), (ids) => ids.length === 1, 20_000);
    expect(await overdueIds(r3)).toEqual([a.id]);
    expect(await overdueIds(r1)).toEqual([]);
    expect((await inbox(r1, 'limit=100')).signals.find((s: any) => s.id === a.id)).toMatchObject({ ack_required: true, ack_overdue: false, receipt_state: 'acknowledged' });
    // the role inbox filters the reader's own overdue items to that role
    expect(expectOk(await r3.client.get('/inbox/ackers?ack_overdue=true')).signals.map((s: any) => s.id)).toEqual([a.id]);

    const receipts = expectOk(await sender.client.get(`/signals/${a.id}/receipts?limit=100`));
    expect(receipts.has_more).toBe(false);
    const byId = new Map(receipts.receipts.map((x: any) => [x.identity_id, x]));
    expect([...byId.keys()].sort()).toEqual(r.map((m) => m.id).sort());
    expect(byId.get(r1.id)).toMatchObject({ signal_id: a.id, state: 'acknowledged', ack_required: true, ack_due_at: a.ack_due_at, ack_overdue: false });
    expect((byId.get(r1.id) as any).acknowledged_at).not.toBeNull();
    for (const m of [r2, r3]) expect(byId.get(m.id)).toMatchObject({ state: 'unread', acknowledged_at: null, ack_due_at: a.ack_due_at, ack_overdue: true });
    // paged: one per page, all three, no repeats
    const seen: string[] = [];
    let after = '';
    for (let i = 0; i < 5; i++) {
      const pg = expectOk(await sender.client.get(`/signals/${a.id}/receipts?limit=1${after}`));
      seen.push(...pg.receipts.map((x: any) => x.identity_id));
      if (!pg.has_more) break;
      after = `&after=${encodeURIComponent(pg.cursor)}`;
    }
    expect(seen.sort()).toEqual(r.map((m) => m.id).sort());

    await waitFor('the sender to hear of both signals', () => [overdueFrames(a.id).length, overdueFrames(b.id).length], ([x, y]) => x >= 1 && y >= 1, 20_000);
    expect(ackOf(overdueFrames(a.id)[0])).toMatchObject({ signal_id: a.id, ack_due_at: a.ack_due_at, overdue_recipients: [r2.id, r3.id].sort() });
    expect(ackOf(overdueFrames(b.id)[0]).overdue_recipients).toEqual([r2.id]);
    await waitFor('the webhook deliveries', () => [overdueHooks(a.id).length, overdueHooks(b.id).length], ([x, y]) => x >= 1 && y >= 1, 20_000);
    const hook = overdueHooks(a.id)[0];
    expect(hook.verified).toBe(true);
    expect(hook.body.data).toMatchObject({ signal_id: a.id, overdue_recipients: [r2.id, r3.id].sort() });

    // the any_one signal's due checks ran (no timers left) and found nobody owing it
    const timersOf = async (kind: string, id: string) => expectOk(await root.client.get(`/admin/actors/${kind}/${encodeURIComponent(id)}`)).timers;
    await waitFor('the any_one due checks', async () => [await timersOf('signal', c.id), await timersOf('receipt', `${r2.id}:${c.id}`)], ([x, y]) => !x.length && !y.length, 20_000);
    expect(expectOk(await sender.client.get(`/signals/${c.id}/receipts`)).receipts.map((x: any) => x.ack_overdue)).toEqual([false, false, false]);
    expect(await overdueIds(r2)).not.toContain(c.id);

    // a late acknowledgement clears what r3 owes; nothing is reported again
    expectOk(await r3.client.post('/inbox/acknowledge', { signal_id: a.id }));
    expect(await overdueIds(r3)).toEqual([]);
    const late = expectOk(await sender.client.get(`/signals/${a.id}/receipts?limit=100`)).receipts.find((x: any) => x.identity_id === r3.id);
    expect(late).toMatchObject({ state: 'acknowledged', ack_overdue: false });
    expect(Date.parse(late.acknowledged_at)).toBeGreaterThan(Date.parse(a.ack_due_at));
    // a marker pushed after everything: once it arrives, any second report would have arrived before it
    const marker = await emitOk(r1, { signal_type: 'pulse', content: 'marker', to_identity: sender.id });
    await socket.waitSignals([marker.id], 20_000);
    expect(overdueFrames(a.id)).toHaveLength(1);
    expect(overdueFrames(b.id)).toHaveLength(1);
    expect(overdueFrames(c.id)).toHaveLength(0);
    expect(overdueHooks(a.id)).toHaveLength(1);
  });

  it('without a due time nothing is ever overdue; the sender and an admin read receipts, others may not', async () => {
    const [r1, r2] = r;
    const s = await emitOk(sender, { signal_type: 'query', content: 'no rush', to_identity: r1.id, ack_required: true });
    expect(s).toMatchObject({ ack_required: true, ack_due_at: null });
    const plain = await emitOk(sender, { signal_type: 'pulse', content: 'plain', to_identity: r1.id });
    expect(plain).toMatchObject({ ack_required: false, ack_due_at: null });
    expect((await inbox(r1, 'limit=100')).signals.find((x: any) => x.id === plain.id)).toMatchObject({ ack_required: false, ack_due_at: null, ack_overdue: false });
    for (const who of [sender, root]) {
      const list = expectOk(await who.client.get(`/signals/${s.id}/receipts`)).receipts;
      expect(list).toEqual([expect.objectContaining({ identity_id: r1.id, state: 'unread', ack_required: true, ack_due_at: null, ack_overdue: false })]);
    }
    expectError(await r2.client.get(`/signals/${s.id}/receipts`), 403, 'POLICY_DENIED');
    expectError(await r1.client.get(`/signals/${s.id}/receipts`), 403, 'POLICY_DENIED');
    expectError(await sender.client.get(`/signals/${UNKNOWN}/receipts`), 404, 'SIGNAL_NOT_FOUND');
  });

  it('refuses ack_due_in_s without ack_required, out of bounds or not an integer, and a non-boolean ack_required', async () => {
    const base = { signal_type: 'query', content: 'x', to_identity: r[0].id };
    for (const bad of [{ ack_due_in_s: 60 }, { ack_required: false, ack_due_in_s: 60 }, { ack_required: true, ack_due_in_s: 0 }, { ack_required: true, ack_due_in_s: 1.5 }, { ack_required: true, ack_due_in_s: 30 * 86_400 + 1 }])
      expectError(await sender.client.post('/emit', { ...base, ...bad }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'ack_due_in_s');
    expectError(await sender.client.post('/emit', { ...base, ack_required: 'yes' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'ack_required');
    expectError(await r[0].client.get('/inbox/identity/' + r[0].id + '?ack_overdue=maybe'), 400, 'VALIDATION_INVALID_TYPE', 'ack_overdue');
  });

  it('the /rpc emit validates with the same schema and takes the same fields', async () => {
    const rpc = (params: unknown) => sender.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'signals.emit', params });
    const base = { signal_type: 'query', content: 'over rpc', to_identity: r[0].id };
    const res = await rpc({ ...base, ack_required: true, ack_due_in_s: 600 });
    expect(res.body.result, JSON.stringify(res.body)).toMatchObject({ ack_required: true });
    expect(Date.parse(res.body.result.ack_due_at)).toBe(Date.parse(res.body.result.created_at) + 600_000);
    expect(expectOk(await sender.client.get(`/signals/${res.body.result.id}/receipts`)).receipts.map((x: any) => x.identity_id)).toEqual([r[0].id]);
    const bad = await rpc({ ...base, ack_required: true, ack_due_in_s: 0 });
    expect(bad.body.error.data.details, JSON.stringify(bad.body)).toMatchObject({ field: 'ack_due_in_s' });
    const lone = await rpc({ ...base, ack_due_in_s: 60 });
    expect(lone.body.error.data, JSON.stringify(lone.body)).toMatchObject({ code: 'SIGNAL_EMIT_VALIDATION_FAILED', details: { field: 'ack_due_in_s' } });
  });
});
