/**
 * Slow and greedy clients at the front end (issue 25.4, docs/reliability.md "Slow peers"):
 * - one client address holds at most MAX_CONNECTIONS_PER_ADDRESS WebSockets and SSE streams together; past it
 *   an upgrade or a stream is refused 429 RATE_LIMIT_EXCEEDED (`details.reason: "connections"`), and a place
 *   comes back when a connection ends;
 * - a connection that sends its headers one byte a second, and a thousand connections that send nothing, are
 *   cut by the front end's 10 s timeout (uWebSockets.js's, not a setting) while other clients are served.
 */
import { connect, type Socket } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, type Member } from '../helpers/client.js';
import { PushSocket, refusedUpgrade, SseStream } from '../helpers/push.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectOk, waitFor } from '../api/support.js';

/** the front end's cut of a connection with no complete request (uWebSockets.js's HTTP idle timeout), plus slack for a loaded machine */
const FRONT_END_TIMEOUT_MS = 10_000;
const SLACK_MS = 8_000;

function rawConnection(port: number): Promise<{ socket: Socket; ended: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const ended = new Promise<number>((done) => socket.once('close', () => done(performance.now())));
    socket.once('connect', () => resolve({ socket, ended }));
    socket.once('error', reject);
  });
}

describe.each(BACKENDS)('slow and greedy clients (%s)', (backend) => {
  const servers = serversOn(backend);
  let svc: Started;
  let root: Member;

  beforeAll(async () => {
    svc = await servers.start({ MAX_CONNECTIONS_PER_ADDRESS: '4' });
    root = await bootstrap(svc.url);
  });

  it('one address holds at most MAX_CONNECTIONS_PER_ADDRESS sockets and streams; a place comes back when one ends', async () => {
    const sockets = [await PushSocket.open(svc.url, root.key, { label: 'ws 1' }), await PushSocket.open(svc.url, root.key, { label: 'ws 2' })];
    const streams = [await SseStream.open(svc.url, { token: root.key }, 'sse 1'), await SseStream.open(svc.url, { token: root.key }, 'sse 2')];
    try {
      const refused = await refusedUpgrade(svc.url, root.key);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', details: { limit: 4, reason: 'connections' } });
      const sse = await fetch(`${svc.url}/signals/stream?token=${encodeURIComponent(root.key)}`);
      expect(sse.status).toBe(429);
      expect((await sse.json()).error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', details: { reason: 'connections' } });
      // a refused or failed attempt holds no place: a bad key, then the limit again
      expect((await refusedUpgrade(svc.url, 'not-a-key')).status).toBe(429);
      // requests are not connections held open: still served
      expectOk(await root.client.get('/health'));
      await sockets.pop()!.close();
      const again = await PushSocket.open(svc.url, root.key, { label: 'ws 3' });
      sockets.push(again);
      streams.pop()!.close();
      await waitFor('the stream place to come back', async () => (await refusedUpgrade(svc.url, 'not-a-key')).status, (s) => s === 401, 10_000);
    } finally {
      for (const s of sockets) await s.close();
      for (const s of streams) s.close();
    }
  });

  it('headers sent a byte a second and a thousand silent connections are cut by the front end; other clients are served meanwhile', async () => {
    const port = Number(new URL(svc.url).port);
    const started = performance.now();
    const slow = await rawConnection(port);
    const request = 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(60);
    let i = 0;
    const drip = setInterval(() => {
      if (!slow.socket.destroyed && i < request.length) slow.socket.write(request[i++]!);
    }, 1000);
    const idle = await Promise.all(Array.from({ length: 1000 }, () => rawConnection(port)));
    try {
      // others are served while they hang on
      for (let k = 0; k < 5; k++) {
        const t = performance.now();
        expectOk(await root.client.get('/health'));
        expect(performance.now() - t).toBeLessThan(FRONT_END_TIMEOUT_MS);
      }
      const cutAt = await slow.ended;
      expect(i, 'the slow client had not finished its headers').toBeLessThan(request.length);
      expect(cutAt - started).toBeLessThan(FRONT_END_TIMEOUT_MS + SLACK_MS);
      const idleCut = await Promise.all(idle.map((c) => c.ended));
      expect(Math.max(...idleCut) - started).toBeLessThan(FRONT_END_TIMEOUT_MS + SLACK_MS);
      expectOk(await root.client.get('/health'));
    } finally {
      clearInterval(drip);
      slow.socket.destroy();
      for (const c of idle) c.socket.destroy();
    }
  });
});
