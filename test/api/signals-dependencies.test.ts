/**
 * Task dependencies, priority and schedule over real HTTP, WebSocket, /rpc, MCP and a webhook receiver, on both
 * backends: a diamond completing in either order (and both sides at once) makes its sink claimable exactly
 * once, in the commit of the last dependency, pushed then; a dead-lettered or cancelled dependency blocks its
 * dependants, downstream too; the ready list and workflow.next order by priority before urgency; not_before
 * and deadline move the task by durable timers (task.expired to the emitter and webhooks); the graph route.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { taskFixture } from '../helpers/tasks.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

/** open for a claim: the worker's socket may have marked it delivered already */
const CLAIMABLE = expect.stringMatching(/^(pending|delivered)$/);
const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const ENV = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000', MAX_DELIVERY_ATTEMPTS: '2' };

describe.each(BACKENDS)('task dependencies and schedule on %s', (backend) => {
  const servers = serversOn(backend);
  const fx = taskFixture(servers, { names: 'dep', env: ENV, bossSocket: true, webhooks: ['task.expired'] });
  let n = 0;

  /** a task to the fx.worker, with its own task_type so ready lists of one test see only its tasks */
  const task = (type: string, extra: Record<string, unknown> = {}) => emitOk(fx.boss, { signal_type: 'task', content: `${type} ${++n}`, to_identity: fx.worker.id, payload: { task_type: type }, ...extra });
  const get = async (id: string) => (await expectOk(await fx.worker.client.get(`/signals/list?type=task&limit=100`))).signals.find((s: any) => s.id === id);
  const ready = async (type: string) => expectOk(await fx.worker.client.get(`/tasks/ready?task_types=${type}&limit=100`));
  const readyIds = async (type: string) => (await ready(type)).tasks.map((t: any) => t.id);
  const complete = async (id: string) => {
    expectOk(await fx.worker.client.post('/claim', { signal_id: id }));
    return expectOk(await fx.worker.client.post('/ack', { signal_id: id, outcome: 'completed' }));
  };
  /** the pushes of a task becoming claimable: updates of it that arrive in the `pending` state */
  const releases = (id: string) => fx.workerSocket.updates(id).filter((f) => f.signal.delivery_state === 'pending' && f.signal.blocked_by.length === 0);

  it('refuses dependencies that are unknown, not tasks, or on a signal that is not a task', async () => {
    expectError(await fx.boss.client.post('/emit', { signal_type: 'task', content: 'x', depends_on: [UNKNOWN] }), 404, 'SIGNAL_NOT_FOUND', 'depends_on');
    const pulse = await emitOk(fx.boss, { signal_type: 'pulse', content: 'not a task' });
    expectError(await fx.boss.client.post('/emit', { signal_type: 'task', content: 'x', depends_on: [pulse.id] }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'depends_on');
    const t = await task('refuse');
    expectError(await fx.boss.client.post('/emit', { signal_type: 'pulse', content: 'x', depends_on: [t.id] }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'depends_on');
    expectError(await fx.boss.client.post('/emit', { signal_type: 'task', content: 'x', depends_on: Array.from({ length: 101 }, () => t.id) }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'depends_on');
    expectError(await fx.boss.client.post('/emit', { signal_type: 'task', content: 'x', deadline: new Date(Date.now() - 1000).toISOString() }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'deadline');
  });

  it('a dependant emitted while its dependency completes is never left waiting on a completed task', async () => {
    // the completion reads the dependency's dependants (none yet) while the emit adds the first one: the
    // completion's commit must see that one came, or the dependant waits forever
    const pairs = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const dep = await task('race');
        expectOk(await fx.worker.client.post('/claim', { signal_id: dep.id }));
        const [then] = await Promise.all([task('race', { depends_on: [dep.id] }), fx.worker.client.post('/ack', { signal_id: dep.id, outcome: 'completed' })]);
        return then.id as string;
      }),
    );
    const states = await Promise.all(pairs.map(get));
    expect(states.map((t) => [t.delivery_state, t.blocked_by])).toEqual(pairs.map(() => [CLAIMABLE, []]));
  });

  for (const order of ['left first', 'right first', 'both at once'] as const)
    it(`a diamond whose sides complete ${order} releases its sink once, in the commit of the last, pushed then`, async () => {
      const type = `diamond-${order.replace(/ /g, '-')}`;
      const top = await task(type);
      const left = await task(type, { depends_on: [top.id] });
      const right = await task(type, { depends_on: [top.id], priority: 3 });
      const sink = await task(type, { depends_on: [left.id, right.id] });
      expect(sink).toMatchObject({ delivery_state: 'waiting', task_status: 'open', depends_on: [left.id, right.id], blocked_by: [left.id, right.id] });
      expect(await readyIds(type)).toEqual([top.id]);
      const refused = await fx.worker.client.post('/claim', { signal_id: sink.id });
      expectError(refused, 422, 'SIGNAL_CLAIM_INVALID_STATUS');
      expect(refused.body.error.details).toMatchObject({ reason: 'waiting', blocked_by: [left.id, right.id] });

      await complete(top.id);
      // priority first: right (3) before left (0)
      expect(await readyIds(type)).toEqual([right.id, left.id]);
      if (order === 'both at once') await Promise.all([complete(left.id), complete(right.id)]);
      else {
        const [first, second] = order === 'left first' ? [left, right] : [right, left];
        await complete(first.id);
        expect(await get(sink.id)).toMatchObject({ delivery_state: 'waiting', blocked_by: [second.id] });
        expect(await readyIds(type)).toEqual([second.id]);
        await complete(second.id);
      }
      expect(await get(sink.id)).toMatchObject({ delivery_state: CLAIMABLE, blocked_by: [] });
      expect(await readyIds(type)).toEqual([sink.id]);
      await waitFor('the sink pushed as it became claimable', () => releases(sink.id).length, (k) => k >= 1);
      // the task's move to claimable is one transition: its history shows it once
      const moves = expectOk(await fx.root.client.get(`/admin/actors/signal/${sink.id}`)).transitions as any[];
      expect(moves.filter((h) => h.from === 'waiting' && h.to === 'pending')).toEqual([expect.objectContaining({ event: 'DEPENDENCY_COMPLETED' })]);
      expect(releases(sink.id)).toHaveLength(1);
      expect((await complete(sink.id)).task_status).toBe('completed');

      const graph = expectOk(await fx.worker.client.get(`/tasks/${sink.id}/graph`));
      expect(graph.task.id).toBe(sink.id);
      expect(graph.upstream.map((x: any) => [x.id, x.depth, x.delivery_state]).sort()).toEqual([[left.id, 1, 'acked'], [right.id, 1, 'acked'], [top.id, 2, 'acked']].sort());
      expect(expectOk(await fx.worker.client.get(`/tasks/${top.id}/graph`)).downstream.map((x: any) => [x.id, x.depth]).sort()).toEqual([[left.id, 1], [right.id, 1], [sink.id, 2]].sort());
    });

  it('a dead-lettered dependency blocks its dependants and theirs, with the reason; a cancelled one too', async () => {
    const type = 'blocked';
    const dep = await task(type);
    const mid = await task(type, { depends_on: [dep.id] });
    const leaf = await task(type, { depends_on: [mid.id] });
    for (let i = 0; i < 2; i++) {
      expectOk(await fx.worker.client.post('/claim', { signal_id: dep.id }));
      expectOk(await fx.worker.client.post('/ack', { signal_id: dep.id, outcome: 'failed' }));
    }
    expect(await get(dep.id)).toMatchObject({ delivery_state: 'dead_letter', dead_letter_reason: 'max_attempts' });
    expect(await get(mid.id)).toMatchObject({ delivery_state: 'blocked', task_status: 'blocked', blocked_reason: { dependency_id: dep.id, reason: 'dead_letter' } });
    expect(await get(leaf.id)).toMatchObject({ delivery_state: 'blocked', blocked_reason: { dependency_id: mid.id, reason: 'blocked' } });
    const refused = await fx.worker.client.post('/claim', { signal_id: mid.id });
    expectError(refused, 422, 'SIGNAL_CLAIM_INVALID_STATUS');
    expect(refused.body.error.details).toMatchObject({ reason: 'blocked', blocked_by: [dep.id] });
    // born blocked: its dependency has already ended
    expect(await task(type, { depends_on: [dep.id] })).toMatchObject({ delivery_state: 'blocked', blocked_reason: { dependency_id: dep.id, reason: 'dead_letter' } });
    // the emitter ends a blocked task
    await cancel(leaf.id);
    expect(await get(leaf.id)).toMatchObject({ delivery_state: 'acked', task_status: 'cancelled' });

    const other = await task(type);
    const after = await task(type, { depends_on: [other.id] });
    await cancel(other.id);
    expect(await get(after.id)).toMatchObject({ delivery_state: 'blocked', blocked_reason: { dependency_id: other.id, reason: 'cancelled' } });
    expect(await readyIds(type)).toEqual([]);
  });

  /** cancel through the one route offering it (A2A tasks/cancel) */
  async function cancel(id: string) {
    const res = await fetch(fx.svc.url + '/a2a', { method: 'POST', headers: { authorization: `Bearer ${fx.boss.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id } }) });
    const body = await res.json();
    expect(body.error, JSON.stringify(body)).toBeUndefined();
  }

  it('the ready list and workflow.next take priority before urgency; /rpc and MCP answer the same list', async () => {
    const type = 'prio';
    const low = await task(type, { urgency: 0.9 });
    const high = await task(type, { urgency: 0.1, priority: 5 });
    const mid = await task(type, { urgency: 0.5, priority: 1 });
    const negative = await task(type, { urgency: 1, priority: -2 });
    const order = [high.id, mid.id, low.id, negative.id];
    expect(await readyIds(type)).toEqual(order);
    // paging keeps the order
    const first = expectOk(await fx.worker.client.get(`/tasks/ready?task_types=${type}&limit=2`));
    expect(first.tasks.map((t: any) => t.id)).toEqual(order.slice(0, 2));
    expect(first.has_more).toBe(true);
    expect(expectOk(await fx.worker.client.get(`/tasks/ready?task_types=${type}&limit=2&after=${first.cursor}`)).tasks.map((t: any) => t.id)).toEqual(order.slice(2));

    const rpc = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'tasks.ready', params: { task_types: type } });
    expect(rpc.body.result.tasks.map((t: any) => t.id)).toEqual(order);
    const mcp = new McpClient({ name: 'deps', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(fx.svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${fx.worker.key}` } } }));
    try {
      const r: any = await mcp.callTool({ name: 'svc_ready_tasks', arguments: { task_types: type } });
      expect(JSON.parse(r.content[0].text).tasks.map((t: any) => t.id)).toEqual(order);
    } finally {
      await mcp.close();
    }
    const taken: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'workflow.next', params: { task_types: [type] } });
      taken.push(res.body.result.signal.id);
    }
    expect(taken).toEqual(order);
  });

  it('not_before keeps a task waiting until its timer, which makes it claimable and pushes it', async () => {
    const type = 'later';
    const at = Date.now() + 1500;
    const t = await task(type, { not_before: new Date(at).toISOString() });
    expect(t).toMatchObject({ delivery_state: 'waiting', not_before: new Date(at).toISOString() });
    expect(await readyIds(type)).toEqual([]);
    const refused = await fx.worker.client.post('/claim', { signal_id: t.id });
    expectError(refused, 422, 'SIGNAL_CLAIM_INVALID_STATUS');
    expect(refused.body.error.details).toMatchObject({ reason: 'waiting', blocked_by: [], not_before: new Date(at).toISOString() });
    await fx.workerSocket.waitUpdate(t.id, (s) => s.delivery_state === 'pending', 'the task pushed at not_before', 15_000);
    expect(Date.now()).toBeGreaterThanOrEqual(at);
    expect(await readyIds(type)).toEqual([t.id]);
    expect(releases(t.id)).toHaveLength(1);
    expectOk(await fx.worker.client.post('/claim', { signal_id: t.id }));
  });

  it('a dependency left past not_before: the task becomes claimable with its last dependency', async () => {
    const type = 'later-dep';
    const dep = await task(type);
    const t = await task(type, { depends_on: [dep.id], not_before: new Date(Date.now() + 200).toISOString() });
    await waitFor('not_before passed', async () => Date.now(), (now) => now > Date.parse(t.not_before) + 300);
    expect(await get(t.id)).toMatchObject({ delivery_state: 'waiting', blocked_by: [dep.id] });
    await complete(dep.id);
    expect(await get(t.id)).toMatchObject({ delivery_state: CLAIMABLE });
  });

  it('deadline ends an unfinished task as expired, told to the emitter once (push and webhook), and blocks its dependants', async () => {
    const type = 'due';
    const t = await task(type, { deadline: new Date(Date.now() + 1500).toISOString() });
    const after = await task(type, { depends_on: [t.id] });
    expectOk(await fx.worker.client.post('/claim', { signal_id: t.id }));
    await waitFor('task.expired pushed to the emitter', () => fx.bossSocket.frames.filter((f: any) => f.type === 'task.expired' && f.signal?.id === t.id).length, (k) => k >= 1, 15_000);
    expect(await get(t.id)).toMatchObject({ delivery_state: 'dead_letter', task_status: 'expired', dead_letter_reason: 'deadline', claimed_by: null });
    expect(await get(after.id)).toMatchObject({ delivery_state: 'blocked', blocked_reason: { dependency_id: t.id, reason: 'expired' } });
    expectError(await fx.worker.client.post('/ack', { signal_id: t.id, outcome: 'completed' }), 422, 'SIGNAL_DEAD_LETTER');
    await waitFor('the task.expired webhook', () => [...fx.rx.unique().values()].filter((x) => x.body.type === 'task.expired' && x.body.data.signal.id === t.id).length, (k) => k >= 1, 15_000);
    // the fx.worker holding it is not the emitter: the event is the emitter's
    expect(fx.workerSocket.frames.filter((f: any) => f.type === 'task.expired')).toHaveLength(0);
    expect(fx.bossSocket.frames.filter((f: any) => f.type === 'task.expired' && f.signal?.id === t.id)).toHaveLength(1);
  });
});
