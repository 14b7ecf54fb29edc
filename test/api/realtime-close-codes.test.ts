/**
 * WebSocket close codes a client must act on, with real `ws` clients:
 * - 4403: the identity's membership was suspended or removed while the socket was open (a live socket and
 *   one resuming with ?after=, on both backends); the last frame is the 403 POLICY_MEMBERSHIP_REQUIRED error;
 * - 1011: the backend failed during a ?after= replay (Redis killed while the socket catches up, its next
 *   journal read fails); the last frame is the 503 DB_CONNECT_FAILED error, and a reconnect from the last
 *   cursor once Redis is back gets the rest exactly once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Service } from '../../src/app.js';
import { JOURNAL_LOG } from '../../src/journal/journal.js';
import { bootstrap, join } from '../helpers/client.js';
import { expectExactlyOnce, PushSocket, pool, wsUrl, type Frame } from '../helpers/push.js';
import { OwnRedis } from '../helpers/redis.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { emitOk, setMembershipStatus, waitFor } from './support.js';

describe.each(BACKENDS)('close 4403 on %s', (backend) => {
  const servers = serversOn(backend);

  it('a membership removed while connected closes the live and the resuming socket with 4403 after a POLICY_MEMBERSHIP_REQUIRED frame', async () => {
    const svc = await servers.start();
    const root = await bootstrap(svc.url);
    const bob = await join(root.client, 'bob');
    const live = await PushSocket.open(svc.url, bob.key, { label: 'live' });
    const first = await emitOk(root, { signal_type: 'pulse', content: 'for bob', to_identity: bob.id });
    await live.waitSignals([first.id]);
    const resuming = await PushSocket.open(svc.url, bob.key, { after: '0', label: 'resuming' });
    await resuming.waitSignals([first.id]);

    await setMembershipStatus(root.client, bob.id, 'removed');
    for (const s of [live, resuming]) {
      expect(await s.closed(), s.label).toMatchObject({ code: 4403, reason: 'POLICY_MEMBERSHIP_REQUIRED' });
      expect(s.frames[s.frames.length - 1], s.label).toMatchObject({ type: 'error', error: { code: 'POLICY_MEMBERSHIP_REQUIRED' } });
    }
  });
});

describe('close 1011 when the backend fails during a replay', () => {
  let redis: OwnRedis | undefined;
  let svc: Service | undefined;
  afterAll(async () => {
    await svc?.close();
    await redis?.stop();
  });

  it('Redis killed while a ?after= socket catches up: error frame DB_CONNECT_FAILED, close 1011; resuming from the last cursor gets the rest once', async () => {
    redis = await OwnRedis.start();
    svc = await startServer({
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'close' + randomBytes(4).toString('hex'),
      DB_CONNECT_TIMEOUT_MS: '1000',
      PUSH_MAX_BUFFER_BYTES: '65536',
      PUSH_DRAIN_TIMEOUT_MS: '60000',
    });
    const root = await bootstrap(svc.url);
    const cursor = await svc.store.lastSeq(JOURNAL_LOG);
    // more than one replay page (500 entries), the first ones big enough to fill the socket's buffers
    const big = 'z'.repeat(48 * 1024);
    const ids = await pool(520, 6, async (i) => (await emitOk(root, { signal_type: 'pulse', content: i < 160 ? `${i} ${big}` : `${i}` })).id as string);

    // a raw `ws` client that stops reading the moment it is open: the replay fills its buffers and waits for room
    // (ws's own pause: pausing its TCP socket directly is undone by ws's receiver when it drains a large frame)
    const frames: Frame[] = [];
    const ws = new WebSocket(`${wsUrl(svc.url)}?after=${cursor}`, { headers: { authorization: `Bearer ${root.key}` } });
    ws.on('message', (d) => frames.push(JSON.parse(d.toString())));
    const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => {
        ws.pause();
        resolve();
      });
      ws.once('error', reject);
    });
    const seen = () => `${frames.filter((f) => f.type === 'signal').length} signal frames, last other frame ${JSON.stringify(frames.filter((f) => f.type !== 'signal').pop())}`;
    await waitFor(() => `the replay to wait for room (${seen()})`, () => svc!.realtime.hub.positions().some((p) => p.waitingForRoom), (held) => held, 20_000);

    await redis.kill();
    ws.resume();
    expect(await closed).toMatchObject({ code: 1011, reason: 'DB_CONNECT_FAILED' });
    expect(frames[frames.length - 1]).toMatchObject({ type: 'error', error: { code: 'DB_CONNECT_FAILED' } });
    const got = frames.filter((f) => f.type === 'signal');
    expect(got.length, 'the first page was sent before the failed read').toBeGreaterThan(0);
    expect(got.length).toBeLessThan(ids.length);

    await redis.up();
    await waitFor('the service to answer again', () => root.client.get('/signals/list?limit=1'), (r) => r.status === 200, 15_000, 100);
    const again = await PushSocket.open(svc.url, root.key, { after: got[got.length - 1].cursor, label: 'resumed' });
    const rest = ids.filter((id) => !got.some((f) => f.signal.id === id));
    await again.waitSignals(rest, 20_000);
    expectExactlyOnce([...got.map((f) => f.signal.id), ...again.signalIds()], ids, 'before and after the failed replay');
    await again.close();
  }, 90_000);
});
