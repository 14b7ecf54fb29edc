/**
 * Soak: mixed load against the service (its own process, as `npm start` runs it) for SOAK_MINUTES, sampling
 * its resident memory (anonymous: LMDB's mapped file grows with the data) and JS heap, both after a full GC
 * forced through the service's inspector (`--inspect` on a loopback port), open handles and async resources (prom-client's `nodejs_active_handles_total`,
 * `nodejs_active_resources_total`; uWS sockets are not libuv handles), pending Node timers (`Timeout`
 * resources) and event-loop lag from GET /metrics, and judging each
 * flat or growing by a least-squares line over the second half of the run (the first half is warm-up).
 *
 *   npm run soak                      # 10 minutes, embedded (LMDB) backend
 *   SOAK_MINUTES=2 npm run soak       # shorter
 *   SOAK_REDIS=1 npm run soak         # Redis backend (its own redis-server on a free port)
 *
 * Env: SOAK_MINUTES (default 10), SOAK_SAMPLE_SECONDS (default 10), SOAK_REDIS (1/true).
 * Prints one JSON line per sample (`"soak":"sample"`) and a verdict line (`"soak":"verdict"`); exits 1 when
 * anything grows, a request answered 5xx, or a socket closed with a code other than the client's own.
 * Load: emits to a watcher, task rounds (emit, claim, ack), inbox reads, memory store and query, WebSocket
 * clients and SSE streams that connect and disconnect, and one socket and stream that stay open throughout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { dirname, join as joinPath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventSource } from 'eventsource';
import WebSocket from 'ws';
import { bootstrap, join, type Member } from '../test/helpers/client.js';
import { startRedis, tempDir, waitExit, type RedisServer } from '../test/helpers/redis.js';

const ROOT = joinPath(dirname(fileURLToPath(import.meta.url)), '..');

function numEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!(n > 0)) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return n;
}

const MINUTES = numEnv('SOAK_MINUTES', 10);
const SAMPLE_MS = numEnv('SOAK_SAMPLE_SECONDS', 10) * 1000;
const WITH_REDIS = ['1', 'true', 'yes'].includes((process.env.SOAK_REDIS ?? '').toLowerCase());

/**
 * What counts as growth: the fitted rise over the second half beyond both a share of the level and an
 * absolute floor (a few handles or milliseconds of jitter, or a few MB of heap settling, are not a leak).
 */
const GROWTH = {
  rss_anon_mb: { share: 0.1, floor: 16 },
  heap_mb: { share: 0.15, floor: 8 },
  handles: { share: 0.2, floor: 10 },
  resources: { share: 0.2, floor: 10 },
  timers: { share: 0.2, floor: 10 },
  lag_ms: { share: 0.5, floor: 20 },
} as const;
type Metric = keyof typeof GROWTH;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------
// the service and its backend, stopped on the way out

let service: ChildProcess | undefined;
let redis: RedisServer | undefined;
let dataDir: string | undefined;

async function stopAll(): Promise<void> {
  if (service && service.exitCode === null && service.signalCode === null) {
    service.kill('SIGTERM');
    if (!(await waitExit(service, 10_000))) service.kill('SIGKILL');
  }
  await redis?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}
process.on('exit', () => service?.kill('SIGKILL'));
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => void stopAll().finally(() => process.exit(130)));

/**
 * The service's V8 inspector (started with --inspect on a free port, loopback only): each sample forces a
 * full garbage collection first, so the heap and RSS compared across the run are what survives a GC, not
 * wherever the collector's sawtooth happened to be.
 */
class Inspector {
  private next = 0;
  private waiting = new Map<number, (r: any) => void>();
  private constructor(private ws: WebSocket) {
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      this.waiting.get(m.id)?.(m.result);
      this.waiting.delete(m.id);
    });
  }

  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new Inspector(ws);
  }

  call(method: string): Promise<any> {
    const id = ++this.next;
    this.ws.send(JSON.stringify({ id, method }));
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  close(): void {
    this.ws.close();
  }
}

let inspectorUrl: Promise<string> | undefined;

