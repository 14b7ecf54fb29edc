/**
 * Request paths whose work is bounded however much is stored, over real HTTP on both backends. Each case
 * seeds beyond its bound (through the fastest real route, or the store port for what a route would write)
 * and shows the bounded answer: a page with has_more, or an answer whose store reads (counted by
 * GET /metrics) do not grow with the data.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { newId } from '../../src/ids.js';
import { memoryIndexes, memoryKeys } from '../../src/memory/model.js';
import { workspaceIndexes, workspaceKeys, type WorkspaceItem } from '../../src/workspace/model.js';
import type { Op } from '../../src/store/port.js';
import { scanLimits } from '../../src/store/scan.js';
import { keys as identityKeys, indexes as identityIndexes } from '../../src/identity/model.js';
import { indexAgentsOnce } from '../../src/presence/presence.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { metricValue, scrape } from '../helpers/metrics.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

let seq = 0;
async function rpcOk(c: Client, method: string, params: unknown): Promise<any> {
  const res = await c.req('POST', '/rpc', { jsonrpc: '2.0', id: ++seq, method, params });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.error, JSON.stringify(res.body)).toBeUndefined();
  return res.body.result;
}

/** Store reads (get, getMany, range) the service made while `fn` ran, as GET /metrics counts them. */
async function readsDuring(url: string, fn: () => Promise<unknown>): Promise<number> {
  const reads = async () => {
    const s = await scrape(url);
    return ['get', 'getMany', 'range'].reduce((n, op) => n + metricValue(s, 'svc_store_operation_duration_seconds_count', { op }), 0);
  };
  const before = await reads();
  await fn();
  return (await reads()) - before;
}

/**
 * The fewest reads of three calls: the count is process-wide, so a background loop's reads (timers, the hub)
 * can fall inside one call's window, more often the slower a loaded machine makes the call, never below.
 */
async function fewestReads(url: string, fn: () => Promise<unknown>): Promise<number> {
  let fewest = Infinity;
  for (let i = 0; i < 3; i++) fewest = Math.min(fewest, await readsDuring(url, fn));
  return fewest;
}

/** Emits `n` signals in batches of 100 through /rpc signals.batch_emit. */
async function emitMany(c: Client, n: number, body: (i: number) => Record<string, unknown>): Promise<void> {
  for (let from = 0; from < n; from += 100) {
    const signals = Array.from({ length: Math.min(100, n - from) }, (_, j) => body(from + j));
    const { results } = await rpcOk(c, 'signals.batch_emit', { signals });
    expect(results.every((r: any) => r.signal)).toBe(true);
  }
}

/** Writes `n` live files into a folder through the store port: the records, names and index entries a create writes. */
async function seedFiles(svc: Service, parentId: string, n: number, by: string): Promise<string[]> {
  const t = new Date().toISOString();
  const ids: string[] = [];
  for (let from = 0; from < n; from += 1000) {
    const ops: Op[] = [];
    for (let i = from; i < Math.min(from + 1000, n); i++) {
      const item: WorkspaceItem = {
        id: newId(), kind: 'file', name: `f-${i}`, parent_id: parentId, tags: [], metadata: {}, created_by: by, created_at: t, updated_at: t, deleted_at: null,
        current_revision_id: null, revision_count: 0, content_type: null, size: null, sha256: null,
      };
      ids.push(item.id);
      ops.push(
        { op: 'put', key: workspaceKeys.name(parentId, item.name), value: { id: item.id }, expect: 0 },
        { op: 'put', key: workspaceKeys.item(item.id), value: item, expect: 0 },
        { op: 'index', index: workspaceIndexes.children(parentId), member: item.id },
      );
    }
    expect((await svc.store.commit(ops)).ok).toBe(true);
  }
  return ids;
}

