/**
 * POST /rpc over real HTTP on both backends: every method, both separators, a batch with mixed success
 * and failure, every RPC error code with its HTTP status, domain errors keeping their status outside a
 * batch, workflow.next under a claim race, handoff.create with its claim step, and auth refusals.
 */
import Type from 'typebox';
import { beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '../../src/auth/keys.js';
import { FrontEnd } from '../../src/http/server.js';
import { Links } from '../../src/http/links.js';
import { createLogger } from '../../src/log.js';
import { rpcRoutes } from '../../src/rpc/rpc.js';
import { compile } from '../../src/validation.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

let seq = 0;
/** One JSON-RPC call; answers the HTTP status and the parsed body. */
async function rpc(c: Client, method: string, params?: unknown, id: string | number | null = ++seq) {
  const res = await c.req('POST', '/rpc', { jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
  return res;
}
async function ok(c: Client, method: string, params?: unknown) {
  const res = await rpc(c, method, params);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body).toMatchObject({ jsonrpc: '2.0' });
  expect(res.body.error).toBeUndefined();
  return res.body.result;
}
function rpcError(res: { status: number; body: any }, status: number, code: string, numeric: number) {
  expect({ status: res.status, code: res.body?.error?.data?.code }, JSON.stringify(res.body)).toEqual({ status, code });
  expect(res.body.jsonrpc).toBe('2.0');
  expect(res.body.error.code).toBe(numeric);
  expect(res.body.error.message.length).toBeGreaterThan(0);
  expect(res.body.error.data.request_id).toMatch(/^req_/);
  expect(res.body.error.data).toHaveProperty('details');
}

for (const backend of BACKENDS) {
  describe(`POST /rpc on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let url: string;
    let root: Member;
    let alice: Member;
    let bob: Member;
    let carol: Member;

    let crews = 0;
    /** Members and a role of its own for a workflow test: a task another test left open (or whose lease ran out under load) never reaches it. */
    async function crew(): Promise<{ role: string; bob: Member; carol: Member }> {
      const n = ++crews;
      const role = expectOk(await root.client.post('/roles', { name: `Crew${n}`, purpose: 'builds' }), 201);
      const b = await join(root.client, `bob${n}`, { capabilities: ['rust'] });
      const c = await join(root.client, `carol${n}`);
      expectOk(await root.client.post('/fills', { identity_id: b.id, role_id: role.id }), 201);
      expectOk(await root.client.post('/fills', { identity_id: c.id, role_id: role.id }), 201);
      return { role: role.name, bob: b, carol: c };
    }

    beforeAll(async () => {
      svc = await servers.start({ TASK_LEASE_MS: '60000' });
      url = svc.url;
      root = await bootstrap(url);
      alice = await join(root.client, 'alice');
      bob = await join(root.client, 'bob', { capabilities: ['rust'] });
      carol = await join(root.client, 'carol');
      const role = expectOk(await root.client.post('/roles', { name: 'Builder', purpose: 'builds' }), 201);
      expectOk(await root.client.post('/fills', { identity_id: bob.id, role_id: role.id }), 201);
      expectOk(await root.client.post('/fills', { identity_id: carol.id, role_id: role.id }), 201);
      expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id, bob.id] }), 201);
    });

    it('signals.emit, tasks.claim, signals.ack and thread.get act as REST does; "." and "/" name the same method', async () => {
      const task = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'rpc task', to_role: 'Builder' });
      expect(task).toMatchObject({ from_identity: alice.id, to_role: 'Builder', task_status: 'open', delivery_state: 'pending' });
      const claimed = await ok(bob.client, 'tasks/claim', { signal_id: task.id, lease_ms: 5000 });
      expect(claimed).toMatchObject({ claimed_by: bob.id, delivery_state: 'leased' });
      rpcError(await rpc(carol.client, 'tasks.claim', { signal_id: task.id }), 409, 'SIGNAL_CLAIM_CONFLICT', -32000);
      rpcError(await rpc(carol.client, 'signals/ack', { signal_id: task.id }), 403, 'SIGNAL_ACK_UNAUTHORIZED', -32000);
      const acked = await ok(bob.client, 'signals/ack', { signal_id: task.id });
      expect(acked).toMatchObject({ task_status: 'completed', delivery_state: 'acked' });
      const reply = await ok(bob.client, 'signals.emit', { signal_type: 'pulse', content: 'done', parent_id: task.id });
      const thread = await ok(alice.client, 'thread/get', { signal_id: task.id });
      expect(thread.signals.map((s: any) => s.id)).toEqual([task.id, reply.id]);
      expect(await ok(alice.client, 'thread.get', { signal_id: reply.id })).toEqual(thread);
      rpcError(await rpc(alice.client, 'signals.emit', { signal_type: 'task', content: 'x', from_identity: bob.id }), 403, 'POLICY_IDENTITY_MISMATCH', -32000);
      rpcError(await rpc(alice.client, 'thread.get', { signal_id: 'nope' }), 404, 'SIGNAL_NOT_FOUND', -32000);
    });

    it('memory.store|get|list|query|recall|update|forget|relate act as REST does under the namespace ACL, with either separator', async () => {
      const own = `agent:${alice.id}`;
      const ids = (r: any) => r.memories.map((m: any) => m.id);
      for (const sep of ['.', '/']) {
        const call = (c: Client, name: string, params: unknown) => ok(c, `memory${sep}${name}`, params);
        const refused = async (c: Client, name: string, params: unknown, status: number, code: string) => rpcError(await rpc(c, `memory${sep}${name}`, params), status, code, -32000);
        const entity = `launch${sep === '.' ? 'dot' : 'slash'}`;
        const m = await call(alice.client, 'store', { namespace: own, content: `the launch date is friday ${sep}`, entity, tags: ['rpc'] });
        expect(m).toMatchObject({ namespace: own, owner: alice.id, entity, version: 1, deleted_at: null });
        expect(expectOk(await alice.client.get(`/memory/${m.id}`))).toEqual(m);
        const ring = await call(bob.client, 'store', { namespace: 'ring:Core', content: `the launch venue is the harbour ${sep}`, entity });
        expect(ring.namespace).toBe('ring:core');
        await refused(bob.client, 'store', { namespace: own, content: 'intrusion' }, 403, 'MEMORY_NAMESPACE_DENIED');
        const bad = await rpc(alice.client, `memory${sep}store`, { namespace: own });
        rpcError(bad, 400, 'RPC_INVALID_PARAMS', -32602);
        expect(bad.body.error.data.details).toMatchObject({ field: 'content' });

        expect(await call(alice.client, 'get', { id: m.id })).toEqual(m);
        await refused(carol.client, 'get', { id: m.id }, 404, 'MEMORY_NOT_FOUND');

        const listed = await call(alice.client, 'list', { namespace: own, entity, tags: ['rpc'], limit: 10 });
        expect(listed).toEqual({ memories: [m], cursor: null, has_more: false });
        expect(ids(await call(alice.client, 'list', { namespace: own, tags: ['nope'] }))).toEqual([]);
        await refused(carol.client, 'list', { namespace: own }, 403, 'MEMORY_NAMESPACE_DENIED');

        const found = await call(alice.client, 'query', { namespace: own, query: 'launch date', mode: 'keyword' });
        expect(found.mode).toBe('keyword');
        expect(ids(found)).toContain(m.id);
        expect(found.memories[0].score).toBeGreaterThan(0);
        await refused(carol.client, 'query', { namespace: 'ring:core', query: 'launch' }, 403, 'MEMORY_NAMESPACE_DENIED');

        expect(ids(await call(alice.client, 'recall', { entity }))).toEqual([ring.id, m.id]);
        const first = await call(alice.client, 'recall', { entity, limit: 1 });
        expect(ids(first)).toEqual([ring.id]);
        expect(ids(await call(alice.client, 'recall', { entity, after: first.cursor }))).toEqual([m.id]);
        expect(ids(await call(bob.client, 'recall', { entity }))).toEqual([ring.id]);
        expect(ids(await call(carol.client, 'recall', { entity }))).toEqual([]);

        const updated = await call(alice.client, 'update', { id: m.id, content: `the launch date moved to monday ${sep}`, tags: ['rpc', 'v2'] });
        expect(updated).toMatchObject({ id: m.id, content: `the launch date moved to monday ${sep}`, tags: ['rpc', 'v2'], version: 2 });
        await refused(carol.client, 'update', { id: ring.id, content: 'x' }, 404, 'MEMORY_NOT_FOUND');

        const edge = await call(alice.client, 'relate', { from_id: m.id, to_id: ring.id, relation: 'happens_at' });
        expect(edge).toMatchObject({ from_id: m.id, to_id: ring.id, relation: 'happens_at' });
        expect(expectOk(await alice.client.get(`/memory/relate/${m.id}/edges`)).edges.map((e: any) => e.id)).toEqual([edge.id]);
        await refused(bob.client, 'relate', { from_id: ring.id, to_id: m.id, relation: 'x' }, 404, 'GRAPH_MEMORY_NOT_FOUND');

        await refused(carol.client, 'forget', { id: ring.id }, 404, 'MEMORY_NOT_FOUND');
        const gone = await call(alice.client, 'forget', { id: m.id });
        expect(gone.deleted_at).not.toBeNull();
        await refused(alice.client, 'get', { id: m.id }, 404, 'MEMORY_NOT_FOUND');
      }
    });

    it('signals.batch_emit: each item on its own, results in order', async () => {
      const res = await ok(alice.client, 'signals.batch_emit', {
        signals: [
          { signal_type: 'pulse', content: 'first' },
          { signal_type: 'pulse', content: 'bad target', to_role: 'Nobody' },
          { signal_type: 'pulse', content: 'third', from_identity: bob.id },
          { signal_type: 'sense', content: 'fourth', to_ring: 'Core' },
        ],
      });
      expect(res.results.map((r: any) => r.signal?.content ?? r.error.code)).toEqual(['first', 'SIGNAL_NOT_FOUND', 'POLICY_IDENTITY_MISMATCH', 'fourth']);
      const listed = expectOk(await alice.client.get('/signals/list?limit=5')).signals.map((s: any) => s.content);
      expect(listed.slice(0, 2)).toEqual(['fourth', 'first']);
      rpcError(await rpc(alice.client, 'signals.batch_emit', { signals: [] }), 400, 'RPC_INVALID_PARAMS', -32602);
    });

    it('signals.search: words in content, with tag, type, role and ring filters', async () => {
      const hit = await ok(alice.client, 'signals.emit', { signal_type: 'query', content: 'Where is the Deploy key?', tags: ['ops', 'keys'], to_ring: 'Core' });
      await ok(alice.client, 'signals.emit', { signal_type: 'query', content: 'deploy later', tags: ['ops'] });
      await ok(alice.client, 'signals.emit', { signal_type: 'pulse', content: 'the deploy key rotated', tags: ['ops', 'keys'] });
      const byText = await ok(alice.client, 'signals.search', { text: 'deploy KEY' });
      expect(byText.map((s: any) => s.content)).toEqual(['the deploy key rotated', 'Where is the Deploy key?']);
      expect((await ok(alice.client, 'signals/search', { text: 'deploy', tags: ['ops', 'keys'], type: 'query' })).map((s: any) => s.id)).toEqual([hit.id]);
      expect((await ok(alice.client, 'signals.search', { text: 'deploy', ring: 'core' })).map((s: any) => s.id)).toEqual([hit.id]);
      expect(await ok(alice.client, 'signals.search', { text: 'deploy', role: 'Builder' })).toEqual([]);
      expect(await ok(alice.client, 'signals.search', { text: 'deploy', limit: 1 })).toHaveLength(1);
      rpcError(await rpc(alice.client, 'signals.search', { tags: 'ops' }), 400, 'RPC_INVALID_PARAMS', -32602);
    });

    it('inbox.check: the caller inbox with the REST filters and paging', async () => {
      const direct = await ok(alice.client, 'signals.emit', { signal_type: 'alert', content: 'for carol', to_identity: carol.id, urgency: 1 });
      const first = await ok(carol.client, 'inbox.check', { limit: 1 });
      expect(first.signals.map((s: any) => s.id)).toEqual([direct.id]);
      expect(first.signals[0].receipt_state).toBe('unread');
      expect(first.has_more).toBe(true);
      const next = await ok(carol.client, 'inbox/check', { limit: 100, after: first.cursor });
      expect(next.signals.map((s: any) => s.id)).not.toContain(direct.id);
      expect((await ok(carol.client, 'inbox.check', { type: 'alert', view: 'summary' })).signals[0]).not.toHaveProperty('content');
      rpcError(await rpc(carol.client, 'inbox.check', { after: 'not a cursor!' }), 400, 'VALIDATION_INVALID_TYPE', -32602);
    });

    it('identity.whoami, roles.list, rings.list, identities.list (admin)', async () => {
      const me = await ok(bob.client, 'identity.whoami');
      expect(me.identity).toMatchObject({ id: bob.id, capabilities: ['rust'] });
      expect(me.key).not.toHaveProperty('hash');
      expect(me.membership.status).toBe('active');
      expect(me.roles.map((r: any) => r.name)).toEqual(['Builder']);
      expect(me.rings.map((r: any) => r.name)).toEqual(['Core']);
      expect((await ok(bob.client, 'roles/list')).map((r: any) => r.name)).toEqual(['Builder']);
      expect((await ok(bob.client, 'rings.list', {})).map((r: any) => r.name)).toEqual(['Core']);
      const ids = await ok(root.client, 'identities.list', { limit: 2 });
      expect(ids.identities.map((i: any) => i.id)).toEqual([carol.id, bob.id]);
      rpcError(await rpc(bob.client, 'identities.list'), 403, 'AUTH_ADMIN_REQUIRED', -32000);
      rpcError(await rpc(bob.client, 'roles.list', { unexpected: true }), 400, 'RPC_INVALID_PARAMS', -32602);
    });

    it('webhooks.list (admin): the webhooks REST lists, without their secrets; refused for a member', async () => {
      const hook = expectOk(await root.client.post('/admin/webhooks', { url: 'https://hooks.example.com/in', events: ['signal.emitted'] }), 201);
      const listed = await ok(root.client, 'webhooks/list');
      expect(listed.map((w: any) => w.id)).toContain(hook.id);
      expect(listed.find((w: any) => w.id === hook.id)).not.toHaveProperty('secret');
      expect(listed).toEqual(expectOk(await root.client.get('/admin/webhooks')));
      rpcError(await rpc(bob.client, 'webhooks.list'), 403, 'AUTH_ADMIN_REQUIRED', -32000);
    });

    it('workflow.next claims the most urgent open task the caller may take; a lost race moves on', async () => {
      const { role, bob, carol } = await crew();
      const low = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'low', to_role: role, urgency: 0.2, payload: { task_type: 'build' } });
      const high = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'high', to_role: role, urgency: 0.95, payload: { task_type: 'build' } });
      const rust = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'rust only', to_role: role, urgency: 0.99, target_capabilities: ['rust'], payload: { task_type: 'build' } });
      const review = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'review', to_role: role, urgency: 0.97, payload: { task_type: 'review' } });

      // carol lacks the rust capability: the most urgent she may take of type build is "high"
      const got = await ok(carol.client, 'workflow.next', { task_types: ['build'], lease_ms: 30000 });
      expect(got.signal).toMatchObject({ id: high.id, claimed_by: carol.id, delivery_state: 'leased' });
      expect(Date.parse(got.signal.claim_expires_at) - Date.parse(got.signal.claimed_at)).toBe(30000);
      // bob may take the rust task
      expect((await ok(bob.client, 'workflow/next', { task_types: ['build'] })).signal.id).toBe(rust.id);

      // two racing for the same candidates: each gets a different task, none fails
      const [x, y] = await Promise.all([ok(bob.client, 'workflow.next', {}), ok(carol.client, 'workflow.next', {})]);
      expect(new Set([x.signal.id, y.signal.id])).toEqual(new Set([review.id, low.id]));
      expect((await ok(carol.client, 'workflow.next', { task_types: ['build'] })).signal).toBeNull();
      rpcError(await rpc(carol.client, 'workflow.next', { lease_ms: 0 }), 400, 'RPC_INVALID_PARAMS', -32602);
    });

    it('workflow.next finds an open task behind more than its scan of completed ones, and a released task again', async () => {
      const { bob } = await crew();
      // a direct, urgent task first, then 1,100 more urgent ones completed: they rank ahead of it in the inbox
      const waiting = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'the one left', to_identity: bob.id, urgency: 0.01 });
      // seeded through the fastest real routes: eleven batch emits, then claim and complete fifty tasks per /rpc batch
      const done = (
        await Promise.all(
          Array.from({ length: 11 }, async (_, k) =>
            (await ok(alice.client, 'signals.batch_emit', { signals: Array.from({ length: 100 }, (_, j) => ({ signal_type: 'task', content: `done ${k * 100 + j}`, to_identity: bob.id, urgency: 0.9 })) })).results.map((r: any) => r.signal.id as string),
          ),
        )
      ).flat();
      expect(done).toHaveLength(1100);
      await Promise.all(
        Array.from({ length: 22 }, async (_, k) => {
          const calls = done.slice(k * 50, k * 50 + 50).flatMap((id) => [
            { jsonrpc: '2.0', id: `c${id}`, method: 'tasks.claim', params: { signal_id: id } },
            { jsonrpc: '2.0', id: `a${id}`, method: 'signals.ack', params: { signal_id: id, outcome: 'completed' } },
          ]);
          const res = await bob.client.req('POST', '/rpc', calls);
          expect(res.status).toBe(200);
          expect(res.body.filter((a: any) => a.error), JSON.stringify(res.body.find((a: any) => a.error))).toEqual([]);
        }),
      );
      const got = await ok(bob.client, 'workflow.next', { lease_ms: 30000 });
      expect(got.signal).toMatchObject({ id: waiting.id, claimed_by: bob.id, delivery_state: 'leased' });
      expect((await ok(bob.client, 'workflow.next', {})).signal).toBeNull();
      // a failed ack hands the task back: it is open again for the next call
      expectOk(await bob.client.post('/ack', { signal_id: waiting.id, outcome: 'failed' }));
      expect((await ok(bob.client, 'workflow.next', {})).signal).toMatchObject({ id: waiting.id, claimed_by: bob.id });
    });

    it('workflow.next walks past tasks the caller may not take, leaves out the ones it resolved, and hands concurrent callers distinct tasks', async () => {
      const { role, bob, carol } = await crew();
      // 40 more urgent tasks only bob may take (rust) sit ahead of carol's one: more than one step of the walk
      const rustOnly = [];
      for (let i = 0; i < 40; i += 20)
        rustOnly.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => ok(alice.client, 'signals.emit', { signal_type: 'task', content: `rust ${i + j}`, to_role: role, urgency: 0.9, target_capabilities: ['rust'] })))));
      const resolved = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'carol resolved it', to_identity: carol.id, urgency: 0.5 });
      const hers = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'for carol', to_identity: carol.id, urgency: 0.1 });
      expectOk(await carol.client.post('/inbox/resolve', { signal_id: resolved.id }));
      expect((await ok(carol.client, 'workflow.next', {})).signal).toMatchObject({ id: hers.id, claimed_by: carol.id });
      expect((await ok(carol.client, 'workflow.next', {})).signal).toBeNull();

      // 40 callers at once for bob's 40 tasks: each claims one, none twice, none comes back empty
      const got = await Promise.all(rustOnly.map(() => ok(bob.client, 'workflow.next', {})));
      expect(got.every((g) => g.signal !== null)).toBe(true);
      expect(new Set(got.map((g) => g.signal.id))).toEqual(new Set(rustOnly.map((s) => s.id)));
      expect((await ok(bob.client, 'workflow.next', {})).signal).toBeNull();
    });

    it('workflow.next never hands one caller the same task twice, across lines of different task types', async () => {
      const { role, bob } = await crew();
      const type = `lines-${Date.now()}`;
      const tasks = await Promise.all(Array.from({ length: 20 }, (_, i) => ok(alice.client, 'signals.emit', { signal_type: 'task', content: `typed ${i}`, to_role: role, payload: { task_type: type } })));
      // two lines at once, one asking for the type and one for anything: each may read a task the other has just claimed
      const got = await Promise.all(Array.from({ length: 40 }, (_, i) => ok(bob.client, 'workflow.next', i % 2 ? { task_types: [type] } : {})));
      const ids = got.map((g) => g.signal?.id).filter((id): id is string => id !== undefined);
      expect(ids.sort()).toEqual(tasks.map((t) => t.id).sort());
    });

    it('workflow.next completes or releases the caller claim first, in the same call, and never hands a released task straight back', async () => {
      const { role, bob, carol } = await crew();
      const a = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'first', to_identity: carol.id, urgency: 0.9 });
      const b = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'second', to_identity: carol.id, urgency: 0.5 });
      expect((await ok(carol.client, 'workflow.next', {})).signal.id).toBe(a.id);
      const step = await ok(carol.client, 'workflow.next', { complete_claim: a.id });
      expect(step.claim).toMatchObject({ id: a.id, delivery_state: 'acked', task_status: 'completed' });
      expect(step.signal).toMatchObject({ id: b.id, claimed_by: carol.id });
      // released: b is open again, more urgent than nothing else, yet not taken back by this call
      const released = await ok(carol.client, 'workflow.next', { release_claim: b.id });
      expect(released.claim).toMatchObject({ id: b.id, delivery_state: 'pending', claimed_by: null });
      expect(released.signal).toBeNull();
      expect((await ok(carol.client, 'workflow.next', {})).signal).toMatchObject({ id: b.id, claimed_by: carol.id });

      // ending a claim that is not the caller's refuses the whole call: bob claims nothing, the task he could take stays for carol
      const c = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'third', to_role: role, urgency: 0.4 });
      rpcError(await rpc(bob.client, 'workflow.next', { complete_claim: b.id }), 403, 'SIGNAL_ACK_UNAUTHORIZED', -32000);
      rpcError(await rpc(carol.client, 'workflow.next', { complete_claim: b.id, release_claim: b.id }), 400, 'VALIDATION_INVALID_TYPE', -32602);
      expect((await ok(carol.client, 'workflow.next', { complete_claim: b.id })).signal).toMatchObject({ id: c.id });
    });

    it('open tasks of a data dir from before the priority-ordered index are indexed once at startup', async () => {
      const { carol } = await crew();
      const old = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'from an older build', to_identity: carol.id });
      // as an older build left it: the task in the old open-task index only, no migration mark
      const member = String(Math.round(old.urgency * 1000)).padStart(4, '0') + old.id;
      const ready = String(1_000_000).padStart(7, '0') + member;
      const legacy = `inbox:identity:${carol.id}:open-tasks`;
      const moved = await svc.store.commit([
        { op: 'index', index: `inbox:identity:${carol.id}:ready-tasks`, member: ready, remove: true },
        { op: 'index', index: legacy, member },
        { op: 'del', key: 'migration:ready-tasks-v3' },
      ]);
      expect(moved.ok).toBe(true);
      const again = await startServer(svc.env);
      try {
        const got = await ok(new Client(again.url, carol.key), 'workflow.next', {});
        expect(got.signal).toMatchObject({ id: old.id, claimed_by: carol.id });
        expect(await svc.store.range(legacy, { limit: 10 })).toEqual([]);
      } finally {
        await again.close();
      }
    });

    it('handoff.create completes or releases the caller claim, then emits the structured task', async () => {
      const task = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'step 1', to_identity: bob.id });
      await ok(bob.client, 'tasks.claim', { signal_id: task.id });
      const h = await ok(bob.client, 'handoff.create', {
        to_role: 'Builder',
        summary: 'step 2: ship it',
        links: [{ kind: 'signal', id: task.id }],
        acceptance_criteria: ['tests green'],
        urgency: 0.8,
        task_type: 'build',
        complete_claim: task.id,
      });
      expect(h.claim).toMatchObject({ id: task.id, task_status: 'completed' });
      expect(h.signal).toMatchObject({ signal_type: 'task', content: 'step 2: ship it', to_role: 'Builder', from_identity: bob.id, parent_id: task.id, urgency: 0.8, task_status: 'open' });
      expect(h.signal.payload).toEqual({ task_type: 'build', handoff: { summary: 'step 2: ship it', links: [{ kind: 'signal', id: task.id }], acceptance_criteria: ['tests green'], from_claim: task.id } });

      const other = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'to release', to_identity: bob.id });
      await ok(bob.client, 'tasks.claim', { signal_id: other.id });
      const r = await ok(bob.client, 'handoff/create', { to_identity: carol.id, summary: 'yours', release_claim: other.id });
      expect(r.claim).toMatchObject({ id: other.id, claimed_by: null, delivery_state: 'pending', delivery_count: 1 });
      expect(r.signal).toMatchObject({ to_identity: carol.id, content: 'yours' });

      // a claim the caller does not hold: refused, and no handoff signal is written
      const before = expectOk(await root.client.get('/signals/list?limit=1')).signals[0].id;
      rpcError(await rpc(carol.client, 'handoff.create', { to_role: 'Builder', summary: 'not mine', complete_claim: other.id }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION', -32000);
      expect(expectOk(await root.client.get('/signals/list?limit=1')).signals[0].id).toBe(before);
      rpcError(await rpc(bob.client, 'handoff.create', { summary: 'nowhere' }), 400, 'VALIDATION_FIELD_REQUIRED', -32602);
      rpcError(await rpc(bob.client, 'handoff.create', { to_role: 'Builder' }), 400, 'RPC_INVALID_PARAMS', -32602);
    });

    it('workflow.resume: identity, roles, rings, held tasks with lease ends, unread count and top items', async () => {
      const held = await ok(alice.client, 'signals.emit', { signal_type: 'task', content: 'hold me', to_identity: carol.id, urgency: 1 });
      await ok(carol.client, 'tasks.claim', { signal_id: held.id });
      const r = await ok(carol.client, 'workflow.resume', {});
      expect(r.identity.id).toBe(carol.id);
      expect(r.roles.map((x: any) => x.name)).toEqual(['Builder']);
      expect(r.rings).toEqual([]);
      const mine = r.tasks.map((t: any) => t.signal.id);
      expect(mine).toContain(held.id);
      expect(r.tasks.every((t: any) => t.signal.claimed_by === carol.id && t.lease_ends_at === t.signal.claim_expires_at)).toBe(true);
      const inbox = await ok(carol.client, 'inbox.check', { receipt_state: 'unread', limit: 100 });
      expect(r.inbox.unread).toBe(inbox.signals.length);
      expect(r.inbox.unread_complete).toBe(true);
      expect(r.inbox.top.map((s: any) => s.id)).toEqual(inbox.signals.slice(0, 5).map((s: any) => s.id));
    });

    it('workflow.resume: the newest memories the caller may read and the active workstreams it created or linked to', async () => {
      const inRole = await ok(carol.client, 'memory.store', { namespace: 'role:Builder', content: 'resume: builder conventions' });
      const forgotten = await ok(carol.client, 'memory.store', { namespace: `agent:${carol.id}`, content: 'resume: a note carol drops' });
      const hidden = await ok(alice.client, 'memory.store', { namespace: `agent:${alice.id}`, content: 'resume: alice private' });
      const mine = await ok(carol.client, 'memory.store', { namespace: `agent:${carol.id}`, content: 'resume: carol private' });
      const org = await ok(bob.client, 'memory.store', { namespace: 'org', content: 'resume: org news' });
      await ok(carol.client, 'memory.forget', { id: forgotten.id });

      const created = expectOk(await carol.client.post('/workstreams', { name: 'carol own' }), 201);
      const linked = expectOk(await alice.client.post('/workstreams', { name: 'alice, carol linked' }), 201);
      const note = await ok(carol.client, 'signals.emit', { signal_type: 'pulse', content: 'resume link target' });
      expectOk(await carol.client.post(`/workstreams/${linked.id}/links`, { kind: 'signal', id: note.id }), 201);
      const others = expectOk(await alice.client.post('/workstreams', { name: 'alice only' }), 201);
      const done = expectOk(await carol.client.post('/workstreams', { name: 'carol done', status: 'done' }), 201);

      const r = await ok(carol.client, 'workflow.resume', {});
      const ids = r.memories.map((m: any) => m.id);
      expect(ids.slice(0, 3)).toEqual([org.id, mine.id, inRole.id]);
      expect(ids).not.toContain(hidden.id);
      expect(ids).not.toContain(forgotten.id);
      expect(r.memories.length).toBeLessThanOrEqual(10);
      expect(r.workstreams.map((w: any) => w.id)).toEqual([linked.id, created.id]);
      expect(r.workstreams.map((w: any) => w.id)).not.toContain(others.id);
      expect(r.workstreams.map((w: any) => w.id)).not.toContain(done.id);
      const a = await ok(alice.client, 'workflow/resume', {});
      expect(a.memories.map((m: any) => m.id)).toContain(hidden.id);
      expect(a.workstreams.map((w: any) => w.id).slice(0, 2)).toEqual([others.id, linked.id]);
    });

    it('a batch answers 200 with per-item results and errors, in order; notifications get no answer', async () => {
      const res = await alice.client.req('POST', '/rpc', [
        { jsonrpc: '2.0', id: 'a', method: 'identity.whoami' },
        { jsonrpc: '2.0', id: 'b', method: 'no.such.method' },
        { jsonrpc: '2.0', id: 'c', method: 'tasks.claim', params: { signal_id: 'missing' } },
        { jsonrpc: '2.0', method: 'signals.emit', params: { signal_type: 'pulse', content: 'notified' } },
        { jsonrpc: '1.0', id: 'e', method: 'roles.list' },
        { jsonrpc: '2.0', id: 'f', method: 'signals.emit', params: { content: 'no type' } },
        'not a call',
      ]);
      expect(res.status).toBe(200);
      expect(res.body.map((r: any) => [r.id, r.result ? 'ok' : r.error.data.code])).toEqual([
        ['a', 'ok'],
        ['b', 'RPC_METHOD_NOT_FOUND'],
        ['c', 'SIGNAL_NOT_FOUND'],
        ['e', 'RPC_INVALID_REQUEST'],
        ['f', 'RPC_INVALID_PARAMS'],
        [null, 'RPC_INVALID_REQUEST'],
      ]);
      expect(res.body[1].error.code).toBe(-32601);
      expect(expectOk(await alice.client.get('/signals/list?limit=1')).signals[0].content).toBe('notified');
      const silent = await fetch(url + '/rpc', { method: 'POST', headers: { authorization: `Bearer ${alice.key}` }, body: JSON.stringify({ jsonrpc: '2.0', method: 'roles.list' }) });
      expect(silent.status).toBe(204);
    });

    it('every RPC error code with its HTTP status', async () => {
      const post = async (body: string) => {
        const r = await fetch(url + '/rpc', { method: 'POST', headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' }, body });
        return { status: r.status, body: await r.json() };
      };
      rpcError(await post('{"jsonrpc": "2.0", "id": 1, "method": '), 400, 'RPC_PARSE_ERROR', -32700);
      rpcError(await post(JSON.stringify({ id: 1, method: 'roles.list' })), 400, 'RPC_INVALID_REQUEST', -32600);
      rpcError(await post(JSON.stringify({ jsonrpc: '2.0', id: 1 })), 400, 'RPC_INVALID_REQUEST', -32600);
      rpcError(await post('[]'), 400, 'RPC_INVALID_REQUEST', -32600);
      rpcError(await post(JSON.stringify(Array.from({ length: 101 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'roles.list' })))), 400, 'RPC_INVALID_REQUEST', -32600);
      rpcError(await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'memory.nope' })), 404, 'RPC_METHOD_NOT_FOUND', -32601);
      rpcError(await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks.claim', params: ['positional'] })), 400, 'RPC_INVALID_PARAMS', -32602);
      const missing = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks.claim', params: {} }));
      rpcError(missing, 400, 'RPC_INVALID_PARAMS', -32602);
      expect(missing.body.error.data.details).toMatchObject({ field: 'signal_id', code: 'VALIDATION_FIELD_REQUIRED' });
      expect(missing.body.id).toBe(1);
    });

    it('RPC_INTERNAL_ERROR: a method that throws an unexpected error answers 500 without its message', async () => {
      // the real /rpc transport and front end, over a method table of one entry that fails unexpectedly
      const front = new FrontEnd({ bodyLimit: 1 << 20, uploadLimit: 1 << 20, links: new Links('http://localhost'), log: createLogger('silent'), authenticate: (h, admin) => authenticate(svc.store, h, admin) });
      front.routes(rpcRoutes({ 'test.fail': { params: compile(Type.Object({})), description: 'fails', handler: async () => { throw new Error('secret internal detail'); } } }, createLogger('silent')));
      front.finish();
      const port = await front.listen('127.0.0.1', 0);
      try {
        const c = new Client(`http://127.0.0.1:${port}`, alice.key);
        const res = await rpc(c, 'test/fail', {});
        rpcError(res, 500, 'RPC_INTERNAL_ERROR', -32603);
        expect(JSON.stringify(res.body)).not.toContain('secret');
        const inBatch = await c.req('POST', '/rpc', [{ jsonrpc: '2.0', id: 1, method: 'test.fail' }]);
        expect(inBatch.status).toBe(200);
        expect(inBatch.body[0].error.data.code).toBe('RPC_INTERNAL_ERROR');
      } finally {
        front.close();
      }
    });

    it('refuses no key and a bad key with the REST envelope', async () => {
      const body = { jsonrpc: '2.0', id: 1, method: 'identity.whoami' };
      expectError(await new Client(url).post('/rpc', body), 401, 'AUTH_KEY_MISSING');
      expectError(await new Client(url, 'svc_not-a-key').post('/rpc', body), 401, 'AUTH_KEY_INVALID');
    });

    it('a key scope applies: a key limited to pulse signals cannot emit a task or search tasks', async () => {
      const key = expectOk(await root.client.post('/admin/api-keys', { owner: alice.id, permissions: { signal_types: ['pulse'] } }), 201);
      const scoped = new Client(url, key.api_key);
      rpcError(await rpc(scoped, 'signals.emit', { signal_type: 'task', content: 'x' }), 403, 'AUTH_SCOPE_DENIED', -32000);
      rpcError(await rpc(scoped, 'signals.search', { type: 'task' }), 403, 'AUTH_SCOPE_DENIED', -32000);
      expect((await ok(scoped, 'signals.emit', { signal_type: 'pulse', content: 'fine' })).signal_type).toBe('pulse');
    });
  });
}