async function startService(env: Record<string, string>): Promise<string> {
  const proc = spawn(process.execPath, ['--inspect=127.0.0.1:0', '--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', RATE_LIMIT_DEFAULT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  service = proc;
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-64_000)));
  inspectorUrl = new Promise((resolve) => {
    const look = () => {
      const m = /Debugger listening on (ws:\/\/\S+)/.exec(stderr);
      if (m) {
        proc.stderr!.off('data', look);
        resolve(m[1]);
      }
    };
    proc.stderr!.on('data', look);
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`service did not start in 60 s:\n${stderr}`)), 60_000);
    proc.stdout!.on('data', (d) => {
      buf += d;
      const m = /"port":(\d+).*"msg":"service listening"/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => reject(new Error(`service exited with ${code}:\n${stderr}`)));
  });
  proc.stdout!.removeAllListeners('data');
  proc.stdout!.resume(); // keep draining its log
  return `http://127.0.0.1:${port}`;
}

// ---------------------------------------------------------------------------------------------------------
// load

const counts = { requests: 0, errors5xx: 0, refused4xx: 0, ws_opened: 0, sse_opened: 0, pushes: 0, bad_closes: 0 };
let running = true;

async function call(m: Member, method: 'get' | 'post', path: string, body?: unknown): Promise<any> {
  const r = await (method === 'get' ? m.client.get(path) : m.client.post(path, body));
  counts.requests++;
  if (r.status >= 500) {
    counts.errors5xx++;
    console.error(JSON.stringify({ soak: 'error', path, status: r.status, body: r.body }));
  } else if (r.status >= 400) counts.refused4xx++;
  return r.status < 300 ? r.body.data : undefined;
}

/** Runs `step` until the run ends; a thrown error (a connection refused) is counted, not fatal. */
async function loop(step: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; running; i++) {
    try {
      await step(i);
    } catch (e) {
      counts.errors5xx++;
      console.error(JSON.stringify({ soak: 'error', error: String(e) }));
      await sleep(500);
    }
  }
}

function openSocket(url: string, key: string): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws', { headers: { authorization: `Bearer ${key}` } });
  ws.on('message', () => counts.pushes++);
  ws.on('close', (code, reason) => {
    // 1000/1005: this client's own close; anything else is the server ending the socket
    if (code === 1000 || code === 1005) return;
    counts.bad_closes++;
    console.error(JSON.stringify({ soak: 'bad_close', code, reason: reason.toString() }));
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      counts.ws_opened++;
      resolve(ws);
    });
    ws.once('error', reject);
  });
}

function openStream(url: string, key: string): EventSource {
  const es = new EventSource(`${url}/signals/stream?token=${encodeURIComponent(key)}`);
  es.addEventListener('open', () => counts.sse_opened++);
  es.addEventListener('signal', () => counts.pushes++);
  return es;
}

function load(url: string, root: Member, watcher: Member, workers: Member[]): Promise<void>[] {
  const pulse = (by: Member) => (i: number) => call(by, 'post', '/emit', { signal_type: 'pulse', content: `soak ${i}`, to_identity: watcher.id });
  const task = (w: Member) => async (i: number) => {
    const t = await call(root, 'post', '/emit', { signal_type: 'task', content: `round ${i}` });
    if (!t) return;
    if (await call(w, 'post', '/claim', { signal_id: t.id })) await call(w, 'post', '/ack', { signal_id: t.id, outcome: 'completed' });
  };
  // a rolling window of memories: the in-process search indexes stay the same size, so growth is a leak
  const kept: string[] = [];
  const memory = (m: Member) => async (i: number) => {
    const ns = `agent:${m.id}`;
    const stored = await call(m, 'post', '/memory/store', { namespace: ns, content: `fact ${i} about ${i % 17}`, allow_duplicate: true });
    if (stored) kept.push(stored.id);
    await call(m, 'post', '/memory/query', { namespace: ns, query: `about ${i % 17}`, limit: 5 });
    if (kept.length > 100) await call(m, 'post', '/memory/forget', { id: kept.shift() });
  };
  const socketChurn = async () => {
    const ws = await openSocket(url, watcher.key);
    await sleep(1000 + Math.random() * 3000);
    ws.close();
  };
  const streamChurn = async () => {
    const es = openStream(url, watcher.key);
    await sleep(1000 + Math.random() * 3000);
    es.close();
  };
  return [
    loop(pulse(root)),
    loop(pulse(workers[0])),
    ...workers.map((w) => loop(task(w))),
    loop(() => call(watcher, 'get', `/inbox/identity/${watcher.id}?limit=20`)),
    loop(memory(workers[1])),
    loop(socketChurn),
    loop(socketChurn),
    loop(streamChurn),
  ];
}

// ---------------------------------------------------------------------------------------------------------
// samples and verdict

