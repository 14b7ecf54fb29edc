/**
 * Embedding providers over real HTTP on both backends: `openai` against a local server speaking the
 * OpenAI /v1/embeddings API (model, key, batching of the input, provider errors, wrong dimensions,
 * timeout), `none` (stores and keyword search work, semantic and hybrid answer 503), and a Redis without
 * the search module falling back to the in-process index and saying so.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashEmbed } from '../../src/embedding/hash.js';
import { openAiEmbedder } from '../../src/embedding/openai.js';
import { bootstrap, Client } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

const DIM = 128;

/** A stand-in for an OpenAI-compatible endpoint: embeds with the hash features, or misbehaves on request. */
class FakeEmbeddings {
  requests: { auth: string | undefined; body: any }[] = [];
  mode: 'ok' | 'fail' | 'wrong-dim' | 'slow' = 'ok';
  private server: Server = createServer(async (req, res) => {
    const body = JSON.parse(await text(req));
    this.requests.push({ auth: req.headers.authorization, body });
    if (req.url !== '/v1/embeddings' || req.method !== 'POST') return void res.writeHead(404).end();
    if (this.mode === 'fail') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}');
    if (this.mode === 'slow') return void setTimeout(() => res.writeHead(200).end('{}'), 3000);
    const dim = this.mode === 'wrong-dim' ? DIM + 1 : DIM;
    const data = (body.input as string[]).map((t, index) => ({ object: 'embedding', index, embedding: [...hashEmbed(t, dim)] }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: body.model }));
  });
  url = '';
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  stop() {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(r));
  }
}
const text = (req: IncomingMessage) => new Promise<string>((r) => {
  let s = '';
  req.on('data', (d) => (s += d));
  req.on('end', () => r(s));
});

describe.each(BACKENDS)('embedding providers on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
  const fake = new FakeEmbeddings();
  beforeAll(() => fake.start());
  afterAll(() => fake.stop());

  it('openai: embeds through the endpoint with model and key, and searches by its vectors', async () => {
    const svc = await servers.start({ EMBEDDING_PROVIDER: 'openai', EMBEDDING_URL: fake.url, EMBEDDING_MODEL: 'test-embed-1', EMBEDDING_API_KEY: 'sk-test', EMBEDDING_DIM: String(DIM), EMBEDDING_TIMEOUT_MS: '1000' });
    const root = await bootstrap(svc.url);
    fake.requests = [];
    const a = expectOk(await root.client.post('/memory/store', { namespace: 'org', content: 'penguins live in antarctica' }), 201);
    expectOk(await root.client.post('/memory/store', { namespace: 'org', content: 'the stock market closed higher' }), 201);
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0]).toEqual({ auth: 'Bearer sk-test', body: { model: 'test-embed-1', input: ['penguins live in antarctica'] } });
    const hits = expectOk(await root.client.post('/memory/query', { namespace: 'org', query: 'penguins in antarctica', mode: 'semantic', limit: 1 })).memories;
    expect(hits.map((h: any) => h.id)).toEqual([a.id]);
    expect(fake.requests[2].body.input).toEqual(['penguins in antarctica']);

    fake.mode = 'fail';
    expectError(await root.client.post('/memory/store', { namespace: 'org', content: 'x' }), 502, 'EMBEDDING_PROVIDER_ERROR');
    expectError(await root.client.post('/memory/query', { namespace: 'org', query: 'x' }), 502, 'EMBEDDING_PROVIDER_ERROR');
    fake.mode = 'wrong-dim';
    expectError(await root.client.post('/memory/store', { namespace: 'org', content: 'x' }), 400, 'EMBEDDING_DIMENSION_MISMATCH');
    fake.mode = 'slow';
    expectError(await root.client.post('/memory/store', { namespace: 'org', content: 'x' }), 502, 'EMBEDDING_PROVIDER_ERROR');
    fake.mode = 'ok';
    // nothing half-written by the failures
    expect(expectOk(await root.client.get('/memory/list?namespace=org')).memories).toHaveLength(2);
  });

  it('openai: inputs go in batches of EMBEDDING_BATCH and come back in input order', async () => {
    fake.requests = [];
    const e = openAiEmbedder({ provider: 'openai', dim: DIM, url: fake.url + '/v1', model: 'm', apiKey: undefined, timeoutMs: 1000, batch: 2 });
    const texts = ['one', 'two', 'three', 'four', 'five'];
    const out = await e.embed(texts);
    expect(fake.requests.map((r) => r.body.input)).toEqual([['one', 'two'], ['three', 'four'], ['five']]);
    expect(fake.requests[0].auth).toBeUndefined();
    out.forEach((v, i) => expect([...v].map((x) => x.toFixed(5))).toEqual([...hashEmbed(texts[i], DIM)].map((x) => x.toFixed(5))));
  });

  it('none: memories are stored and keyword-searchable, semantic and hybrid queries are 503', async () => {
    const svc = await servers.start({ EMBEDDING_PROVIDER: 'none' });
    const root = await bootstrap(svc.url);
    const m = expectOk(await root.client.post('/memory/store', { namespace: 'org', content: 'otters hold hands while sleeping' }), 201);
    expectError(await root.client.post('/memory/query', { namespace: 'org', query: 'otters', mode: 'semantic' }), 503, 'EMBEDDING_PROVIDER_UNAVAILABLE');
    expectError(await root.client.post('/memory/query', { namespace: 'org', query: 'otters' }), 503, 'EMBEDDING_PROVIDER_UNAVAILABLE');
    expect(expectOk(await root.client.post('/memory/query', { namespace: 'org', query: 'otters', mode: 'keyword' })).memories.map((x: any) => x.id)).toEqual([m.id]);
  });
});

describe('Redis without the search module', () => {
  const servers = serversOn('redis');
  it('falls back to the in-process index, logs it and says so in /health/detailed', async () => {
    const svc = await servers.start();
    const h = expectOk(await new Client(svc.url).get('/health/detailed'));
    expect(h.vector_index).toMatchObject({ kind: 'hnsw', dim: 384 });
    expect(h.vector_index.note).toMatch(/no search module/);
    const root = await bootstrap(svc.url);
    const m = expectOk(await root.client.post('/memory/store', { namespace: 'org', content: 'fallback index still finds beavers' }), 201);
    expect(expectOk(await root.client.post('/memory/query', { namespace: 'org', query: 'beavers' })).memories[0].id).toBe(m.id);
  });
});
