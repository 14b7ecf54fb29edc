/**
 * Load process of bench/push.ts and bench/fanout.ts (never the service's process). Opens one WebSocket per
 * entry of PUSH_SOCKETS (a JSON file of {id, key, url}), then:
 *   mode "tail":      emits at PUSH_RATE/s for PUSH_SECONDS, each to a random socket's identity, measuring
 *                     emit-to-receive on that socket and the POST /emit answer time;
 *   mode "nats-tail": the same open loop against NATS JetStream on PUSH_NATS instead of the service:
 *                     PUSH_AGENTS agents, a stream with file storage and one subject per agent, one durable
 *                     pull consumer per agent (filtered to its subject, explicit acks) read with consume() on
 *                     PUSH_NATS_CONNECTIONS connections (one per agent unless fewer are given; consumers share them
 *                     round-robin); each publish waits for its PubAck, the analogue of the POST /emit answer;
 *   mode "fanout":    PUSH_ROUNDS times, one signal (PUSH_EMIT_EXTRA, a JSON object, is merged into its body,
 *                     e.g. {"to_ring":"r"}); per round the emit's answer time, the time until the last socket
 *                     has it and how many sockets got it within PUSH_ROUND_TIMEOUT_MS.
 * Prints one JSON line of figures.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Agent, request } from 'node:http';
import WebSocket from 'ws';
import { intEnv, openWelcomed, percentile, socketRetries } from './lib.js';

interface Target {
  id: string;
  key: string;
  url: string;
}
const mode = process.env.PUSH_MODE ?? 'tail';
const targets = mode === 'nats-tail' ? [] : (JSON.parse(readFileSync(process.env.PUSH_SOCKETS!, 'utf8')) as Target[]);
const emitUrl = new URL(process.env.PUSH_EMIT_URL ?? 'http://127.0.0.1');
const adminKey = process.env.PUSH_ADMIN_KEY ?? '';
const agent = new Agent({ keepAlive: true, maxSockets: intEnv('PUSH_EMIT_CONNECTIONS', 64, 1) });

/** content token → handler run when a socket (or a NATS consumer) receives it */
const waiting = new Map<string, (at: number, socket: number) => void>();
/** push frames (`signal` and `signal.updated`) all sockets received: the fan-out each emit costs */
let pushFrames = 0;

/** One socket per target, its push frames counted and matched to their emits. */
function open(t: Target, n: number): Promise<WebSocket> {
  return openWelcomed(t.url, t.key, `socket ${n}`, (f: { type: string; signal?: { content: string } }, at) => {
    if (f.type === 'signal' || f.type === 'signal.updated') pushFrames++;
    if (f.type === 'signal' && f.signal) waiting.get(f.signal.content)?.(at, n);
  });
}

