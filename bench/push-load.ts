/**
 * Load process of bench/push.ts and bench/fanout.ts (never the service's process). Opens one WebSocket per
 * entry of PUSH_SOCKETS (a JSON file of {id, key, url}), then:
 *   mode "tail":   emits at PUSH_RATE/s for PUSH_SECONDS, each to a random socket's identity, measuring
 *                  emit-to-receive on that socket and the POST /emit answer time;
 *   mode "fanout": PUSH_ROUNDS times, one broadcast signal; the time until the last socket has it.
 * Prints one JSON line of figures.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Agent, request } from 'node:http';
import WebSocket from 'ws';
import { intEnv, percentile } from './lib.js';

interface Target {
  id: string;
  key: string;
  url: string;
}
const targets = JSON.parse(readFileSync(process.env.PUSH_SOCKETS!, 'utf8')) as Target[];
const emitUrl = new URL(process.env.PUSH_EMIT_URL!);
const adminKey = process.env.PUSH_ADMIN_KEY!;
const mode = process.env.PUSH_MODE ?? 'tail';
const agent = new Agent({ keepAlive: true, maxSockets: intEnv('PUSH_EMIT_CONNECTIONS', 64, 1) });

/** content token → handler run when a socket receives it */
const waiting = new Map<string, (at: number, socket: number) => void>();
/** push frames (`signal` and `signal.updated`) all sockets received: the fan-out each emit costs */
let pushFrames = 0;

async function openAll(): Promise<WebSocket[]> {
  const out: WebSocket[] = [];
  for (let i = 0; i < targets.length; i += 100) {
    out.push(
      ...(await Promise.all(
        targets.slice(i, i + 100).map(
          (t, j) =>
            new Promise<WebSocket>((resolve, reject) => {
              const ws = new WebSocket(t.url.replace(/^http/, 'ws') + '/ws', { headers: { authorization: `Bearer ${t.key}` } });
              ws.on('message', (data) => {
                const at = performance.now();
                const f = JSON.parse(data.toString()) as { type: string; signal?: { content: string } };
                if (f.type === 'welcome') return resolve(ws);
                if (f.type === 'signal' || f.type === 'signal.updated') pushFrames++;
                if (f.type === 'signal' && f.signal) waiting.get(f.signal.content)?.(at, i + j);
              });
              ws.on('error', reject);
              // a socket closed before its welcome never opened (docs/realtime.md): fail rather than wait forever
              ws.on('close', (code) => reject(new Error(`socket ${i + j} closed with ${code} before its welcome`)));
            }),
        ),
      )),
    );
  }
  return out;
}

function emit(body: object): Promise<{ ms: number; status: number }> {
  const payload = JSON.stringify(body);
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { agent, host: emitUrl.hostname, port: emitUrl.port, path: '/emit', method: 'POST', headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ ms: performance.now() - t, status: res.statusCode ?? 0 }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sorted = (a: number[]) => [...a].sort((x, y) => x - y);
const round = (n: number) => +n.toFixed(2);

async function tail(): Promise<object> {
  const rate = intEnv('PUSH_RATE', 1000, 1);
  const seconds = intEnv('PUSH_SECONDS', 30, 1);
  const e2r: number[] = [];
  const post: number[] = [];
  let sent = 0;
  let non2xx = 0;
  // this process's own stalls delay both what it sends and what it timestamps on arrival: reported beside the figures
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const start = performance.now();
  const emits: Promise<void>[] = [];
  // open loop: each 10 ms tick sends what the rate owes by now, whatever the answers do
  while (performance.now() - start < seconds * 1000) {
    const owed = Math.floor(((performance.now() - start) / 1000) * rate) - sent;
    for (let i = 0; i < owed; i++) {
      const to = targets[Math.floor(Math.random() * targets.length)];
      const token = `t${sent++}`;
      const t0 = performance.now();
      waiting.set(token, (at) => {
        e2r.push(at - t0);
        waiting.delete(token);
      });
      emits.push(
        emit({ signal_type: 'pulse', content: token, to_identity: to.id }).then((r) => {
          post.push(r.ms);
          if (r.status !== 201) non2xx++;
        }),
      );
    }
    await sleep(10);
  }
  await Promise.all(emits);
  lag.disable();
  for (let i = 0; i < 200 && waiting.size; i++) await sleep(25);
  // a push's delivered mark (if it is pushed at all) follows it within a commit: let the last ones arrive
  await sleep(500);
  const stall = (ns: number) => round(Math.max(0, ns / 1e6 - 10));
  const a = sorted(e2r);
  const p = sorted(post);
  return { sent, received: e2r.length, push_frames_per_emit: round(pushFrames / sent), lost: sent - non2xx - e2r.length, non2xx, rate, seconds, e2r_p50_ms: round(percentile(a, 50)), e2r_p99_ms: round(percentile(a, 99)), post_p50_ms: round(percentile(p, 50)), post_p99_ms: round(percentile(p, 99)), load_stall_p99_ms: stall(lag.percentile(99)), load_stall_max_ms: stall(lag.max) };
}

async function fanout(sockets: number): Promise<object> {
  const rounds = intEnv('PUSH_ROUNDS', 5, 1);
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const token = `f${r}-${Date.now()}`;
    const got = new Set<number>();
    const t0 = performance.now();
    const done = new Promise<number>((resolve) =>
      waiting.set(token, (at, socket) => {
        got.add(socket);
        if (got.size === sockets) resolve(at - t0);
      }),
    );
    const res = await emit({ signal_type: 'pulse', content: token });
    if (res.status !== 201) throw new Error(`emit answered ${res.status}`);
    const ms = await Promise.race([done, sleep(30_000).then(() => NaN)]);
    if (Number.isNaN(ms)) throw new Error(`round ${r}: ${got.size} of ${sockets} sockets got the signal within 30 s; missing: ${[...Array(sockets).keys()].filter((i) => !got.has(i)).join(",")}`);
    times.push(ms);
    waiting.delete(token);
    await sleep(500);
  }
  const a = sorted(times);
  return { sockets, rounds, last_receipt_p50_ms: round(percentile(a, 50)), last_receipt_max_ms: round(a.at(-1)!) };
}

const sockets = await openAll();
const out = mode === 'fanout' ? await fanout(sockets.length) : await tail();
for (const ws of sockets) ws.terminate();
agent.destroy();
console.log(JSON.stringify(out));
process.exit(0);
