/**
 * Two service processes on one Redis (same REDIS_PREFIX): sockets on both instances for direct, role, ring
 * and broadcast recipients; signals emitted on both instances over REST and over the socket op `emit`,
 * concurrently. Every socket receives every signal meant for it exactly once, none meant for others, with
 * strictly increasing cursors; an admin SSE stream on one instance sees what is emitted on the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { expectExactlyOnce, expectIncreasing, pool, PushSocket, SseStream } from '../helpers/push.js';
import { serversOn, spawnServer, type ChildServer } from '../helpers/server.js';

describe('realtime across two instances on one Redis', () => {
  const servers = serversOn('redis');
  let a: ChildServer;
  let b: ChildServer;
  let root: Member;
  /** direct recipient, with a socket on each instance */
  let direct: Member;
  /** fill role ops: one socket on A, one on B */
  let op1: Member;
  let op2: Member;
  /** members of ring grid: one socket on A, one on B */
  let grid1: Member;
  let grid2: Member;
  /** no role, no ring: broadcasts only */
  let loner: Member;
  const sockets: PushSocket[] = [];
  const streams: SseStream[] = [];

  beforeAll(async () => {
    const env = await servers.env();
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    root = await bootstrap(a.url);
    direct = await join(root.client, 'direct');
    op1 = await join(root.client, 'op1');
    op2 = await join(root.client, 'op2');
    grid1 = await join(root.client, 'grid1');
    grid2 = await join(root.client, 'grid2');
    loner = await join(root.client, 'loner');
    const role = await root.client.post('/roles', { name: 'ops' });
    expect(role.status, JSON.stringify(role.body)).toBe(201);
    for (const m of [op1, op2]) expect((await root.client.post('/fills', { identity_id: m.id, role_id: role.body.data.id })).status).toBe(201);
    // org changes made through A, read by B from the shared store
    expect((await new Client(b.url, root.key).post('/rings', { name: 'grid', members: [grid1.id, grid2.id] })).status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.all(sockets.map((s) => s.close()));
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('every socket on either instance gets each signal meant for it exactly once, in cursor order', async () => {
    const open = async (srv: ChildServer, m: Member, where: string) => {
      const s = await PushSocket.open(srv.url, m.key, { label: `${m.name}@${where}` });
      sockets.push(s);
      return s;
    };
    const socks = {
      directA: await open(a, direct, 'A'),
      directB: await open(b, direct, 'B'),
      op1A: await open(a, op1, 'A'),
      op2B: await open(b, op2, 'B'),
      grid1A: await open(a, grid1, 'A'),
      grid2B: await open(b, grid2, 'B'),
      lonerA: await open(a, loner, 'A'),
      lonerB: await open(b, loner, 'B'),
    };
    const adminB = await SseStream.open(b.url, { token: root.key }, 'admin SSE @B');
    streams.push(adminB);

    const clientA = new Client(a.url, root.key);
    const clientB = new Client(b.url, root.key);
    const targets = [{ to_identity: direct.id }, { to_role: 'ops' }, { to_ring: 'grid' }, {}];
    const kinds = ['direct', 'role', 'ring', 'broadcast'] as const;
    type Sent = { id: string; kind: (typeof kinds)[number]; via: string };
    const N = 12;
    const viaRest = (client: Client, via: string) =>
      pool(N, 3, async (i): Promise<Sent> => {
        const r = await client.post('/emit', { signal_type: 'pulse', content: `${via} ${i}`, ...targets[i % 4] });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return { id: r.body.data.id, kind: kinds[i % 4], via };
      });
    const viaSocket = (s: PushSocket, via: string) =>
      pool(N, 3, async (i): Promise<Sent> => {
        const data = await s.ok('emit', { signal_type: 'alert', content: `${via} ${i}`, ...targets[i % 4] });
        return { id: data.id, kind: kinds[i % 4], via };
      });
    const sent = (
      await Promise.all([viaRest(clientA, 'REST@A'), viaRest(clientB, 'REST@B'), viaSocket(socks.lonerA, 'WS@A'), viaSocket(socks.op2B, 'WS@B')])
    ).flat();
    expect(sent).toHaveLength(4 * N);
    expect(new Set(sent.map((s) => s.id)).size).toBe(4 * N);

    // one sentinel from each instance, committed after everything else
    const sentinels: string[] = [];
    for (const client of [clientA, clientB]) {
      const r = await client.post('/emit', { signal_type: 'pulse', content: 'sentinel' });
      expect(r.status).toBe(201);
      sentinels.push(r.body.data.id);
    }
    const all = Object.values(socks);
    for (const s of all) await s.waitSignals(sentinels, 10_000);

    const ofKind = (...ks: Sent['kind'][]) => sent.filter((s) => ks.includes(s.kind)).map((s) => s.id);
    const expected: [PushSocket, string[]][] = [
      [socks.directA, ofKind('direct', 'broadcast')],
      [socks.directB, ofKind('direct', 'broadcast')],
      [socks.op1A, ofKind('role', 'broadcast')],
      [socks.op2B, ofKind('role', 'broadcast')],
      [socks.grid1A, ofKind('ring', 'broadcast')],
      [socks.grid2B, ofKind('ring', 'broadcast')],
      [socks.lonerA, ofKind('broadcast')],
      [socks.lonerB, ofKind('broadcast')],
    ];
    for (const [s, ids] of expected) {
      expectExactlyOnce(s.signalIds(), [...ids, ...sentinels], s.label);
      expectIncreasing(s.pushes(), s.label);
    }
    // both instances number the journal the same way: the same signal has the same cursor on either
    const cursorOf = (s: PushSocket) => new Map(s.frames.filter((f) => f.type === 'signal').map((f) => [f.signal.id, f.cursor]));
    expect(cursorOf(socks.directB)).toEqual(cursorOf(socks.directA));
    expect(cursorOf(socks.lonerB)).toEqual(cursorOf(socks.lonerA));

    // the admin stream on B saw everything, including what was emitted on A
    await adminB.waitSignals([...sent.map((s) => s.id), ...sentinels], 10_000);
    expectExactlyOnce(adminB.signalIds(), [...sent.map((s) => s.id), ...sentinels], 'admin SSE @B');
    const ids = adminB.events.map((e) => e.id);
    for (let i = 1; i < ids.length; i++) expect(BigInt(ids[i]) > BigInt(ids[i - 1]), `SSE id ${ids[i]} after ${ids[i - 1]}`).toBe(true);
    expect(sent.filter((s) => s.via.endsWith('@A')).every((s) => adminB.signalIds().includes(s.id))).toBe(true);
  }, 60_000);
});
