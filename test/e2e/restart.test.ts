/**
 * Crash durability, on both backends: the service runs as its own process and is killed with SIGKILL (no
 * graceful shutdown); a new process on the same data (same DATA_DIR, or same REDIS_URL + REDIS_PREFIX)
 * still has every acknowledged write, and a lease taken before the crash still ends on time after it.
 *
 * One crash per backend: before it, 50 emits answered 201 and one task claimed under a lease; after it,
 * each test checks one consequence on the restarted process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { findSignal, listAll, waitFor } from '../api/support.js';

describe.each(BACKENDS)('SIGKILL and restart on %s', (backend) => {
  const servers = serversOn(backend);
  let first: ChildServer | undefined;
  let second: ChildServer | undefined;
  let root: Member;
  let worker: Member;
  let after: Client;
  let restartMs: number;
  let leaseMs: number;
  const sent: { id: string; content: string }[] = [];
  let claim: any;

  let env: Record<string, string>;

  beforeAll(async () => {
    env = await servers.env();

    const t0 = Date.now();
    first = await spawnServer(env);
    // The lease must outlast a kill and a fresh process start; scale it by how long this machine took to start one.
    leaseMs = Math.max(3000, 3 * (Date.now() - t0));

    root = await bootstrap(first.url);
    worker = await join(root.client, 'worker');
    for (let i = 0; i < 50; i++) {
      const r = await root.client.post('/emit', { signal_type: i % 5 === 0 ? 'task' : 'pulse', content: `durable ${i}` });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      sent.push({ id: r.body.data.id, content: r.body.data.content });
    }
    const task = await root.client.post('/emit', { signal_type: 'task', content: 'survive the crash' });
    expect(task.status).toBe(201);
    claim = await worker.client.post('/claim', { signal_id: task.body.data.id, lease_ms: leaseMs });
    expect(claim.status, JSON.stringify(claim.body)).toBe(200);
  });

  // a hook of its own: each hook waits on one process start, so two slow starts under load do not share one hook's limit
  beforeAll(async () => {
    // SIGKILL: the process gets no chance to flush or close anything
    const crashedAt = Date.now();
    const exited = new Promise<NodeJS.Signals | null>((resolve) => first!.proc.once('exit', (_code, signal) => resolve(signal)));
    first!.proc.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    first = undefined;

    second = await spawnServer(env);
    restartMs = Date.now() - crashedAt;
    after = new Client(second.url, root.key);
  });

  afterAll(async () => {
    await first?.stop('SIGKILL');
    await second?.stop('SIGTERM');
  });

  it('every emit answered 201 before the kill is there after restart, in order', async () => {
    const all = await listAll(after, 20);
    const byId = new Map(all.map((s) => [s.id, s]));
    for (const s of sent) expect(byId.get(s.id), s.id).toMatchObject({ content: s.content, from_identity: root.id });
    const listed = all.map((s) => s.id).filter((id) => sent.some((s) => s.id === id));
    expect(listed).toEqual(sent.map((s) => s.id).reverse());
    expect(all).toHaveLength(51); // the 50, and the claimed task

    // keys issued before the crash still work, and the restarted process takes new writes after the old ones
    const more = await new Client(second!.url, worker.key).post('/emit', { signal_type: 'pulse', content: 'after restart' });
    expect(more.status, JSON.stringify(more.body)).toBe(201);
    expect(more.body.data.id > sent[sent.length - 1].id).toBe(true);
  });

  it('a lease taken before the kill is still held after restart, then expires back to pending', async () => {
    const id = claim.body.data.id;
    const expiresAt = Date.parse(claim.body.data.claim_expires_at);
    const held = await findSignal(after, id);
    expect(held, `restart took ${restartMs} ms against a ${leaseMs} ms lease`).toMatchObject({
      id,
      delivery_state: 'leased',
      task_status: 'open',
      claimed_by: worker.id,
      claimed_at: claim.body.data.claimed_at,
      claim_expires_at: claim.body.data.claim_expires_at,
      delivery_count: 0,
    });
    const conflict = await after.post('/claim', { signal_id: id });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('SIGNAL_CLAIM_CONFLICT');

    const released = await waitFor(
      'the lease to expire on the restarted process',
      async () => ({ at: Date.now(), s: await findSignal(after, id) }),
      (v) => v.s?.delivery_state !== 'leased',
      Math.max(0, expiresAt - Date.now()) + 5000,
    );
    expect(released.s).toMatchObject({ delivery_state: 'pending', delivery_count: 1, claimed_by: null, claimed_at: null, claim_expires_at: null, task_status: 'open' });
    expect(released.at).toBeGreaterThanOrEqual(expiresAt); // not released before the lease ended

    const again = await new Client(second!.url, worker.key).post('/claim', { signal_id: id, lease_ms: 60_000 });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.data).toMatchObject({ delivery_state: 'leased', claimed_by: worker.id, delivery_count: 1 });
  });
});
