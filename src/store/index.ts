import { redisTarget, type Config } from '../config.js';
import { openEmbeddedStore } from './embedded.js';
import { openRedisStore } from './redis.js';
import type { Store } from './port.js';

export async function openStore(config: Pick<Config, 'redisUrl' | 'redisClusterNodes' | 'redisPrefix' | 'dataDir' | 'dbConnectTimeoutMs' | 'dbQueryTimeoutMs'>): Promise<Store> {
  const target = redisTarget(config);
  return target
    ? openRedisStore({ target, prefix: config.redisPrefix, connectTimeoutMs: config.dbConnectTimeoutMs, queryTimeoutMs: config.dbQueryTimeoutMs })
    : openEmbeddedStore(config.dataDir);
}
export type { Store, Op, Versioned } from './port.js';
