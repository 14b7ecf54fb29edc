/**
 * The WebSocket heartbeat: a quiet socket is pinged and stays open past WS_IDLE_TIMEOUT_S while it answers
 * with pongs; one that leaves the pings unanswered is closed once the idle timeout runs out.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { bootstrap, type Member } from '../helpers/client.js';
import { PushSocket, waitFor, wsUrl } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';

const IDLE_S = 8;

describe.each(BACKENDS)('websocket heartbeat on %s', (backend) => {
  const servers = serversOn(backend);
  let url: string;
  let root: Member;

  beforeAll(async () => {
    url = (await servers.start({ WS_IDLE_TIMEOUT_S: String(IDLE_S) })).url;
    root = await bootstrap(url);
  });

  it('pings a quiet socket and keeps it open past the idle timeout while it answers', async () => {
    const s = await PushSocket.open(url, root.key);
    const opened = Date.now();
    const pings: number[] = [];
    s.ws.on('ping', () => pings.push(Date.now()));
    // answered pings keep it open for longer than one idle timeout
    await waitFor(() => pings.length >= 1 && Date.now() - opened > IDLE_S * 1000 + 1000, 20_000, () => `pings past the idle timeout (have ${pings.length})`);
    expect(s.closeInfo).toBeUndefined();
    expect((await s.ok('subscribe', {})).types).toEqual([]);
    await s.close();
  }, 30_000);

  it('closes a socket that leaves the pings unanswered once WS_IDLE_TIMEOUT_S runs out', async () => {
    const ws = new WebSocket(wsUrl(url), { headers: { authorization: `Bearer ${root.key}` }, autoPong: false });
    const pings: number[] = [];
    ws.on('ping', () => pings.push(Date.now()));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const opened = Date.now();
    const closed = await new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    const after = Date.now() - opened;
    expect(pings.length, 'it was pinged first').toBeGreaterThanOrEqual(1);
    // uWS times out in 4 s steps; it closes without a close frame (1006 at the client)
    expect(after).toBeGreaterThanOrEqual((IDLE_S - 4) * 1000);
    expect(after).toBeLessThan((IDLE_S + 8) * 1000);
    expect(closed).toBe(1006);
  }, 30_000);
});