describe.each(BACKENDS)('bounded request paths on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;

  beforeAll(async () => {
    // the 10,003-item delete answers when done however loaded the machine (not 202 after the default 10 s)
    svc = await servers.start({ WORKSPACE_DELETE_WAIT_MS: '120000' });
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'bounds-worker');
  });

  it('GET /thread/:id and thread.get page a thread of 101 in thread order: 100 by default, has_more, the cursor goes on', async () => {
    const top = await emitOk(root, { signal_type: 'proposal', content: 'a long thread' });
    await emitMany(root.client, 100, (i) => ({ signal_type: 'pulse', content: `reply ${i}`, parent_id: top.id }));
    const first = expectOk(await worker.client.get(`/thread/${top.id}`));
    expect(first.signals.map((s: any) => s.sequence)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(first).toMatchObject({ has_more: true });
    const rest = expectOk(await worker.client.get(`/thread/${top.id}?after=${encodeURIComponent(first.cursor)}`));
    expect(rest).toMatchObject({ has_more: false, cursor: null });
    expect(rest.signals.map((s: any) => s.sequence)).toEqual([100]);

    const seen: number[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const got = await rpcOk(worker.client, 'thread.get', { signal_id: top.id, limit: 40, ...(after ? { after } : {}) });
      seen.push(...got.signals.map((s: any) => s.sequence));
      if (!got.has_more) break;
      after = got.cursor;
    }
    expect(seen).toEqual(Array.from({ length: 101 }, (_, i) => i));
  }, 120_000);

  describe('workflow.next over 3,000 open tasks the worker may not take', () => {
    beforeAll(async () => {
      // type build to a role the worker fills, each wanting a capability the worker lacks: open, never its to take
      const role = expectOk(await root.client.post('/roles', { name: 'bounds-builders' }), 201);
      expectOk(await root.client.post('/fills', { identity_id: worker.id, role_id: role.id }), 201);
      await emitMany(root.client, 3000, (i) => ({ signal_type: 'task', content: `rust ${i}`, to_role: 'bounds-builders', target_capabilities: ['rust'], payload: { task_type: 'build' } }));
      scanLimits.scanCap = 64;
    }, 300_000);
    afterAll(() => {
      scanLimits.scanCap = 5000;
    });

    it('task_types that match nothing read no task: null after a handful of store reads', async () => {
      let got: any;
      const reads = await readsDuring(svc.url, async () => (got = await rpcOk(worker.client, 'workflow.next', { task_types: ['deploy'] })));
      expect(got.signal).toBeNull();
      expect(reads).toBeLessThan(40);
    });

    it('without task_types the walk stops at the scan cap (64 here), then answers null', async () => {
      let got: any;
      const reads = await readsDuring(svc.url, async () => (got = await rpcOk(worker.client, 'workflow.next', {})));
      expect(got.signal).toBeNull();
      // each examined task costs a few reads (signal, receipt, taker); 3,000 of them would be thousands
      expect(reads).toBeLessThan(64 * 4 + 40);
    });

    it('the ready list walks the same bounded scan: an empty page at the cap with a cursor that continues it', async () => {
      let got: any;
      const reads = await readsDuring(svc.url, async () => (got = expectOk(await worker.client.get('/tasks/ready?limit=10'))));
      expect(got.tasks).toEqual([]);
      expect(got.has_more).toBe(true);
      expect(reads).toBeLessThan(64 * 4 + 40);
    });

    it('a matching task among them is still found and claimed', async () => {
      const deploy = await emitOk(root, { signal_type: 'task', content: 'deploy', to_identity: worker.id, urgency: 0.1, payload: { task_type: 'deploy' } });
      expect((await rpcOk(worker.client, 'workflow.next', { task_types: ['deploy'] })).signal).toMatchObject({ id: deploy.id, claimed_by: worker.id });
    });
  });

  describe('GET /memory/stats', () => {
    it('pages an admin through 150 namespaces, 100 at a time, with has_more and a cursor', async () => {
      const ops: Op[] = [];
      for (let i = 0; i < 150; i++) {
        const ns = `agent:stats-${String(i).padStart(3, '0')}`;
        ops.push({ op: 'put', key: memoryKeys.namespace(ns), value: { namespace: ns, count: 1 } }, { op: 'index', index: memoryIndexes.namespaces, member: ns });
      }
      expect((await svc.store.commit(ops)).ok).toBe(true);
      const first = expectOk(await root.client.get('/memory/stats'));
      expect(first.namespaces).toHaveLength(100);
      expect(first).toMatchObject({ has_more: true });
      const rest = expectOk(await root.client.get(`/memory/stats?after=${encodeURIComponent(first.cursor)}`));
      expect(rest).toMatchObject({ has_more: false, cursor: null });
      const names = [...first.namespaces, ...rest.namespaces].map((n: any) => n.namespace).filter((n: string) => n.startsWith('agent:stats-'));
      expect(names).toHaveLength(150);
      expect(new Set(names).size).toBe(150);
    });

    it('a share made after 10,000 others grants its read: lists, stats and the admin list all see it', async () => {
      const reader = await join(root.client, 'share-reader');
      const t = new Date().toISOString();
      for (let from = 0; from < 10_000; from += 1000) {
        const ops: Op[] = [];
        for (let i = from; i < from + 1000; i++) {
          const share = { id: newId(), namespace: `agent:other-${i}`, grantee_type: 'identity', grantee: `other-${i}`, expires_at: null, created_by: root.id, created_at: t };
          ops.push(
            { op: 'put', key: memoryKeys.share(share.id), value: share, expect: 0 },
            { op: 'index', index: memoryIndexes.shares, member: share.id },
            { op: 'index', index: memoryIndexes.sharesTo('identity', share.grantee), member: share.id },
            { op: 'index', index: memoryIndexes.sharesOf(share.namespace), member: share.id },
          );
        }
        expect((await svc.store.commit(ops)).ok).toBe(true);
      }
      const ns = `agent:${root.id}`;
      const mem = expectOk(await root.client.post('/memory/store', { namespace: ns, content: 'shared past ten thousand' }), 201);
      const share = expectOk(await root.client.post('/memory/admin/share', { namespace: ns, grantee_type: 'identity', grantee: reader.id }), 201);

      expect(expectOk(await reader.client.get(`/memory/list?namespace=${encodeURIComponent(ns)}`)).memories.map((m: any) => m.id)).toContain(mem.id);
      const stats = expectOk(await reader.client.get('/memory/stats'));
      expect(stats.namespaces.find((n: any) => n.namespace === ns)?.count).toBeGreaterThanOrEqual(1);
      expect(stats).toMatchObject({ has_more: false });
      const listed = expectOk(await root.client.get('/memory/admin/shares')).shares;
      expect(listed).toHaveLength(10_001);
      expect(listed.map((s: any) => s.id)).toContain(share.id);
    }, 120_000);
  });

  describe('workspace delete', () => {
    it('a folder of 10,002 items below it (10,000 files in one folder, beyond the old cut) is deleted whole, a page per commit', async () => {
      const top = expectOk(await worker.client.post('/workspace/folders', { name: 'big' }), 201);
      const sub = expectOk(await worker.client.post('/workspace/folders', { name: 'sub', parent_id: top.id }), 201);
      const deep = expectOk(await worker.client.post('/workspace/folders', { name: 'deep', parent_id: sub.id }), 201);
      const files = await seedFiles(svc, top.id, 10_000, worker.id);
      expect(expectOk(await worker.client.del(`/workspace/items/${top.id}`))).toMatchObject({ id: top.id, status: 'completed', deleted: 10_003, folders_left: 0 });
      for (const id of [top.id, sub.id, deep.id, files[0], files[9_999]]) expectError(await worker.client.get(`/workspace/items/${id}`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
      const left = await svc.store.getMany<WorkspaceItem>(files.map(workspaceKeys.item));
      expect(left.filter((r) => !r?.value.deleted_at)).toHaveLength(0);
      expect(await svc.store.count(workspaceIndexes.children(top.id))).toBe(0);
      expect(await svc.store.range(workspaceIndexes.deleting, { limit: 10 })).toEqual([]);
      expect(await svc.store.count(workspaceIndexes.deletionFolders(top.id))).toBe(0);
    }, 120_000);

    it('a deletion an older version left part done (the folder in the deleting index, no deletion record) is finished at the next startup', async () => {
      const first = await servers.start();
      const admin = await bootstrap(first.url);
      const top = expectOk(await admin.client.post('/workspace/folders', { name: 'half' }), 201);
      const files = await seedFiles(first, top.id, 30, admin.id);
      // what a crash after the folder's own commit leaves: the folder deleted and recorded, its children live
      const rec = (await first.store.get<WorkspaceItem>(workspaceKeys.item(top.id)))!;
      const t = new Date().toISOString();
      expect(
        (
          await first.store.commit([
            { op: 'put', key: workspaceKeys.item(top.id), value: { ...rec.value, deleted_at: t, updated_at: t }, expect: rec.version },
            { op: 'del', key: workspaceKeys.name(null, 'half') },
            { op: 'index', index: workspaceIndexes.children(null), member: top.id, remove: true },
            { op: 'index', index: workspaceIndexes.deleting, member: top.id },
          ])
        ).ok,
      ).toBe(true);
      await first.close();
      const again = await startServer(first.env);
      try {
        const progress = async () => ({
          live: (await again.store.getMany<WorkspaceItem>(files.map(workspaceKeys.item))).filter((r) => !r?.value.deleted_at).length,
          deleting: await again.store.count(workspaceIndexes.deleting),
        });
        await waitFor('the children deleted and the folder done after the restart', progress, (p) => p.live === 0 && p.deleting === 0, 30_000);
        expectError(await new Client(again.url, admin.key).get(`/workspace/items/${files[29]}`), 404, 'WORKSPACE_ITEM_NOT_FOUND');
      } finally {
        await again.close();
      }
    }, 120_000);
  });

  it('GET /stats/overview counts the liveness of 2,000 agents from index counts: its store reads do not grow, and every commit keeps the counts', async () => {
    const own = await servers.start();
    const admin = await bootstrap(own.url);
    const agent = await join(admin.client, 'live-agent');
    const liveness = async (c = admin.client) => expectOk(await c.get('/stats/overview')).agent_liveness;
    const base = await liveness();
    const readsBefore = await fewestReads(own.url, () => liveness());
    // an older data dir: agents and humans with their seen records, no agent indexes; the startup pass indexes them
    const now = Date.now();
    const ops: Op[] = [];
    for (let i = 0; i < 2_300; i++) {
      const id = newId();
      const type = i < 2_000 ? 'agent' : 'human';
      ops.push({ op: 'put', key: identityKeys.identity(id), value: { id, name: `seeded-${i}`, type } }, { op: 'index', index: identityIndexes.identities, member: id });
      const at = i < 800 || i >= 2_000 ? now : i < 1_500 ? now - 10 * 60_000 : undefined;
      if (at !== undefined) ops.push({ op: 'put', key: `seen:${id}`, value: { at } });
    }
    expect((await own.store.commit(ops)).ok).toBe(true);
    expect((await own.store.commit([{ op: 'del', key: 'migration:agent-liveness-v1' }])).ok).toBe(true);
    expect(await indexAgentsOnce(own.store)).toBe(2_000 + base.total);
    const plus = (d: Record<string, number>) => Object.fromEntries(Object.entries(base).map(([k, v]) => [k, (v as number) + (d[k] ?? 0)]));
    expect(await liveness()).toEqual(plus({ total: 2_000, active: 800, idle: 700, disconnected: 500 }));
    // the old count read every identity and its seen record, a page at a time (24 pages of 100 here)
    const pageSize = scanLimits.pageSize;
    scanLimits.pageSize = 100;
    try {
      expect(await fewestReads(own.url, () => liveness())).toBeLessThanOrEqual(readsBefore + 1);
    } finally {
      scanLimits.pageSize = pageSize;
    }

    const want = async (d: Record<string, number>, what: string) => {
      const expected = plus({ total: 2_000, active: 800, idle: 700, disconnected: 500, ...d });
      await waitFor(what, () => liveness(), (l) => JSON.stringify(l) === JSON.stringify(expected), 10_000);
    };
    await liveness(agent.client);
    await want({ active: 801, disconnected: 499 }, 'the agent active after its request');
    expectOk(await admin.client.put(`/identities/${agent.id}`, { type: 'human' }));
    await want({ total: 1_999, active: 800, disconnected: 499 }, 'no longer counted once it is a human');
    expectOk(await admin.client.put(`/identities/${agent.id}`, { type: 'agent' }));
    await want({ active: 801, disconnected: 499 }, 'counted as active again as an agent');
    expectOk(await admin.client.del(`/admin/identity/${agent.id}`));
    await want({ total: 1_999, active: 800, disconnected: 499 }, 'gone with its identity');
  }, 120_000);
});
