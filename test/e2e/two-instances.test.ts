/**
 * Two service processes on one Redis (same REDIS_PREFIX) are one service: an identity made through one works
 * on the other, 20 concurrent claims of one task split across both instances have exactly one winner, and
 * 200 concurrent replies to one thread split across both get distinct, gapless sequence numbers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { expectError, expectOk, findSignal } from '../api/support.js';

describe('two instances on one Redis', () => {
  const servers = serversOn('redis');
  let a: ChildServer | undefined;
  let b: ChildServer | undefined;
  /** the admin, bootstrapped through instance a */
  let root: Member;

  beforeAll(async () => {
    const env = await servers.env({ TASK_LEASE_MS: '60000' });
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    root = await bootstrap(a.url);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('20 concurrent claims split across both instances: exactly one winner, seen by both', async () => {
    // the bootstrap is shared: instance b refuses a second bootstrap and accepts a's admin key
    expectError(await new Client(b!.url).post('/invite/create', { name: 'late-root', type: 'human' }), 401, 'AUTH_KEY_MISSING');
    const rootOnB = new Client(b!.url, root.key);

    const members: Member[] = await Promise.all(Array.from({ length: 20 }, (_, i) => join(i % 2 ? rootOnB : root.client, `agent-${i}`)));
    const task = await rootOnB.post('/emit', { signal_type: 'task', content: 'one winner' });
    expect(task.status).toBe(201);
    const id = task.body.data.id;

    const clientFor = (m: Member, i: number) => new Client(i % 2 ? a!.url : b!.url, m.key);
    const results = await Promise.all(members.map((m, i) => clientFor(m, i).post('/claim', { signal_id: id })));

    const winners = results.flatMap((r, i) => (r.status === 200 ? [i] : []));
    expect(winners, JSON.stringify(results.map((r) => r.status))).toHaveLength(1);
    for (const [i, r] of results.entries()) if (i !== winners[0]) expectError(r, 409, 'SIGNAL_CLAIM_CONFLICT');
    const winner = members[winners[0]];
    expect(results[winners[0]].body.data).toMatchObject({ claimed_by: winner.id, delivery_state: 'leased', delivery_count: 0 });

    const onA = await findSignal(root.client, id);
    const onB = await findSignal(rootOnB, id);
    for (const s of [onA, onB]) {
      expect(s).toMatchObject({ id, claimed_by: winner.id, delivery_state: 'leased', claim_expires_at: results[winners[0]].body.data.claim_expires_at });
    }
    // the claim holds on both instances: the winner can renew on either, a loser cannot take it on either
    expect((await new Client(a!.url, winner.key).post('/claim', { signal_id: id })).status).toBe(200);
    expect((await new Client(b!.url, winner.key).post('/claim', { signal_id: id })).status).toBe(200);
    const loser = members[(winners[0] + 1) % 20];
    expectError(await new Client(a!.url, loser.key).post('/claim', { signal_id: id }), 409, 'SIGNAL_CLAIM_CONFLICT');
    expectError(await new Client(b!.url, loser.key).post('/claim', { signal_id: id }), 409, 'SIGNAL_CLAIM_CONFLICT');
  });

  it('200 concurrent replies to one thread split across both instances: all succeed, sequences 1..200 without gaps', async () => {
    const rootOnA = new Client(a!.url, (await join(root.client, 'replier')).key);
    const rootOnB = new Client(b!.url, rootOnA.key);
    const top = await rootOnA.post('/emit', { signal_type: 'proposal', content: 'thread across instances' });
    expect(top.status).toBe(201);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? rootOnA : rootOnB).post('/emit', { signal_type: 'pulse', content: `r${i}`, parent_id: top.body.data.id })));
    expect(results.filter((r) => r.status !== 201).map((r) => r.body)).toEqual([]);
    expect(results.map((r) => r.body.data.sequence).sort((x, y) => x - y)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    for (const c of [rootOnA, rootOnB]) {
      // GET /thread pages (100 a page): the whole thread is its pages in order
      const thread: any[] = [];
      for (let after = ''; ; ) {
        const page = expectOk(await c.get(`/thread/${top.body.data.id}${after && `?after=${encodeURIComponent(after)}`}`));
        thread.push(...page.signals);
        if (!page.has_more) break;
        after = page.cursor;
      }
      expect(thread.map((s: any) => s.sequence)).toEqual(Array.from({ length: 201 }, (_, i) => i));
    }
  }, 60_000);
});
