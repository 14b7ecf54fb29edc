/**
 * MCP sessions are bounded per identity as well as in all: an identity opening more than
 * MAX_SESSIONS_PER_IDENTITY closes its own least recently used session, never another identity's.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_SESSIONS_PER_IDENTITY } from '../../src/mcp/mcp.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';

const VERSION = '2025-06-18';

async function mcp(url: string, key: string, body: unknown, session?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (session) Object.assign(headers, { 'mcp-session-id': session, 'mcp-protocol-version': VERSION });
  const r = await fetch(url + '/mcp', { method: 'POST', headers, body: JSON.stringify(body) });
  await r.text();
  return { status: r.status, session: r.headers.get('mcp-session-id') };
}

const open = async (url: string, key: string) => {
  const r = await mcp(url, key, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'sessions', version: '1' } } });
  expect(r.status).toBe(200);
  return r.session!;
};
/** 200 while the session is held, 404 once it was closed */
const ping = async (url: string, key: string, session: string) => (await mcp(url, key, { jsonrpc: '2.0', id: 2, method: 'ping' }, session)).status;

for (const backend of BACKENDS) {
  describe(`MCP sessions per identity on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let carol: Member;
    let dave: Member;

    beforeAll(async () => {
      url = (await servers.start()).url;
      const root = await bootstrap(url);
      carol = await join(root.client, 'carol');
      dave = await join(root.client, 'dave');
    });

    it(`an identity holds at most ${MAX_SESSIONS_PER_IDENTITY} sessions: more close its own least recently used, never another identity's`, async () => {
      const daves = await open(url, dave.key);
      const carols: string[] = [];
      for (let i = 0; i < MAX_SESSIONS_PER_IDENTITY; i++) carols.push(await open(url, carol.key));
      // the first is used again, so the second is now the least recently used
      expect(await ping(url, carol.key, carols[0])).toBe(200);
      for (let i = 0; i < 3; i++) carols.push(await open(url, carol.key));
      expect(await ping(url, carol.key, carols[0])).toBe(200);
      for (const gone of carols.slice(1, 4)) expect(await ping(url, carol.key, gone)).toBe(404);
      for (const held of carols.slice(4)) expect(await ping(url, carol.key, held)).toBe(200);
      expect(await ping(url, dave.key, daves)).toBe(200);
    });
  });
}
