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
 * KEYS[1]: the prefix itself (declares the slot).  ARGV: the op lists as flat tokens, no JSON to decode: each
 * list is its token count, then its ops, each a letter and a fixed number of fields (WIDTH):
 *   p key expect value | d key expect | c key expect  (expect '' = unconditional)
 *   i index member | r index member                   (index add, remove)
 *   t key at                                          (at '' cancels the timer)
 *   a log entry                                       (journal append)
 * Group commit: the lists run in order, each as its own commit (all its version checks, then its writes), so a
 * later list sees the earlier ones' writes. Each record's version is read at most once per call (`vers`), each
 * log's sequence too; the entries of the call go out on the log's channel (`pub:<log>`) as one message, one
 * `seq entry` line each (JSON has no raw newline).
 * Returns one reply per list: {1, seq...} on success, {-1, key} when a version check of that list failed (that
 * list wrote nothing; the others are unaffected).
 */
const COMMIT = `
local P = KEYS[1]
local WIDTH = {p = 4, d = 3, c = 3, i = 3, r = 3, t = 3, a = 3}
local vers = {}
local function ver(k)
  local v = vers[k]
  if v == nil then
    v = tonumber(redis.call('HGET', P .. 'r:' .. k, 'v') or '0')
    vers[k] = v
  end
  return v
end
-- a log's sequence is read once per call and written back once; its entries go out as one message per call
local seqs, pubs, logs = {}, {}, {}
local function next_seq(log)
  if seqs[log] == nil then
    seqs[log] = tonumber(redis.call('GET', P .. 'seq:' .. log) or '0')
    pubs[log] = {}
    logs[#logs + 1] = log
  end
  seqs[log] = seqs[log] + 1
  return seqs[log]
end
local function conflict(i, j)
  while i < j do
    local o = ARGV[i]
    if (o == 'p' or o == 'd' or o == 'c') and ARGV[i + 2] ~= '' and ver(ARGV[i + 1]) ~= tonumber(ARGV[i + 2]) then return ARGV[i + 1] end
    i = i + WIDTH[o]
  end
end
local function write(i, j)
  local out = {1}
  while i < j do
    local o, x, y = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if o == 'p' then
      local v = ver(x) + 1
      redis.call('HSET', P .. 'r:' .. x, 'v', v, 'd', ARGV[i + 3])
      vers[x] = v
    elseif o == 'd' then
      redis.call('DEL', P .. 'r:' .. x)
      vers[x] = 0
    elseif o == 'i' then redis.call('ZADD', P .. 'i:' .. x, 0, y)
    elseif o == 'r' then redis.call('ZREM', P .. 'i:' .. x, y)
    elseif o == 't' then
      if y == '' then redis.call('ZREM', P .. 'timers', x)
      else redis.call('ZADD', P .. 'timers', y, x) end
    elseif o == 'a' then
      local seq = next_seq(x)
      redis.call('XADD', P .. 'l:' .. x, seq .. '-1', 'e', y)
      local p = pubs[x]
      p[#p + 1] = seq .. ' ' .. y
      out[#out + 1] = seq
    end
    i = i + WIDTH[o]
  end
  return out
end
local replies = {}
local i = 1
while i <= #ARGV do
  local j = i + 1 + tonumber(ARGV[i])
  local bad = conflict(i + 1, j)
  replies[#replies + 1] = bad and {-1, bad} or write(i + 1, j)
  i = j
end
for _, log in ipairs(logs) do
  redis.call('SET', P .. 'seq:' .. log, seqs[log])
  redis.call('PUBLISH', P .. 'pub:' .. log, table.concat(pubs[log], '\\n'))
end
return replies
`;

/** One op as COMMIT's tokens (see there). */
function tokens(x: Op, out: string[]): void {
  const expect = (e: number | undefined) => (e === undefined || e === null ? '' : String(e));
  if (x.op === 'put') out.push('p', x.key, expect(x.expect), JSON.stringify(x.value));
  else if (x.op === 'del' || x.op === 'check') out.push(x.op[0], x.key, expect(x.expect));
  else if (x.op === 'index') out.push(x.remove ? 'r' : 'i', x.index, x.member);
  else if (x.op === 'timer') out.push('t', x.key, x.at === null || x.at === undefined ? '' : String(x.at));
  else out.push('a', x.log, JSON.stringify(x.entry));
}

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
 * and records the new start.  Returns the start.  Sequences are consecutive (each append takes the next), so
 * the limit-th entry from the start is start + limit: no entry is read (the XRANGE of up to `limit` whole
 * entries this did before cost 3-4 µs of Redis time per commit behind bench/redis-ceiling.ts's writers).
 */
const TRIM_LOG = `
local S = KEYS[1] .. 'start:' .. ARGV[1]
local L = KEYS[1] .. 'l:' .. ARGV[1]
local start = tonumber(redis.call('GET', S) or '1')
local before = tonumber(ARGV[2])
if before <= start then return start end
local nxt = math.min(before, start + tonumber(ARGV[3]))
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
    const args: string[] = [];
    for (const ops of lists) {
      const at = args.push('');
      for (const x of ops) tokens(x, args);
      args[at - 1] = String(args.length - at);
    }
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
      const channel = P + 'pub:' + log;
      let set = handlers.get(channel);
      if (!set) {
        handlers.set(channel, (set = new Set()));
        await link.subscribe(channel, (msg: string) => {
          for (const line of msg.split('\n')) {
            const sp = line.indexOf(' ');
            const e: LogEntry = { seq: Number(line.slice(0, sp)), entry: JSON.parse(line.slice(sp + 1)) };
            for (const h of handlers.get(channel) ?? []) h(e);
          }
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
