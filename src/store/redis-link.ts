/**
 * One guarded connection to Redis, a single server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES),
 * for every part that talks to Redis: the store, the rate limits. Every operation fails fast while Redis is
 * away (see `Guard`) with catalogue errors, never a raw client error.
 *
 * On a cluster, node-redis follows MOVED/ASK redirects and rediscovers the slots on MOVED, which covers a
 * manual `CLUSTER FAILOVER` (the old master answers MOVED). A master that dies answers nothing, so the
 * client would keep reconnecting to it; instead an operation refused before it was sent (node offline,
 * CLUSTERDOWN, READONLY, TRYAGAIN) opens a fresh cluster connection from the seed nodes and is sent again,
 * until `connectMs` has passed. An operation whose connection broke after it was sent is never sent again:
 * it answers DB_CONNECT_FAILED (it was applied whole or not at all, as on a single server).
 */
import { createHash } from 'node:crypto';
import {
  AbortError,
  ClientClosedError,
  ClientOfflineError,
  ConnectionTimeoutError,
  createClient,
  createCluster,
  DisconnectsClientError,
  ErrorReply,
  ReconnectStrategyError,
  RootNodesUnavailableError,
  SocketClosedUnexpectedlyError,
  SocketTimeoutError,
  TimeoutError,
  type RedisClientType,
  type RedisClusterType,
} from 'redis';
import { elapsed } from '../clock.js';
import { AppError } from '../errors.js';
import { storeFull } from './full.js';

/** Where Redis is: one server, or the seed nodes (host:port) of a cluster. */
export type RedisTarget = { url: string } | { clusterNodes: string[] };

/**
 * The keyed commands the store and the rate limits send. A cluster offers each of them with the same
 * signature, routed to the slot of its first key, so both connections are used through this one type.
 */
export type Commands = Pick<
  RedisClientType,
  'hGetAll' | 'multi' | 'evalSha' | 'eval' | 'zRange' | 'zRangeByLex' | 'zCard' | 'zLexCount' | 'zRangeWithScores' | 'xRange' | 'get'
>;

export interface LinkOptions {
  /** how long an operation waits for a lost connection to come back, and one connect attempt may take */
  connectTimeoutMs?: number;
  /** how long an operation waits for Redis's reply */
  queryTimeoutMs?: number;
}

export interface RedisLink {
  readonly cluster: boolean;
  /** one bounded operation (on a cluster, each command goes to its first key's slot) */
  run<T>(send: (c: Commands) => Promise<T>): Promise<T>;
  /** a Lua script by its SHA1, loaded (by EVAL) on the node that lacks it */
  script(src: string, keys: string[], args: string[]): Promise<unknown>;
  /** round trip to the node that serves `key`'s slot */
  ping(key: string): Promise<void>;
  /** a message listener on `channel` (what a script's PUBLISH sends) */
  subscribe(channel: string, listener: (msg: string) => void): Promise<void>;
  close(): Promise<void>;
}

const reconnectStrategy = (n: number) => Math.min(50 * 2 ** n, 2000);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Redis replies that mean "not serving now" rather than "this command is wrong"; none ran the command. MOVED
 * and ASK reach us only when node-redis's own redirects ran out in a topology still settling (a failover).
 */
const UNAVAILABLE_REPLY = /^(LOADING|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY|MOVED|ASK)\b/;

/** `maxmemory` reached under `noeviction`: Redis refuses the first write of a script, so nothing of it was applied */
const OUT_OF_MEMORY_REPLY = /^OOM\b|\bOOM command not allowed\b/;

const connectFailed = () => new AppError('DB_CONNECT_FAILED', 'Redis is unreachable', { backend: 'redis' });
const queryTimeout = () => new AppError('DB_QUERY_TIMEOUT', 'Redis did not answer in time', { backend: 'redis' });

const CONNECTION_ERRORS = [ClientClosedError, ClientOfflineError, ConnectionTimeoutError, DisconnectsClientError, ReconnectStrategyError, SocketClosedUnexpectedlyError, RootNodesUnavailableError];

