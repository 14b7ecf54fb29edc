/**
 * The fixture the task tests share (signals-dependencies, -retry, -heartbeat): one server per describe on
 * `env`, root, an emitter (`<names>-boss`) and a worker (`<names>-worker`, and `<names>-other` on request),
 * the worker's push socket, and on request the boss's, a webhook receiver subscribed to `webhooks` and an
 * MCP client as the worker. Call it in a describe body after `serversOn`; the fields are set in its beforeAll.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll } from 'vitest';
import type { Service } from '../../src/app.js';
import { expectOk } from '../api/support.js';
import { bootstrap, join, type Member } from './client.js';
import { PushSocket } from './push.js';
import type { Servers } from './server.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';

export interface TaskFixture {
  svc: Service;
  root: Member;
  boss: Member;
  worker: Member;
  other: Member;
  workerSocket: PushSocket;
  bossSocket: PushSocket;
  rx: Receiver;
  mcp: McpClient;
}

export interface TaskFixtureOptions {
  names: string;
  env?: Record<string, string>;
  other?: boolean;
  bossSocket?: boolean;
  webhooks?: string[];
  mcp?: boolean;
}

export function taskFixture(servers: Servers, o: TaskFixtureOptions): TaskFixture {
  const f = {} as TaskFixture;
  beforeAll(async () => {
    f.svc = await servers.start(o.env ?? {});
    f.root = await bootstrap(f.svc.url);
    f.boss = await join(f.root.client, `${o.names}-boss`);
    f.worker = await join(f.root.client, `${o.names}-worker`);
    if (o.other) f.other = await join(f.root.client, `${o.names}-other`);
    if (o.webhooks) {
      f.rx = await startReceiver();
      f.rx.secret = expectOk(await f.root.client.post('/admin/webhooks', { url: f.rx.url, events: o.webhooks }), 201).secret;
    }
    if (o.bossSocket) f.bossSocket = await PushSocket.open(f.svc.url, f.boss.key, { label: 'boss' });
    f.workerSocket = await PushSocket.open(f.svc.url, f.worker.key, { label: 'worker' });
    if (o.mcp) {
      f.mcp = new McpClient({ name: o.names, version: '1.0.0' });
      await f.mcp.connect(new StreamableHTTPClientTransport(new URL(f.svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${f.worker.key}` } } }));
    }
  });
  afterAll(async () => {
    await f.bossSocket?.close();
    await f.workerSocket?.close();
    await f.mcp?.close();
    await f.rx?.close();
  });
  return f;
}
