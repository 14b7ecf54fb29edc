/**
 * `/mcp?tools=<profile>` with the official MCP SDK client on both backends (docs/surfaces.md, Tool
 * profiles): `core` is at most 8 tools (its `svc_wait` holds until something new arrives), every other profile is core plus its part, the default list is
 * unchanged, a tool outside the session's profile is unknown, an unknown profile is refused, and each
 * profile's `tools/list` stays within the size recorded in docs/surfaces.md.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { getEncoding } from 'js-tiktoken';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk } from './support.js';

const CORE = ['svc_emit_signal', 'svc_check_inbox', 'svc_ack_signal', 'svc_claim_next', 'svc_get_thread', 'svc_whoami', 'svc_wait'];
/** cl100k_base tokens of each profile's tools/list `tools` as JSON, recorded in docs/surfaces.md (bounds, a little above the measure; core's is the issue's target) */
const MAX_TOKENS: Record<string, number> = { core: 2000, tasks: 3400, memory: 3350, reservations: 2200, all: 5600, default: 4400 };
const tokens = (() => {
  const enc = getEncoding('cl100k_base');
  return (v: unknown) => enc.encode(JSON.stringify(v)).length;
})();

async function connect(url: string, key: string, profile?: string) {
  const client = new McpClient({ name: 'test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp${profile ? `?tools=${profile}` : ''}`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

describe.each(BACKENDS)('MCP tool profiles on %s', (backend) => {
  const servers = serversOn(backend);
  let url: string;
  let root: Member;
  let worker: Member;
  const open: McpClient[] = [];
  const listed: Record<string, { name: string }[]> = {};

  beforeAll(async () => {
    url = (await servers.start()).url;
    root = await bootstrap(url);
    worker = await join(root.client, 'worker');
    for (const p of ['core', 'tasks', 'memory', 'reservations', 'all', '']) {
      const c = await connect(url, worker.key, p || undefined);
      open.push(c);
      listed[p || 'default'] = (await c.listTools()).tools;
    }
  });
  afterAll(async () => {
    await Promise.all(open.map((c) => c.close()));
  });

  it('core is at most 8 tools; each profile is core and its part; the default list is the interface\'s 21', () => {
    const names = (p: string) => listed[p].map((t) => t.name);
    expect(names('core')).toEqual(CORE);
    expect(CORE.length).toBeLessThanOrEqual(8);
    for (const p of ['tasks', 'memory', 'reservations', 'all']) expect(names(p)).toEqual(expect.arrayContaining(CORE));
    expect(names('memory')).toContain('svc_memory_query');
    expect(names('reservations')).toEqual([...CORE, 'svc_reserve_paths', 'svc_release_paths', 'svc_check_reservations']);
    expect(names('tasks')).toEqual(expect.arrayContaining(['svc_claim_task', 'svc_ready_tasks', 'svc_task_graph', 'svc_heartbeat_task', 'svc_retry_task']));
    expect(names('default')).toHaveLength(25);
    expect(names('default')).not.toContain('svc_claim_next');
    expect(names('all')).toEqual(expect.arrayContaining([...names('default'), 'svc_claim_next', 'svc_my_tasks', 'svc_wait']));
  });

  it('each profile\'s tools/list stays within its recorded size in tokens', () => {
    if (process.env.PRINT_TOKENS) console.log(Object.fromEntries(Object.keys(listed).map((p) => [p, tokens(listed[p])])));
    for (const [p, max] of Object.entries(MAX_TOKENS)) expect(tokens(listed[p]), p).toBeLessThanOrEqual(max);
  });

  it('core: claim next takes a task; a tool of another profile is unknown here; an unknown profile is refused', async () => {
    const core = open[0];
    const task = await emitOk(root, { signal_type: 'task', content: 'profile task', to_identity: worker.id });
    const r: any = await core.callTool({ name: 'svc_claim_next', arguments: {} });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent.signal).toMatchObject({ id: task.id, claimed_by: worker.id });
    // compact by default: the first line of content; the whole signal on request
    await emitOk(root, { signal_type: 'query', content: 'first line\nthe long rest', to_identity: worker.id, metadata: { big: 'x'.repeat(500) } });
    const box: any = await core.callTool({ name: 'svc_check_inbox', arguments: { receipt_state: 'unread', type: 'query' } });
    expect(box.structuredContent).toMatchObject({ count: 1, has_more: false });
    expect(box.structuredContent.signals[0]).toMatchObject({ signal_type: 'query', from_identity: root.id, content: 'first line' });
    expect(box.structuredContent.signals[0].metadata).toBeUndefined();
    const full: any = await core.callTool({ name: 'svc_check_inbox', arguments: { receipt_state: 'unread', type: 'query', view: 'full' } });
    expect(full.structuredContent.signals[0]).toMatchObject({ content: 'first line\nthe long rest', metadata: { big: 'x'.repeat(500) } });
    await expect(core.callTool({ name: 'svc_memory_store', arguments: { namespace: 'x', content: 'y' } })).rejects.toThrow(/Unknown tool/);
    await expect(connect(url, worker.key, 'everything')).rejects.toThrow(/tools must be one of/);
  });

  it('svc_wait: what is unread first, each item once per session; then it holds until an emit reaches the caller; empty on timeout', async () => {
    const core = open[0];
    const wait = async (args: Record<string, unknown>) => ((await core.callTool({ name: 'svc_wait', arguments: args })) as any).structuredContent;
    const backlog = await wait({ timeout_s: 1 });
    expect(backlog).toMatchObject({ timed_out: false });
    expect(backlog.signals.map((s: any) => s.content)).toContain('first line');
    expect(await wait({ timeout_s: 1 })).toEqual({ signals: [], count: 0, timed_out: true });
    const waiting = wait({ timeout_s: 20, types: ['alert'] });
    // a signal of another type, and one from the caller itself, do not end the wait
    await emitOk(root, { signal_type: 'query', content: 'not this one', to_identity: worker.id });
    await emitOk(worker, { signal_type: 'alert', content: 'my own', to_identity: root.id });
    const sent = Date.now();
    const alert = await emitOk(root, { signal_type: 'alert', content: 'wake up\nmore', to_identity: worker.id });
    const woke = await waiting;
    expect(Date.now() - sent).toBeLessThan(2000);
    expect(woke).toMatchObject({ count: 1, timed_out: false, signals: [{ id: alert.id, content: 'wake up', from_identity: root.id }] });
    const refused: any = await core.callTool({ name: 'svc_wait', arguments: { timeout_s: 600 } });
    expect(refused.isError).toBe(true);
    expect(refused.content[0].text).toMatch(/^VALIDATION_/);
  });

  it("a key's mcp_profile is /mcp's default: set at key create, rotate and invite, overridden by ?tools=, its values checked", async () => {
    const toolsOf = async (key: string, profile?: string) => {
      const c = await connect(url, key, profile);
      open.push(c);
      return (await c.listTools()).tools.map((t) => t.name);
    };
    const made = await root.client.post('/admin/api-keys', { owner: worker.id, mcp_profile: 'reservations' });
    expect(made.status).toBe(201);
    expect(made.body.data.mcp_profile).toBe('reservations');
    expect(await toolsOf(made.body.data.api_key)).toEqual(listed.reservations.map((t) => t.name));
    expect(await toolsOf(made.body.data.api_key, 'core')).toEqual(CORE);
    // a rotation keeps the default unless it names one; null clears it
    const kept = await root.client.post(`/admin/api-keys/${made.body.data.id}/rotate`, {});
    expect(kept.status).toBe(200);
    expect(await toolsOf(kept.body.data.api_key)).toEqual(listed.reservations.map((t) => t.name));
    const changed = await root.client.post(`/admin/api-keys/${kept.body.data.id}/rotate`, { mcp_profile: 'memory' });
    expect(await toolsOf(changed.body.data.api_key)).toEqual(listed.memory.map((t) => t.name));
    const cleared = await root.client.post(`/admin/api-keys/${changed.body.data.id}/rotate`, { mcp_profile: null });
    expect(await toolsOf(cleared.body.data.api_key)).toEqual(listed.default.map((t) => t.name));
    const inv = await root.client.post('/invite/create', { name: 'profiled', type: 'agent', mcp_profile: 'core' });
    expect(inv.status).toBe(201);
    const red = await new Client(url).post('/invite', { code: inv.body.data.code, name: 'profiled', type: 'agent' });
    expect(red.status).toBe(201);
    expect(await toolsOf(red.body.data.api_key)).toEqual(CORE);
    // a value outside the profiles is refused on each
    expect((await root.client.post('/admin/api-keys', { owner: worker.id, mcp_profile: 'everything' })).body.error.code).toMatch(/^VALIDATION_/);
    expect((await root.client.post(`/admin/api-keys/${cleared.body.data.id}/rotate`, { mcp_profile: 'everything' })).body.error.code).toMatch(/^VALIDATION_/);
    expect((await root.client.post('/invite/create', { name: 'bad', type: 'agent', mcp_profile: 'everything' })).body.error.code).toBe('INVITE_VALIDATION_FAILED');
  });
});
