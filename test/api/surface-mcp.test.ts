/**
 * /mcp with the MCP TypeScript SDK's own Client and StreamableHTTPClientTransport, on both backends:
 * initialize with a session id, every tool listed with its input schema, each called successfully and
 * refused, the identity of the Bearer key, GET stream, DELETE ends the session, and auth refusals.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreBody } from '../../src/memory/schemas.js';
import { EmitBody } from '../../src/signals/schemas.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk } from './support.js';

/** the interface's eighteen tools, the three reservation tools (issue 17) and the task-planning, retry and heartbeat tools (issue 27) */
const TOOLS = [
  'svc_emit_signal', 'svc_batch_emit', 'svc_check_inbox', 'svc_claim_task', 'svc_ack_signal', 'svc_search_signals', 'svc_get_thread', 'svc_whoami', 'svc_list_roles', 'svc_list_rings', 'svc_list_identities',
  'svc_memory_store', 'svc_memory_query', 'svc_memory_recall', 'svc_memory_list', 'svc_memory_update', 'svc_memory_forget', 'svc_memory_relate',
  'svc_reserve_paths', 'svc_release_paths', 'svc_check_reservations',
  'svc_ready_tasks', 'svc_task_graph', 'svc_retry_task', 'svc_heartbeat_task',
];

