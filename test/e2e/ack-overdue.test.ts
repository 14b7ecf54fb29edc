/**
 * signal.ack_overdue fires once across processes: on both backends the due time passes while the server
 * process is down and the restarted process reports it exactly once (a third start reports nothing more);
 * on Redis two instances also share the due timers and together report each signal exactly once. Counted
 * on the journal (a WebSocket replaying it from the start) and at a webhook receiver.
 */
import { describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { PushSocket, type Frame } from '../helpers/push.js';
import { BACKENDS, childServersOn } from '../helpers/server.js';
import type { Receiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectOk, waitFor } from '../api/support.js';

const FAST = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
const ackOf = (f: Frame): any => (f as Frame & { ack?: unknown }).ack;

/** Every signal.ack_overdue frame in the journal, replayed from its start to the sender's socket, per signal id. */
async function reportsIn(url: string, sender: Member, marker: () => Promise<string>): Promise<Map<string, any[]>> {
  const socket = await PushSocket.open(url, sender.key, { after: '0', label: 'sender replay' });
  try {
    // a signal to the sender emitted now: once it arrives, the replay before it has arrived too
    await socket.waitSignals([await marker()], 20_000);
    const out = new Map<string, any[]>();
    for (const f of socket.frames.filter((x) => x.type === 'signal.ack_overdue')) out.set(ackOf(f).signal_id, [...(out.get(ackOf(f).signal_id) ?? []), ackOf(f)]);
    return out;
  } finally {
    await socket.close();
  }
}

const hooksOf = (rx: Receiver, id: string) => [...rx.unique().values()].filter((x) => x.body.type === 'signal.ack_overdue' && x.body.data.signal_id === id);

async function setUp(url: string, rx: Receiver) {
  const root = await bootstrap(url);
  const sender = await join(root.client, 'sender');
  const r1 = await join(root.client, 'r1');
  const r2 = await join(root.client, 'r2');
  const role = expectOk(await root.client.post('/roles', { name: 'crew' }), 201);
  for (const m of [r1, r2]) expectOk(await root.client.post('/fills', { identity_id: m.id, role_id: role.id }), 201);
  rx.secret = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.ack_overdue'] }), 201).secret;
  return { root, sender, r1, r2 };
}

describe.each(BACKENDS)('signal.ack_overdue across a restart (%s)', (backend) => {
  const fleet = childServersOn(backend);

  it('the due time passes while the server is down: the restarted process reports it once, a later start never again', async () => {
    const rx = await fleet.receiver();
    const env = await fleet.env(FAST);
    const first = await fleet.start(env);
    const { root, sender, r1, r2 } = await setUp(first.url, rx);
    const s = await emitOk(sender, { signal_type: 'query', content: 'ack before the restart', to_role: 'crew', ack_required: true, ack_due_in_s: 5 });
    expectOk(await r1.client.post('/inbox/acknowledge', { signal_id: s.id }));
    const second = await fleet.restartPast(first, env, Date.parse(s.ack_due_at), 'the due time');
    const onSecond = (m: Member) => new Client(second.url, m.key);
    await waitFor('r2 overdue after the restart', async () => expectOk(await onSecond(r2).get(`/inbox/identity/${r2.id}?ack_overdue=true`)).signals.map((x: any) => x.id), (ids) => ids.length === 1, 20_000);
    await waitFor('the webhook delivery', () => hooksOf(rx, s.id).length, (n) => n >= 1, 20_000);
    const marker = () => emitOk(onSecond(root), { signal_type: 'pulse', content: 'marker', to_identity: sender.id }).then((x) => x.id as string);
    const seen = await reportsIn(second.url, sender, marker);
    expect(seen.get(s.id)).toEqual([expect.objectContaining({ signal_id: s.id, overdue_recipients: [r2.id] })]);
    await fleet.stop(second);

    const third = await fleet.start(env);
    const again = await reportsIn(third.url, sender, () => emitOk(new Client(third.url, root.key), { signal_type: 'pulse', content: 'marker 2', to_identity: sender.id }).then((x) => x.id as string));
    expect(again.get(s.id)).toHaveLength(1);
    expect(hooksOf(rx, s.id)).toHaveLength(1);
  }, 240_000);
});

describe('signal.ack_overdue on two instances sharing one Redis', () => {
  const fleet = childServersOn('redis');

  it('each of ten signals due at once is reported exactly once between the two instances', async () => {
    const rx = await fleet.receiver();
    const env = await fleet.env(FAST);
    const [a, b] = await Promise.all([fleet.start(env), fleet.start(env)]);
    const { root, sender, r1, r2 } = await setUp(a.url, rx);
    const onB = new Client(b.url, sender.key);
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await emitOk(i % 2 ? onB : sender.client, { signal_type: 'query', content: `due ${i}`, to_role: 'crew', ack_required: true, ack_due_in_s: 12 })).id);
    for (const id of ids.slice(0, 5)) expectOk(await new Client(b.url, r1.key).post('/inbox/acknowledge', { signal_id: id }));

    await waitFor('every webhook delivery', () => ids.filter((id) => hooksOf(rx, id).length > 0).length, (n) => n === 10, 40_000);
    const marker = () => emitOk(root, { signal_type: 'pulse', content: 'marker', to_identity: sender.id }).then((x) => x.id as string);
    const [onA, onBSeen] = [await reportsIn(a.url, sender, marker), await reportsIn(b.url, sender, marker)];
    for (const [i, id] of ids.entries()) {
      const expected = i < 5 ? [r2.id] : [r1.id, r2.id].sort();
      expect(onA.get(id), id).toEqual([expect.objectContaining({ overdue_recipients: expected })]);
      expect(onBSeen.get(id), id).toHaveLength(1);
      expect(hooksOf(rx, id), id).toHaveLength(1);
    }
  }, 240_000);
});