/** The sum of a metric's series in Prometheus text whose labels include `match` (every series by default). */
function series(text: string, name: string, match = ''): number {
  const lines = text.split('\n').filter((l) => (l.startsWith(name + ' ') || l.startsWith(name + '{')) && l.includes(match));
  return lines.reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

interface Sample extends Record<Metric, number> {
  t_s: number;
  /** all resident pages, LMDB's memory-mapped data file included (it grows with the data, not a leak) */
  rss_mb: number;
}

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/**
 * The service's anonymous resident memory (heap and native allocations) from /proc (Linux): RSS less the
 * file-backed pages of LMDB's map. Elsewhere, all of RSS.
 */
async function rssAnon(pid: number, rss: number): Promise<number> {
  try {
    const m = /RssAnon:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : rss;
  } catch {
    return rss;
  }
}

async function sample(url: string, t0: number, inspector: Inspector): Promise<Sample> {
  await inspector.call('HeapProfiler.collectGarbage');
  const heap = await inspector.call('Runtime.getHeapUsage');
  const text = await (await fetch(`${url}/metrics`)).text();
  const rss = series(text, 'process_resident_memory_bytes');
  return {
    t_s: Math.round((Date.now() - t0) / 1000),
    rss_mb: mb(rss),
    rss_anon_mb: mb(await rssAnon(service!.pid!, rss)),
    heap_mb: mb(heap.usedSize),
    handles: series(text, 'nodejs_active_handles_total'),
    resources: series(text, 'nodejs_active_resources_total'),
    timers: series(text, 'nodejs_active_resources', 'type="Timeout"'),
    lag_ms: Math.round(series(text, 'nodejs_eventloop_lag_seconds') * 1e4) / 10,
  };
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function judge(samples: Sample[]): Record<Metric, { mean: number; rise: number; verdict: 'flat' | 'growing' }> {
  const half = samples.slice(Math.floor(samples.length / 2));
  const xs = half.map((s) => s.t_s);
  const span = xs[xs.length - 1] - xs[0];
  const out = {} as ReturnType<typeof judge>;
  for (const m of Object.keys(GROWTH) as Metric[]) {
    const ys = half.map((s) => s[m]);
    const mean = ys.reduce((a, b) => a + b, 0) / ys.length;
    const rise = slope(xs, ys) * span;
    const limit = Math.max(GROWTH[m].share * mean, GROWTH[m].floor);
    out[m] = { mean: Math.round(mean * 10) / 10, rise: Math.round(rise * 10) / 10, verdict: rise > limit ? 'growing' : 'flat' };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  let env: Record<string, string>;
  if (WITH_REDIS) {
    redis = await startRedis();
    env = { REDIS_URL: redis.url, REDIS_PREFIX: 'soak' + randomBytes(4).toString('hex') };
  } else {
    dataDir = await tempDir('soak-data');
    env = { DATA_DIR: dataDir };
  }
  const url = await startService(env);
  const inspector = await Inspector.connect(await inspectorUrl!);
  const root = await bootstrap(url);
  const watcher = await join(root.client, 'watcher');
  const workers = await Promise.all(['worker-1', 'worker-2'].map((n) => join(root.client, n)));
  const backend = WITH_REDIS ? 'redis' : 'embedded';
  console.log(JSON.stringify({ soak: 'start', backend, minutes: MINUTES, sample_s: SAMPLE_MS / 1000, url }));

  const steady = await openSocket(url, watcher.key);
  const steadyStream = openStream(url, watcher.key);
  const t0 = Date.now();
  const loops = load(url, root, watcher, workers);
  const samples: Sample[] = [];
  while (Date.now() - t0 < MINUTES * 60_000) {
    await sleep(SAMPLE_MS);
    const s = await sample(url, t0, inspector);
    samples.push(s);
    console.log(JSON.stringify({ soak: 'sample', ...s, ...counts }));
  }
  running = false;
  await Promise.all(loops);
  steady.close();
  steadyStream.close();
  inspector.close();

  if (samples.length < 4) throw new Error(`too few samples (${samples.length}) for a verdict: run longer or sample more often`);
  const metrics = judge(samples);
  const growing = (Object.keys(metrics) as Metric[]).filter((m) => metrics[m].verdict === 'growing');
  const ok = growing.length === 0 && counts.errors5xx === 0 && counts.bad_closes === 0;
  console.log(JSON.stringify({ soak: 'verdict', backend, minutes: MINUTES, samples: samples.length, verdict: ok ? 'flat' : 'failed', growing, metrics, ...counts }));
  process.exitCode = ok ? 0 : 1;
}

main()
  .catch((e) => {
    running = false;
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => stopAll());