/** node-redis errors as catalogue errors; anything else (a Redis error reply about the command itself, a bug) stays as it is. */
export function storeError(e: unknown): unknown {
  if (e instanceof AppError) return e;
  if (e instanceof ErrorReply) return UNAVAILABLE_REPLY.test(e.message) ? connectFailed() : /^BUSY\b/.test(e.message) ? queryTimeout() : OUT_OF_MEMORY_REPLY.test(e.message) ? storeFull('redis') : e;
  if (e instanceof AbortError || e instanceof TimeoutError || e instanceof SocketTimeoutError) return queryTimeout();
  // socket errors (ECONNRESET, EPIPE, ...) reach a command as they are when the connection breaks under it
  if (CONNECTION_ERRORS.some((c) => e instanceof c) || typeof (e as NodeJS.ErrnoException)?.code === 'string') return connectFailed();
  return e;
}

/**
 * Errors raised before the command reached Redis, or refusals Redis gives before running it: safe to send
 * again on a cluster. A node's connection is dropped with its commands (DisconnectsClientError) when node-redis
 * finds the node is no longer a master, i.e. when it could not have run them (a manual failover pauses its
 * writes, then it answers MOVED), or when the link replaced its connection after they had timed out.
 */
function notSent(e: unknown): boolean {
  if (e instanceof ErrorReply) return UNAVAILABLE_REPLY.test(e.message);
  if (e instanceof DisconnectsClientError || e instanceof ClientOfflineError || e instanceof ClientClosedError || e instanceof RootNodesUnavailableError || e instanceof ConnectionTimeoutError) return true;
  return (e as NodeJS.ErrnoException)?.code === 'ECONNREFUSED';
}

/** Settles with `p`, or rejects after `ms` (calling `onTimeout`). */
function within<T>(p: Promise<T>, ms: number, onTimeout: () => unknown): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(onTimeout()), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** close() waits for replies still owed (up to `graceMs`); a server that is down owes none it will ever send. */
async function shut(c: { close(): Promise<unknown>; destroy(): void } | undefined, graceMs = 1000): Promise<void> {
  if (!c) return;
  await Promise.race([c.close().catch(() => {}), sleep(graceMs)]);
  try {
    c.destroy();
  } catch {
    // already closed
  }
}

type Cluster = RedisClusterType;
type Client = RedisClientType;

/**
 * Bounds every command. Connections are opened with `disableOfflineQueue`, so nothing queues while one is
 * down, but node-redis times nothing out once written (a paused Redis keeps the socket open). So:
 * - an operation issued while the connection is down waits for it until `connectMs` after it was lost, then
 *   gets DB_CONNECT_FAILED; after that window every operation gets it at once, until Redis is back;
 * - an operation Redis has not answered within `queryMs` gets DB_QUERY_TIMEOUT; if it was never written it
 *   is withdrawn, else its late reply is dropped (a commit is one script: applied whole or not at all, and
 *   a thrown timeout is never retried as a version conflict);
 * - while an earlier reply is overdue by `queryMs`, new operations get DB_QUERY_TIMEOUT at once instead of
 *   queueing behind it, so background loops do not pile up on a stalled server.
 */
class Guard {
  private lostAt: number | undefined;
  private waiters = new Set<() => void>();
  /** unanswered commands in send order (replies come back in that order); `late` once one has timed out */
  private inflight = new Set<{ late: boolean }>();

  constructor(
    private ready: () => boolean,
    private connectMs: number,
    private queryMs: number,
  ) {}

  /** the connection is up again: waiting operations go on */
  up(): void {
    this.lostAt = undefined;
    for (const w of this.waiters) w();
    this.waiters.clear();
  }

  noteLost(): void {
    if (!this.ready()) this.lostAt ??= elapsed();
  }

