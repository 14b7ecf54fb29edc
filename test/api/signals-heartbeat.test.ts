/**
 * Task heartbeats and results over real HTTP, WebSocket, /rpc, MCP and a webhook receiver, on both backends:
 * a heartbeat extends the holder's lease past its original end (seen against a twin whose lease timer fired)
 * and pushes `task.progress` to the emitter; `heartbeat_timeout_ms` ends a lease early by its durable timer
 * once heartbeats stop, and the task is offered again; an older claim_token is refused on heartbeat. A
 * completing ack's `result` and `resources` show on the task, in the `task.completed` push and webhook, and on
 * the dependant's graph.
 */
import { describe, expect, it } from 'vitest';
import type { Member } from '../helpers/client.js';
import { upload } from '../helpers/blobs.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { taskFixture } from '../helpers/tasks.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const ENV = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
type Answer = { signal: any } | { code: string; details: any };

describe.each(BACKENDS)('task heartbeats and results on %s', (backend) => {
  const servers = serversOn(backend);
  const fx = taskFixture(servers, { names: 'beat', env: ENV, other: true, bossSocket: true, webhooks: ['task.completed', 'task.progress'], mcp: true });
  let n = 0;

  const task = (extra: Record<string, unknown> = {}) => emitOk(fx.boss, { signal_type: 'task', content: `beat ${++n}`, payload: { task_type: `beat-${n}` }, ...extra });
  const shown = async (id: string) => expectOk(await fx.root.client.get(`/thread/${id}`)).signals[0];
  const claim = async (m: Member, id: string, lease_ms?: number) => expectOk(await m.client.post('/claim', { signal_id: id, lease_ms }));
  const beat = (m: Member, id: string, body: Record<string, unknown>) => m.client.post(`/tasks/${id}/heartbeat`, body);

  const surfaces: [string, (id: string, body: Record<string, unknown>) => Promise<Answer>][] = [
    ['REST', async (id, body) => {
      const res = await beat(fx.worker, id, body);
      return res.status === 200 ? { signal: res.body.data } : { code: res.body.error.code, details: res.body.error.details };
    }],
    ['WebSocket', async (id, body) => {
      const f: any = await fx.workerSocket.op('heartbeat', { signal_id: id, ...body });
      return f.type === 'result' ? { signal: f.data } : { code: f.error.code, details: f.error.details };
    }],
    ['/rpc', async (id, body) => {
      const res = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'tasks.heartbeat', params: { signal_id: id, ...body } });
      return res.body.error ? { code: res.body.error.data.code, details: res.body.error.data.details } : { signal: res.body.result };
    }],
    ['MCP', async (id, body) => {
      const r: any = await fx.mcp.callTool({ name: 'svc_heartbeat_task', arguments: { signal_id: id, ...body } });
      return r.isError ? { code: r.structuredContent.error.code, details: r.structuredContent.error.details } : { signal: JSON.parse(r.content[0].text) };
    }],
  ];

  it.each(surfaces)('%s: a heartbeat extends the lease, records progress and pushes task.progress to the emitter; an older token is stale', async (_name, heartbeat) => {
    const t = await task();
    const first = await claim(fx.worker, t.id, 60_000);
    const a: any = await heartbeat(t.id, { lease_ms: 120_000, progress: 0.25, note: 'parsing', claim_token: first.claim_token });
    expect(a.signal).toMatchObject({ id: t.id, delivery_state: 'leased', claimed_by: fx.worker.id, claim_token: 1, progress: 0.25, progress_note: 'parsing' });
    expect(Date.parse(a.signal.claim_expires_at)).toBeGreaterThan(Date.parse(first.claim_expires_at));
    expect(a.signal.heartbeat_at).toEqual(expect.any(String));
    await waitFor('task.progress pushed to the emitter', () => fx.bossSocket.frames.filter((f: any) => f.type === 'task.progress' && f.progress?.signal_id === t.id), (fs) => fs.length >= 1, 10_000);
    const frame: any = fx.bossSocket.frames.find((f: any) => f.type === 'task.progress' && f.progress?.signal_id === t.id);
    expect(frame.progress).toMatchObject({ claimed_by: fx.worker.id, claim_token: 1, progress: 0.25, note: 'parsing', claim_expires_at: a.signal.claim_expires_at });
    await waitFor('the task.progress webhook', () => [...fx.rx.unique().values()].filter((x) => x.body.type === 'task.progress' && x.body.data.progress.signal_id === t.id), (xs) => xs.length >= 1, 15_000);
    // the fx.worker is not the emitter: progress is the emitter's
    expect(fx.workerSocket.frames.filter((f: any) => f.type === 'task.progress')).toHaveLength(0);

    expect(await heartbeat(t.id, { claim_token: 2 })).toEqual({ code: 'SIGNAL_ACK_UNAUTHORIZED', details: { reason: 'stale_claim' } });
    // without a token, only the holder may beat
    const theirs = await beat(fx.other, t.id, { progress: 0.9 });
    expectError(theirs, 403, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(await shown(t.id)).toMatchObject({ progress: 0.25, claim_expires_at: a.signal.claim_expires_at });
  });

  it('the lease outlives its original end while heartbeats extend it: its twin without heartbeats is released by its timer first', async () => {
    const beating = await task();
    const twin = await task();
    const LEASE = 400;
    const b = await claim(fx.worker, beating.id, LEASE);
    await claim(fx.worker, twin.id, LEASE);
    expectOk(await beat(fx.worker, beating.id, { lease_ms: 30_000, progress: 0.5 }));
    await waitFor('the twin released by its lease timer', () => shown(twin.id), (s) => s.delivery_state === 'pending', 10_000, 20);
    expect(Date.now()).toBeGreaterThan(Date.parse(b.claim_expires_at));
    expect(await shown(beating.id)).toMatchObject({ delivery_state: 'leased', claimed_by: fx.worker.id, claim_token: 1, progress: 0.5 });
    expect(expectOk(await fx.worker.client.post('/ack', { signal_id: beating.id, claim_token: 1 }))).toMatchObject({ task_status: 'completed' });
  });

  it('heartbeat_timeout_ms ends the lease early once heartbeats stop; the task is offered again and the old token is stale', async () => {
    const t = await task({ heartbeat_timeout_ms: 500 });
    expect(t.heartbeat_timeout_ms).toBe(500);
    const first = await claim(fx.worker, t.id, 60_000);
    expectOk(await beat(fx.worker, t.id, { progress: 0.1, claim_token: 1 }));
    await waitFor('the lease ended by the heartbeat timeout', () => shown(t.id), (s) => s.delivery_state === 'pending', 10_000, 20);
    expect(Date.now()).toBeLessThan(Date.parse(first.claim_expires_at));
    const ready = expectOk(await fx.other.client.get(`/tasks/ready?task_types=beat-${n}`));
    expect(ready.tasks.map((x: any) => x.id)).toEqual([t.id]);
    expect(await claim(fx.other, t.id)).toMatchObject({ claimed_by: fx.other.id, claim_token: 2 });
    const stale = await beat(fx.worker, t.id, { claim_token: 1, progress: 0.2 });
    expectError(stale, 403, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(stale.body.error.details).toEqual({ reason: 'stale_claim' });
  });

  it('heartbeat_timeout_ms is for tasks; a heartbeat of a task nobody holds is refused', async () => {
    expectError(await fx.boss.client.post('/emit', { signal_type: 'pulse', content: 'x', heartbeat_timeout_ms: 100 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'heartbeat_timeout_ms');
    const t = await task();
    const res = await beat(fx.worker, t.id, {});
    expectError(res, 403, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(res.body.error.details).toEqual({ reason: 'not_claimed' });
    await claim(fx.worker, t.id);
    expectError(await beat(fx.worker, t.id, { progress: 1.5 }), 400, 'VALIDATION_INVALID_TYPE', 'progress');
  });

  it('a completing ack keeps result and resources: on the task, in the task.completed push and webhook, on the dependant\'s graph', async () => {
    const art = expectOk(await upload(fx.svc.url, fx.worker.key, '/artifacts/upload', 'report body', { fields: { name: 'report.txt' } }), 201);
    const dep = await task();
    const sink = await task({ depends_on: [dep.id] });
    await claim(fx.worker, dep.id);
    const result = { rows: 42, tables: ['a', 'b'], nested: { ok: true } };
    const resources = [{ kind: 'artifact', id: art.id }];
    const done = expectOk(await fx.worker.client.post('/ack', { signal_id: dep.id, outcome: 'completed', claim_token: 1, result, resources }));
    expect(done).toMatchObject({ task_status: 'completed', result, result_resources: resources });
    expect(await shown(dep.id)).toMatchObject({ result, result_resources: resources });

    await waitFor('task.completed pushed to the emitter', () => fx.bossSocket.frames.filter((f: any) => f.type === 'task.completed' && f.signal?.id === dep.id), (fs) => fs.length >= 1, 10_000);
    expect(fx.bossSocket.frames.find((f: any) => f.type === 'task.completed' && f.signal?.id === dep.id)!.signal).toMatchObject({ result, result_resources: resources });
    const hooks = await waitFor('the task.completed webhook', () => [...fx.rx.unique().values()].filter((x) => x.body.type === 'task.completed' && x.body.data.signal.id === dep.id), (xs) => xs.length >= 1, 15_000);
    expect(hooks[0].body.data.signal).toMatchObject({ result, result_resources: resources });

    const graph = expectOk(await fx.worker.client.get(`/tasks/${sink.id}/graph`));
    expect(graph.upstream).toEqual([expect.objectContaining({ id: dep.id, task_status: 'completed', result, result_resources: resources })]);
    expect(graph.task).toMatchObject({ task_status: 'open', blocked_by: [], result: null, result_resources: [] });
  });

  it('result is bounded and only for completing a task; resources must exist', async () => {
    const t = await task();
    await claim(fx.worker, t.id);
    let deep: unknown = 1;
    for (let i = 0; i < 70; i++) deep = [deep];
    expectError(await fx.worker.client.post('/ack', { signal_id: t.id, result: deep }), 400, 'VALIDATION_INVALID_TYPE');
    expectError(await fx.worker.client.post('/ack', { signal_id: t.id, outcome: 'failed', result: { x: 1 } }), 400, 'VALIDATION_INVALID_TYPE', 'result');
    expectError(await fx.worker.client.post('/ack', { signal_id: t.id, resources: [{ kind: 'artifact', id: '01ARZ3NDEKTSV4RRFFQ69G5FAV' }] }), 404, 'ARTIFACT_NOT_FOUND');
    expect(await shown(t.id)).toMatchObject({ delivery_state: 'leased', result: null });
    const rpc = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'signals.ack', params: { signal_id: t.id, result: 'done' } });
    expect(rpc.body.result).toMatchObject({ task_status: 'completed', result: 'done', result_resources: [] });
  });

  it('workflow.next completes its complete_claim with a result', async () => {
    const t = await task();
    const first = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'workflow.next', params: { task_types: [t.payload.task_type] } });
    expect(first.body.result.signal).toMatchObject({ id: t.id, claim_token: 1 });
    const res = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 2, method: 'workflow.next', params: { task_types: ['none-left'], complete_claim: t.id, claim_token: 1, result: { answer: 42 } } });
    expect(res.body.result.claim).toMatchObject({ id: t.id, task_status: 'completed', result: { answer: 42 } });
  });
});
