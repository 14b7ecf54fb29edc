/**
 * Retries with back-off over real HTTP, WebSocket, /rpc and MCP, on both backends: a failed attempt (a failed
 * ack, an expired lease) keeps the task waiting until `retry_at`, the failure time plus retry_backoff_ms ×
 * 2^(attempt-1) capped by retry_backoff_max_ms, moved back by the durable RETRY_DUE timer and pushed then; a
 * task's max_attempts overrides MAX_DELIVERY_ATTEMPTS; POST /tasks/:id/retry brings a dead-lettered task back
 * for its emitter or an admin, audited, and refuses everyone else.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { taskFixture } from '../helpers/tasks.js';
import { emitOk, expectError, expectOk } from './support.js';

const gap = (s: any) => Date.parse(s.retry_at) - Date.parse(s.updated_at);

describe.each(BACKENDS)('task retries with back-off on %s', (backend) => {
  const servers = serversOn(backend);
  const fx = taskFixture(servers, { names: 'retry' });
  let n = 0;

  const task = (extra: Record<string, unknown> = {}) => emitOk(fx.boss, { signal_type: 'task', content: `retry ${++n}`, to_identity: fx.worker.id, ...extra });
  const claim = async (id: string, extra: Record<string, unknown> = {}) => expectOk(await fx.worker.client.post('/claim', { signal_id: id, ...extra }));
  const fail = async (id: string) => {
    await claim(id);
    return expectOk(await fx.worker.client.post('/ack', { signal_id: id, outcome: 'failed' }));
  };
  const transitions = async (id: string) => expectOk(await fx.root.client.get(`/admin/actors/signal/${id}`)).transitions as any[];
  /** waits for the RETRY_DUE timer to push the task claimable again after its retry_at */
  const backAt = async (id: string, retryAt: string, k: number) => {
    await fx.workerSocket.waitUpdate(id, (s) => s.delivery_state === 'pending' && s.retry_at === retryAt, `claimable after the back-off ${k}`, 15_000);
    expect((await transitions(id)).filter((t) => t.event === 'RETRY_DUE' && t.from === 'waiting' && t.to === 'pending')).toHaveLength(k);
  };

  it('validates the retry fields with the emit validation code', async () => {
    const bad = async (body: Record<string, unknown>, field: string) =>
      expectError(await fx.boss.client.post('/emit', { signal_type: 'task', content: 'x', ...body }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', field);
    await bad({ retry_backoff_ms: -1 }, 'retry_backoff_ms');
    await bad({ retry_backoff_ms: 86_400_001 }, 'retry_backoff_ms');
    await bad({ max_attempts: 0 }, 'max_attempts');
    await bad({ retry_backoff_ms: 500, retry_backoff_max_ms: 100 }, 'retry_backoff_max_ms');
    await bad({ signal_type: 'pulse', max_attempts: 2 }, 'max_attempts');
    await bad({ signal_type: 'pulse', retry_backoff_ms: 2 }, 'retry_backoff_ms');
  });

  it('with no back-off (the default) a failed attempt is claimable again at once, as before', async () => {
    const t = await task();
    expect(t).toMatchObject({ retry_backoff_ms: 0, retry_at: null });
    const failed = await fail(t.id);
    expect(failed.delivery_state).toBe('pending');
    expect(failed.retry_at).toBeNull();
    await claim(t.id);
  });

  it('a failed ack waits retry_backoff_ms × 2^(attempt-1), capped, by the durable timer, and is pushed when claimable', async () => {
    const t = await task({ retry_backoff_ms: 300, retry_backoff_max_ms: 1000, max_attempts: 5 });
    expect(t).toMatchObject({ retry_backoff_ms: 300, retry_at: null });
    const expected = [300, 600, 1000];
    for (const [i, ms] of expected.entries()) {
      const failed = await fail(t.id);
      expect(failed).toMatchObject({ delivery_state: 'waiting', task_status: 'open', delivery_count: i + 1, claimed_by: null });
      expect(gap(failed)).toBe(ms);
      const early = await fx.worker.client.post('/claim', { signal_id: t.id });
      expectError(early, 422, 'SIGNAL_CLAIM_INVALID_STATUS');
      expect(early.body.error.details).toMatchObject({ reason: 'waiting', retry_at: failed.retry_at });
      expect(expectOk(await fx.worker.client.get('/tasks/ready?limit=100')).tasks.map((x: any) => x.id)).not.toContain(t.id);
      await backAt(t.id, failed.retry_at, i + 1);
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(failed.retry_at));
    }
    expect((await claim(t.id)).delivery_state).toBe('leased');
  });

  it('an expired lease backs off from the end of the lease', async () => {
    const t = await task({ retry_backoff_ms: 400 });
    const held = await claim(t.id, { lease_ms: 200 });
    const waiting = await fx.workerSocket.waitUpdate(t.id, (s) => s.delivery_state === 'waiting', 'the lease expired into its back-off', 15_000);
    expect(Date.parse(waiting.signal.retry_at)).toBe(Date.parse(held.claim_expires_at) + 400);
    await backAt(t.id, waiting.signal.retry_at, 1);
    expect((await transitions(t.id)).filter((x) => x.event === 'LEASE_EXPIRED')).toHaveLength(1);
  });

  it("a task's max_attempts dead-letters it; the retry route brings it back for its emitter or an admin only", async () => {
    const t = await task({ max_attempts: 2 });
    expect((await fail(t.id)).delivery_state).toBe('pending');
    expect(await fail(t.id)).toMatchObject({ delivery_state: 'dead_letter', dead_letter_reason: 'max_attempts', delivery_count: 2 });
    expectError(await fx.worker.client.post(`/tasks/${t.id}/retry`), 403, 'POLICY_DENIED');
    const back = expectOk(await fx.boss.client.post(`/tasks/${t.id}/retry`));
    expect(back).toMatchObject({ delivery_state: 'pending', task_status: 'open', delivery_count: 0, dead_letter_reason: null });
    await fx.workerSocket.waitUpdate(t.id, (s) => s.delivery_state === 'pending' && s.delivery_count === 0, 'the retried task pushed', 10_000);
    expectError(await fx.boss.client.post(`/tasks/${t.id}/retry`), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
    // its attempts were reset: two more failures before the dead letter again
    expect((await fail(t.id)).delivery_state).toBe('pending');
    expect((await fail(t.id)).delivery_state).toBe('dead_letter');

    const rpc = await fx.worker.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method: 'tasks.retry', params: { signal_id: t.id } });
    expect(rpc.body.error.data.code).toBe('POLICY_DENIED');
    const mcp = new McpClient({ name: 'retry', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(fx.svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${fx.root.key}` } } }));
    try {
      const r: any = await mcp.callTool({ name: 'svc_retry_task', arguments: { signal_id: t.id } });
      expect(JSON.parse(r.content[0].text)).toMatchObject({ id: t.id, delivery_state: 'pending', delivery_count: 0 });
    } finally {
      await mcp.close();
    }
    expect((await claim(t.id)).delivery_state).toBe('leased');
    const audit = expectOk(await fx.root.client.get(`/admin/audit?action=task.retry&target=${t.id}`));
    expect(audit.entries.map((e: any) => [e.actor, e.details.by_admin])).toEqual([
      [fx.root.id, true],
      [fx.boss.id, false],
    ]);
  });

  it('a task its deadline ended is not retried', async () => {
    const t = await task({ deadline: new Date(Date.now() + 300).toISOString() });
    await fx.workerSocket.waitUpdate(t.id, (s) => s.delivery_state === 'dead_letter', 'expired', 15_000);
    expectError(await fx.root.client.post(`/tasks/${t.id}/retry`), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
  });
});
