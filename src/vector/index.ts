/** Picks the vector index at startup: RediSearch when the store is Redis and the module is loaded, else in-process HNSW. */
import type { Config } from '../config.js';
import { openEmbeddedVectorIndex } from './embedded.js';
import { hasSearchModule, openRedisVectorIndex } from './redis.js';
import type { VectorIndex } from './port.js';

export async function openVectorIndex(config: Pick<Config, 'redisUrl' | 'redisPrefix' | 'embedding'>): Promise<VectorIndex> {
  const dim = config.embedding.dim;
  if (!config.redisUrl) return openEmbeddedVectorIndex(dim);
  if (await hasSearchModule(config.redisUrl)) return openRedisVectorIndex({ url: config.redisUrl, prefix: config.redisPrefix, dim });
  return openEmbeddedVectorIndex(dim, 'Redis has no search module (RediSearch): in-process index, rebuilt from the store at startup; not shared between instances');
}
export type { VectorIndex, VectorDoc, VectorFilter, Hit } from './port.js';
