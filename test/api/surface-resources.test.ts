/**
 * MCP resources and subscriptions, and the reservation tools and RPC methods, through the official MCP SDK
 * client and real HTTP on both backends: resources/list and templates; each resource read as REST answers
 * it, with ACL refusals; subscriptions to svc://inbox/{me} and svc://reservations notified after a REST
 * change, silent once unsubscribed or once the identity's membership is suspended, the session ended once its key is revoked; svc_reserve_paths / svc_check_reservations / svc_release_paths and
 * reservations.* over /rpc (grant, conflict, release, force-release) with their refusals.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '../helpers/client.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectOk, setMembershipStatus, waitFor } from './support.js';

async function connect(url: string, key: string) {
  const client = new McpClient({ name: 'test', version: '1.0.0' });
  const updated: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
  const transport = new StreamableHTTPClientTransport(new URL(url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  return { client, updated, transport };
}
type Session = Awaited<ReturnType<typeof connect>>;

const json = (r: { contents: { uri: string; mimeType?: string; text?: unknown }[] }) => {
  expect(r.contents).toHaveLength(1);
  expect(r.contents[0]!.mimeType).toBe('application/json');
  return JSON.parse(r.contents[0]!.text as string);
};
const refusedRead = (s: Session, uri: string, code: string, numeric = -32000) => expect(s.client.readResource({ uri })).rejects.toMatchObject({ code: numeric, data: { code } });
const toolResult = (r: any) => {
  expect(r.isError, JSON.stringify(r)).toBeFalsy();
  return JSON.parse(r.content[0].text);
};
const toolRefusal = (r: any, code: string) => {
  expect(r.isError, JSON.stringify(r)).toBe(true);
  expect(r.structuredContent.error.code).toBe(code);
};

let seq = 0;
async function rpc(c: Client, method: string, params?: unknown) {
  return c.req('POST', '/rpc', { jsonrpc: '2.0', id: ++seq, method, ...(params === undefined ? {} : { params }) });
}
async function rpcOk(c: Client, method: string, params?: unknown) {
  const res = await rpc(c, method, params);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.result;
}
async function rpcRefused(c: Client, method: string, params: unknown, status: number, code: string) {
  const res = await rpc(c, method, params);
  expect({ status: res.status, code: res.body?.error?.data?.code }, JSON.stringify(res.body)).toEqual({ status, code });
}

let projects = 0;
const project = () => `mcp-p${++projects}`;

for (const backend of BACKENDS) {
  describe(`MCP resources and reservation tools on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let root: Member;
    let alice: Member;
    let bob: Member;
    let a: Session;
    let b: Session;
    let r: Session;

    beforeAll(async () => {
      url = (await servers.start()).url;
      root = await bootstrap(url);
      alice = await join(root.client, 'res-alice');
      bob = await join(root.client, 'res-bob');
      [a, b, r] = await Promise.all([connect(url, alice.key), connect(url, bob.key), connect(url, root.key)]);
    });
    afterAll(async () => {
      await Promise.all([a, b, r].map((s) => s?.client.close()));
    });

    it('lists the resources (with the caller’s own inbox) and the templates of the parameterised ones', async () => {
      expect(a.client.getServerCapabilities()?.resources).toMatchObject({ subscribe: true });
      const { resources } = await a.client.listResources();
      expect(resources.map((x) => x.uri).sort()).toEqual(['svc://inbox/' + alice.id, 'svc://reservations', 'svc://tasks/mine', 'svc://whoami'].sort());
      for (const x of resources) expect(x).toMatchObject({ mimeType: 'application/json', name: expect.any(String), description: expect.any(String) });
      const { resourceTemplates } = await a.client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual(['svc://inbox/{identity}{?limit,scope}', 'svc://thread/{id}']);
    });

    it('reads each resource as REST answers it, and refuses what REST refuses', async () => {
      expect(json(await a.client.readResource({ uri: 'svc://whoami' })).identity.id).toBe(alice.id);

      const direct = await emitOk(bob, { signal_type: 'pulse', content: 'to alice', to_identity: alice.id });
      await emitOk(bob, { signal_type: 'pulse', content: 'to everyone' });
      const mine = json(await a.client.readResource({ uri: `svc://inbox/${alice.id}?scope=direct&limit=5` }));
      const rest = expectOk(await alice.client.get(`/inbox/identity/${alice.id}?scope=direct&limit=5`));
      expect(mine.signals.map((s: any) => s.id)).toEqual([direct.id]);
      expect(mine.signals.map((s: any) => s.id)).toEqual(rest.signals.map((s: any) => s.id));
      expect(json(await a.client.readResource({ uri: `svc://inbox/${alice.id}` })).signals.length).toBeGreaterThanOrEqual(2);
      // only the identity itself or an admin reads an inbox
      await refusedRead(b, `svc://inbox/${alice.id}`, 'POLICY_DENIED');
      expect(json(await r.client.readResource({ uri: `svc://inbox/${alice.id}?scope=direct` })).signals.map((s: any) => s.id)).toEqual([direct.id]);
      await refusedRead(a, `svc://inbox/${alice.id}?limit=0`, 'VALIDATION_INVALID_TYPE');
      await refusedRead(a, `svc://inbox/${alice.id}?scope=everyone`, 'VALIDATION_INVALID_TYPE');

      const reply = await emitOk(alice, { signal_type: 'pulse', content: 'thanks', parent_id: direct.id });
      const thread = json(await b.client.readResource({ uri: `svc://thread/${reply.id}` }));
      expect(thread.signals.map((s: any) => s.id)).toEqual([direct.id, reply.id]);
      await refusedRead(a, 'svc://thread/nope', 'SIGNAL_NOT_FOUND', -32002);

      const p = project();
      const held = expectOk(await alice.client.post('/reservations', { project: p, paths: ['src/**'] })).granted[0];
      const listed = json(await b.client.readResource({ uri: `svc://reservations?project=${p}` }));
      expect(listed.reservations).toEqual([held]);
      expect(listed).toEqual(expectOk(await bob.client.get(`/reservations?project=${p}`)));
      await refusedRead(a, 'svc://reservations?project=x&bogus=1', 'VALIDATION_INVALID_TYPE');

      const task = await emitOk(bob, { signal_type: 'task', content: 'mcp task', to_identity: alice.id });
      expect(json(await a.client.readResource({ uri: 'svc://tasks/mine' })).tasks).toEqual([]);
      const claimed = expectOk(await alice.client.post('/claim', { signal_id: task.id }));
      const tasks = json(await a.client.readResource({ uri: 'svc://tasks/mine' })).tasks;
      expect(tasks.map((t: any) => [t.signal.id, t.lease_ends_at])).toEqual([[task.id, claimed.claim_expires_at]]);
      expect(json(await b.client.readResource({ uri: 'svc://tasks/mine' })).tasks).toEqual([]);

      for (const uri of ['svc://nothing', 'https://example.com/', 'svc://thread/a/b', 'svc://whoami?x=1']) await expect(a.client.readResource({ uri })).rejects.toMatchObject({ code: -32002 });
    });

    it('a subscribed inbox and reservations list are notified after a REST change; unsubscribing stops it', async () => {
      const inboxUri = `svc://inbox/${alice.id}`;
      const p = project();
      const resUri = `svc://reservations?project=${p}`;
      await a.client.subscribeResource({ uri: inboxUri });
      await a.client.subscribeResource({ uri: resUri });
      // a subscription is granted only to a caller that may read: bob may not watch alice's inbox
      await expect(b.client.subscribeResource({ uri: inboxUri })).rejects.toMatchObject({ data: { code: 'POLICY_DENIED' } });
      await expect(b.client.subscribeResource({ uri: 'svc://nothing' })).rejects.toMatchObject({ code: -32002 });

      // the notification rides the session's GET stream, which the client opens after initialize: retry the change until it is up
      await waitFor('inbox update', async () => {
        await emitOk(bob, { signal_type: 'pulse', content: 'ping alice', to_identity: alice.id });
        await new Promise((res) => setTimeout(res, 300));
        return a.updated.includes(inboxUri);
      }, (ok) => ok, 20_000, 0);
      expect(a.updated).not.toContain(resUri);
      expectOk(await bob.client.post('/reservations', { project: p, paths: ['docs/**'] }));
      await waitFor('reservations update', () => a.updated.includes(resUri), (ok) => ok, 20_000);
      // a change elsewhere does not touch them: another project, a signal to bob only
      const before = a.updated.length;
      expectOk(await bob.client.post('/reservations', { project: project(), paths: ['docs/**'] }));
      await emitOk(alice, { signal_type: 'pulse', content: 'to bob', to_identity: bob.id });

      await a.client.unsubscribeResource({ uri: inboxUri });
      await emitOk(bob, { signal_type: 'pulse', content: 'after unsubscribe', to_identity: alice.id });
      // a later change of the still-subscribed list arrives, so anything for the inbox would have arrived first
      const mark = a.updated.length;
      expectOk(await alice.client.post('/reservations', { project: p, paths: ['lib/**'] }));
      await waitFor('second reservations update', () => a.updated.slice(mark).includes(resUri), (ok) => ok, 20_000);
      expect(a.updated.slice(before)).toEqual(a.updated.slice(before).filter((u) => u === resUri));

      await a.client.unsubscribeResource({ uri: resUri });
      expectOk(await bob.client.post('/reservations', { project: p, paths: ['test/**'] }));
      await emitOk(bob, { signal_type: 'pulse', content: 'nobody listens', to_identity: alice.id });
      // nothing more after both are gone: the session's watch is detached (checked after the hub had time to fan out)
      const count = a.updated.length;
      await new Promise((res) => setTimeout(res, 1000));
      expect(a.updated.length).toBe(count);
    });

    it('a subscribed thread and svc://tasks/mine are notified after a reply and a claim through REST', async () => {
      const a2 = await connect(url, alice.key);
      try {
        const root = await emitOk(bob, { signal_type: 'pulse', content: 'thread root', to_identity: alice.id });
        const task = await emitOk(bob, { signal_type: 'task', content: 'claim me', to_identity: alice.id });
        const threadUri = `svc://thread/${root.id}`;
        await a2.client.subscribeResource({ uri: threadUri });
        await a2.client.subscribeResource({ uri: 'svc://tasks/mine' });
        await expect(a2.client.subscribeResource({ uri: 'svc://thread/nope' })).rejects.toMatchObject({ code: -32002 });
        await waitFor('thread update', async () => {
          await emitOk(bob, { signal_type: 'pulse', content: 'a reply', parent_id: root.id });
          await new Promise((res) => setTimeout(res, 300));
          return a2.updated.includes(threadUri);
        }, (ok) => ok, 20_000, 0);
        expect(a2.updated).not.toContain('svc://tasks/mine');
        expectOk(await alice.client.post('/claim', { signal_id: task.id }));
        await waitFor('tasks/mine update', () => a2.updated.includes('svc://tasks/mine'), (ok) => ok, 20_000);
        expect(json(await a2.client.readResource({ uri: 'svc://tasks/mine' })).tasks.map((t: any) => t.signal.id)).toContain(task.id);
      } finally {
        await a2.client.close();
      }
    });

    it("a session's subscriptions end when its identity's membership is suspended", async () => {
      const carol = await join(root.client, 'res-carol');
      const c = await connect(url, carol.key);
      const b2 = await connect(url, bob.key);
      try {
        const p = project();
        const uri = `svc://reservations?project=${p}`;
        await c.client.subscribeResource({ uri });
        await b2.client.subscribeResource({ uri });
        let n = 0;
        await waitFor('both notified', async () => {
          expectOk(await bob.client.post('/reservations', { project: p, paths: [`warmup-${++n}`] }));
          await new Promise((res) => setTimeout(res, 300));
          return c.updated.includes(uri) && b2.updated.includes(uri);
        }, (ok) => ok, 20_000, 0);
        await setMembershipStatus(root.client, carol.id, 'suspended');
        const [cs, bs] = [c.updated.length, b2.updated.length];
        // bob's session, on the same hub, hears the change; carol's is silent
        expectOk(await bob.client.post('/reservations', { project: p, paths: ['after-suspension'] }));
        await waitFor('bob notified', () => b2.updated.length > bs, (ok) => ok, 20_000);
        await new Promise((res) => setTimeout(res, 500));
        expect(c.updated.length).toBe(cs);
      } finally {
        await Promise.all([c.client.close(), b2.client.close()]);
      }
    });

    it("a session whose key is revoked ends, its subscriptions with it; the identity's other sessions stay", async () => {
      const dave = await join(root.client, 'res-dave');
      const minted = expectOk(await root.client.post('/admin/api-keys', { owner: dave.id }), 201);
      const d = await connect(url, minted.api_key);
      const d2 = await connect(url, dave.key);
      const sid = d.transport.sessionId!;
      // the same session asked for with the identity's other key: 200 while it lives, 404 once it ended
      const sessionAnswers = async () =>
        (await fetch(url + '/mcp', {
          method: 'POST',
          headers: { authorization: `Bearer ${dave.key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/templates/list' }),
        })).status;
      try {
        const p = project();
        const uri = `svc://reservations?project=${p}`;
        await d.client.subscribeResource({ uri });
        await d2.client.subscribeResource({ uri });
        expect(await sessionAnswers()).toBe(200);
        expectOk(await root.client.post(`/admin/api-keys/${minted.id}/revoke`));
        await waitFor('the revoked key’s session ended', sessionAnswers, (status) => status === 404, 10_000);
        const before = d2.updated.length;
        expectOk(await bob.client.post('/reservations', { project: p, paths: ['after-revocation'] }));
        await waitFor('the other session notified', () => d2.updated.length > before, (ok) => ok, 20_000);
      } finally {
        await Promise.all([d.client.close().catch(() => undefined), d2.client.close()]);
      }
    });

    it('the reservation tools grant, report conflicts and release as the key identity, with refusals', async () => {
      const names = (await a.client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['svc_reserve_paths', 'svc_release_paths', 'svc_check_reservations']));
      const p = project();
      const got = toolResult(await a.client.callTool({ name: 'svc_reserve_paths', arguments: { project: p, paths: ['src/**', 'docs/a.md'], reason: 'refactor' } }));
      expect(got.granted.map((x: any) => [x.path, x.identity, x.exclusive, x.reason])).toEqual([['src/**', alice.id, true, 'refactor'], ['docs/a.md', alice.id, true, 'refactor']]);
      expect(got.conflicts).toEqual([]);
      expect(expectOk(await alice.client.get(`/reservations/${got.granted[0].id}`))).toEqual(got.granted[0]);

      const lost = toolResult(await b.client.callTool({ name: 'svc_reserve_paths', arguments: { project: p, paths: ['src/lib/x.ts', 'test/**'] } }));
      expect(lost.granted.map((x: any) => x.path)).toEqual(['test/**']);
      expect(lost.conflicts).toEqual([{ path: 'src/lib/x.ts', reservation: got.granted[0] }]);
      toolRefusal(await b.client.callTool({ name: 'svc_reserve_paths', arguments: { project: p, paths: [] } }), 'RPC_INVALID_PARAMS');
      toolRefusal(await b.client.callTool({ name: 'svc_reserve_paths', arguments: { project: p, paths: ['../etc'] } }), 'RESERVATION_VALIDATION_FAILED');

      const check = toolResult(await b.client.callTool({ name: 'svc_check_reservations', arguments: { project: p, paths: ['src/a.ts', 'docs/a.md', 'other.ts'] } }));
      expect(check.conflicts.map((c: any) => [c.path, c.reservation.identity])).toEqual([['src/a.ts', alice.id], ['docs/a.md', alice.id]]);
      // one's own reservations never conflict
      expect(toolResult(await a.client.callTool({ name: 'svc_check_reservations', arguments: { project: p, paths: ['src/a.ts'] } })).conflicts).toEqual([]);
      toolRefusal(await a.client.callTool({ name: 'svc_check_reservations', arguments: { project: p } }), 'RPC_INVALID_PARAMS');

      toolRefusal(await b.client.callTool({ name: 'svc_release_paths', arguments: { id: got.granted[0].id } }), 'RESERVATION_NOT_HOLDER');
      toolRefusal(await b.client.callTool({ name: 'svc_release_paths', arguments: { id: 'nope' } }), 'RESERVATION_NOT_FOUND');
      const released = toolResult(await a.client.callTool({ name: 'svc_release_paths', arguments: { id: got.granted[0].id } }));
      expect(released).toMatchObject({ id: got.granted[0].id, state: 'released', released_by: alice.id });
      toolRefusal(await a.client.callTool({ name: 'svc_release_paths', arguments: { id: got.granted[0].id } }), 'RESERVATION_NOT_ACTIVE');
      expect(toolResult(await b.client.callTool({ name: 'svc_reserve_paths', arguments: { project: p, paths: ['src/lib/x.ts'] } })).granted).toHaveLength(1);
    });

    it('reservations.* over /rpc call the same service functions as REST, with the same refusals', async () => {
      const p = project();
      const got = await rpcOk(alice.client, 'reservations.create', { project: p, paths: ['app/**'], ttl_s: 600, idempotency_key: 'rpc-1' });
      expect(got.granted).toHaveLength(1);
      const id = got.granted[0].id;
      expect(await rpcOk(alice.client, 'reservations.create', { project: p, paths: ['app/**'], ttl_s: 600, idempotency_key: 'rpc-1' })).toEqual(got);
      await rpcRefused(alice.client, 'reservations.create', { project: p, paths: ['app/x'], idempotency_key: 'rpc-1' }, 409, 'RESERVATION_IDEMPOTENCY_MISMATCH');
      await rpcRefused(alice.client, 'reservations.create', { project: p }, 400, 'RPC_INVALID_PARAMS');
      expect(await rpcOk(alice.client, 'reservations.get', { id })).toEqual(expectOk(await alice.client.get(`/reservations/${id}`)));

      const bobs = await rpcOk(bob.client, 'reservations.create', { project: p, paths: ['app/main.ts'] });
      expect(bobs).toEqual({ granted: [], conflicts: [{ path: 'app/main.ts', reservation: got.granted[0] }] });
      expect(await rpcOk(bob.client, 'reservations.conflicts', { project: p, paths: ['app/main.ts'] })).toEqual({ conflicts: bobs.conflicts });
      const listed = await rpcOk(bob.client, 'reservations.list', { project: p });
      expect(listed).toEqual({ reservations: [got.granted[0]], cursor: null, has_more: false });

      const renewed = await rpcOk(alice.client, 'reservations.renew', { id, ttl_s: 1200 });
      expect(Date.parse(renewed.expires_at)).toBeGreaterThan(Date.parse(got.granted[0].expires_at));
      await rpcRefused(bob.client, 'reservations.renew', { id, ttl_s: 1200 }, 403, 'RESERVATION_NOT_HOLDER');
      await rpcRefused(bob.client, 'reservations.release', { id }, 403, 'RESERVATION_NOT_HOLDER');
      // the holder is active, so only an admin may force it
      await rpcRefused(bob.client, 'reservations.force_release', { id }, 403, 'RESERVATION_FORCE_DENIED');
      const forced = await rpcOk(root.client, 'reservations.force_release', { id });
      expect(forced).toMatchObject({ id, state: 'released', forced: true, released_by: root.id });
      await rpcRefused(alice.client, 'reservations.release', { id }, 409, 'RESERVATION_NOT_ACTIVE');

      const again = await rpcOk(bob.client, 'reservations.create', { project: p, paths: ['app/main.ts'] });
      expect(await rpcOk(bob.client, 'reservations.release', { id: again.granted[0].id })).toMatchObject({ state: 'released', released_by: bob.id });
    });
  });
}
