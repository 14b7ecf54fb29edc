/**
 * Fair concurrency over real HTTP, WebSocket, /rpc and MCP on both backends: every surface's emit takes
 * concurrency_key and concurrency_limit; at most the limit of one key's tasks are leased at once (a claim over
 * it is 422 SIGNAL_CLAIM_INVALID_STATUS with details.reason "concurrency_limit"); workflow.next and
 * /tasks/ready pass over a key at its limit and reach another key's tasks behind it; an ack, an expired lease
 * and a cancel each free the slot; callers of two identities for the same task types are served round-robin.
 * A federated copy's heartbeat (progress, note) and completion result reach the origin's task and its emitter.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Client, type Member } from '../helpers/client.js';
import { burst } from '../helpers/burst.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const ENV = { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_TIMEOUT_MS: '2000' };
const rpc = async (m: Member, method: string, params: Record<string, unknown>) => {
  const res = await m.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method, params });
  if (res.body.error) throw Object.assign(new Error(res.body.error.data?.code ?? res.body.error.message), { data: res.body.error.data });
  return res.body.result;
};
const next = (m: Member, params: Record<string, unknown>) => rpc(m, 'workflow.next', params);
const signalOf = async (c: Client, id: string) => (expectOk(await c.get(`/thread/${id}`)).signals as any[]).find((x) => x.id === id);

describe.each(BACKENDS)('fair concurrency on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let boss: Member;
  let workers: Member[];
  let n = 0;

  beforeAll(async () => {
    svc = await servers.start(ENV);
    root = await bootstrap(svc.url);
    boss = await join(root.client, 'conc-boss');
    workers = await Promise.all(['w1', 'w2', 'w3'].map((x) => join(root.client, `conc-${x}`)));
  });

  /** a fresh task type per test, so tests never take each other's tasks */
  const kind = () => `conc-${++n}`;
  const task = (type: string, extra: Record<string, unknown> = {}) => emitOk(boss, { signal_type: 'task', content: type, payload: { task_type: type }, ...extra });

  it('every surface takes the fields through one emit; bad terms are refused', async () => {
    const body = { signal_type: 'task', content: 'surfaces', concurrency_key: 'deploy:prod', concurrency_limit: 2 };
    const rest = expectOk(await boss.client.post('/emit', body), 201);
    const ws = await PushSocket.open(svc.url, boss.key, { label: 'boss' });
    const viaWs: any = await ws.op('emit', body);
    await ws.close();
    const viaRpc = await rpc(boss, 'signals.emit', body);
    const mcp = new McpClient({ name: 'conc', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${boss.key}` } } }));
    const viaMcp: any = await mcp.callTool({ name: 'svc_emit_signal', arguments: body });
    await mcp.close();
    for (const s of [rest, viaWs.data, viaRpc, JSON.parse(viaMcp.content[0].text)]) expect(s).toMatchObject({ concurrency_key: 'deploy:prod', concurrency_limit: 2 });
    expect(expectOk(await boss.client.post('/emit', { signal_type: 'task', content: 'default', concurrency_key: 'k' }), 201).concurrency_limit).toBe(1);
    expect(expectOk(await boss.client.post('/emit', { signal_type: 'task', content: 'none' }), 201)).toMatchObject({ concurrency_key: null, concurrency_limit: null });
    expectError(await boss.client.post('/emit', { signal_type: 'task', content: 'x', concurrency_limit: 2 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'concurrency_limit');
    expectError(await boss.client.post('/emit', { signal_type: 'pulse', content: 'x', concurrency_key: 'k' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'concurrency_key');
    expectError(await boss.client.post('/emit', { signal_type: 'task', content: 'x', concurrency_key: 'k', concurrency_limit: 0 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'concurrency_limit');
  });

  it('a key at its limit is passed over without starving another key; an ack, an expired lease and a cancel free the slot', async () => {
    const type = kind();
    const key = `serial-${type}`;
    // the keyed tasks rank first, so a walk meets them before the other key's task
    const keyed = [await task(type, { concurrency_key: key, priority: 10 }), await task(type, { concurrency_key: key, priority: 10 }), await task(type, { concurrency_key: key, priority: 10 })];
    const other = await task(type, { concurrency_key: `other-${type}` });
    const [w1, w2, w3] = workers;

    const first = await next(w1, { task_types: [type] });
    expect(keyed.map((t) => t.id)).toContain(first.signal.id);
    expect((await next(w2, { task_types: [type] })).signal.id).toBe(other.id);
    expect((await next(w3, { task_types: [type] })).signal).toBeNull();
    expect(expectOk(await w3.client.get(`/tasks/ready?task_types=${type}`)).tasks).toEqual([]);
    const waiting = keyed.find((t) => t.id !== first.signal.id)!;
    const refused = await w3.client.post('/claim', { signal_id: waiting.id });
    expectError(refused, 422, 'SIGNAL_CLAIM_INVALID_STATUS');
    expect(refused.body.error.details).toMatchObject({ reason: 'concurrency_limit', concurrency_key: key, concurrency_limit: 1, leased: [first.signal.id] });

    // ack frees the slot: the next caller gets another task of the key
    const second = await next(w1, { task_types: [type], complete_claim: first.signal.id });
    expect(second.claim).toMatchObject({ id: first.signal.id, task_status: 'completed' });
    expect(keyed.map((t) => t.id)).toContain(second.signal.id);
    expect(expectOk(await w3.client.get(`/tasks/ready?task_types=${type}`)).tasks).toEqual([]);

    // an expired lease frees it (its durable timer ends the lease)
    const released = await next(w1, { task_types: [type], release_claim: second.signal.id });
    expect(released.signal).not.toBeNull();
    expectOk(await w1.client.post('/claim', { signal_id: released.signal.id, lease_ms: 300 }));
    await waitFor('the short lease expired', () => signalOf(root.client, released.signal.id), (s) => s.delivery_state !== 'leased', 10_000);
    const ready = expectOk(await w3.client.get(`/tasks/ready?task_types=${type}`)).tasks as any[];
    expect(ready.length).toBeGreaterThan(0);
    const third = await next(w3, { task_types: [type] });
    expect(third.signal.concurrency_key).toBe(key);

    // a cancel frees it too
    const cancelled = await fetch(`${svc.url}/a2a`, { method: 'POST', headers: { authorization: `Bearer ${boss.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id: third.signal.id } }) });
    expect(cancelled.status).toBe(200);
    expect((await signalOf(root.client, third.signal.id)).task_status).toBe('cancelled');
    const fourth = await next(w2, { task_types: [type], complete_claim: other.id });
    expect(fourth.signal?.concurrency_key).toBe(key);
  });

  it('a limit of two leases two at once and refuses the third', async () => {
    const type = kind();
    const key = `pair-${type}`;
    const tasks = await Promise.all([1, 2, 3].map(() => task(type, { concurrency_key: key, concurrency_limit: 2 })));
    const got = await Promise.all(workers.map((w) => next(w, { task_types: [type] })));
    expect(got.filter((g) => g.signal !== null)).toHaveLength(2);
    const left = tasks.find((t) => !got.some((g) => g.signal?.id === t.id))!;
    expectError(await workers[0].client.post('/claim', { signal_id: left.id }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');
  });

  it('callers of two identities waiting for the same task types are served round-robin', async () => {
    const type = kind();
    await Promise.all([1, 2, 3, 4].map(() => task(type)));
    const [w1, w2] = workers;
    // each key authenticates once first, so every call of the burst goes straight to the line
    for (const m of [w1, w2]) expect((await next(m, { task_types: [`${type}-none`] })).signal).toBeNull();
    // w1's six calls are written before w2's two and all are read in one poll: in arrival order w1 takes all four tasks
    const call = (m: Member) => ({ method: 'POST', path: '/rpc', key: m.key, body: { jsonrpc: '2.0', id: 1, method: 'workflow.next', params: { task_types: [type] } } });
    const replies = await burst(svc.url, [w1, w1, w1, w1, w1, w1, w2, w2].map(call));
    const served = replies.map((r, i) => [i < 6 ? 'w1' : 'w2', r.body.result.signal]).filter(([, s]) => s !== null).map(([who]) => who);
    expect(served.sort()).toEqual(['w1', 'w1', 'w2', 'w2']);
  });
});

