/**
 * Redis adapter (node-redis v5), on one server or a Redis Cluster. Every key lives under one hash tag,
 * `<prefix>:{<ns>}:`, so each commit's multi-key Lua script touches one slot, as a cluster requires. A
 * commit is one script (the commits of one event-loop turn share one call): all version checks first, then every write; the log append and its PUBLISH happen inside the same script, so only committed entries are
 * ever published. Every operation fails fast while Redis is away (the guard in `redis-link.ts`).
 */
import { openRedisLink, type LinkOptions, type RedisTarget } from './redis-link.js';
import { batched } from './batch.js';
import type { CommitResult, CountRange, DueTimer, LogEntry, Op, RangeOptions, Store, Versioned } from './port.js';

/*
 * KEYS[1]: the prefix itself (declares the slot)   ARGV[1]: JSON array of op lists, in which a put's value and an
 * append's entry are the index of the ARGV holding that value's JSON (each value is encoded once, not again
 * as an escaped string inside the list)
 * Group commit: the lists run in order, each as its own commit (all its version checks, then its writes), so a
 * later list sees the earlier ones' writes. Returns one reply per list: {1, seq...} on success, {-1, key} when a
 * version check of that list failed (that list wrote nothing; the others are unaffected).
 */
const COMMIT = `
local P = KEYS[1]
local lists = cjson.decode(ARGV[1])
local function ver(k) return tonumber(redis.call('HGET', P .. 'r:' .. k, 'v') or '0') end
local function commit(ops)
  for _, o in ipairs(ops) do
    if (o.op == 'put' or o.op == 'del' or o.op == 'check') and o.expect ~= nil and o.expect ~= cjson.null then
      if ver(o.key) ~= o.expect then return {-1, o.key} end
    end
  end
  local out = {1}
  for _, o in ipairs(ops) do
    if o.op == 'put' then
      redis.call('HSET', P .. 'r:' .. o.key, 'v', ver(o.key) + 1, 'd', ARGV[o.value])
    elseif o.op == 'del' then
      redis.call('DEL', P .. 'r:' .. o.key)
    elseif o.op == 'index' then
      if o.remove then redis.call('ZREM', P .. 'i:' .. o.index, o.member)
      else redis.call('ZADD', P .. 'i:' .. o.index, 0, o.member) end
    elseif o.op == 'timer' then
      if o.at == nil or o.at == cjson.null then redis.call('ZREM', P .. 'timers', o.key)
      else redis.call('ZADD', P .. 'timers', o.at, o.key) end
    elseif o.op == 'append' then
      local seq = redis.call('INCR', P .. 'seq:' .. o.log)
      local entry = ARGV[o.entry]
      redis.call('XADD', P .. 'l:' .. o.log, seq .. '-1', 'e', entry)
      redis.call('PUBLISH', P .. 'ch:' .. o.log, seq .. ' ' .. entry)
      out[#out + 1] = seq
    end
  end
  return out
end
local replies = {}
for i, ops in ipairs(lists) do replies[i] = commit(ops) end
return replies
`;

/* KEYS[1]: prefix  ARGV: now, limit, holdMs.  Returns the claimed timer keys; each now scores now+holdMs. */
const CLAIM_TIMERS = `
local T = KEYS[1] .. 'timers'
local due = redis.call('ZRANGEBYSCORE', T, '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local at = tonumber(ARGV[1]) + tonumber(ARGV[3])
for _, k in ipairs(due) do redis.call('ZADD', T, at, k) end
return due
`;

/* KEYS[1]: prefix  ARGV: timer key, claim score.  Deletes the timer only if still at the claim score. */
const RELEASE_TIMER = `
local T = KEYS[1] .. 'timers'
local s = redis.call('ZSCORE', T, ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then redis.call('ZREM', T, ARGV[1]) return 1 end
return 0
`;

/*
 * KEYS[1]: prefix  ARGV: log, before, limit.  Drops stream entries below `before`, at most `limit` of them,
 * and records the new start.  Returns the start.
 */
const TRIM_LOG = `
local S = KEYS[1] .. 'start:' .. ARGV[1]
local L = KEYS[1] .. 'l:' .. ARGV[1]
local start = tonumber(redis.call('GET', S) or '1')
local before = tonumber(ARGV[2])
if before <= start then return start end
local over = redis.call('XRANGE', L, start .. '-0', '+', 'COUNT', tonumber(ARGV[3]) + 1)
local nxt = before
if #over > tonumber(ARGV[3]) then
  local s = tonumber(string.match(over[#over][1], '^(%d+)'))
  if s < nxt then nxt = s end
end
redis.call('XTRIM', L, 'MINID', nxt .. '-0')
redis.call('SET', S, nxt)
return nxt
`;

export interface RedisStoreOptions extends LinkOptions {
  target: RedisTarget;
  prefix: string;
  namespace?: string;
}

