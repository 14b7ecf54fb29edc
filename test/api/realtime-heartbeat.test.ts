/** The WebSocket heartbeat: a quiet socket is pinged, and one that answers pongs stays open past the idle timeout. */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';

describe.each(BACKENDS)('websocket heartbeat on %s', (backend) => {
  const servers = serversOn(backend);
  let url: string;
  let root: Member;

  beforeAll(async () => {
    url = (await servers.start({ WS_IDLE_TIMEOUT_S: '8' })).url;
    root = await bootstrap(url);
  });

  it('pings a quiet socket and keeps it open while it answers', async () => {
    const s = await PushSocket.open(url, root.key);
    const pings: number[] = [];
    s.ws.on('ping', () => pings.push(Date.now()));
    await new Promise((r) => setTimeout(r, 10_000));
    expect(pings.length).toBeGreaterThanOrEqual(1);
    expect(s.closeInfo).toBeUndefined();
    expect((await s.ok('subscribe', {})).types).toEqual([]);
    await s.close();
  }, 20_000);
});