describe.each(BACKENDS)('a federated copy reports its heartbeat and result to the origin, on %s', (backend) => {
  const servers = serversOn(backend);
  let rootA: Member;
  let rootB: Member;
  let alice: Member;
  let bob: Member;
  let peerId: string;
  let aliceSocket: PushSocket;

  beforeAll(async () => {
    const [a, b] = await Promise.all([servers.start(ENV), servers.start(ENV)]);
    [rootA, rootB] = await Promise.all([bootstrap(a.url, 'root-a'), bootstrap(b.url, 'root-b')]);
    [alice, bob] = await Promise.all([join(rootA.client, 'alice'), join(rootB.client, 'bob')]);
    const ops = expectOk(await rootB.client.post('/roles', { name: 'ops' }), 201);
    expectOk(await rootB.client.post('/fills', { identity_id: bob.id, role_id: ops.id }), 201);
    const t = expectOk(await rootA.client.post('/federation/trust', { name: 'org-b', endpoint: b.url, allowed_scopes: ['task'], expires_in: 3600 }), 201);
    peerId = t.peer_id;
    expectOk(await rootB.client.post('/federation/trust', { ...t, name: 'org-a', endpoint: a.url, allowed_scopes: ['task'] }), 201);
    aliceSocket = await PushSocket.open(a.url, alice.key, { label: 'alice' });
  });
  afterAll(async () => {
    await aliceSocket?.close();
  });

  it('progress and note show on the origin task and reach its emitter; so does the result', async () => {
    const origin = await emitOk(alice, { signal_type: 'task', content: 'remote work', to_peer: peerId, to_role: 'ops' });
    const copy = await waitFor('the copy on B', async () => (expectOk(await rootB.client.get('/signals/list?type=task&limit=100')).signals as any[]).find((x) => x.federation?.remote_id === origin.id), (c) => !!c, 20_000);
    expectOk(await bob.client.post('/claim', { signal_id: copy.id, lease_ms: 5000 }));
    const beat = expectOk(await bob.client.post(`/tasks/${copy.id}/heartbeat`, { lease_ms: 120_000, progress: 0.5, note: 'halfway' }));
    expect(beat).toMatchObject({ progress: 0.5, progress_note: 'halfway' });
    const atOrigin = await signalOf(alice.client, origin.id);
    expect(atOrigin).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:${bob.id}`, progress: 0.5, progress_note: 'halfway' });
    expect(Date.parse(atOrigin.claim_expires_at)).toBeGreaterThan(Date.now() + 60_000);
    await waitFor('task.progress pushed to the origin emitter', () => aliceSocket.frames.find((f: any) => f.type === 'task.progress' && f.progress?.signal_id === origin.id), (f) => !!f, 10_000);

    expectOk(await bob.client.post('/ack', { signal_id: copy.id, outcome: 'completed', result: { merged: 3 } }));
    const done = await waitFor('the origin completed', () => signalOf(alice.client, origin.id), (s) => s.task_status === 'completed', 20_000);
    expect(done.result).toEqual({ merged: 3 });
    const frame: any = await waitFor('task.completed pushed to the origin emitter', () => aliceSocket.frames.find((f: any) => f.type === 'task.completed' && f.signal?.id === origin.id), (f) => !!f, 10_000);
    expect(frame.signal.result).toEqual({ merged: 3 });
  });
});
