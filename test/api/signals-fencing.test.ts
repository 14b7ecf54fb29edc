/**
 * Task lease fencing over every surface that claims, on both backends and a Redis Cluster: a claim answers `claim_token`, the
 * lease lapses, the task is granted again (to another worker of the same identity, or to another agent),
 * and the old holder's renewal, completion and release naming its older token are refused 403
 * SIGNAL_ACK_UNAUTHORIZED with details.reason "stale_claim", changing nothing; the new holder's token
 * completes it. REST /claim and /ack, the WebSocket claim and ack ops, /rpc tasks.claim and signals.ack,
 * MCP svc_claim_task and svc_ack_signal, /rpc workflow.next (complete_claim / release_claim) and
 * handoff.create. A caller that
 * sends no token is checked by identity, as before.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket } from '../helpers/push.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

/** What a surface answered: the Signal, or the error's code and details. */
type Answer = { signal: any } | { code: string; details: any };
type Task = { id: string; payload: { task_type: string } };
let n = 0;
interface Surface {
  claim(m: Member, task: Task, extra?: Record<string, unknown>): Promise<Answer>;
  ack(m: Member, signal_id: string, extra?: Record<string, unknown>): Promise<Answer>;
  close?(): Promise<void>;
}

const LAPSING = 300;

const rest = (): Surface => ({
  claim: async (m, task, extra) => answer(await m.client.post('/claim', { signal_id: task.id, ...extra })),
  ack: async (m, signal_id, extra) => answer(await m.client.post('/ack', { signal_id, ...extra })),
});
function answer(res: { status: number; body: any }): Answer {
  if (res.status === 200) return { signal: res.body.data };
  expectError(res as never, res.status, res.body.error.code);
  return { code: res.body.error.code, details: res.body.error.details };
}

async function ws(url: string, members: Member[]): Promise<Surface> {
  const sockets = new Map<string, PushSocket>();
  for (const m of members) sockets.set(m.key, await PushSocket.open(url, m.key, { label: m.id }));
  const op = async (m: Member, name: string, fields: Record<string, unknown>): Promise<Answer> => {
    const f: any = await sockets.get(m.key)!.op(name, fields);
    return f.type === 'result' ? { signal: f.data } : { code: f.error.code, details: f.error.details };
  };
  return {
    claim: (m, task, extra) => op(m, 'claim', { signal_id: task.id, ...extra }),
    ack: (m, signal_id, extra) => op(m, 'ack', { signal_id, ...extra }),
    close: async () => {
      for (const s of sockets.values()) await s.close();
    },
  };
}

async function rpc(m: Member, method: string, params: Record<string, unknown>): Promise<any> {
  const res = await m.client.req('POST', '/rpc', { jsonrpc: '2.0', id: 1, method, params });
  return res.body.error ? { code: res.body.error.data.code, details: res.body.error.data.details } : { result: res.body.result };
}
const rpcSurface = (): Surface => ({
  claim: async (m, task, extra) => signalOf(await rpc(m, 'tasks.claim', { signal_id: task.id, ...extra })),
  ack: async (m, signal_id, extra) => signalOf(await rpc(m, 'signals.ack', { signal_id, ...extra })),
});
const signalOf = (r: any): Answer => ('result' in r ? { signal: r.result } : r);

