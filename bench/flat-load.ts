/**
 * Load process of bench/flat.ts (never the service's process). FLAT_URL is the service.
 *   mode "sockets": opens FLAT_SOCKETS WebSockets, round-robin over the keys in FLAT_KEYS (a JSON file),
 *                   200 handshakes at a time, each counted once its `welcome` frame arrived (authenticated);
 *                   prints {"ready": n, ...} and keeps them idle until a line arrives on stdin, then closes
 *                   them and prints the final line. A failure to open more (fd limit, refusals) stops the
 *                   opening and is reported with the count reached.
 *   mode "fill":    FLAT_COUNT signals from FLAT_ADMIN_KEY to FLAT_READER, FLAT_CONCURRENCY requests in flight:
 *                   POST /rpc signals.batch_emit of 100 signals each (FLAT_FILL_VIA=rpc, the default: one
 *                   request and one key check per 100 signals, each signal still its own commit), or one
 *                   POST /emit per signal (FLAT_FILL_VIA=emit).
 *   mode "measure": FLAT_EMITS POST /emit from 50 keep-alive connections (req/s, p50/p99), then FLAT_PAGES
 *                   sequential GET /inbox/identity/<reader>?limit=50 with the reader's key and as many
 *                   GET /signals/list?limit=50 (p50/p99 each).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import WebSocket from 'ws';
import { intEnv, percentile } from './lib.js';

const url = new URL(process.env.FLAT_URL!);
const mode = process.env.FLAT_MODE ?? 'measure';
const agent = new Agent({ keepAlive: true, maxSockets: intEnv('FLAT_CONCURRENCY', 100, 1) });

function call(method: string, path: string, key: string, body?: object): Promise<{ status: number; ms: number; text: string }> {
  const payload = body ? JSON.stringify(body) : undefined;
  const headers: Record<string, string | number> = { authorization: `Bearer ${key}` };
  if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ agent, host: url.hostname, port: url.port, path, method, headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t, text }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const round = (n: number) => +n.toFixed(2);
const stats = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return { p50_ms: round(percentile(s, 50)), p99_ms: round(percentile(s, 99)) };
};

async function emits(count: number, concurrency: number, tag: string): Promise<{ seconds: number; per_s: number; times: number[] }> {
  const key = process.env.FLAT_ADMIN_KEY!;
  const reader = process.env.FLAT_READER!;
  const times: number[] = [];
  let next = 0;
  const start = performance.now();
  let lastLog = start;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const r = await call('POST', '/emit', key, { signal_type: 'note', content: `${tag} ${i}`, to_identity: reader });
        if (r.status !== 201) throw new Error(`emit answered ${r.status}: ${r.text.slice(0, 300)}`);
        times.push(r.ms);
        if (performance.now() - lastLog > 10_000) {
          lastLog = performance.now();
          process.stderr.write(`  ${tag}: ${times.length}/${count} (${Math.round(times.length / ((lastLog - start) / 1000))}/s)\n`);
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { seconds: round(seconds), per_s: Math.round(count / seconds), times };
}

async function batchFill(count: number, concurrency: number): Promise<{ seconds: number; per_s: number; emitted: number }> {
  const key = process.env.FLAT_ADMIN_KEY!;
  const reader = process.env.FLAT_READER!;
  let next = 0;
  let emitted = 0;
  const start = performance.now();
  let lastLog = start;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const from = next;
        next = Math.min(count, next + 100);
        const signals = Array.from({ length: next - from }, (_, j) => ({ signal_type: 'note', content: `fill ${from + j}`, to_identity: reader }));
        const r = await call('POST', '/rpc', key, { jsonrpc: '2.0', id: from, method: 'signals.batch_emit', params: { signals } });
        const results = r.status === 200 ? (JSON.parse(r.text).result?.results as { signal?: unknown }[] | undefined) : undefined;
        if (!results || results.some((x) => !x.signal)) throw new Error(`batch_emit answered ${r.status}: ${r.text.slice(0, 300)}`);
        emitted += results.length;
        if (performance.now() - lastLog > 10_000) {
          lastLog = performance.now();
          process.stderr.write(`  fill: ${emitted}/${count} (${Math.round(emitted / ((lastLog - start) / 1000))}/s)\n`);
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  return { seconds: round(seconds), per_s: Math.round(emitted / seconds), emitted };
}

async function sockets(): Promise<object> {
  const keys = JSON.parse(readFileSync(process.env.FLAT_KEYS!, 'utf8')) as string[];
  const n = intEnv('FLAT_SOCKETS', 10_000, 1);
  const open: WebSocket[] = [];
  let error: string | null = null;
  const one = (key: string) =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(`ws://${url.host}/ws`, { headers: { authorization: `Bearer ${key}` }, perMessageDeflate: false });
      const timer = setTimeout(() => (ws.terminate(), reject(new Error('no welcome in 30 s'))), 30_000);
      ws.on('message', (data) => {
        if ((JSON.parse(data.toString()) as { type: string }).type === 'welcome') {
          clearTimeout(timer);
          resolve(ws);
        }
      });
      ws.on('error', (e) => (clearTimeout(timer), reject(e)));
      ws.on('close', (code) => (clearTimeout(timer), reject(new Error(`closed before welcome (${code})`))));
    });
  const start = performance.now();
  for (let i = 0; i < n && !error; i += 200) {
    const batch = await Promise.allSettled(Array.from({ length: Math.min(200, n - i) }, (_, j) => one(keys[(i + j) % keys.length])));
    for (const r of batch) {
      if (r.status === 'fulfilled') open.push(r.value);
      else error ??= (r.reason as Error).message;
    }
    if (i % 2000 === 0) process.stderr.write(`  sockets: ${open.length}/${n}\n`);
  }
  let closedEarly = 0;
  for (const ws of open) ws.on('close', () => closedEarly++);
  console.log(JSON.stringify({ ready: open.length, open_seconds: round((performance.now() - start) / 1000), error }));
  // idle until the parent has measured
  await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once('line', () => resolve()));
  const stillOpen = open.filter((ws) => ws.readyState === WebSocket.OPEN).length;
  for (const ws of open) ws.terminate();
  return { sockets: open.length, still_open_at_end: stillOpen, closed_early: closedEarly, error };
}

async function measure(): Promise<object> {
  const e = await emits(intEnv('FLAT_EMITS', 3000, 1), 50, 'measure');
  const reader = process.env.FLAT_READER!;
  const readerKey = process.env.FLAT_READER_KEY!;
  const pages = intEnv('FLAT_PAGES', 300, 1);
  const inbox: number[] = [];
  const list: number[] = [];
  for (let i = 0; i < pages; i++) {
    const r = await call('GET', `/inbox/identity/${reader}?limit=50`, readerKey);
    if (r.status !== 200 || (JSON.parse(r.text).data.signals as unknown[]).length !== 50) throw new Error(`inbox answered ${r.status}: ${r.text.slice(0, 300)}`);
    inbox.push(r.ms);
    const l = await call('GET', `/signals/list?limit=50`, readerKey);
    if (l.status !== 200) throw new Error(`list answered ${l.status}: ${l.text.slice(0, 300)}`);
    list.push(l.ms);
  }
  return { emit_per_s: e.per_s, emit: stats(e.times), inbox_page: stats(inbox), list_page: stats(list) };
}

let out: object;
if (mode === 'sockets') out = await sockets();
else if (mode === 'fill') {
  const count = intEnv('FLAT_COUNT', 10_000, 0);
  const conc = intEnv('FLAT_CONCURRENCY', 100, 1);
  if (process.env.FLAT_FILL_VIA === 'emit') {
    const f = await emits(count, conc, 'fill');
    out = { via: 'emit', emitted: f.times.length, seconds: f.seconds, per_s: f.per_s };
  } else out = { via: 'rpc batch_emit', ...(await batchFill(count, conc)) };
} else out = await measure();
agent.destroy();
console.log(JSON.stringify(out));
process.exit(0);
