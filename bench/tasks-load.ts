/**
 * Load process of bench/tasks.ts. Mode "produce": emits TASKS_N task signals (50 at a time). Mode "http":
 * TASKS_KEYS workers (a JSON file of API keys), each finding open tasks with GET /signals/list
 * (delivery_state=pending), claiming one (POST /claim; a 409 means another worker took it) and acking it,
 * until none is left. Mode "bullmq": a BullMQ queue of TASKS_N jobs on TASKS_REDIS, processed by one
 * Worker of concurrency TASKS_WORKERS. Prints one JSON line: tasks, seconds, tasks/s, and the exactly-once
 * check (every task completed once, none twice).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { intEnv } from './lib.js';

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

const out = mode === 'produce' ? await produce() : mode === 'bullmq' ? await bullmq() : await http();
agent.destroy();
console.log(JSON.stringify(out));
process.exit(0);
