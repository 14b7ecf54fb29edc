/**
 * Reservations across processes: two instances on one Redis grant exactly one of many concurrent exclusive
 * requests for one path (the project lock's version check in the store commit), and on both backends a
 * reservation's expiry timer still fires after the process that granted it was killed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { expectOk, waitFor } from '../api/support.js';

describe('reservations on two instances sharing one Redis', () => {
  const servers = serversOn('redis');
  let a: ChildServer | undefined;
  let b: ChildServer | undefined;
  let root: Member;

  beforeAll(async () => {
    const env = await servers.env();
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    root = await bootstrap(a.url);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('20 concurrent exclusive requests for one path split across both instances: exactly one granted', async () => {
    const members = await Promise.all(Array.from({ length: 20 }, (_, i) => join(root.client, `racer-${i}`)));
    const answers = await Promise.all(
      members.map(async (m, i) => expectOk(await new Client(i % 2 ? a!.url : b!.url, m.key).post('/reservations', { project: 'race', paths: [i % 3 ? 'src/hot.ts' : 'src/*.ts'] }))),
    );
    const winners = answers.filter((x) => x.granted.length);
    expect(winners, JSON.stringify(answers)).toHaveLength(1);
    const won = winners[0].granted[0];
    for (const x of answers) if (x !== winners[0]) expect(x.conflicts.map((c: any) => c.reservation.id)).toEqual([won.id]);
    for (const url of [a!.url, b!.url]) expect(expectOk(await new Client(url, root.key).get('/reservations?project=race')).reservations.map((r: any) => r.id)).toEqual([won.id]);
  });
});

describe.each(BACKENDS)('reservation expiry across a restart on %s', (backend) => {
  const servers = serversOn(backend);
  let second: ChildServer | undefined;
  afterAll(async () => {
    await second?.stop();
  });

  it('a reservation granted before SIGKILL expires on time on the restarted process', async () => {
    const env = await servers.env();
    const first = await spawnServer(env);
    const root = await bootstrap(first.url);
    const holder = await join(root.client, 'holder');
    const r = expectOk(await holder.client.post('/reservations', { paths: ['src/**'], ttl_s: 2 })).granted[0];
    await first.stop('SIGKILL');
    second = await spawnServer(env);
    const onSecond = new Client(second.url, root.key);
    const seen = await waitFor(
      'the reservation to expire',
      async () => expectOk(await onSecond.get(`/reservations/${r.id}`)),
      (x) => x.state === 'expired',
      20_000,
    );
    expect(Date.parse(seen.expires_at)).toBe(Date.parse(r.expires_at));
    expect(expectOk(await onSecond.get('/reservations')).reservations).toEqual([]);
    const other = await join(onSecond, 'next');
    expect(expectOk(await other.client.post('/reservations', { paths: ['src/a.ts'] })).granted).toHaveLength(1);
  });
});
