/**
 * Load process of bench/tasks.ts. Mode "produce": emits TASKS_N task signals (50 at a time). Mode "http":
 * TASKS_KEYS workers (a JSON file of API keys), each finding open tasks with GET /signals/list
 * (delivery_state=pending), claiming one (POST /claim; a 409 means another worker took it) and acking it,
 * until none is left. Mode "bullmq": a BullMQ queue of TASKS_N jobs on TASKS_REDIS, processed by one
 * Worker of concurrency TASKS_WORKERS. Mode "next": the same workers call the JSON-RPC method workflow.next
 * (POST /rpc: the service picks and claims the most urgent open task) and ack with POST /ack, until
 * workflow.next answers {signal: null}; mode "loop" the same with complete_claim of the previous task instead
 * of POST /ack (one request per task). Mode "nats": a JetStream stream with WorkQueue retention on
 * TASKS_NATS, TASKS_N messages, one durable pull consumer read by TASKS_WORKERS concurrent loops, each
 * taking one message at a time and acking it with a confirmed ack (ackAck). Prints one JSON line: tasks, seconds, tasks/s, and the exactly-once
 * check (every task completed once, none twice).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { intEnv, openWelcomed, socketRetries } from './lib.js';

const N = intEnv('TASKS_N', 10_000, 1);
const WORKERS = intEnv('TASKS_WORKERS', 50, 1);
const mode = process.env.TASKS_MODE ?? 'http';
const agent = new Agent({ keepAlive: true, maxSockets: 128 });

function call(method: string, path: string, key: string, body?: object): Promise<{ status: number; body: any }> {
  const url = new URL(process.env.TASKS_URL!);
  const payload = body ? JSON.stringify(body) : undefined;
  const headers: Record<string, string | number> = { authorization: `Bearer ${key}` };
  if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  return new Promise((resolve, reject) => {
    const req = request({ agent, host: url.hostname, port: url.port, path, method, headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function produce(): Promise<object> {
  const key = process.env.TASKS_ADMIN_KEY!;
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < N) {
        const i = next++;
        const r = await call('POST', '/emit', key, { signal_type: 'task', content: `task ${i}` });
        if (r.status !== 201) throw new Error(`emit answered ${r.status}: ${JSON.stringify(r.body)}`);
      }
    }),
  );
  return { produced: N };
}

async function http(): Promise<object> {
  const keys = JSON.parse(readFileSync(process.env.TASKS_KEYS!, 'utf8')) as string[];
  const done = new Map<string, number>();
  let conflicts = 0;
  let failures = 0;
  const start = performance.now();
  await Promise.all(
    keys.map(async (key) => {
      for (;;) {
        const page = await call('GET', '/signals/list?delivery_state=pending&limit=100', key);
        const open = (page.body?.data?.signals ?? []) as { id: string }[];
        if (!open.length) return;
        // start at a random place so 50 workers do not all race for the newest task
        const first = Math.floor(Math.random() * open.length);
        for (let k = 0; k < open.length; k++) {
          const id = open[(first + k) % open.length].id;
          const c = await call('POST', '/claim', key, { signal_id: id });
          // taken meanwhile by another worker: a lost race (409) or no longer open (422)
          if (c.status === 409 || c.body?.error?.code === 'SIGNAL_CLAIM_INVALID_STATUS') {
            conflicts++;
            continue;
          }
          if (c.status !== 200) throw new Error(`claim answered ${c.status}: ${JSON.stringify(c.body)}`);
          const a = await call('POST', '/ack', key, { signal_id: id, outcome: 'completed' });
          if (a.status !== 200) failures++;
          else done.set(id, (done.get(id) ?? 0) + 1);
          break;
        }
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const twice = [...done.values()].filter((n) => n > 1).length;
  return { tasks: done.size, seconds: +seconds.toFixed(2), tasks_per_s: +(done.size / seconds).toFixed(1), claim_conflicts: conflicts, ack_failures: failures, exactly_once: done.size === N && twice === 0 };
}

async function bullmq(): Promise<object> {
  const { Queue, Worker } = await import('bullmq');
  const u = new URL(process.env.TASKS_REDIS!);
  const connection = { host: u.hostname, port: Number(u.port) };
  const name = 'bench-' + process.pid;
  const queue = new Queue(name, { connection });
  for (let i = 0; i < N; i += 1000) await queue.addBulk(Array.from({ length: Math.min(1000, N - i) }, (_, j) => ({ name: 'task', data: { i: i + j } })));
  const done = new Map<number, number>();
  const start = performance.now();
  const finished = new Promise<void>((resolve) => {
    const worker = new Worker(
      name,
      async (job) => {
        done.set(job.data.i, (done.get(job.data.i) ?? 0) + 1);
      },
      { connection, concurrency: WORKERS },
    );
    worker.on('completed', () => {
      if ([...done.values()].length === N && done.size === N) void worker.close().then(resolve);
    });
  });
  await finished;
  const seconds = (performance.now() - start) / 1000;
  await queue.obliterate({ force: true });
  await queue.close();
  const twice = [...done.values()].filter((n) => n > 1).length;
  return { tasks: done.size, seconds: +seconds.toFixed(2), tasks_per_s: +(done.size / seconds).toFixed(1), exactly_once: done.size === N && twice === 0 };
}

/** Mode "next": workflow.next then POST /ack per task. Mode "loop": workflow.next with complete_claim of the previous task, one request per task. */
async function next(loop = false): Promise<object> {
  const keys = JSON.parse(readFileSync(process.env.TASKS_KEYS!, 'utf8')) as string[];
  const done = new Map<string, number>();
  let calls = 0;
  let failures = 0;
  let empty = 0;
  const completed = (id: string) => done.set(id, (done.get(id) ?? 0) + 1);
  const start = performance.now();
  await Promise.all(
    keys.map(async (key, w) => {
      let held: string | undefined;
      for (let n = 0; ; n++) {
        calls++;
        const params = loop && held ? { complete_claim: held } : {};
        const r = await call('POST', '/rpc', key, { jsonrpc: '2.0', id: `${w}-${n}`, method: 'workflow.next', params });
        if (r.status !== 200 || r.body?.error) throw new Error(`workflow.next answered ${r.status}: ${JSON.stringify(r.body)}`);
        const { signal, claim } = r.body.result as { signal: { id: string } | null; claim?: { id: string; task_status: string } };
        if (held && loop) {
          if (claim?.id === held && claim.task_status === 'completed') completed(held);
          else failures++;
        }
        held = signal?.id;
        if (!signal) {
          empty++;
          return;
        }
        if (loop) continue;
        const a = await call('POST', '/ack', key, { signal_id: signal.id, outcome: 'completed' });
        if (a.status !== 200) failures++;
        else completed(signal.id);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const twice = [...done.values()].filter((n) => n > 1).length;
  return { tasks: done.size, seconds: +seconds.toFixed(2), tasks_per_s: +(done.size / seconds).toFixed(1), next_calls: calls, ack_failures: failures, twice, left_open_when_next_answered_null: N - done.size, exactly_once: done.size === N && twice === 0 };
}

async function nats(): Promise<object> {
  const { connect, AckPolicy, RetentionPolicy, StorageType } = await import('nats');
  const nc = await connect({ servers: process.env.TASKS_NATS! });
  const jsm = await nc.jetstreamManager();
  const stream = 'TASKS' + process.pid;
  await jsm.streams.add({ name: stream, subjects: [`${stream}.*`], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
  await jsm.consumers.add(stream, { durable_name: 'workers', ack_policy: AckPolicy.Explicit, max_ack_pending: 10 * WORKERS });
  const js = nc.jetstream();
  // publish with confirmation, 100 in flight
  for (let i = 0; i < N; i += 100) await Promise.all(Array.from({ length: Math.min(100, N - i) }, (_, j) => js.publish(`${stream}.task`, new TextEncoder().encode(String(i + j)), { msgID: String(i + j) })));
  const stored = (await jsm.streams.info(stream)).state.messages;
  if (stored !== N) throw new Error(`stream holds ${stored} messages, expected ${N}`);
  const consumer = await js.consumers.get(stream, 'workers');
  const done = new Map<number, number>();
  let processed = 0;
  let end = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (processed < N) {
        const m = await consumer.next({ expires: 1000 });
        if (!m) continue;
        const i = Number(new TextDecoder().decode(m.data));
        await m.ackAck();
        done.set(i, (done.get(i) ?? 0) + 1);
        // the clock stops at the last ack, not when the idle loops' pull requests expire
        if (++processed === N) end = performance.now();
      }
    }),
  );
  const seconds = (end - start) / 1000;
  const left = (await jsm.streams.info(stream)).state.messages;
  await jsm.streams.delete(stream);
  await nc.close();
  const twice = [...done.values()].filter((n) => n > 1).length;
  return { tasks: done.size, seconds: +seconds.toFixed(2), tasks_per_s: +(done.size / seconds).toFixed(1), left_in_stream: left, twice, exactly_once: done.size === N && twice === 0 && left === 0 };
}

/** a socket run with no task completed for this long fails with what it saw (TASKS_STALL_MS) */
const STALL_MS = intEnv('TASKS_STALL_MS', 60_000, 1);

/**
 * Mode "socket": TASKS_SOCKETS WebSockets (the first keys of TASKS_KEYS) each send {op:"work", capacity} with
 * the TASKS_WORKERS slots split between them, and answer every task frame with {op:"done"} at once. The clock
 * stops at the last done's result; exactly once: every task given once and completed once.
 */
async function socket(): Promise<object> {
  const keys = (JSON.parse(readFileSync(process.env.TASKS_KEYS!, 'utf8')) as string[]).slice(0, intEnv('TASKS_SOCKETS', 5, 1));
  const given = new Map<string, number>();
  const done = new Map<string, number>();
  let failures = 0;
  const errors: unknown[] = [];
  let finish!: () => void;
  let stall!: (e: Error) => void;
  const finished = new Promise<void>((resolve, reject) => ((finish = resolve), (stall = reject)));
  let lastDone = 0;
  const sockets = await Promise.all(
    keys.map(async (key, i) => {
      const ws = await openWelcomed(process.env.TASKS_URL!, key, `socket ${i}`, (f) => {
        if (f.type === 'task') {
          given.set(f.signal.id, (given.get(f.signal.id) ?? 0) + 1);
          return ws.send(JSON.stringify({ op: 'done', id: f.signal.id, signal_id: f.signal.id, claim_token: f.claim_token }));
        }
        if (f.type === 'error') {
          failures++;
          if (errors.length < 3) errors.push(f);
        }
        if (f.type !== 'result' || f.data?.task_status !== 'completed') return;
        done.set(f.data.id, (done.get(f.data.id) ?? 0) + 1);
        lastDone = performance.now();
        if (done.size === N) finish();
      });
      return ws;
    }),
  );
  const slots = keys.map((_, i) => Math.floor(WORKERS / keys.length) + (i < WORKERS % keys.length ? 1 : 0));
  const start = performance.now();
  lastDone = start;
  // a run that stops making progress fails with what it saw, instead of waiting for ever
  const watchdog = setInterval(() => {
    if (performance.now() - lastDone < STALL_MS) return;
    const open = [...given.keys()].filter((id) => !done.has(id));
    stall(new Error(`no task completed for ${STALL_MS} ms: given ${given.size}, done ${done.size} of ${N}, error frames ${failures} (first: ${JSON.stringify(errors.slice(0, 3))}), given but not done: ${JSON.stringify(open.slice(0, 5))}`));
  }, 1000);
  sockets.forEach((ws, i) => ws.send(JSON.stringify({ op: 'work', id: 'work', capacity: slots[i], quiet: true })));
  await finished.finally(() => clearInterval(watchdog));
  const seconds = (performance.now() - start) / 1000;
  for (const ws of sockets) ws.close();
  const twice = [...done.values(), ...given.values()].filter((n) => n > 1).length;
  return { tasks: done.size, seconds: +seconds.toFixed(2), tasks_per_s: +(done.size / seconds).toFixed(1), sockets: keys.length, socket_retries: socketRetries.count, slots, failures, twice, exactly_once: done.size === N && given.size === N && twice === 0 };
}

const modes: Record<string, () => Promise<object>> = { produce, bullmq, http, next: () => next(), loop: () => next(true), nats, socket };
if (!modes[mode]) throw new Error(`unknown TASKS_MODE ${mode}`);
const out = await modes[mode]();
agent.destroy();
console.log(JSON.stringify(out));
process.exit(0);