async function mcp(url: string, members: Member[]): Promise<Surface> {
  const clients = new Map<string, McpClient>();
  for (const m of members) {
    const client = new McpClient({ name: 'fencing', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${m.key}` } } }));
    clients.set(m.key, client);
  }
  const call = async (m: Member, name: string, args: Record<string, unknown>): Promise<Answer> => {
    const r: any = await clients.get(m.key)!.callTool({ name, arguments: args });
    return r.isError ? { code: r.structuredContent.error.code, details: r.structuredContent.error.details } : { signal: JSON.parse(r.content[0].text) };
  };
  return {
    claim: (m, task, extra) => call(m, 'svc_claim_task', { signal_id: task.id, ...extra }),
    ack: (m, signal_id, extra) => call(m, 'svc_ack_signal', { signal_id, ...extra }),
    close: async () => {
      for (const c of clients.values()) await c.close();
    },
  };
}

/** workflow.next claims the caller's most urgent open task; a renewal is a claim; complete_claim / release_claim end one. */
const workflow = (): Surface => ({
  claim: async (m, task, extra) => {
    if (extra?.claim_token !== undefined) return signalOf(await rpc(m, 'tasks.claim', { signal_id: task.id, ...extra }));
    const r = await rpc(m, 'workflow.next', { task_types: [task.payload.task_type], ...extra });
    if (!('result' in r)) return r;
    expect(r.result.signal?.id).toBe(task.id);
    return { signal: r.result.signal };
  },
  ack: async (m, signal_id, extra) => {
    const { outcome, ...rest } = extra ?? {};
    const r = await rpc(m, 'workflow.next', { task_types: ['none-left'], [outcome === 'failed' ? 'release_claim' : 'complete_claim']: signal_id, ...rest });
    return 'result' in r ? { signal: r.result.claim } : r;
  },
});

const ok = (a: Answer) => {
  expect(a, JSON.stringify(a)).toHaveProperty('signal');
  return (a as { signal: any }).signal;
};
const stale = (a: Answer) => expect(a).toEqual({ code: 'SIGNAL_ACK_UNAUTHORIZED', details: { reason: 'stale_claim' } });

describe.each(CORE_BACKENDS)('task lease fencing on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;
  let other: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'fence-worker');
    other = await join(root.client, 'fence-other');
  });

  const surfaces: [string, () => Promise<Surface>][] = [
    ['REST', async () => rest()],
    ['WebSocket', () => ws(svc.url, [worker, other])],
    ['/rpc', async () => rpcSurface()],
    ['MCP', () => mcp(svc.url, [worker, other])],
    ['workflow.next', async () => workflow()],
  ];

  const shown = async (id: string) => expectOk(await root.client.get(`/thread/${id}`)).signals[0];
  const lapsed = (id: string) => waitFor(`task ${id} released by its lease end`, () => shown(id), (t) => t.delivery_state === 'pending', 10_000, 20);

  it.each(surfaces)('%s: after the lease lapsed and was granted again, the older claim_token cannot renew, complete or release', async (_name, open) => {
    const s = await open();
    try {
      for (const [second, why] of [[worker, 'another worker of the same identity'], [other, 'another agent']] as const) {
        const task = await emitOk(root, { signal_type: 'task', content: `fenced work, then ${why}`, payload: { task_type: `fence-${++n}` } });
        const first = ok(await s.claim(worker, task, { lease_ms: LAPSING }));
        expect(first).toMatchObject({ id: task.id, claimed_by: worker.id, claim_token: 1 });
        await lapsed(task.id);
        const now = ok(await s.claim(second, task));
        expect(now).toMatchObject({ claimed_by: second.id, claim_token: 2 });

        stale(await s.claim(worker, task, { claim_token: 1 }));
        stale(await s.ack(worker, task.id, { claim_token: 1 }));
        stale(await s.ack(worker, task.id, { claim_token: 1, outcome: 'failed' }));
        expect(await shown(task.id)).toMatchObject({ delivery_state: 'leased', task_status: 'open', claimed_by: second.id, claim_token: 2, claim_expires_at: now.claim_expires_at });

        // the holder renews with its token (kept), then completes with it
        expect(ok(await s.claim(second, task, { claim_token: 2 }))).toMatchObject({ claimed_by: second.id, claim_token: 2 });
        expect(ok(await s.ack(second, task.id, { claim_token: 2 }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed', claim_token: 2 });
      }
    } finally {
      await s.close?.();
    }
  });

  it('handoff.create ends the claim it names only with the current claim_token', async () => {
    const task = await emitOk(root, { signal_type: 'task', content: 'hand me off', payload: {} });
    expect(ok(await rpcSurface().claim(worker, task, { lease_ms: LAPSING }))).toMatchObject({ claim_token: 1 });
    await lapsed(task.id);
    expect(ok(await rpcSurface().claim(worker, task))).toMatchObject({ claim_token: 2 });
    const handoff = { to_identity: other.id, summary: 'over to you', complete_claim: task.id };
    stale(await rpc(worker, 'handoff.create', { ...handoff, claim_token: 1 }));
    expect(await shown(task.id)).toMatchObject({ delivery_state: 'leased', task_status: 'open', claim_token: 2 });
    const done = await rpc(worker, 'handoff.create', { ...handoff, claim_token: 2 });
    expect(done.result.claim).toMatchObject({ id: task.id, task_status: 'completed' });
    expect(done.result.signal).toMatchObject({ to_identity: other.id, parent_id: task.id });
  });

  it('a caller that sends no token is checked by identity as before; a token never granted is refused', async () => {
    const task = await emitOk(root, { signal_type: 'task', content: 'unfenced caller', payload: {} });
    expect(task.claim_token).toBeNull();
    expect(expectOk(await worker.client.post('/claim', { signal_id: task.id }))).toMatchObject({ claimed_by: worker.id, claim_token: 1 });
    expect(expectOk(await worker.client.post('/claim', { signal_id: task.id }))).toMatchObject({ claimed_by: worker.id, claim_token: 1 });
    expectError(await other.client.post('/ack', { signal_id: task.id }), 403, 'SIGNAL_ACK_UNAUTHORIZED');
    const never = await worker.client.post('/ack', { signal_id: task.id, claim_token: 2 });
    expectError(never, 403, 'SIGNAL_ACK_UNAUTHORIZED');
    expect(never.body.error.details).toEqual({ reason: 'stale_claim' });
    expectError(await worker.client.post('/ack', { signal_id: task.id, claim_token: 0 }), 400, 'VALIDATION_INVALID_TYPE', 'claim_token');
    expect(expectOk(await worker.client.post('/ack', { signal_id: task.id }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
  });
});
