/**
 * The ceiling of one Redis for our commit script (issue 15 item 7), on a private redis-server.
 *
 * 1. capture: one service on the Redis; one POST /emit while MONITOR listens; the op list of the emit's
 *    commit (the EVALSHA of the commit script that creates the signal) is the template.
 * 2. store: for each entry of BENCH_CEILING_CLIENTS (default 1,3), that many load processes drive the Redis
 *    store adapter (openRedisStore) with the template (a fresh signal id per commit), BENCH_CEILING_CONCURRENCY
 *    (64) commits in flight each, for BENCH_CEILING_SECONDS (10). Figures: commits/s, Redis CPU (INFO cpu,
 *    user+sys) per commit and in % of one core, script calls per commit (group commit), and the ceiling
 *    = 1 s of Redis CPU / CPU per commit (Redis runs commands on one thread).
 * 3. service: BENCH_CEILING_INSTANCES (2) services sharing the Redis and one REDIS_PREFIX (one deployment);
 *    one load process per instance, BENCH_CEILING_EMITS (3000) POST /emit each, 50 in flight; Redis CPU
 *    and commands per emit (everything an emit costs Redis: key checks, reads, the commit, the journal
 *    readers), the emits/s one Redis core carries, and so how many instances at the measured per-instance
 *    rate.
 *
 * Env: BENCH_CEILING_CLIENTS (1,3), BENCH_CEILING_CONCURRENCY (64), BENCH_CEILING_SECONDS (10),
 * BENCH_CEILING_INSTANCES (2; 0 skips part 3), BENCH_CEILING_EMITS (3000).
 */
import { writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { createClient } from 'redis';
import { bootstrap } from '../test/helpers/client.js';
import { startRedis } from '../test/helpers/redis.js';
import { intEnv, main, onCleanup, report, runLoad, scratchDir, startService, stopChild, usedCpuMs } from './lib.js';
import { agents } from './push-agents.js';

const CLIENTS = (process.env.BENCH_CEILING_CLIENTS ?? '1,3').split(',').map(Number);
const CONC = intEnv('BENCH_CEILING_CONCURRENCY', 64, 1);
const SECONDS = intEnv('BENCH_CEILING_SECONDS', 10, 1);
const INSTANCES = intEnv('BENCH_CEILING_INSTANCES', 2, 0);
const EMITS = intEnv('BENCH_CEILING_EMITS', 3000, 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Undoes the quoting of a MONITOR argument (C-style escapes: \" \\ \n \r \t \xNN). */
function unquote(s: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const n = s[++i];
    if (n === 'x') {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(({ n: 10, r: 13, t: 9, a: 7, b: 8 } as Record<string, number>)[n] ?? n.charCodeAt(0));
  }
  return Buffer.from(bytes).toString('utf8');
}

/** The quoted arguments of one MONITOR line. */
const monitorArgs = (line: string) => [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => unquote(m[1]));

/** The op lists of one commit script call, from its ARGV tokens (the inverse of `tokens` in src/store/redis.ts). */
function commitLists(argv: string[]): Array<Array<Record<string, unknown>>> {
  const lists: Array<Array<Record<string, unknown>>> = [];
  const expect = (e: string) => (e === '' ? {} : { expect: Number(e) });
  for (let i = 0; i < argv.length; ) {
    const end = i + 1 + Number(argv[i]);
    const ops: Array<Record<string, unknown>> = [];
    for (i++; i < end; ) {
      const [o, x, y, z] = argv.slice(i, i + 4);
      if (o === 'p') ops.push({ op: 'put', key: x, ...expect(y), value: JSON.parse(z) });
      else if (o === 'd' || o === 'c') ops.push({ op: o === 'd' ? 'del' : 'check', key: x, ...expect(y) });
      else if (o === 'i' || o === 'r') ops.push({ op: 'index', index: x, member: y, ...(o === 'r' ? { remove: true } : {}) });
      else if (o === 't') ops.push({ op: 'timer', key: x, at: y === '' ? null : Number(y) });
      else ops.push({ op: 'append', log: x, entry: JSON.parse(y) });
      i += o === 'p' ? 4 : 3;
    }
    lists.push(ops);
  }
  return lists;
}

type Info = { cpu_s: number; calls: Record<string, number>; usec: Record<string, number> };
async function redisInfo(url: string): Promise<Info> {
  const c = createClient({ url });
  await c.connect();
  const cpu = await c.info('cpu');
  const stats = await c.info('commandstats');
  await c.close();
  const calls: Record<string, number> = {};
  const usec: Record<string, number> = {};
  for (const m of stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) {
    calls[m[1]] = Number(m[2]);
    usec[m[1]] = Number(m[3]);
  }
  return { cpu_s: usedCpuMs(cpu) / 1000, calls, usec };
}
const diffCalls = (a: Info, b: Info) => Object.fromEntries(Object.keys(b.calls).map((k) => [k, b.calls[k] - (a.calls[k] ?? 0)]).filter(([, v]) => (v as number) > 0));
/** Redis's own time per commit by command (commandstats usec; a script's time includes the commands it calls) */
const usecPer = (a: Info, b: Info, n: number) => Object.fromEntries(Object.keys(b.usec).map((k) => [k, +((b.usec[k] - (a.usec[k] ?? 0)) / n).toFixed(2)]).filter(([, v]) => (v as number) > 0));
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

await main(async () => {
  const redis = await startRedis();
  onCleanup(() => redis.stop());
  const dir = await scratchDir('bench-ceiling-');

  // 1. capture one emit's commit
  const svc = await startService('redis', {}, [], redis.url);
  const root = await bootstrap(svc.url, 'bench');
  const [reader] = await agents(svc.url, root.key, 1, 'reader');
  await sleep(1000);
  const mon = new Socket();
  let seen = '';
  mon.on('data', (d) => (seen += d));
  await new Promise<void>((r) => mon.connect(redis.port, '127.0.0.1', () => r()));
  mon.write('MONITOR\r\n');
  await sleep(200);
  const res = await fetch(svc.url + '/emit', { method: 'POST', headers: { authorization: `Bearer ${root.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ signal_type: 'note', content: 'a typical short note', to_identity: reader.id }) });
  const signalId = ((await res.json()) as { data: { id: string } }).data.id;
  await sleep(500);
  mon.destroy();
  await stopChild(svc.proc);
  const line = seen.split('\n').find((l) => l.includes('"EVALSHA"') && l.includes(`actor:signal:${signalId}`)); // the first: the commit that creates it
  if (!line) throw new Error(`no commit of signal ${signalId} seen by MONITOR`);
  // EVALSHA sha 1 prefix ARGV...: the op lists as COMMIT's tokens (src/store/redis.ts), read back into ops
  const callLists = commitLists(monitorArgs(line).slice(4));
  const callCommits = callLists.length;
  const ops = callLists.find((l) => JSON.stringify(l).includes(`actor:signal:${signalId}`))!;
  const templateFile = join(dir, 'template.json');
  writeFileSync(templateFile, JSON.stringify(ops));
  if (process.env.BENCH_CEILING_TEMPLATE_OUT) writeFileSync(process.env.BENCH_CEILING_TEMPLATE_OUT, JSON.stringify({ id: signalId, ops }));
  const opKinds = ops.map((o) => o.op).join(',');
  // the whole script call (every commit of its turn), per commit of the turn
  const bytes = Math.round(monitorArgs(line).slice(4).reduce((n, a) => n + Buffer.byteLength(a), 0) / callCommits);
  process.stderr.write(`ceiling: an emit commits ${ops.length} ops (${opKinds}), ${bytes} bytes of script argument\n`);

  // 2. the store adapter from several processes
  for (const k of CLIENTS) {
    const startAt = Date.now() + 4000;
    const endAt = startAt + SECONDS * 1000;
    const runs = Array.from({ length: k }, (_, i) =>
      runLoad<{ commits: number; conflicts: number; seconds: number; commit_p50_ms: number; commit_p99_ms: number }>('redis-ceiling-load.ts', {
        CEIL_REDIS: redis.url,
        CEIL_PREFIX: `ceiling${k}`,
        CEIL_TEMPLATE: templateFile,
        CEIL_TEMPLATE_ID: signalId,
        CEIL_CONCURRENCY: String(CONC),
        CEIL_START_AT: String(startAt),
        CEIL_END_AT: String(endAt),
        CEIL_PROC: String(i),
      }),
    );
    await sleep(startAt - Date.now());
    const a = await redisInfo(redis.url);
    await sleep(endAt - Date.now());
    const b = await redisInfo(redis.url);
    const out = await Promise.all(runs);
    const commits = out.reduce((s, o) => s + o.commits, 0);
    const cpuUs = ((b.cpu_s - a.cpu_s) * 1e6) / commits;
    const calls = diffCalls(a, b);
    report({
      bench: 'redis-ceiling-store',
      target: `openRedisStore commits of one emit's op list, ${k} process(es) x ${CONC} in flight`,
      ops_per_commit: ops.length,
      op_kinds: opKinds,
      commit_bytes: bytes,
      processes: k,
      commits,
      commits_per_s: Math.round(commits / SECONDS),
      conflicts: out.reduce((s, o) => s + o.conflicts, 0),
      commit_p50_ms: Math.max(...out.map((o) => o.commit_p50_ms)),
      commit_p99_ms: Math.max(...out.map((o) => o.commit_p99_ms)),
      redis_cpu_pct: +((100 * (b.cpu_s - a.cpu_s)) / SECONDS).toFixed(1),
      redis_cpu_us_per_commit: +cpuUs.toFixed(1),
      script_calls_per_commit: +(((calls.evalsha ?? 0) + (calls.eval ?? 0)) / commits).toFixed(3),
      redis_commands_per_commit: +(sum(calls) / commits).toFixed(2),
      command_us_per_commit: usecPer(a, b, commits),
      ceiling_commits_per_s_one_core: Math.round(1e6 / cpuUs),
      goal: 'measure the ceiling of one Redis (docs/scaling.md)',
      met: null,
    });
  }

  // 3. service instances sharing the Redis
  if (INSTANCES > 0) {
    const prefix = 'shared' + Date.now().toString(36);
    const svcs = [];
    for (let i = 0; i < INSTANCES; i++) svcs.push(await startService('redis', { REDIS_PREFIX: prefix }, [], redis.url));
    const admin = await bootstrap(svcs[0].url, 'bench');
    const [to] = await agents(svcs[0].url, admin.key, 1, 'reader');
    // warm-up: every instance serves a few emits (its key cache, its journal reader)
    await Promise.all(svcs.map((s) => runLoad('flat-load.ts', { FLAT_URL: s.url, FLAT_MODE: 'fill', FLAT_FILL_VIA: 'emit', FLAT_COUNT: '200', FLAT_CONCURRENCY: '20', FLAT_ADMIN_KEY: admin.key, FLAT_READER: to.id })));
    const a = await redisInfo(redis.url);
    const out = await Promise.all(
      svcs.map((s) =>
        runLoad<{ emitted: number; seconds: number; per_s: number }>('flat-load.ts', { FLAT_URL: s.url, FLAT_MODE: 'fill', FLAT_FILL_VIA: 'emit', FLAT_COUNT: String(EMITS), FLAT_CONCURRENCY: '50', FLAT_ADMIN_KEY: admin.key, FLAT_READER: to.id }),
      ),
    );
    // the load processes' own clocks (their start-up is outside them): the longest one is the window
    const wall = Math.max(...out.map((o) => o.seconds));
    const b = await redisInfo(redis.url);
    const emits = out.reduce((s, o) => s + o.emitted, 0);
    const cpuUs = ((b.cpu_s - a.cpu_s) * 1e6) / emits;
    const calls = diffCalls(a, b);
    const perInstance = Math.round(out.reduce((s, o) => s + o.per_s, 0) / out.length);
    const carried = Math.round(1e6 / cpuUs);
    report({
      bench: 'redis-ceiling-service',
      target: `${INSTANCES} service instances on one Redis, POST /emit (50 in flight per instance)`,
      instances: INSTANCES,
      emits,
      emits_per_s: out.reduce((s, o) => s + o.per_s, 0),
      emits_per_s_per_instance: perInstance,
      redis_cpu_pct: +((100 * (b.cpu_s - a.cpu_s)) / wall).toFixed(1),
      redis_cpu_us_per_emit: +cpuUs.toFixed(1),
      redis_commands_per_emit: +(sum(calls) / emits).toFixed(2),
      commands: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, +((v as number) / emits).toFixed(3)])),
      emits_per_s_one_redis_core: carried,
      instances_one_redis_carries: +(carried / perInstance).toFixed(1),
      goal: 'measure the ceiling of one Redis (docs/scaling.md)',
      met: null,
    });
    await Promise.all(svcs.map((s) => stopChild(s.proc)));
  }
});