  private async connected(): Promise<void> {
    if (this.ready()) return;
    this.noteLost();
    const left = this.lostAt! + this.connectMs - elapsed();
    if (left <= 0) throw connectFailed();
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        reject(connectFailed());
      }, left);
      this.waiters.add(done);
    });
  }

  /** One attempt; raw client errors pass through (the caller decides whether to send again). */
  async once<T>(send: (signal: AbortSignal) => Promise<T>): Promise<T> {
    await this.connected();
    if (this.inflight.values().next().value?.late) throw queryTimeout();
    const abort = new AbortController();
    const entry = { late: false };
    this.inflight.add(entry);
    const reply = send(abort.signal);
    const settle = () => void this.inflight.delete(entry);
    reply.then(settle, settle);
    return within(reply, this.queryMs, () => {
      entry.late = true;
      abort.abort();
      return queryTimeout();
    });
  }

  /** the connection was replaced: what the old one still owes no longer holds new operations back */
  reset(): void {
    this.inflight.clear();
  }

  /**
   * Attempts until one is answered, one fails after it was sent, or `connectMs` has passed; `recover` (a
   * cluster's fresh connection) runs between attempts, and after a timeout for the operations that follow.
   */
  async run<T>(send: (signal: AbortSignal) => Promise<T>, recover?: () => Promise<void>): Promise<T> {
    const giveUpAt = elapsed() + this.connectMs;
    for (;;) {
      try {
        return await this.once(send);
      } catch (e) {
        if (recover && e instanceof AppError && e.code === 'DB_QUERY_TIMEOUT') void recover().catch(() => {});
        if (!recover || !notSent(e) || elapsed() >= giveUpAt) throw storeError(e);
        await recover().catch(() => {});
        await sleep(Math.min(100, Math.max(0, giveUpAt - elapsed())));
      }
    }
  }
}

export async function openRedisLink(target: RedisTarget, o: LinkOptions = {}): Promise<RedisLink> {
  return 'url' in target ? openServerLink(target.url, o) : openClusterLink(target.clusterNodes, o);
}

/** a script's digest, hashed once per script (a commit's is ~3 KB, sent with every group commit) */
const digests = new Map<string, string>();
const sha1 = (s: string) => digests.get(s) ?? digests.set(s, createHash('sha1').update(s).digest('hex')).get(s)!;

/** EVALSHA first; NOSCRIPT means the script did not run on that node, so EVAL (which also caches it there) is safe. */
async function evalScript(c: Commands, src: string, keys: string[], args: string[]): Promise<unknown> {
  try {
    return await c.evalSha(sha1(src), { keys, arguments: args });
  } catch (e) {
    if (!(e instanceof ErrorReply) || !e.message.startsWith('NOSCRIPT')) throw e;
    return c.eval(src, { keys, arguments: args });
  }
}

async function openServerLink(url: string, o: LinkOptions): Promise<RedisLink> {
  const connectTimeout = o.connectTimeoutMs ?? 2000;
  const client = createClient({ url, disableOfflineQueue: true, socket: { connectTimeout, reconnectStrategy } }) as Client;
  client.on('error', () => {}); // reconnects by itself; operations answer DB_CONNECT_FAILED meanwhile
  const guard = new Guard(() => client.isReady, connectTimeout, o.queryTimeoutMs ?? 5000);
  client.on('ready', () => guard.up());
  for (const ev of ['error', 'end', 'reconnecting']) client.on(ev, () => guard.noteLost());
  await client.connect();
  let sub: Client | undefined;
  const run = <T>(send: (c: Commands) => Promise<T>) => guard.run((signal) => send(client.withAbortSignal(signal) as Commands));
  return {
    cluster: false,
    run,
    script: (src, keys, args) => run((c) => evalScript(c, src, keys, args)),
    async ping() {
      await guard.run((signal) => client.withAbortSignal(signal).ping());
    },
    async subscribe(channel, listener) {
      if (!sub) {
        sub = client.duplicate() as Client;
        sub.on('error', () => {});
        await sub.connect();
      }
      await sub.subscribe(channel, listener);
    },
    async close() {
      for (const c of [sub, client]) await shut(c);
    },
  };
}

/**
 * A cluster connection that is replaced by a fresh one (discovered from the seeds) when the slot's master
 * stops answering. Pub/sub is classic SUBSCRIBE on one node (a PUBLISH reaches every node of a cluster):
 * its own small connection, replaced likewise when its node fails, so a failover elsewhere never silences it.
 */
