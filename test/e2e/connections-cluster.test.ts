/**
 * GET /admin/connections across two service processes on one Redis: a WebSocket on instance A and an SSE
 * stream on instance B are listed by either, each with the instance holding it (filters still apply); a
 * closed connection leaves both lists, and so does a burst of opens and closes once it is over (all
 * published on open and close: the beat is 30 s); a SIGKILLed instance's connections vanish once its
 * published record expires (three beats of its short PRESENCE_TOUCH_MS); a non-admin is refused.
 */
import { describe, expect, it } from 'vitest';
import { bootstrap, Client, join } from '../helpers/client.js';
import { childServersOn } from '../helpers/server.js';
import { PushSocket, SseStream } from '../helpers/push.js';
import { expectError, expectOk, waitFor } from '../api/support.js';

describe('connections listed across two instances on one Redis', () => {
  const fleet = childServersOn('redis');

  it('either instance lists both instances’ sockets and streams; a close or a crash removes them', async () => {
    // the default beat (30 s): what follows until the crash is published on open and close, not by a refresh
    const env = await fleet.env();
    const [a, b] = await Promise.all([fleet.start(env), fleet.start(env)]);
    const root = await bootstrap(a.url);
    const watcher = await join(root.client, 'watcher');
    const onA = new Client(a.url, root.key);
    const onB = new Client(b.url, root.key);
    const list = async (c: Client, q = `identity_id=${watcher.id}`) => expectOk(await c.get(`/admin/connections?${q}`));
    const instanceOf = async (c: Client) => (await list(c)).instance as string;
    const [ia, ib] = [await instanceOf(onA), await instanceOf(onB)];
    expect(ia).not.toBe(ib);

    const socket = await PushSocket.open(a.url, watcher.key, { label: 'watcher on A' });
    const stream = await SseStream.open(b.url, { token: watcher.key }, 'watcher on B');
    const both = (d: any) => d.connections.length === 2;
    for (const c of [onA, onB]) {
      const d = await waitFor(`both connections listed by ${c === onA ? 'A' : 'B'}`, () => list(c), both);
      const byTransport = Object.fromEntries(d.connections.map((x: any) => [x.transport, x]));
      expect(byTransport.websocket).toMatchObject({ instance: ia, identity_id: watcher.id, key_id: expect.stringMatching(/^key_/), catching_up: false });
      expect(byTransport.sse).toMatchObject({ instance: ib, identity_id: watcher.id, key_id: byTransport.websocket.key_id });
      expect(typeof byTransport.sse.opened_at).toBe('string');
      expect(typeof byTransport.sse.cursor).toBe('string');
    }
    // the filters apply to the other instance's connections too
    expect((await list(onA, `key_id=nope`)).connections).toEqual([]);
    expect((await list(onA, `identity_id=${root.id}`)).connections.every((x: any) => x.identity_id === root.id)).toBe(true);

    stream.close();
    for (const c of [onA, onB]) {
      const d = await waitFor('the closed stream gone', () => list(c), (x: any) => x.connections.length === 1);
      expect(d.connections[0]).toMatchObject({ transport: 'websocket', instance: ia });
    }

    // a burst of opens and then of closes on B: what A lists settles on B's state after each
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => PushSocket.open(b.url, watcher.key, { label: `burst ${i}` })));
    const during = await waitFor('the burst listed on A', () => list(onA), (x: any) => x.connections.length === 13);
    expect(during.connections.filter((x: any) => x.instance === ib)).toHaveLength(12);
    await Promise.all(burst.map((x) => x.close()));
    await waitFor('the burst gone from A', () => list(onA), (x: any) => x.connections.length === 1);

    // a third instance with a short beat (its record lives three of them) holds a stream and dies without
    // its shutdown: its record expires and A stops listing it
    const c = await fleet.start({ ...env, PRESENCE_TOUCH_MS: '200' });
    const again = await SseStream.open(c.url, { token: watcher.key }, 'watcher on C');
    await waitFor('the stream on C listed on A', () => list(onA), both);
    again.es.onerror = () => again.close();
    await fleet.kill(c);
    const left = await waitFor('the dead instance’s stream gone', () => list(onA), (x: any) => x.connections.length === 1, 10_000);
    expect(left.connections[0]).toMatchObject({ transport: 'websocket', instance: ia });

    expectError(await new Client(a.url, watcher.key).get('/admin/connections'), 403, 'AUTH_ADMIN_REQUIRED');
    await socket.close();
    await waitFor('the closed socket gone', () => list(onA), (x: any) => x.connections.length === 0);
  }, 120_000);
});
