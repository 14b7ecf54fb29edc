/**
 * Redis adapter (node-redis v5). Every key lives under one hash tag, `<prefix>:{<ns>}:`, so each commit's
 * multi-key Lua script is legal on Redis Cluster too. A commit is one script: all version checks first,
 * then every write; the log append and its PUBLISH happen inside the same script, so only committed
 * entries are ever published.
 */
import { createClient, type RedisClientType } from 'redis';
import type { CommitResult, DueTimer, LogEntry, Op, RangeOptions, Store, Versioned } from './port.js';

/*
 * KEYS[1]: the prefix itself (declares the slot)   ARGV[1]: JSON op list (values pre-encoded as JSON strings)
 * Returns {1, seq...} on success, {-1, key} when a version check fails.
 */
const COMMIT = `
local P = KEYS[1]
local ops = cjson.decode(ARGV[1])
local function ver(k) return tonumber(redis.call('HGET', P .. 'r:' .. k, 'v') or '0') end
for _, o in ipairs(ops) do
  if (o.op == 'put' or o.op == 'del' or o.op == 'check') and o.expect ~= nil and o.expect ~= cjson.null then
    if ver(o.key) ~= o.expect then return {-1, o.key} end
  end
end
local out = {1}
for _, o in ipairs(ops) do
  if o.op == 'put' then
    redis.call('HSET', P .. 'r:' .. o.key, 'v', ver(o.key) + 1, 'd', o.value)
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
    redis.call('XADD', P .. 'l:' .. o.log, seq .. '-1', 'e', o.entry)
    redis.call('PUBLISH', P .. 'ch:' .. o.log, seq .. ' ' .. o.entry)
    out[#out + 1] = seq
  end
end
return out
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

type Client = RedisClientType;

export interface RedisStoreOptions {
  url: string;
  prefix: string;
  namespace?: string;
}

export async function openRedisStore(o: RedisStoreOptions): Promise<Store> {
  const P = `${o.prefix}:{${o.namespace ?? 'main'}}:`;
  const client = createClient({ url: o.url, socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 2000) } }) as Client;
  client.on('error', () => {}); // reconnects by itself; health reports reachability
  await client.connect();
  let sub: Client | undefined;
  const handlers = new Map<string, Set<(e: LogEntry) => void>>();
  const shas = new Map<string, string>();

  async function script(src: string, args: string[]): Promise<unknown> {
    let sha = shas.get(src);
    if (!sha) shas.set(src, (sha = (await client.scriptLoad(src)) as string));
    try {
      return await client.evalSha(sha, { keys: [P], arguments: args });
    } catch (e) {
      if (!String((e as Error).message).includes('NOSCRIPT')) throw e;
      shas.delete(src);
      return script(src, args);
    }
  }

  const parse = <T>(h: Record<string, string>): Versioned<T> | undefined =>
    h && h.v !== undefined ? { version: Number(h.v), value: JSON.parse(h.d) as T } : undefined;

  return {
    backend: 'redis',
    async get<T>(key: string) {
      return parse<T>((await client.hGetAll(P + 'r:' + key)) as Record<string, string>);
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return [];
      const multi = client.multi();
      for (const k of keys) multi.hGetAll(P + 'r:' + k);
      const rows = (await multi.execAsPipeline()) as unknown as Record<string, string>[];
      return rows.map((h) => parse<T>(h));
    },
    async commit(ops: Op[]): Promise<CommitResult> {
      const wire = ops.map((x) =>
        x.op === 'put' ? { ...x, value: JSON.stringify(x.value) } : x.op === 'append' ? { ...x, entry: JSON.stringify(x.entry) } : x,
      );
      const r = (await script(COMMIT, [JSON.stringify(wire)])) as (number | string)[];
      if (r[0] === -1) return { ok: false, conflict: String(r[1]) };
      return { ok: true, seqs: r.slice(1).map(Number) };
    },
    async range(index: string, r: RangeOptions) {
      const lo = r.gt !== undefined ? '(' + r.gt : '-';
      const hi = r.lt !== undefined ? '(' + r.lt : '+';
      const key = P + 'i:' + index;
      return r.reverse
        ? (client.sendCommand(['ZREVRANGEBYLEX', key, hi, lo, 'LIMIT', '0', String(r.limit)]) as Promise<string[]>)
        : client.zRangeByLex(key, lo, hi, { LIMIT: { offset: 0, count: r.limit } });
    },
    async count(index: string) {
      return client.zCard(P + 'i:' + index);
    },
    async claimTimers(now: number, limit: number, holdMs: number) {
      const keys = (await script(CLAIM_TIMERS, [String(now), String(limit), String(holdMs)])) as string[];
      return keys.map((key): DueTimer => ({ key, claim: now + holdMs }));
    },
    async releaseTimer(t: DueTimer) {
      await script(RELEASE_TIMER, [t.key, String(t.claim)]);
    },
    async nextTimerAt() {
      const r = await client.zRangeWithScores(P + 'timers', 0, 0);
      return r[0]?.score;
    },
    async readLog<T>(log: string, afterSeq: number, limit: number) {
      const rows = await client.xRange(P + 'l:' + log, `(${afterSeq}-1`, '+', { COUNT: limit });
      return rows.map((r): LogEntry<T> => ({ seq: Number(r.id.split('-')[0]), entry: JSON.parse(r.message.e) as T }));
    },
    async lastSeq(log: string) {
      return Number((await client.get(P + 'seq:' + log)) ?? 0);
    },
    async logStart(log: string) {
      return Number((await client.get(P + 'start:' + log)) ?? 1);
    },
    async trimLog(log: string, before: number, limit: number) {
      return Number(await script(TRIM_LOG, [log, String(before), String(limit)]));
    },
    async subscribe<T>(log: string, fn: (e: LogEntry<T>) => void) {
      if (!sub) {
        sub = client.duplicate() as Client;
        sub.on('error', () => {});
        await sub.connect();
      }
      const channel = P + 'ch:' + log;
      let set = handlers.get(channel);
      if (!set) {
        handlers.set(channel, (set = new Set()));
        await sub.subscribe(channel, (msg: string) => {
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
      await client.ping();
      return performance.now() - t;
    },
    async close() {
      // close() waits for replies still owed; a server that is down owes none it will ever send
      for (const c of [sub, client]) {
        if (!c) continue;
        await Promise.race([c.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
        try {
          c.destroy();
        } catch {
          // already closed
        }
      }
    },
  };
}
