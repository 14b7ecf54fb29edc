/**
 * Per-key rate limits with rate-limiter-flexible: a one-minute window of `rate_limit` (the key's own, else
 * RATE_LIMIT_DEFAULT) requests. Embedded: counters in process memory. Redis: counters in Redis, so every
 * instance on one Redis spends the same budget. The store port hides its Redis client, so this module
 * keeps a small client of its own.
 */
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { createClient } from 'redis';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Principal } from '../identity/model.js';

const WINDOW_S = 60;

export class RateLimits {
  /** limiters share their counters (one key prefix); the points a request may spend differ per key */
  private limiters = new Map<number, RateLimiterAbstract>();

  private constructor(
    private defaultLimit: number,
    private make: (points: number) => RateLimiterAbstract,
    private closeClient: () => Promise<void>,
  ) {}

  static async open(config: Pick<Config, 'rateLimitDefault' | 'redisUrl' | 'redisPrefix'>): Promise<RateLimits> {
    if (!config.redisUrl) return new RateLimits(config.rateLimitDefault, (points) => new RateLimiterMemory({ points, duration: WINDOW_S }), async () => {});
    const client = createClient({ url: config.redisUrl, socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 2000) } });
    client.on('error', () => {}); // reconnects by itself; the store's health check reports reachability
    await client.connect();
    const keyPrefix = `${config.redisPrefix}:ratelimit`;
    return new RateLimits(
      config.rateLimitDefault,
      (points) => new RateLimiterRedis({ storeClient: client, useRedisPackage: true, points, duration: WINDOW_S, keyPrefix }),
      async () => {
        await Promise.race([client.close().catch(() => {}), new Promise((r) => setTimeout(r, 1000).unref())]);
      },
    );
  }

  private limiter(points: number): RateLimiterAbstract {
    let l = this.limiters.get(points);
    if (!l) this.limiters.set(points, (l = this.make(points)));
    return l;
  }

  /** Spends one request of the principal's key (HTTP request or WebSocket op); RATE_LIMIT_EXCEEDED when none is left. */
  async consume(p: Principal): Promise<void> {
    const limit = p.key.rate_limit ?? this.defaultLimit;
    if (!limit) return;
    try {
      const r = await this.limiter(limit).consume(p.key.id);
      p.rate = { limit, remaining: r.remainingPoints, resetMs: r.msBeforeNext };
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      const err = new AppError('RATE_LIMIT_EXCEEDED', `This key may make ${limit} requests a minute`, { limit, retry_after_ms: e.msBeforeNext });
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
