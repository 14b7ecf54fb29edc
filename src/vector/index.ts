/**
 * Picks the vector index at startup: RediSearch when the store is one Redis with the module loaded, else
 * in-process HNSW. On a Redis Cluster the index is in-process too: open-source RediSearch indexes one node's
 * keys only and has no cluster coordinator, so a cluster index is not relied upon (docs/decisions.md).
 */
import type { Config } from '../config.js';
import { openEmbeddedVectorIndex } from './embedded.js';
import { hasSearchModule, openRedisVectorIndex } from './redis.js';
import type { VectorIndex } from './port.js';

const IN_PROCESS = 'in-process index, rebuilt from the store at startup; not shared between instances';

export async function openVectorIndex(config: Pick<Config, 'redisUrl' | 'redisClusterNodes' | 'redisPrefix' | 'embedding'>): Promise<VectorIndex> {
  const dim = config.embedding.dim;
  if (config.redisClusterNodes) return openEmbeddedVectorIndex(dim, `Redis Cluster: ${IN_PROCESS}`);
  if (!config.redisUrl) return openEmbeddedVectorIndex(dim);
  if (await hasSearchModule(config.redisUrl)) return openRedisVectorIndex({ url: config.redisUrl, prefix: config.redisPrefix, dim });
  return openEmbeddedVectorIndex(dim, `Redis has no search module (RediSearch): ${IN_PROCESS}`);
}
export type { VectorIndex, VectorDoc, VectorFilter, Hit } from './port.js';
