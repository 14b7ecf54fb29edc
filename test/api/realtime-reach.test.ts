/**
 * Who a ring or role signal is pushed to follows the org at once: a change of a ring's members or of a role's
 * fills journals `reach.changed` in its own commit, and every instance's push reloads those identities' roles
 * and rings before it offers anything committed after it. So the first ring or role signal emitted after the
 * change already reaches a member just added and no longer reaches one just removed (before, the push read a
 * copy up to a second old). On both backends; on Redis the sockets sit on a second instance.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectOk } from './support.js';

describe.each(BACKENDS)('push follows ring and role changes at once on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let second: Started | undefined;
  let root: Member;
  let stays: Member;
  let leaves: Member;
  let joins: Member;
  const sockets: PushSocket[] = [];
  /** where the sockets connect: the other instance on Redis, so the change travels through the shared journal */
  const socketUrl = () => second?.url ?? svc.url;
  const open = async (m: Member) => {
    const s = await PushSocket.open(socketUrl(), m.key, { label: m.name });
    sockets.push(s);
    return s;
  };

  beforeAll(async () => {
    svc = await servers.start();
    if (backend === 'redis') second = await servers.beside(svc);
    root = await bootstrap(svc.url);
    [stays, leaves, joins] = await Promise.all(['stays', 'leaves', 'joins'].map((n) => join(root.client, n)));
  });
  afterAll(async () => {
    await Promise.all(sockets.map((s) => s.close()));
  });

  /** A direct marker to each socket's identity, emitted last: once it arrived, everything before it was decided. */
  async function settle(pairs: [Member, PushSocket][]): Promise<void> {
    const markers = await Promise.all(pairs.map(([m]) => emitOk(root, { signal_type: 'pulse', content: 'marker', to_identity: m.id })));
    await Promise.all(pairs.map(([, s], i) => s.waitSignals([markers[i].id], 20_000)));
  }

  it('the first ring signal after a members change reaches who was added and not who was removed', async () => {
    const ring = expectOk(await root.client.post('/rings', { name: `crew-${backend}`, members: [stays.id, leaves.id] }), 201);
    const [sStays, sLeaves, sJoins] = await Promise.all([stays, leaves, joins].map(open));
    const pairs: [Member, PushSocket][] = [
      [stays, sStays],
      [leaves, sLeaves],
      [joins, sJoins],
    ];
    // each socket's reach is read once and cached: the members see a ring signal, the outsider a direct one
    const before = await emitOk(root, { signal_type: 'alert', content: 'before', to_ring: ring.name });
    await settle(pairs);
    expect(sStays.signalIds()).toContain(before.id);
    expect(sLeaves.signalIds()).toContain(before.id);
    expect(sJoins.signalIds()).not.toContain(before.id);

    expectOk(await root.client.put(`/rings/${ring.id}`, { members: [stays.id, joins.id] }));
    const after = await emitOk(root, { signal_type: 'alert', content: 'after', to_ring: ring.name });
    await settle(pairs);
    expect(sStays.signalIds()).toContain(after.id);
    expect(sJoins.signalIds(), 'added a moment ago').toContain(after.id);
    expect(sLeaves.signalIds(), 'removed a moment ago').not.toContain(after.id);
  });

  it('the first role signal after a fill is added or removed follows it', async () => {
    const role = expectOk(await root.client.post('/roles', { name: `reviewer-${backend}` }), 201);
    const fill = expectOk(await root.client.post('/fills', { identity_id: leaves.id, role_id: role.id }), 201);
    const [sLeaves, sJoins] = await Promise.all([leaves, joins].map(open));
    const pairs: [Member, PushSocket][] = [
      [leaves, sLeaves],
      [joins, sJoins],
    ];
    const before = await emitOk(root, { signal_type: 'alert', content: 'before', to_role: role.name });
    await settle(pairs);
    expect(sLeaves.signalIds()).toContain(before.id);
    expect(sJoins.signalIds()).not.toContain(before.id);

    expectOk(await root.client.del(`/fills/${fill.id}`));
    expectOk(await root.client.post('/fills', { identity_id: joins.id, role_id: role.id }), 201);
    const after = await emitOk(root, { signal_type: 'alert', content: 'after', to_role: role.name });
    await settle(pairs);
    expect(sJoins.signalIds(), 'filled a moment ago').toContain(after.id);
    expect(sLeaves.signalIds(), 'unfilled a moment ago').not.toContain(after.id);
  });

  it('never pushes the reach.changed entry itself', () => {
    for (const s of sockets) expect(s.frames.filter((f) => f.type === 'reach.changed' || f.type === 'auth.changed')).toEqual([]);
  });
});
