/**
 * Memory jobs and stats over real HTTP on both backends: export → import round trip equal (bad lines
 * reported, good lines kept, idempotent by id), re-embed after a provider change, an import and a re-embed
 * stopped for real mid-run (the server closed while batches remain, then started again on the same data)
 * complete with the right totals, an export left mid-run by a dead worker resumes from its last batch,
 * a worker whose lease lapsed mid-batch and was granted to another records nothing (the fencing token),
 * unknown jobs, and GET /memory/stats.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { hashEmbed } from '../../src/embedding/hash.js';
import { download, upload } from '../helpers/blobs.js';
import { bootstrap, Client, join } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';
import { MEMORY_JOB } from '../../src/memory/job-kind.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

async function finished(c: Client, kind: string, id: string) {
  const r = await waitFor(`${kind} job ${id}`, () => c.get(`/memory/admin/${kind}/${id}`), (r) => r.status === 200 && r.body.data.state !== 'running', 15_000, 50);
  return r.body.data;
}

/** An OpenAI-compatible embeddings endpoint that holds its first request until `release()`: a worker stuck mid-batch. */
async function heldEmbeddings(dim: number) {
  let arrived!: () => void;
  const first = new Promise<void>((r) => (arrived = r));
  let held: (() => void) | undefined;
  let holding = true;
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const d of req) body += d;
    const input = JSON.parse(body).input as string[];
    const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: input.map((t, index) => ({ object: 'embedding', index, embedding: [...hashEmbed(t, dim)] })) }));
    if (!holding) return answer();
    holding = false;
    held = answer;
    arrived();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    first,
    release: () => held?.(),
    stop: () => new Promise((r) => (server.closeAllConnections(), server.close(r))),
  };
}

const listAll = async (c: Client, ns: string) => expectOk(await c.get(`/memory/list?namespace=${ns}&limit=100`)).memories;