async function openClusterLink(seeds: string[], o: LinkOptions): Promise<RedisLink> {
  const connectTimeout = o.connectTimeoutMs ?? 2000;
  const connect = async (minimizeConnections = false): Promise<Cluster> => {
    const c = createCluster({
      rootNodes: seeds.map((s) => ({ url: `redis://${s}` })),
      defaults: { disableOfflineQueue: true, socket: { connectTimeout, reconnectStrategy } },
      minimizeConnections,
    }) as unknown as Cluster;
    c.on('error', () => {});
    c.on('node-error', () => {});
    // discovery waits on every master's connection: bounded, so a dead master never holds it up
    return within(c.connect() as Promise<Cluster>, connectTimeout, () => {
      c.destroy();
      return new RootNodesUnavailableError();
    });
  };
  let cluster = await connect();
  let closed = false;
  const queryTimeout = o.queryTimeoutMs ?? 5000;
  const guard = new Guard(() => cluster.isOpen, connectTimeout, queryTimeout);
  /** operations under way per connection: a replaced one is closed once none is left (closing clears its slot table) */
  const users = new Map<Cluster, { n: number; idle?: () => void }>();
  const using = async <T>(use: (c: Cluster) => Promise<T>): Promise<T> => {
    const c = cluster;
    const u = users.get(c) ?? { n: 0 };
    users.set(c, u);
    u.n++;
    try {
      return await use(c);
    } finally {
      if (--u.n === 0) {
        users.delete(c);
        u.idle?.();
      }
    }
  };
  const retire = async (old: Cluster) => {
    const u = users.get(old);
    // (or until their callers have timed out anyway)
    if (u) await Promise.race([new Promise<void>((r) => (u.idle = r)), sleep(queryTimeout)]);
    await shut(old);
  };
  const refresh = singleFlight(async () => {
    const next = await connect();
    const old = cluster;
    cluster = next;
    guard.reset(); // the old connection's overdue replies no longer hold new operations back
    void retire(old);
  });

  const listeners = new Map<string, (msg: string) => void>();
  let sub: Cluster | undefined;
  /** a fresh subscriber with every listener; retried until it stands while the link is open */
  const resubscribe = singleFlight(async () => {
    const next = await connect(true);
    // its one node may be the dead master the seeds still name: bounded like a connect
    const subscribed = (async () => {
      for (const [channel, fn] of listeners) await next.subscribe(channel, fn);
    })();
    await within(subscribed, connectTimeout, () => {
      next.destroy();
      return new RootNodesUnavailableError();
    });
    next.on('node-error', () => {
      if (sub === next) void resubscribe().catch(() => {});
    });
    const old = sub;
    sub = next;
    void shut(old);
  });

  /** one run at a time, at most every 200 ms; a failed run is retried in the background while the link is open */
  function singleFlight(fn: () => Promise<void>): () => Promise<void> {
    let running: Promise<void> | undefined;
    let lastAt = 0;
    const go = (): Promise<void> =>
      (running ??= (async () => {
        if (closed) return;
        await sleep(Math.max(0, lastAt + 200 - elapsed()));
        lastAt = elapsed();
        await fn();
      })().finally(() => (running = undefined)));
    const retry = () => {
      if (!closed) setTimeout(() => void go().catch(retry), 500).unref();
    };
    return () =>
      go().catch((e) => {
        retry();
        throw e;
      });
  }

  const run = <T>(send: (c: Commands) => Promise<T>) =>
    guard.run((signal) => using((c) => send(c.withCommandOptions({ abortSignal: signal }) as unknown as Commands)), refresh);
  return {
    cluster: true,
    run,
    script: (src, keys, args) => run((c) => evalScript(c, src, keys, args)),
    async ping(key) {
      await guard.run((signal) => using((c) => c.sendCommand(key, true, ['PING'], { abortSignal: signal })), refresh);
    },
    async subscribe(channel, listener) {
      listeners.set(channel, listener);
      if (!sub) await resubscribe();
      else await sub.subscribe(channel, listener);
    },
    async close() {
      closed = true;
      await Promise.all([shut(sub), shut(cluster), ...[...users.keys()].filter((c) => c !== cluster).map((c) => shut(c))]);
    },
  };
}
