/**
 * Two instances on one Redis; instance B reaches Redis through a TCP relay. The relay is cut while A emits,
 * so B's pub/sub link misses those journal entries, and nothing is emitted after it comes back. B must still
 * push them, exactly once and in order, from the stored journal: nothing is delivered only from memory.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket, Relay, expectExactlyOnce, expectIncreasing } from '../helpers/push.js';
import { startRedis, type RedisServer } from '../helpers/redis.js';
import { startServer } from '../helpers/server.js';

describe('push across instances survives a lost pub/sub link', () => {
  let redis: RedisServer;
  let relay: Relay;
  let a: Service;
  let b: Service;
  let root: Member;
  let agent: Member;

  beforeAll(async () => {
    redis = await startRedis();
    relay = await Relay.start(redis.port);
    const prefix = `catchup${process.pid}`;
    a = await startServer({ REDIS_URL: redis.url, REDIS_PREFIX: prefix });
    b = await startServer({ REDIS_URL: relay.url.replace(/^http/, 'redis'), REDIS_PREFIX: prefix });
    root = await bootstrap(a.url);
    agent = await join(root.client, 'agent');
  });
  afterAll(async () => {
    relay?.release();
    await a?.close();
    await b?.close();
    await relay?.stop();
    await redis?.stop();
  });

  it('a socket on instance B gets what A emitted while B was cut off, each once and in order', async () => {
    const sock = await PushSocket.open(b.url, agent.key, { label: 'agent@B' });
    const first = (await root.client.post('/emit', { signal_type: 'pulse', content: 'before', to_identity: agent.id })).body.data;
    await sock.waitSignals([first.id]);

    relay.cut();
    const during: string[] = [];
    for (let i = 0; i < 5; i++) during.push((await root.client.post('/emit', { signal_type: 'pulse', content: `during ${i}`, to_identity: agent.id })).body.data.id);
    relay.release();

    // nothing more is emitted: only the hub's own catch-up from the stored journal can deliver these
    await sock.waitSignals(during, 10_000);
    expectExactlyOnce(sock.signalIds(), [first.id, ...during], 'agent@B');
    expectIncreasing(sock.pushes(), 'agent@B');
    await sock.close();
  });
});