async function connect(url: string, key: string) {
  const client = new McpClient({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  return { client, transport };
}

const result = (r: any) => {
  expect(r.isError, JSON.stringify(r)).toBeFalsy();
  return JSON.parse(r.content[0].text);
};
const refusal = (r: any, code: string) => {
  expect(r.isError, JSON.stringify(r)).toBe(true);
  expect(r.structuredContent.error.code).toBe(code);
  expect(r.content[0].text).toMatch(new RegExp(`^${code}: `));
};

for (const backend of BACKENDS) {
  describe(`MCP over Streamable HTTP on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let root: Member;
    let alice: Member;
    let bob: Member;
    let a: Awaited<ReturnType<typeof connect>>;
    let b: Awaited<ReturnType<typeof connect>>;

    beforeAll(async () => {
      url = (await servers.start()).url;
      root = await bootstrap(url);
      alice = await join(root.client, 'alice');
      bob = await join(root.client, 'bob');
      a = await connect(url, alice.key);
      b = await connect(url, bob.key);
    });
    afterAll(async () => {
      await a?.client.close();
      await b?.client.close();
    });

    it('initializes with an Mcp-Session-Id and answers ping', async () => {
      expect(a.transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
      expect(a.client.getServerVersion()?.name).toBe('agent-coordination-service');
      expect(a.client.getServerCapabilities()?.tools).toBeDefined();
      await expect(a.client.ping()).resolves.toBeDefined();
    });

    it('lists every tool with an input schema generated from the shared TypeBox schema', async () => {
      const { tools } = await a.client.listTools();
      expect(tools).toHaveLength(TOOLS.length);
      expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
      for (const t of tools) {
        expect(t.inputSchema.type).toBe('object');
        expect(t.description?.length).toBeGreaterThan(0);
      }
      const emit = tools.find((t) => t.name === 'svc_emit_signal')!;
      expect(emit.inputSchema).toEqual(JSON.parse(JSON.stringify(EmitBody.schema)));
      expect(emit.inputSchema.required).toEqual(['signal_type', 'content']);
      const store = tools.find((t) => t.name === 'svc_memory_store')!;
      expect(store.inputSchema).toEqual(JSON.parse(JSON.stringify(StoreBody.schema)));
      expect(store.inputSchema.required).toEqual(['namespace', 'content']);
    });

    it('each memory tool works as the key identity under the namespace ACL, and is refused outside it', async () => {
      const own = `agent:${alice.id}`;
      const ids = (r: any) => r.memories.map((m: any) => m.id);
      const m = result(await a.client.callTool({ name: 'svc_memory_store', arguments: { namespace: own, content: 'mcp memory of the release checklist', entity: 'release', tags: ['mcp'] } }));
      expect(m).toMatchObject({ namespace: own, owner: alice.id, entity: 'release', version: 1 });
      expect(expectOk(await alice.client.get(`/memory/${m.id}`))).toEqual(m);
      const other = result(await a.client.callTool({ name: 'svc_memory_store', arguments: { namespace: 'org', content: 'mcp org memory of the release party', entity: 'release' } }));
      refusal(await b.client.callTool({ name: 'svc_memory_store', arguments: { namespace: own, content: 'intrusion' } }), 'MEMORY_NAMESPACE_DENIED');
      refusal(await a.client.callTool({ name: 'svc_memory_store', arguments: { namespace: own } }), 'RPC_INVALID_PARAMS');

      expect(result(await a.client.callTool({ name: 'svc_memory_list', arguments: { namespace: own, tags: ['mcp'] } }))).toEqual({ memories: [m], cursor: null, has_more: false });
      refusal(await b.client.callTool({ name: 'svc_memory_list', arguments: { namespace: own } }), 'MEMORY_NAMESPACE_DENIED');

      const found = result(await a.client.callTool({ name: 'svc_memory_query', arguments: { namespace: own, query: 'release checklist', mode: 'keyword' } }));
      expect(ids(found)).toEqual([m.id]);
      refusal(await b.client.callTool({ name: 'svc_memory_query', arguments: { namespace: own, query: 'release' } }), 'MEMORY_NAMESPACE_DENIED');

      expect(ids(result(await a.client.callTool({ name: 'svc_memory_recall', arguments: { entity: 'release' } })))).toEqual([other.id, m.id]);
      expect(ids(result(await b.client.callTool({ name: 'svc_memory_recall', arguments: { entity: 'release' } })))).toEqual([other.id]);
      refusal(await b.client.callTool({ name: 'svc_memory_recall', arguments: {} }), 'RPC_INVALID_PARAMS');

      const updated = result(await a.client.callTool({ name: 'svc_memory_update', arguments: { id: m.id, content: 'mcp memory of the revised release checklist' } }));
      expect(updated).toMatchObject({ id: m.id, version: 2, content: 'mcp memory of the revised release checklist' });
      refusal(await b.client.callTool({ name: 'svc_memory_update', arguments: { id: m.id, content: 'x' } }), 'MEMORY_NOT_FOUND');

      const edge = result(await a.client.callTool({ name: 'svc_memory_relate', arguments: { from_id: m.id, to_id: other.id, relation: 'precedes' } }));
      expect(edge).toMatchObject({ from_id: m.id, to_id: other.id, relation: 'precedes' });
      refusal(await b.client.callTool({ name: 'svc_memory_relate', arguments: { from_id: other.id, to_id: m.id, relation: 'x' } }), 'GRAPH_MEMORY_NOT_FOUND');

      refusal(await b.client.callTool({ name: 'svc_memory_forget', arguments: { id: m.id } }), 'MEMORY_NOT_FOUND');
      expect(result(await a.client.callTool({ name: 'svc_memory_forget', arguments: { id: m.id } })).deleted_at).not.toBeNull();
      expectError(await alice.client.get(`/memory/${m.id}`), 404, 'MEMORY_NOT_FOUND');
    });

    it('each tool works as the key identity, and each refuses what REST refuses', async () => {
      const me = result(await a.client.callTool({ name: 'svc_whoami', arguments: {} }));
      expect(me.identity.id).toBe(alice.id);
      expect(me.key).not.toHaveProperty('hash');

      const task = result(await a.client.callTool({ name: 'svc_emit_signal', arguments: { signal_type: 'task', content: 'mcp needle task', to_identity: bob.id, tags: ['mcp'] } }));
      expect(task).toMatchObject({ from_identity: alice.id, to_identity: bob.id, task_status: 'open' });
      refusal(await a.client.callTool({ name: 'svc_emit_signal', arguments: { signal_type: 'task', content: 'x', from_identity: bob.id } }), 'POLICY_IDENTITY_MISMATCH');
      refusal(await a.client.callTool({ name: 'svc_emit_signal', arguments: { content: 'no type' } }), 'RPC_INVALID_PARAMS');

      const batch = result(await a.client.callTool({ name: 'svc_batch_emit', arguments: { signals: [{ signal_type: 'pulse', content: 'one' }, { signal_type: 'pulse', content: 'two', to_role: 'nobody' }] } }));
      expect(batch.results[0].signal.content).toBe('one');
      expect(batch.results[1].error.code).toBe('SIGNAL_NOT_FOUND');
      refusal(await a.client.callTool({ name: 'svc_batch_emit', arguments: { signals: [] } }), 'RPC_INVALID_PARAMS');

      const inbox = result(await b.client.callTool({ name: 'svc_check_inbox', arguments: { type: 'task' } }));
      expect(inbox.signals.map((s: any) => s.id)).toEqual([task.id]);
      refusal(await b.client.callTool({ name: 'svc_check_inbox', arguments: { limit: 0 } }), 'RPC_INVALID_PARAMS');

      const claimed = result(await b.client.callTool({ name: 'svc_claim_task', arguments: { signal_id: task.id } }));
      expect(claimed).toMatchObject({ claimed_by: bob.id, delivery_state: 'leased' });
      refusal(await a.client.callTool({ name: 'svc_claim_task', arguments: { signal_id: task.id } }), 'SIGNAL_CLAIM_CONFLICT');

      refusal(await a.client.callTool({ name: 'svc_ack_signal', arguments: { signal_id: task.id } }), 'SIGNAL_ACK_UNAUTHORIZED');
      const acked = result(await b.client.callTool({ name: 'svc_ack_signal', arguments: { signal_id: task.id } }));
      expect(acked).toMatchObject({ task_status: 'completed', delivery_state: 'acked' });

      const found = result(await a.client.callTool({ name: 'svc_search_signals', arguments: { text: 'needle', tags: ['mcp'] } }));
      expect(found.map((s: any) => s.id)).toEqual([task.id]);
      refusal(await a.client.callTool({ name: 'svc_search_signals', arguments: { limit: 1000 } }), 'RPC_INVALID_PARAMS');

      const reply = await emitOk(bob, { signal_type: 'pulse', content: 'done', parent_id: task.id });
      const thread = result(await a.client.callTool({ name: 'svc_get_thread', arguments: { signal_id: task.id } }));
      expect(thread.signals.map((s: any) => s.id)).toEqual([task.id, reply.id]);
      refusal(await a.client.callTool({ name: 'svc_get_thread', arguments: { signal_id: 'no-such-signal' } }), 'SIGNAL_NOT_FOUND');

      expectOk(await root.client.post('/roles', { name: 'Builder' }), 201);
      expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id] }), 201);
      expect(result(await a.client.callTool({ name: 'svc_list_roles', arguments: {} })).map((r: any) => r.name)).toContain('Builder');
      expect(result(await a.client.callTool({ name: 'svc_list_rings', arguments: {} })).map((r: any) => r.name)).toContain('Core');
      refusal(await a.client.callTool({ name: 'svc_list_roles', arguments: { extra: 1 } }), 'RPC_INVALID_PARAMS');
      refusal(await a.client.callTool({ name: 'svc_list_rings', arguments: { extra: 1 } }), 'RPC_INVALID_PARAMS');
      refusal(await a.client.callTool({ name: 'svc_whoami', arguments: { extra: 1 } }), 'RPC_INVALID_PARAMS');

      refusal(await a.client.callTool({ name: 'svc_list_identities', arguments: {} }), 'AUTH_ADMIN_REQUIRED');
      const admin = await connect(url, root.key);
      try {
        const ids = result(await admin.client.callTool({ name: 'svc_list_identities', arguments: { limit: 2 } }));
        expect(ids.identities.map((i: any) => i.id)).toEqual([bob.id, alice.id]);
        expect(ids.has_more).toBe(true);
      } finally {
        await admin.client.close();
      }
    });

    it('an unknown tool is a protocol error, not a result', async () => {
      await expect(a.client.callTool({ name: 'svc_nope', arguments: {} })).rejects.toThrow(/Unknown tool/);
    });

    it('a session belongs to its key: another key, no key, or a bad key is refused', async () => {
      const sid = a.transport.sessionId!;
      const ping = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' });
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' };
      const other = await fetch(url + '/mcp', { method: 'POST', headers: { ...headers, authorization: `Bearer ${bob.key}` }, body: ping });
      expect(other.status).toBe(404);
      const own = await fetch(url + '/mcp', { method: 'POST', headers: { ...headers, authorization: `Bearer ${alice.key}` }, body: ping });
      expect(own.status).toBe(200);
      expect(await own.json()).toMatchObject({ jsonrpc: '2.0', id: 9, result: {} });
      for (const verb of ['POST', 'GET', 'DELETE']) {
        const none = await fetch(url + '/mcp', { method: verb, headers: { 'content-type': 'application/json' }, body: verb === 'POST' ? ping : undefined });
        expectError({ status: none.status, body: await none.json() }, 401, 'AUTH_KEY_MISSING');
        const bad = await fetch(url + '/mcp', { method: verb, headers: { authorization: 'Bearer svc_not-a-key' } });
        expectError({ status: bad.status, body: await bad.json() }, 401, 'AUTH_KEY_INVALID');
      }
      const noSession = await fetch(url + '/mcp', { method: 'POST', headers: { ...headers, 'mcp-session-id': '', authorization: `Bearer ${alice.key}` }, body: ping });
      expect(noSession.status).toBe(400);
    });

    it('GET /mcp opens the server-to-client stream; DELETE ends the session', async () => {
      const base = { authorization: `Bearer ${alice.key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
      const init = await fetch(url + '/mcp', {
        method: 'POST',
        headers: base,
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
      });
      expect(init.status).toBe(200);
      expect((await init.json()).result.protocolVersion).toBe('2025-06-18');
      const sid = init.headers.get('mcp-session-id')!;
      const headers = { ...base, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' };
      expect((await fetch(url + '/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).status).toBe(202);

      const ac = new AbortController();
      const stream = await fetch(url + '/mcp', { method: 'GET', headers: { ...headers, accept: 'text/event-stream' }, signal: ac.signal });
      expect(stream.status).toBe(200);
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
      // one stream per session: a second GET while the first is open is refused by the SDK
      const second = await fetch(url + '/mcp', { method: 'GET', headers: { ...headers, accept: 'text/event-stream' } });
      expect(second.status).toBe(409);
      ac.abort();

      expect((await fetch(url + '/mcp', { method: 'DELETE', headers })).status).toBe(200);
      const after = await fetch(url + '/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
      expect(after.status).toBe(404);
    });
  });
}
