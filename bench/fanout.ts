/**
 * Fan-out: one signal, the time until the last socket has it. On one instance per backend, and with
 * BENCH_REDIS_PAIR (default on) across two instances sharing one Redis, the sockets alternating between them
 * while the signal is emitted on the first. Load runs in bench/push-load.ts. Two modes (BENCH_FANOUT_MODE):
 *
 *   broadcast (default): BENCH_SOCKETS WebSockets over BENCH_FANOUT_IDENTITIES identities, one broadcast
 *              signal per round; the median of BENCH_ROUNDS rounds.
 *   ring:      issue 28's case: BENCH_RING_MEMBERS (5000) distinct identities in one ring (POST /rings with
 *              all of them as members), one socket each, one signal `to_ring` per round; every member gets
 *              its own inbox entry. Per round: the POST /emit answer time, the last receipt and how many
 *              sockets got it (all of them, every round, or the round fails the goal). The goal is met when
 *              every round's last receipt is under 150 ms.
 *
 * Env: BENCH_BACKENDS (embedded,redis), BENCH_FANOUT_MODE (broadcast), BENCH_SOCKETS (5000),
 * BENCH_FANOUT_IDENTITIES (50), BENCH_RING_MEMBERS (5000), BENCH_JOIN_PARALLEL (joins in flight while making
 * identities, 20), BENCH_ROUNDS (5), BENCH_REDIS_PAIR (1).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join as pathJoin } from 'node:path';
import { bootstrap, Client } from '../test/helpers/client.js';
import { intEnv, main, scratchDir, report, runLoad, startService, stopChild, type Backend } from './lib.js';
import { agents } from './push-agents.js';

const BACKENDS = (process.env.BENCH_BACKENDS ?? 'embedded,redis').split(',') as Backend[];
const MODE = process.env.BENCH_FANOUT_MODE ?? 'broadcast';
const SOCKETS = intEnv('BENCH_SOCKETS', 5000, 1);
const IDENTITIES = intEnv('BENCH_FANOUT_IDENTITIES', 50, 1);
const MEMBERS = intEnv('BENCH_RING_MEMBERS', 5000, 1);
const PARALLEL = intEnv('BENCH_JOIN_PARALLEL', 20, 1);
const ROUNDS = intEnv('BENCH_ROUNDS', 5, 1);
const PAIR = (process.env.BENCH_REDIS_PAIR ?? '1') !== '0';
const TARGET_MS = 150;
if (!['broadcast', 'ring'].includes(MODE)) throw new Error(`BENCH_FANOUT_MODE must be broadcast or ring, got "${MODE}"`);

interface Fanout {
  complete: boolean;
  last_receipt_p50_ms: number;
  last_receipt_max_ms: number | null;
  per_round: { emit_ms: number; last_receipt_ms: number | null; received: number }[];
}

/** The sockets of a run: who each one is and which instance it opens on. */
interface Audience {
  sockets: { id: string; key: string }[];
  emit: Record<string, string>;
}

async function broadcastAudience(url: string, adminKey: string): Promise<Audience> {
  const ids = await agents(url, adminKey, IDENTITIES, 'fan-' + randomBytes(3).toString('hex'), PARALLEL);
  return { sockets: Array.from({ length: SOCKETS }, (_, i) => ids[i % ids.length]), emit: {} };
}

/** MEMBERS identities and one ring of all of them, made once per backend (the two-instance run reuses them). */
async function ringAudience(url: string, adminKey: string): Promise<Audience> {
  const tag = randomBytes(3).toString('hex');
  const t0 = performance.now();
  const ids = await agents(url, adminKey, MEMBERS, `ring-${tag}`, PARALLEL);
  const name = `bench-ring-${tag}`;
  const res = await new Client(url, adminKey).post('/rings', { name, members: ids.map((i) => i.id) });
  if (res.status !== 201) throw new Error(`POST /rings answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
  process.stderr.write(`${MEMBERS} identities and their ring in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return { sockets: ids, emit: { to_ring: name } };
}

async function run(label: string, urls: string[], adminKey: string, audience: Audience): Promise<void> {
  const list = audience.sockets.map((s, i) => ({ ...s, url: urls[i % urls.length] }));
  const file = pathJoin(await scratchDir('bench-fanout-'), 'sockets.json');
  writeFileSync(file, JSON.stringify(list));
  const r = await runLoad<Fanout>('push-load.ts', { PUSH_SOCKETS: file, PUSH_EMIT_URL: urls[0], PUSH_ADMIN_KEY: adminKey, PUSH_MODE: 'fanout', PUSH_ROUNDS: String(ROUNDS), PUSH_EMIT_EXTRA: JSON.stringify(audience.emit) });
  const everyRound = r.complete && r.per_round.every((x) => x.last_receipt_ms !== null && x.last_receipt_ms < TARGET_MS);
  if (MODE === 'ring') {
    report({ bench: 'fanout-ring', target: label, instances: urls.length, members: list.length, ...r, goal: `every round: all ${list.length} sockets, last receipt < ${TARGET_MS} ms`, met: everyRound });
  } else {
    report({ bench: 'fanout', target: label, instances: urls.length, ...r, goal: `last receipt < ${TARGET_MS} ms`, met: r.complete && r.last_receipt_p50_ms < TARGET_MS, met_every_round: everyRound });
  }
}

await main(async () => {
  for (const backend of BACKENDS) {
    const prefix = 'bench' + randomBytes(4).toString('hex');
    const a = await startService(backend, backend === 'redis' ? { REDIS_PREFIX: prefix } : {});
    const root = await bootstrap(a.url, 'bench');
    const audience = () => (MODE === 'ring' ? ringAudience(a.url, root.key) : broadcastAudience(a.url, root.key));
    const first = await audience();
    await run(backend, [a.url], root.key, first);
    if (backend === 'redis' && PAIR) {
      const b = await startService('redis', { REDIS_PREFIX: prefix }, [], a.redisUrl);
      await run('redis, two instances', [a.url, b.url], root.key, MODE === 'ring' ? first : await audience());
      await stopChild(b.proc);
    }
    await stopChild(a.proc);
  }
});
