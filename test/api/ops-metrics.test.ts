/**
 * GET /metrics over real HTTP on both backends: Prometheus text whose counters move with traffic (requests
 * by route pattern and status, latency histograms, store operations, signals by delivery state, dead
 * letters), event loop lag, and METRICS_TOKEN refusing a scrape without it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { metricValue, parseMetrics, scrape } from '../helpers/metrics.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';
import { PushSocket, SseStream } from '../helpers/push.js';

describe.each(BACKENDS)('GET /metrics on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let worker: Member;

  beforeAll(async () => {
    svc = await servers.start({ MAX_DELIVERY_ATTEMPTS: '1' });
    root = await bootstrap(svc.url);
    worker = await join(root.client, 'worker');
  });

  it('is public Prometheus text with the event loop lag and every declared family', async () => {
    const r = await fetch(`${svc.url}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await r.text();
    for (const family of ['svc_http_requests_total', 'svc_http_request_duration_seconds', 'svc_push_connections', 'svc_signals', 'svc_lease_expiries_total', 'svc_dead_letters_total', 'svc_webhook_attempts_total', 'svc_federation_attempts_total', 'svc_store_operation_duration_seconds', 'nodejs_eventloop_lag_seconds'])
      expect(text).toContain(`# TYPE ${family} `);
    const samples = parseMetrics(text);
    expect(metricValue(samples, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(samples.find((s) => s.name === 'svc_signals')?.labels.backend).toBe(backend);
  });

  it('counts requests by route pattern and status, their latency, store operations and signals by state', async () => {
    const before = await scrape(svc.url);
    const task = await emitOk(root, { signal_type: 'task', content: 'count me', to_identity: worker.id });
    expectOk(await worker.client.get(`/thread/${task.id}`));
    expectOk(await worker.client.get(`/thread/${task.id}`));
    expectError(await worker.client.get('/thread/01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'SIGNAL_NOT_FOUND');
    expectError(await new Client(svc.url).post('/emit', {}), 401, 'AUTH_KEY_MISSING');
    const after = await scrape(svc.url);
    const moved = (name: string, labels: Record<string, string>) => metricValue(after, name, labels) - metricValue(before, name, labels);
    expect(moved('svc_http_requests_total', { method: 'POST', route: '/emit', status: '201' })).toBe(1);
    expect(moved('svc_http_requests_total', { method: 'POST', route: '/emit', status: '401' })).toBe(1);
    // the pattern, never the raw path: no label carries a signal id
    expect(moved('svc_http_requests_total', { method: 'GET', route: '/thread/:id', status: '200' })).toBe(2);
    expect(moved('svc_http_requests_total', { method: 'GET', route: '/thread/:id', status: '404' })).toBe(1);
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes(task.id)))).toBe(false);
    expect(moved('svc_http_request_duration_seconds_count', { route: '/thread/:id' })).toBe(3);
    expect(moved('svc_http_request_duration_seconds_sum', { route: '/emit' })).toBeGreaterThan(0);
    // buckets are cumulative: each holds every answer at most its bound, the +Inf one all of them
    const thread = { method: 'GET', route: '/thread/:id', status: '200' };
    const buckets = after.filter((s) => s.name === 'svc_http_request_duration_seconds_bucket' && s.labels.route === thread.route && s.labels.status === thread.status);
    expect(buckets.map((s) => s.labels.le)).toEqual(['0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '2.5', '+Inf']);
    expect(buckets.every((s, i) => i === 0 || s.value >= buckets[i - 1].value)).toBe(true);
    expect(buckets.at(-1)!.value).toBe(metricValue(after, 'svc_http_request_duration_seconds_count', thread));
    expect(moved('svc_http_request_duration_seconds_bucket', { ...thread, le: '+Inf' })).toBe(2);
    expect(moved('svc_store_operation_duration_seconds_count', { op: 'commit' })).toBeGreaterThanOrEqual(1);
    expect(moved('svc_store_operation_duration_seconds_count', { op: 'get' })).toBeGreaterThanOrEqual(3);
    expect(moved('svc_signals', { delivery_state: 'pending' })).toBe(1);
  });

  it('counts a signal moved to dead_letter once, and shows it by delivery state', async () => {
    const before = await scrape(svc.url);
    const task = await emitOk(root, { signal_type: 'task', content: 'fail me', to_identity: worker.id });
    expectOk(await worker.client.post('/claim', { signal_id: task.id }));
    const mid = await scrape(svc.url);
    expect(metricValue(mid, 'svc_signals', { delivery_state: 'leased' }) - metricValue(before, 'svc_signals', { delivery_state: 'leased' })).toBe(1);
    expect(expectOk(await worker.client.post('/ack', { signal_id: task.id, outcome: 'failed' })).delivery_state).toBe('dead_letter');
    const after = await scrape(svc.url);
    expect(metricValue(after, 'svc_dead_letters_total') - metricValue(before, 'svc_dead_letters_total')).toBe(1);
    expect(metricValue(after, 'svc_signals', { delivery_state: 'dead_letter' }) - metricValue(before, 'svc_signals', { delivery_state: 'dead_letter' })).toBe(1);
    expect(metricValue(after, 'svc_signals', { delivery_state: 'leased' })).toBe(metricValue(before, 'svc_signals', { delivery_state: 'leased' }));
  });

  it('counts the open WebSocket sockets and SSE streams of the process', async () => {
    const open = async () => metricValue(await scrape(svc.url), 'svc_push_connections');
    const base = await open();
    const ws = await PushSocket.open(svc.url, worker.key);
    const sse = await SseStream.open(svc.url, { token: root.key });
    await waitFor('two more connections', open, (n) => n === base + 2);
    ws.close();
    sse.close();
    await waitFor('connections closed', open, (n) => n === base);
  });

  it('with METRICS_TOKEN set, wants that token and nothing else', async () => {
    const guarded = await servers.start({ METRICS_TOKEN: 'scrape-secret-1' });
    const admin = await bootstrap(guarded.url);
    const get = (auth?: string) => new Client(guarded.url).req('GET', '/metrics', undefined, auth ? { authorization: auth } : {});
    expectError(await get(), 401, 'AUTH_KEY_MISSING');
    expectError(await get('Bearer scrape-secret-2'), 401, 'AUTH_KEY_INVALID');
    expectError(await get(`Bearer ${admin.key}`), 401, 'AUTH_KEY_INVALID');
    const ok = await scrape(guarded.url, 'scrape-secret-1');
    expect(metricValue(ok, 'svc_http_requests_total', { route: '/metrics', status: '401' })).toBe(3);
  });
});