export async function openRedisStore(o: RedisStoreOptions): Promise<Store> {
  const P = `${o.prefix}:{${o.namespace ?? 'main'}}:`;
  const link = await openRedisLink(o.target, o);
  const handlers = new Map<string, Set<(e: LogEntry) => void>>();
  const run = link.run;
  const eval_ = (src: string, args: string[]) => link.script(src, [P], args);

  const parse = <T>(h: Record<string, string>): Versioned<T> | undefined =>
    h && h.v !== undefined ? { version: Number(h.v), value: JSON.parse(h.d) as T } : undefined;

  /** Group commit: the commits of one event-loop turn go to Redis as one script call (see COMMIT). */
  const commitBatch = batched<Op[], CommitResult>(async (lists) => {
    const args = [''];
    // push answers the new length, which is the value's index in Lua's 1-based ARGV
    const arg = (v: unknown) => args.push(JSON.stringify(v));
    args[0] = JSON.stringify(lists.map((ops) => ops.map((x) => (x.op === 'put' ? { ...x, value: arg(x.value) } : x.op === 'append' ? { ...x, entry: arg(x.entry) } : x))));
    const r = (await eval_(COMMIT, args)) as (number | string)[][];
    return r.map((one): CommitResult => (one[0] === -1 ? { ok: false, conflict: String(one[1]) } : { ok: true, seqs: one.slice(1).map(Number) }));
  });

  return {
    backend: 'redis',
    async get<T>(key: string) {
      return parse<T>((await run((c) => c.hGetAll(P + 'r:' + key))) as Record<string, string>);
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return [];
      const rows = (await run((c) => {
        const multi = c.multi();
        for (const k of keys) multi.hGetAll(P + 'r:' + k);
        return multi.execAsPipeline();
      })) as unknown as Record<string, string>[];
      return rows.map((h) => parse<T>(h));
    },
    commit: commitBatch,
    async range(index: string, r: RangeOptions) {
      const lo = r.gt !== undefined ? '(' + r.gt : '-';
      const hi = r.lt !== undefined ? '(' + r.lt : '+';
      const key = P + 'i:' + index;
      return run((c) =>
        r.reverse
          ? c.zRange(key, hi, lo, { BY: 'LEX', REV: true, LIMIT: { offset: 0, count: r.limit } })
          : c.zRangeByLex(key, lo, hi, { LIMIT: { offset: 0, count: r.limit } }),
      );
    },
    async count(index: string, between?: CountRange) {
      if (!between) return run((c) => c.zCard(P + 'i:' + index));
      const lo = between.gt !== undefined ? '(' + between.gt : '-';
      const hi = between.lt !== undefined ? '(' + between.lt : '+';
      return run((c) => c.zLexCount(P + 'i:' + index, lo, hi));
    },
    async claimTimers(now: number, limit: number, holdMs: number) {
      const keys = (await eval_(CLAIM_TIMERS, [String(now), String(limit), String(holdMs)])) as string[];
      return keys.map((key): DueTimer => ({ key, claim: now + holdMs }));
    },
    async releaseTimer(t: DueTimer) {
      await eval_(RELEASE_TIMER, [t.key, String(t.claim)]);
    },
    async nextTimerAt() {
      const r = await run((c) => c.zRangeWithScores(P + 'timers', 0, 0));
      return r[0]?.score;
    },
    async readLog<T>(log: string, afterSeq: number, limit: number) {
      const rows = await run((c) => c.xRange(P + 'l:' + log, `(${afterSeq}-1`, '+', { COUNT: limit }));
      return rows.map((r): LogEntry<T> => ({ seq: Number(r.id.split('-')[0]), entry: JSON.parse(r.message.e) as T }));
    },
    async lastSeq(log: string) {
      return Number((await run((c) => c.get(P + 'seq:' + log))) ?? 0);
    },
    async logStart(log: string) {
      return Number((await run((c) => c.get(P + 'start:' + log))) ?? 1);
    },
    async trimLog(log: string, before: number, limit: number) {
      return Number(await eval_(TRIM_LOG, [log, String(before), String(limit)]));
    },
    async subscribe<T>(log: string, fn: (e: LogEntry<T>) => void) {
      const channel = P + 'ch:' + log;
      let set = handlers.get(channel);
      if (!set) {
        handlers.set(channel, (set = new Set()));
        await link.subscribe(channel, (msg: string) => {
          const sp = msg.indexOf(' ');
          const e: LogEntry = { seq: Number(msg.slice(0, sp)), entry: JSON.parse(msg.slice(sp + 1)) };
          for (const h of handlers.get(channel) ?? []) h(e);
        });
      }
      const h = fn as (e: LogEntry) => void;
      set.add(h);
      return async () => {
        set!.delete(h);
      };
    },
    async ping() {
      const t = performance.now();
      await link.ping(P);
      return performance.now() - t;
    },
    close: () => link.close(),
  };
}