async function openAll(): Promise<WebSocket[]> {
  const out: WebSocket[] = [];
  for (let i = 0; i < targets.length; i += 100) out.push(...(await Promise.all(targets.slice(i, i + 100).map((t, j) => open(t, i + j)))));
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

/** Sends `token` to agent number `to`; answers the send's answer time and whether it was accepted. */
type Send = (to: number, token: string) => Promise<{ ms: number; ok: boolean }>;

/**
 * The open loop both systems get: each 10 ms tick sends what the rate owes by now, whatever the answers do,
 * each to a random agent; emit-to-receive is measured from just before the send to the receiving handler.
 */
async function tail(agents: number, send: Send): Promise<object> {
  const rate = intEnv('PUSH_RATE', 1000, 1);
  const seconds = intEnv('PUSH_SECONDS', 30, 1);
  const e2r: number[] = [];
  const post: number[] = [];
  let sent = 0;
  /** tokens whose send was refused or failed: not owed to a receiver (a NATS publish that timed out may still arrive) */
  const refused = new Set<string>();
  // this process's own stalls delay both what it sends and what it timestamps on arrival: reported beside the figures
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const start = performance.now();
  const sends: Promise<void>[] = [];
  while (performance.now() - start < seconds * 1000) {
    const owed = Math.floor(((performance.now() - start) / 1000) * rate) - sent;
    for (let i = 0; i < owed; i++) {
      const to = Math.floor(Math.random() * agents);
      const token = `t${sent++}`;
      const t0 = performance.now();
      waiting.set(token, (at) => {
        e2r.push(at - t0);
        waiting.delete(token);
      });
      sends.push(
        send(to, token).then((r) => {
          post.push(r.ms);
          if (!r.ok) refused.add(token);
        }),
      );
    }
    await sleep(10);
  }
  await Promise.all(sends);
  lag.disable();
  for (let i = 0; i < 200 && waiting.size; i++) await sleep(25);
  // a push's delivered mark (if it is pushed at all) follows it within a commit: let the last ones arrive
  await sleep(500);
  const stall = (ns: number) => round(Math.max(0, ns / 1e6 - 10));
  const a = sorted(e2r);
  const p = sorted(post);
  const lost = [...waiting.keys()].filter((t) => !refused.has(t)).length;
  return { sent, received: e2r.length, push_frames_per_emit: sent ? round(pushFrames / sent) : 0, lost, non2xx: refused.size, rate, seconds, e2r_p50_ms: round(percentile(a, 50)), e2r_p99_ms: round(percentile(a, 99)), post_p50_ms: round(percentile(p, 50)), post_p99_ms: round(percentile(p, 99)), load_stall_p99_ms: stall(lag.percentile(99)), load_stall_max_ms: stall(lag.max) };
}

const serviceSend: Send = async (to, token) => {
  const r = await emit({ signal_type: 'pulse', content: token, to_identity: targets[to].id });
  return { ms: r.ms, ok: r.status === 201 };
};

/** NATS JetStream under the same open loop (see the header); the stream is deleted afterwards. */
async function natsTail(): Promise<object> {
  const { connect, AckPolicy, DeliverPolicy, StorageType } = await import('nats');
  const agents = intEnv('PUSH_AGENTS', 1000, 1);
  const conns = Math.min(agents, intEnv('PUSH_NATS_CONNECTIONS', agents, 1));
  const servers = process.env.PUSH_NATS!;
  const stream = 'PUSH' + process.pid;
  const subject = (i: number) => `${stream}.agent.${i}`;
  const pub = await connect({ servers });
  const jsm = await pub.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${stream}.agent.*`], storage: StorageType.File });
  for (let i = 0; i < agents; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, agents - i) }, (_, j) =>
        jsm.consumers.add(stream, { durable_name: `a${i + j}`, filter_subject: subject(i + j), ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All }),
      ),
    );
  }
  const ncs = [];
  for (let i = 0; i < conns; i += 50) ncs.push(...(await Promise.all(Array.from({ length: Math.min(50, conns - i) }, () => connect({ servers })))));
  const decoder = new TextDecoder();
  const readers: Promise<void>[] = [];
  const stops: Array<() => void> = [];
  for (let i = 0; i < agents; i++) {
    const consumer = await ncs[i % conns].jetstream().consumers.get(stream, `a${i}`);
    const messages = await consumer.consume({ max_messages: 100 });
    stops.push(() => void messages.stop());
    readers.push(
      (async () => {
        for await (const m of messages) {
          const at = performance.now();
          m.ack();
          waiting.get(decoder.decode(m.data))?.(at, i);
        }
      })(),
    );
  }
  const js = pub.jetstream();
  const encoder = new TextEncoder();
  const out = await tail(agents, async (to, token) => {
    const t = performance.now();
    try {
      await js.publish(subject(to), encoder.encode(token));
      return { ms: performance.now() - t, ok: true };
    } catch {
      return { ms: performance.now() - t, ok: false };
    }
  });
  for (const stop of stops) stop();
  await Promise.all(readers);
  await jsm.streams.delete(stream);
  await Promise.all([pub, ...ncs].map((nc) => nc.close()));
  return { ...out, agents, nats_connections: conns, consumer: 'durable pull, consume(), explicit ack, one per agent' };
}

interface Round {
  emit_ms: number;
  last_receipt_ms: number | null;
  received: number;
}

async function fanout(sockets: number): Promise<object> {
  const rounds = intEnv('PUSH_ROUNDS', 5, 1);
  const timeout = intEnv('PUSH_ROUND_TIMEOUT_MS', 30_000, 1);
  const extra = JSON.parse(process.env.PUSH_EMIT_EXTRA ?? '{}') as object;
  const out: Round[] = [];
  for (let r = 0; r < rounds; r++) {
    // every round starts 500 ms after the one before it, the first 500 ms after the last welcome: the
    // service's follow-up of 5,000 connections (presence writes, reach loads) is not counted in round one
    await sleep(500);
    const token = `f${r}-${Date.now()}`;
    const got = new Set<number>();
    const t0 = performance.now();
    const done = new Promise<number>((resolve) =>
      waiting.set(token, (at, socket) => {
        got.add(socket);
        if (got.size === sockets) resolve(at - t0);
      }),
    );
    const res = await emit({ signal_type: 'pulse', content: token, ...extra });
    if (res.status !== 201) throw new Error(`emit answered ${res.status}`);
    const ms = await Promise.race([done, sleep(timeout).then(() => NaN)]);
    if (Number.isNaN(ms)) process.stderr.write(`round ${r}: ${got.size} of ${sockets} sockets got the signal within ${timeout} ms\n`);
    out.push({ emit_ms: round(res.ms), last_receipt_ms: Number.isNaN(ms) ? null : round(ms), received: got.size });
    waiting.delete(token);
  }
  const a = sorted(out.map((x) => x.last_receipt_ms ?? Infinity));
  const e = sorted(out.map((x) => x.emit_ms));
  const complete = out.every((x) => x.received === sockets);
  return { sockets, rounds, complete, last_receipt_p50_ms: round(percentile(a, 50)), last_receipt_max_ms: complete ? round(a.at(-1)!) : null, emit_p50_ms: round(percentile(e, 50)), emit_max_ms: round(e.at(-1)!), per_round: out };
}

const sockets = await openAll();
const out = mode === 'fanout' ? await fanout(sockets.length) : mode === 'nats-tail' ? await natsTail() : await tail(targets.length, serviceSend);
for (const ws of sockets) ws.terminate();
agent.destroy();
console.log(JSON.stringify(targets.length ? { ...out, socket_retries: socketRetries.count } : out));
process.exit(0);
