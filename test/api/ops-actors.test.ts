/**
 * Actor inspection over real HTTP on both backends: GET /admin/actors (counts per kind and state from the
 * per-kind state indexes, matching actors paged), GET /admin/actors/:kind/:id (state, context, version,
 * pending timers, last transitions with event, time and request id), POST /admin/actors/:kind/:id/events
 * (one event; a refused event answers its rule's code and changes nothing). Lease expiry through a timer
 * shows in the history and in /metrics.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { metricValue, scrape } from '../helpers/metrics.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

describe.each(BACKENDS)('actor inspection on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;
  let pulse: any;
  let task: any;
  let claimRid: string;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'worker');
    pulse = await emitOk(root, { signal_type: 'pulse', content: 'hello', to_identity: worker.id });
    task = await emitOk(root, { signal_type: 'task', content: 'build', to_identity: worker.id });
    const claim = await worker.client.post('/claim', { signal_id: task.id, lease_ms: 600_000 });
    expectOk(claim);
    claimRid = claim.body.meta.request_id;
  });

  it('counts every registered kind by state and lists the matching actors, paged', async () => {
    const all = expectOk(await root.client.get('/admin/actors'));
    expect(Object.keys(all.counts)).toEqual(expect.arrayContaining(['receipt', 'signal']));
    expect(all.counts.signal).toMatchObject({ pending: 1, delivered: 0, leased: 1, acked: 0, dead_letter: 0 });
    expect(all.actors.map((a: any) => `${a.kind}:${a.id}`)).toEqual(expect.arrayContaining([`signal:${pulse.id}`, `signal:${task.id}`]));

    const leased = expectOk(await root.client.get('/admin/actors?kind=signal&state=leased'));
    expect(leased.actors).toEqual([{ kind: 'signal', id: task.id, state: 'leased', version: 2, updated_at: expect.any(String) }]);
    expect(leased).toMatchObject({ cursor: null, has_more: false });

    const first = expectOk(await root.client.get('/admin/actors?kind=signal&limit=1'));
    expect(first.actors.map((a: any) => a.id)).toEqual([task.id]);
    expect(first.has_more).toBe(true);
    const second = expectOk(await root.client.get(`/admin/actors?kind=signal&limit=1&after=${first.cursor}`));
    expect(second.actors.map((a: any) => a.id)).toEqual([pulse.id]);
    expect(second.has_more).toBe(false);

    expectError(await root.client.get('/admin/actors?kind=nope'), 400, 'VALIDATION_INVALID_TYPE', 'kind');
    expectError(await root.client.get('/admin/actors?kind=signal&state=nope'), 400, 'VALIDATION_INVALID_TYPE', 'state');
    expectError(await root.client.get('/admin/actors?limit=0'), 400, 'VALIDATION_INVALID_TYPE', 'limit');
    expectError(await worker.client.get('/admin/actors'), 403, 'AUTH_ADMIN_REQUIRED');
  });

  it('shows one actor: state, context, version, pending timers and its transitions with request ids', async () => {
    const a = expectOk(await root.client.get(`/admin/actors/signal/${task.id}`));
    expect(a).toMatchObject({ kind: 'signal', id: task.id, state: 'leased', version: 2 });
    expect(a.context).toMatchObject({ id: task.id, claimed_by: worker.id, content: 'build' });
    expect(a.timers).toEqual([{ event: 'LEASE_EXPIRED', at: a.context.claim_expires_at }]);
    expect(a.transitions.map((t: any) => [t.event, t.from, t.to])).toEqual([
      ['CLAIM', 'pending', 'leased'],
      ['create', null, 'pending'],
    ]);
    expect(a.transitions[0].request_id).toBe(claimRid);
    expect(a.transitions[1].request_id).toMatch(/^req_/);
    expect(Date.parse(a.transitions[0].at)).toBeGreaterThanOrEqual(Date.parse(a.transitions[1].at));
    expect(expectOk(await root.client.get(`/admin/actors/signal/${pulse.id}`)).timers).toEqual([]);
    expectError(await root.client.get('/admin/actors/signal/01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'NOT_FOUND');
    expectError(await root.client.get(`/admin/actors/nope/${task.id}`), 400, 'VALIDATION_INVALID_TYPE', 'kind');
    expectError(await worker.client.get(`/admin/actors/signal/${task.id}`), 403, 'AUTH_ADMIN_REQUIRED');
  });

  it('sends one event; a refused event answers its rule code and writes nothing', async () => {
    const other = await emitOk(root, { signal_type: 'task', content: 'admin moves it', to_identity: worker.id });
    const conflict = await root.client.post(`/admin/actors/signal/${task.id}/events`, { type: 'CLAIM', identity: root.id, lease_ms: 1000 });
    expectError(conflict, 409, 'SIGNAL_CLAIM_CONFLICT');
    expectError(await root.client.post(`/admin/actors/signal/${pulse.id}/events`, { type: 'CLAIM', identity: root.id, lease_ms: 1000 }), 422, 'SIGNAL_CLAIM_NOT_TASK');
    expectError(await root.client.post(`/admin/actors/signal/${pulse.id}/events`, { type: 'LEASE_EXPIRED' }), 422, 'SIGNAL_DELIVERY_INVALID_TRANSITION');
    expectError(await root.client.post(`/admin/actors/signal/${pulse.id}/events`, {}), 400, 'VALIDATION_FIELD_REQUIRED', 'type');
    expectError(await root.client.post('/admin/actors/signal/01ARZ3NDEKTSV4RRFFQ69G5FAV/events', { type: 'ACK' }), 404, 'NOT_FOUND');
    expectError(await worker.client.post(`/admin/actors/signal/${other.id}/events`, { type: 'DELIVER' }), 403, 'AUTH_ADMIN_REQUIRED');
    expect(expectOk(await root.client.get(`/admin/actors/signal/${task.id}`)).version).toBe(2);

    const sent = await root.client.post(`/admin/actors/signal/${other.id}/events`, { type: 'DELIVER', now: 0 });
    const moved = expectOk(sent);
    expect(moved).toMatchObject({ id: other.id, state: 'delivered', version: 2 });
    expect(moved.transitions[0]).toMatchObject({ event: 'DELIVER', from: 'pending', to: 'delivered', request_id: sent.body.meta.request_id });
    // `now` is the runtime's clock, never the sender's
    expect(Date.parse(moved.transitions[0].at)).toBeGreaterThan(Date.now() - 60_000);
    // audited in the same commit; the refused events above wrote no entry
    const audit = expectOk(await root.client.get('/admin/audit?action=actor.event')).entries;
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: root.id, action: 'actor.event', target: `signal:${other.id}`, request_id: sent.body.meta.request_id, details: { kind: 'signal', id: other.id, event: { type: 'DELIVER' }, from: 'pending', to: 'delivered' } });
    // the change is the signal's own: its readers see it
    expect(expectOk(await worker.client.get(`/thread/${other.id}`)).signals[0].delivery_state).toBe('delivered');
  });

  it('keeps the last ten transitions and records a lease that ran out through its timer', async () => {
    const t = await emitOk(root, { signal_type: 'task', content: 'renewed', to_identity: worker.id });
    for (let i = 0; i < 11; i++) expectOk(await worker.client.post('/claim', { signal_id: t.id, lease_ms: 600_000 }));
    const busy = expectOk(await root.client.get(`/admin/actors/signal/${t.id}`));
    expect(busy.transitions).toHaveLength(10);
    expect(busy.transitions.every((x: any) => x.event === 'CLAIM')).toBe(true);
    expect(busy.version).toBe(12);

    const before = await scrape(svc.url);
    const short = await emitOk(root, { signal_type: 'task', content: 'let it lapse', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: short.id, lease_ms: 50 }));
    const lapsed = await waitFor('lease expiry', async () => expectOk(await root.client.get(`/admin/actors/signal/${short.id}`)), (a) => a.state !== 'leased');
    expect(lapsed.state).toBe('pending');
    expect(lapsed.timers).toEqual([]);
    expect(lapsed.transitions[0]).toMatchObject({ event: 'LEASE_EXPIRED', from: 'leased', to: 'pending', request_id: null });
    // counted once the commit has returned to the timer loop, which may be just after readers see it
    const expiries = async () => metricValue(await scrape(svc.url), 'svc_lease_expiries_total') - metricValue(before, 'svc_lease_expiries_total');
    expect(await waitFor('the lease expiry counted', expiries, (n) => n >= 1)).toBe(1);
  });
  it('records on every transition a request makes that request id, whatever surface carried it, and the moves its commit carries', async () => {
    const last = async (kind: string, id: string) => expectOk(await root.client.get(`/admin/actors/${kind}/${id}`)).transitions[0];
    const rid = (r: { body: { meta: { request_id: string } } }) => r.body.meta.request_id;
    const first = await emitOk(root, { signal_type: 'task', content: 'first', to_identity: worker.id });
    const then = await emitOk(root, { signal_type: 'task', content: 'then', to_identity: worker.id, depends_on: [first.id] });
    const claimed = await worker.client.post('/claim', { signal_id: first.id });
    expect(await last('signal', first.id)).toMatchObject({ event: 'CLAIM', request_id: rid(claimed) });
    const beat = await worker.client.post(`/tasks/${first.id}/heartbeat`, { lease_ms: 60_000 });
    expect(await last('signal', first.id)).toMatchObject({ event: 'HEARTBEAT', request_id: rid(beat) });
    // the ack's commit moves the dependant too: both transitions are the ack's
    const acked = await worker.client.post('/ack', { signal_id: first.id, outcome: 'completed' });
    expect(await last('signal', first.id)).toMatchObject({ event: 'ACK', request_id: rid(acked) });
    expect(await last('signal', then.id)).toMatchObject({ event: 'DEPENDENCY_COMPLETED', request_id: rid(acked) });

    // a read that marks a pending signal delivered
    const note = await emitOk(root, { signal_type: 'pulse', content: 'read me', to_identity: worker.id });
    const read = await worker.client.get(`/inbox/@worker`);
    expect(await last('signal', note.id)).toMatchObject({ event: 'DELIVER', request_id: rid(read) });

    const held = await emitOk(root, { signal_type: 'task', content: 'held', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: held.id }));
    const released = await root.client.post(`/tasks/${held.id}/release`);
    expect(await last('signal', held.id)).toMatchObject({ event: 'RELEASE', request_id: rid(released) });
    const cancelled = await root.client.post(`/tasks/${held.id}/cancel`);
    expect(await last('signal', held.id)).toMatchObject({ event: 'CANCEL', request_id: rid(cancelled) });

    const reserved = await worker.client.post('/reservations', { paths: ['src/**'], project: 'history', ttl_s: 3600 });
    const reservation = expectOk(reserved).granted[0].id;
    expect(await last('reservation', reservation)).toMatchObject({ event: 'create', request_id: rid(reserved) });
    const renewed = await worker.client.post(`/reservations/${reservation}/renew`, { ttl_s: 60 });
    expect(await last('reservation', reservation)).toMatchObject({ event: 'RENEW', request_id: rid(renewed) });

    // JSON-RPC: the request id is the HTTP request's (its x-request-id header)
    const viaRpc = await emitOk(root, { signal_type: 'task', content: 'by rpc', to_identity: worker.id });
    const r = await fetch(`${svc.url}/rpc`, { method: 'POST', headers: { authorization: `Bearer ${worker.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks.claim', params: { signal_id: viaRpc.id } }) });
    expect(((await r.json()) as { result?: unknown }).result).toBeDefined();
    expect(await last('signal', viaRpc.id)).toMatchObject({ event: 'CLAIM', request_id: r.headers.get('x-request-id') });

    // workflow.next with complete_claim: the completion and the next claim are both that request's moves
    const done = await emitOk(root, { signal_type: 'task', content: 'finish me', to_identity: worker.id, payload: { task_type: 'one-commit' } });
    const after = await emitOk(root, { signal_type: 'task', content: 'then me', to_identity: worker.id, payload: { task_type: 'one-commit' } });
    const holding = await worker.client.post('/claim', { signal_id: done.id });
    const step = await fetch(`${svc.url}/rpc`, { method: 'POST', headers: { authorization: `Bearer ${worker.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'workflow.next', params: { task_types: ['one-commit'], complete_claim: done.id, claim_token: expectOk(holding).claim_token } }) });
    const stepped = ((await step.json()) as { result: { signal: { id: string }; claim: { id: string; task_status: string } } }).result;
    expect(stepped).toMatchObject({ signal: { id: after.id }, claim: { id: done.id, task_status: 'completed' } });
    expect(await last('signal', done.id)).toMatchObject({ event: 'ACK', request_id: step.headers.get('x-request-id') });
    expect(await last('signal', after.id)).toMatchObject({ event: 'CLAIM', request_id: step.headers.get('x-request-id') });

    // a socket op is a request of its own: a request id of its own, not null
    const viaSocket = await emitOk(root, { signal_type: 'task', content: 'by socket', to_identity: worker.id });
    const sock = await PushSocket.open(svc.url, worker.key);
    try {
      await sock.ok('claim', { signal_id: viaSocket.id });
    } finally {
      await sock.close();
    }
    const bySocket = await last('signal', viaSocket.id);
    expect(bySocket).toMatchObject({ event: 'CLAIM', request_id: expect.stringMatching(/^req_/) });
    expect(bySocket.request_id).not.toBe(r.headers.get('x-request-id'));
  });
});