describe.each(BACKENDS)('memory jobs on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });

  it('export → import round trip is equal; bad lines are reported, good ones kept, ids imported once', async () => {
    const a = await servers.start();
    const rootA = await bootstrap(a.url);
    const alice = await join(rootA.client, 'alice');
    const made = [];
    for (let i = 0; i < 5; i++) made.push(expectOk(await alice.client.post('/memory/store', { namespace: 'org', content: `exported fact number ${i} about ${['owls', 'maps', 'tea', 'kites', 'jazz'][i]}`, entity: i % 2 ? 'odd' : 'even', tags: ['x'], metadata: { i }, confidence: 0.5, memory_type: 'fact' }), 201));
    expectOk(await alice.client.post('/memory/forget', { id: made[4].id }));
    expectOk(await alice.client.patch(`/memory/${made[0].id}`, { content: 'exported fact number 0 about owls, revised' }));
    expectOk(await alice.client.post('/memory/store', { namespace: `agent:${alice.id}`, content: 'not in the org export' }), 201);

    expectError(await alice.client.post('/memory/admin/export', { namespace: 'org' }), 403, 'AUTH_ADMIN_REQUIRED');
    const job = expectOk(await rootA.client.post('/memory/admin/export', { namespace: 'org' }), 202);
    expect(job).toMatchObject({ kind: 'export', state: 'running', namespace: 'org', progress: { processed: 0, total: 4 } });
    const done = await finished(rootA.client, 'export', job.id);
    expect(done).toMatchObject({ state: 'completed', progress: { processed: 4, total: 4 }, result: { exported: 4, lines: 4 } });
    const lines = done.result.ndjson.trim().split('\n').map((l: string) => JSON.parse(l));
    expect(lines.map((l: any) => l.id).sort()).toEqual(made.slice(0, 4).map((m) => m.id).sort());
    expect(lines.every((l: any) => l.embedding.length === 384)).toBe(true);

    const b = await servers.start();
    const rootB = await bootstrap(b.url);
    const ndjson = [done.result.ndjson.trim(), '{"namespace":"org"}', 'not json', lines[1] && JSON.stringify(lines[1]), JSON.stringify({ namespace: 'org', content: 'a brand new line without id' })].join('\n');
    const imp = expectOk(await rootB.client.post('/memory/admin/import', { ndjson }), 202);
    expect(imp.progress.total).toBe(8);
    const idone = await finished(rootB.client, 'import', imp.id);
    expect(idone).toMatchObject({ state: 'completed', counts: { imported: 5, skipped: 1, failed: 2 }, result: { imported: 5, skipped: 1, failed: 2 } });
    expect(idone.errors.map((e: any) => e.line)).toEqual([5, 6]);
    expect(idone.errors[0].error).toMatch(/^MEMORY_VALIDATION_FAILED/);

    const strip = (ms: any[]) => ms.filter((m) => m.content !== 'a brand new line without id');
    expect(strip(await listAll(rootB.client, 'org'))).toEqual(await listAll(alice.client, 'org'));
    // imported memories are searchable
    expect(expectOk(await rootB.client.post('/memory/query', { namespace: 'org', query: 'owls revised' })).memories[0].id).toBe(made[0].id);
    // importing the same lines again changes nothing
    const again = await finished(rootB.client, 'import', expectOk(await rootB.client.post('/memory/admin/import', { ndjson: done.result.ndjson }), 202).id);
    expect(again.counts).toEqual({ imported: 0, skipped: 4, failed: 0 });
    expectError(await rootB.client.get(`/memory/admin/export/${imp.id}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await rootB.client.get(`/memory/admin/import/${UNKNOWN}`), 404, 'MEMORY_NOT_FOUND');
    expectError(await rootB.client.post('/memory/admin/import', {}), 400, 'MEMORY_VALIDATION_FAILED', 'ndjson');

    const stats = expectOk(await rootB.client.get('/memory/stats'));
    expect(stats).toMatchObject({ namespaces: [{ namespace: 'org', count: 5 }], total: 5, embedding: { provider: 'hash', dim: 384, backlog: { reembed: 0, unindexed: 0 } }, index: { kind: backend === 'redis' ? 'redisearch' : 'hnsw', size: 5 } });
    expect(stats.jobs).toEqual({ running: 0, completed: 2, failed: 0 });
  });

  it("lines with another system's ids (not ULIDs) are imported once each, the id kept as metadata.source_id", async () => {
    const svc = await servers.start();
    const root = await bootstrap(svc.url);
    const ndjson = [
      { id: 'mem-42', namespace: 'org', content: 'from another system', metadata: { kind: 'note' } },
      { id: '7f3c2a9e-1b2d-4c5e-8f90-123456789abc', namespace: 'org', content: 'a uuid id' },
      { id: '', namespace: 'org', content: 'an empty id is no id' },
    ].map((l) => JSON.stringify(l)).join('\n');
    const first = await finished(root.client, 'import', expectOk(await root.client.post('/memory/admin/import', { ndjson }), 202).id);
    expect(first.counts).toEqual({ imported: 2, skipped: 0, failed: 1 });
    expect(first.errors.map((e: any) => e.line)).toEqual([3]);
    const listed = await listAll(root.client, 'org');
    expect(listed.map((m: any) => m.metadata.source_id).sort()).toEqual(['7f3c2a9e-1b2d-4c5e-8f90-123456789abc', 'mem-42']);
    expect(listed.find((m: any) => m.metadata.source_id === 'mem-42')).toMatchObject({ content: 'from another system', metadata: { kind: 'note' } });
    expect(listed.every((m: any) => /^[0-9A-HJKMNP-TV-Z]{26}$/.test(m.id))).toBe(true);
    const again = await finished(root.client, 'import', expectOk(await root.client.post('/memory/admin/import', { ndjson }), 202).id);
    expect(again.counts).toEqual({ imported: 0, skipped: 2, failed: 1 });
    expect(await listAll(root.client, 'org')).toHaveLength(2);
  });

  it('export writes its NDJSON into the blob store as a private artifact; import reads one by artifact_id', async () => {
    const a = await servers.start();
    const rootA = await bootstrap(a.url);
    const alice = await join(rootA.client, 'alice');
    const made = [];
    for (let i = 0; i < 3; i++) made.push(expectOk(await alice.client.post('/memory/store', { namespace: 'org', content: `artifact round trip fact ${['one', 'two', 'three'][i]}`, entity: 'trip', tags: ['art'] }), 201));
    const done = await finished(rootA.client, 'export', expectOk(await rootA.client.post('/memory/admin/export', { namespace: 'org' }), 202).id);
    expect(done).toMatchObject({ state: 'completed', result: { exported: 3, lines: 3, artifact_id: expect.stringMatching(/^[0-9A-Z]{26}$/) } });
    const meta = expectOk(await rootA.client.get(`/artifacts/${done.result.artifact_id}?meta=true`));
    expect(meta).toMatchObject({ visibility: 'private', uploaded_by: rootA.id, content_type: 'application/x-ndjson', tags: ['memory-export'], metadata: { job_id: done.id, namespace: 'org' } });
    const file = await download(a.url, rootA.key, `/artifacts/${done.result.artifact_id}`);
    expect(file.status).toBe(200);
    expect(file.bytes.toString('utf8')).toBe(done.result.ndjson);
    expect(file.bytes.toString('utf8').trim().split('\n').map((l) => JSON.parse(l).id).sort()).toEqual(made.map((m) => m.id).sort());
    // the export holds every namespace it covers: other members do not see the artifact
    expectError(await alice.client.get(`/artifacts/${done.result.artifact_id}?meta=true`), 404, 'ARTIFACT_NOT_FOUND');
    // importing it where it came from skips every id
    const same = await finished(rootA.client, 'import', expectOk(await rootA.client.post('/memory/admin/import', { artifact_id: done.result.artifact_id }), 202).id);
    expect(same.counts).toEqual({ imported: 0, skipped: 3, failed: 0 });

    const b = await servers.start();
    const rootB = await bootstrap(b.url);
    const moved = expectOk(await upload(b.url, rootB.key, '/artifacts/upload', file.bytes, { fields: { name: 'export.ndjson' }, type: 'application/x-ndjson' }), 201);
    const imp = expectOk(await rootB.client.post('/memory/admin/import', { artifact_id: moved.id }), 202);
    expect(imp.progress.total).toBe(3);
    const idone = await finished(rootB.client, 'import', imp.id);
    expect(idone).toMatchObject({ state: 'completed', counts: { imported: 3, skipped: 0, failed: 0 } });
    expect(await listAll(rootB.client, 'org')).toEqual(await listAll(alice.client, 'org'));

    const bob = await join(rootB.client, 'bob');
    const hidden = expectOk(await upload(b.url, bob.key, '/artifacts/upload', file.bytes, { fields: { name: 'bob.ndjson', visibility: 'private' }, type: 'application/x-ndjson' }), 201);
    expectError(await bob.client.post('/memory/admin/import', { artifact_id: hidden.id }), 403, 'AUTH_ADMIN_REQUIRED');
    expectError(await rootB.client.post('/memory/admin/import', { artifact_id: UNKNOWN }), 404, 'ARTIFACT_NOT_FOUND');
    expectError(await rootB.client.post('/memory/admin/import', { artifact_id: moved.id, ndjson: '{}' }), 400, 'MEMORY_VALIDATION_FAILED', 'ndjson');
    const empty = expectOk(await upload(b.url, rootB.key, '/artifacts/upload', '\n', { fields: { name: 'empty.ndjson' }, type: 'application/x-ndjson' }), 201);
    expectError(await rootB.client.post('/memory/admin/import', { artifact_id: empty.id }), 400, 'MEMORY_VALIDATION_FAILED', 'artifact_id');
  });

  it('GET /memory/stats shows a member only the namespaces it may read', async () => {
    const s = await servers.start();
    const root = await bootstrap(s.url);
    const [ann, ben] = await Promise.all([join(root.client, 'ann'), join(root.client, 'ben')]);
    expectOk(await ann.client.post('/memory/store', { namespace: `agent:${ann.id}`, content: 'ann private' }), 201);
    expectOk(await ben.client.post('/memory/store', { namespace: 'org', content: 'shared by all' }), 201);
    expect(expectOk(await ben.client.get('/memory/stats'))).toMatchObject({ namespaces: [{ namespace: 'org', count: 1 }], total: 1 });
    expect(expectOk(await ann.client.get('/memory/stats')).total).toBe(2);
    expect(expectOk(await root.client.get('/memory/stats')).total).toBe(2);
  });

  it('re-embed after a provider change embeds the memories the old provider could not', async () => {
    const s1 = await servers.start({ EMBEDDING_PROVIDER: 'none' });
    const root = await bootstrap(s1.url);
    for (const c of ['glaciers carve fjords', 'volcanoes build islands', 'rivers cut canyons']) expectOk(await root.client.post('/memory/store', { namespace: 'org', content: c }), 201);
    await s1.close();
    const s2 = await startServer({ ...s1.env, EMBEDDING_PROVIDER: 'hash' });
    try {
      const c = new Client(s2.url, root.key);
      expect(expectOk(await c.get('/memory/stats')).embedding).toMatchObject({ provider: 'hash', model: 'hash-384', backlog: { reembed: 3, unindexed: 0 } });
      expect(expectOk(await c.post('/memory/query', { namespace: 'org', query: 'volcanoes', mode: 'semantic' })).memories).toEqual([]);
      const job = expectOk(await c.post('/memory/admin/re-embed', {}), 202);
      const done = await finished(c, 're-embed', job.id);
      expect(done).toMatchObject({ state: 'completed', namespace: null, counts: { reembedded: 3 }, progress: { processed: 3, total: 3 } });
      expect(expectOk(await c.post('/memory/query', { namespace: 'org', query: 'volcanoes build islands', mode: 'semantic', limit: 1 })).memories[0].content).toBe('volcanoes build islands');
      // nothing left to do
      expect(expectOk(await c.get('/memory/stats')).embedding.backlog).toEqual({ reembed: 0, unindexed: 0 });
      expect((await finished(c, 're-embed', expectOk(await c.post('/memory/admin/re-embed', { namespace: 'org' }), 202).id)).counts).toEqual({ reembedded: 0 });
    } finally {
      await s2.close();
    }
  });

  it('an import and a re-embed stopped mid-run by a restart complete after it with the right totals', async () => {
    const N = 300; // three batches of 100: the stop lands while the second runs, so one is left for after the restart
    const env = await servers.env({ EMBEDDING_PROVIDER: 'none' });
    const ids = Array.from({ length: N }, (_, i) => `01HZZZZZZZZZZZZZZZZZ${String(i).padStart(6, '0')}`);
    const ndjson = ids.map((id, i) => JSON.stringify({ id, namespace: 'org', content: `bulk fact ${i} about topic ${i % 37}` })).join('\n');

    /** Starts the job, stops the server once a first batch is committed, restarts it; answers the finished job, and its transitions. */
    async function interrupted(kind: 'import' | 're-embed', body: Record<string, unknown>, provider: string) {
      const first = await startServer({ ...env, EMBEDDING_PROVIDER: provider });
      let job: any;
      try {
        const root = new Client(first.url, rootKey);
        job = expectOk(await root.post(`/memory/admin/${kind}`, body), 202);
        expect(job.progress).toEqual({ processed: 0, total: N });
        const mid = await waitFor(`${kind}: a first batch`, () => root.get(`/memory/admin/${kind}/${job.id}`), (r) => r.status === 200 && r.body.data.progress.processed > 0, 30_000, 10);
        expect(mid.body.data.state).toBe('running');
      } finally {
        await first.close(); // a clean stop: the worker ends its batch and releases the job
      }
      const second = await startServer({ ...env, EMBEDDING_PROVIDER: provider });
      try {
        const root = new Client(second.url, rootKey);
        const done = await finished(root, kind, job.id);
        const shown = expectOk(await root.get(`/admin/actors/memory-job/${job.id}`));
        const transitions = shown.transitions.map((t: any) => t.event);
        return { done, transitions, root, server: second };
      } catch (e) {
        await second.close();
        throw e;
      }
    }

    const boot = await startServer(env);
    const rootKey = (await bootstrap(boot.url)).key;
    await boot.close();

    const imp = await interrupted('import', { ndjson }, 'none');
    try {
      expect(imp.done).toMatchObject({ state: 'completed', progress: { processed: N, total: N }, counts: { imported: N, skipped: 0, failed: 0 }, errors: [] });
      // it was stopped mid-run: the first worker released it, a worker of the restarted server claimed it again
      expect(imp.transitions).toContain('RELEASE');
      expect(imp.transitions.slice(imp.transitions.lastIndexOf('RELEASE'))).toContain('CLAIM');
      expect(expectOk(await imp.root.get('/memory/stats')).namespaces).toEqual([{ namespace: 'org', count: N }]);
    } finally {
      await imp.server.close();
    }

    const re = await interrupted('re-embed', {}, 'hash');
    try {
      expect(re.done).toMatchObject({ state: 'completed', namespace: null, progress: { processed: N, total: N }, counts: { reembedded: N } });
      expect(re.transitions).toContain('RELEASE');
      expect(re.transitions.slice(re.transitions.lastIndexOf('RELEASE'))).toContain('CLAIM');
      expect(expectOk(await re.root.get('/memory/stats')).embedding.backlog).toEqual({ reembed: 0, unindexed: 0 });
      expect(expectOk(await re.root.post('/memory/query', { namespace: 'org', query: 'bulk fact 123 about topic 12', mode: 'semantic', limit: 1 })).memories[0].id).toBe(ids[123]);
      expectError(await re.root.get(`/memory/admin/re-embed/${UNKNOWN}`), 404, 'MEMORY_NOT_FOUND');
    } finally {
      await re.server.close();
    }
  });

  it('a job interrupted by a restart resumes from its last batch and completes', async () => {
    const s1 = await servers.start();
    const root = await bootstrap(s1.url);
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(expectOk(await root.client.post('/memory/store', { namespace: 'org', content: `resume item ${i} ${['alpha', 'bravo', 'charlie', 'delta'][i]}` }), 201).id);
    // what a worker that died after its first batch leaves: the cursor past two memories, their chunk, a lease still held
    const first = (await s1.store.getMany<any>(ids.slice(0, 2).map((id) => `memory:${id}`))).map((r) => JSON.stringify({ id: r!.value.id }));
    const jobId = '01JOBJOBJOBJOBJOBJOBJOBJOB';
    const t = new Date().toISOString();
    await s1.store.commit([
      ...s1.runtime.createOps(MEMORY_JOB, jobId, {
        value: 'running',
        context: { id: jobId, kind: 'export', params: { namespace: 'org' }, cursor: ids[1], step: 1, processed: 2, total: 4, counts: { exported: 2 }, errors: [], result: null, lease_until: Date.now() + 1500, created_by: root.id, created_at: t, updated_at: t },
      }),
      { op: 'put', key: `memory-export:${jobId}:0`, value: { lines: first } },
    ]);
    await s1.close();
    const s2 = await startServer(s1.env);
    try {
      const c = new Client(s2.url, root.key);
      const done = await finished(c, 'export', jobId);
      expect(done).toMatchObject({ state: 'completed', progress: { processed: 4, total: 4 }, result: { exported: 4 } });
      expect(done.result.ndjson.trim().split('\n').map((l: string) => JSON.parse(l).id)).toEqual(ids);
    } finally {
      await s2.close();
    }
  });

  it('a worker whose lease lapsed mid-batch and was granted to another writes nothing when it wakes: the import lands once', async () => {
    const DIM = 16;
    const fake = await heldEmbeddings(DIM);
    const env = await servers.env({ EMBEDDING_PROVIDER: 'openai', EMBEDDING_URL: fake.url, EMBEDDING_DIM: String(DIM), EMBEDDING_TIMEOUT_MS: '60000', MEMORY_JOB_LEASE_MS: '300' });
    const first = await startServer(env);
    let rootKey = '';
    let jobId = '';
    const N = 5;
    try {
      const root = await bootstrap(first.url);
      rootKey = root.key;
      const ndjson = Array.from({ length: N }, (_, i) => JSON.stringify({ namespace: 'org', content: `line without id ${i}` })).join('\n');
      jobId = expectOk(await root.client.post('/memory/admin/import', { ndjson }), 202).id;
      await fake.first; // the first worker is mid-batch, waiting on the embedding of its first line
      await waitFor('the first lease to lapse', () => first.runtime.load<any>(MEMORY_JOB, jobId), (r) => !!r && r.value.context.lease_until < Date.now(), 10_000, 20);
      const second = first.jobWorker(); // another instance's worker takes the job and finishes it
      second.start();
      try {
        expect(await finished(root.client, 'import', jobId)).toMatchObject({ state: 'completed', counts: { imported: N, skipped: 0, failed: 0 } });
      } finally {
        await second.stop();
      }
      fake.release(); // the first worker wakes and tries to record its batch
    } finally {
      await first.close(); // waits for the first worker's run to end
    }
    const after = await startServer(env);
    try {
      const c = new Client(after.url, rootKey);
      expect(expectOk(await c.get(`/memory/admin/import/${jobId}`))).toMatchObject({ state: 'completed', progress: { processed: N, total: N }, counts: { imported: N, skipped: 0, failed: 0 } });
      const contents = (await listAll(c, 'org')).map((m: any) => m.content).sort();
      expect(contents).toEqual(Array.from({ length: N }, (_, i) => `line without id ${i}`));
      expect(expectOk(await c.get('/memory/stats')).namespaces).toEqual([{ namespace: 'org', count: N }]);
      const shown = expectOk(await c.get(`/admin/actors/memory-job/${jobId}`));
      expect(shown.transitions.filter((t: any) => t.event === 'CLAIM')).toHaveLength(2);
      expect(shown.context.fence).toBe(2);
    } finally {
      await after.close();
      await fake.stop();
    }
  });
});
