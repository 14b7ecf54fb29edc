/**
 * Rate limits with rate-limiter-flexible: a one-minute window of `rate_limit` (the key's own, else
 * RATE_LIMIT_DEFAULT) units per key, of RATE_LIMIT_PUBLIC requests per client address on public routes, and of a peer's `rate_limit`
 * (else FEDERATION_PEER_RATE_LIMIT) requests per federation peer on proof routes. Embedded: counters in process memory. Redis: counters in Redis, so every
 * instance on one Redis (or Redis Cluster) spends the same budget. The store port hides its Redis link, so
 * this module keeps a small one of its own: with the store's guard, a Redis outage or a cluster failover
 * answers DB_CONNECT_FAILED / DB_QUERY_TIMEOUT here too, never a raw client error.
 */
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { redisTarget, type Config } from '../config.js';
import { AppError, isAppError } from '../errors.js';
import type { Principal } from '../identity/model.js';
import { openRedisLink } from '../store/redis-link.js';

const WINDOW_S = 60;
/** a peer's counter, apart from key ids and `addr:` ones */
const peerKey = (peerId: string) => `peer:${peerId}`;

export class RateLimits {
  /** limiters share their counters (one key prefix); the points a request may spend differ per key */
  private limiters = new Map<number, RateLimiterAbstract>();

  private constructor(
    private defaultLimit: number,
    private publicLimit: number,
    private make: (points: number) => RateLimiterAbstract,
    private closeClient: () => Promise<void>,
  ) {}

  static async open(config: Pick<Config, 'rateLimitDefault' | 'rateLimitPublic' | 'redisUrl' | 'redisClusterNodes' | 'redisPrefix' | 'dbConnectTimeoutMs' | 'dbQueryTimeoutMs'>): Promise<RateLimits> {
    const target = redisTarget(config);
    if (!target) return new RateLimits(config.rateLimitDefault, config.rateLimitPublic, (points) => new RateLimiterMemory({ points, duration: WINDOW_S }), async () => {});
    const link = await openRedisLink(target, { connectTimeoutMs: config.dbConnectTimeoutMs, queryTimeoutMs: config.dbQueryTimeoutMs });
    // the limiter spends points with one EVAL on its key (a hash-tag-free key: one slot per rate-limit key)
    const storeClient = { eval: (script: string, o: { keys: string[]; arguments: string[] }) => link.run((c) => c.eval(script, o)) };
    const keyPrefix = `${config.redisPrefix}:ratelimit`;
    return new RateLimits(
      config.rateLimitDefault,
      config.rateLimitPublic,
      // a Redis that refuses the limiter's write (maxmemory reached, or away) must not refuse reads that need no write:
      // meanwhile each instance counts in its own memory (rate-limiter-flexible's insurance limiter)
      (points) => new RateLimiterRedis({ storeClient, useRedisPackage: true, points, duration: WINDOW_S, keyPrefix, insuranceLimiter: new RateLimiterMemory({ points, duration: WINDOW_S }) }),
      () => link.close(),
    );
  }

  private limiter(points: number): RateLimiterAbstract {
    let l = this.limiters.get(points);
    if (!l) this.limiters.set(points, (l = this.make(points)));
    return l;
  }

  /**
   * Spends `units` of the principal's key budget (one per HTTP request or WebSocket op; a surface charges
   * the further calls of a batch and the signals of a batch emit); RATE_LIMIT_EXCEEDED when none is left.
   */
  async consume(p: Principal, units = 1): Promise<void> {
    const limit = p.key.rate_limit ?? this.defaultLimit;
    if (!limit) return;
    try {
      p.rate = await this.spend(p.key.id, limit, units, `This key may make ${limit} requests a minute`);
    } catch (e) {
      // a refused spend still counts: the answer's headers say nothing is left
      if (isAppError(e) && e.code === 'RATE_LIMIT_EXCEEDED') p.rate = { limit, remaining: 0, resetMs: Number(e.details?.retry_after_ms ?? 0) };
      throw e;
    }
  }

  /**
   * The principal's meter for the calls of one request: the request's own unit (spent at the door) pays
   * for its first call, every further unit is spent here.
   */
  meter(p: Principal): (units: number) => Promise<void> {
    let prepaid = 1;
    return async (units) => {
      const free = Math.min(prepaid, units);
      prepaid -= free;
      if (units > free) await this.consume(p, units - free);
    };
  }

  /** Spends one request of a client address on a public route; answers the RateLimit-* headers. */
  async consumeAddress(address: string): Promise<Record<string, string>> {
    if (!this.publicLimit) return {};
    return rateHeaders(await this.spend(`addr:${address}`, this.publicLimit, 1, `This address may make ${this.publicLimit} requests a minute to public routes`));
  }

  /**
   * Spends one request of a federation peer on a proof route (after its proof verified, so no forger spends a
   * peer's budget); `limit` is the peer's own or FEDERATION_PEER_RATE_LIMIT. Answers the RateLimit-* headers.
   */
  async consumePeer(peerId: string, limit: number): Promise<Record<string, string>> {
    if (!limit) return {};
    return rateHeaders(await this.spend(peerKey(peerId), limit, 1, `This peer may make ${limit} requests a minute`));
  }

  /** A peer's budget in the current window without spending any (GET /admin/peers); null when unlimited. */
  async peerRate(peerId: string, limit: number): Promise<{ limit: number; used: number; remaining: number; reset_ms: number } | null> {
    if (!limit) return null;
    // a spend of nothing reads the counter on both backends (the Redis limiter's own read wants a full client); over the limit it rejects with the counter
    const r = await this.limiter(limit).consume(peerKey(peerId), 0).catch((e: unknown) => {
      if (e instanceof RateLimiterRes) return e;
      throw e;
    });
    const used = Math.min(limit, r.consumedPoints);
    return { limit, used, remaining: limit - used, reset_ms: r.msBeforeNext };
  }

  private async spend(id: string, limit: number, units: number, refusal: string): Promise<NonNullable<Principal['rate']>> {
    try {
      const r = await this.limiter(limit).consume(id, units);
      return { limit, remaining: r.remainingPoints, resetMs: r.msBeforeNext };
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      const err = new AppError('RATE_LIMIT_EXCEEDED', refusal, { limit, retry_after_ms: e.msBeforeNext, ...(units > 1 ? { units } : {}) });
      err.headers = { 'retry-after': String(Math.max(1, Math.ceil(e.msBeforeNext / 1000))), ...rateHeaders({ limit, remaining: 0, resetMs: e.msBeforeNext }) };
      throw err;
    }
  }

  close(): Promise<void> {
    return this.closeClient();
  }
}

export const rateHeaders = (r: NonNullable<Principal['rate']>): Record<string, string> => ({
  'ratelimit-limit': String(r.limit),
  'ratelimit-remaining': String(r.remaining),
  'ratelimit-reset': String(Math.max(0, Math.ceil(r.resetMs / 1000))),
});
