/** The memory and embedding settings of the one config reader: defaults, every variable, refusals naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, readConfig } from '../../src/config.js';

describe('memory config', () => {
  it('has the documented defaults', () => {
    const c = readConfig({});
    expect(c.embedding).toEqual({ provider: 'hash', dim: 384, url: undefined, model: 'text-embedding-3-small', apiKey: undefined, timeoutMs: 10_000, batch: 64 });
    expect(c.memoryNamespaceQuota).toBe(10_000);
    expect(c.memoryExpirySweepMs).toBe(1000);
  });

  it('reads every variable', () => {
    const c = readConfig({ EMBEDDING_PROVIDER: 'openai', EMBEDDING_DIM: '1536', EMBEDDING_URL: 'http://localhost:11434/', EMBEDDING_MODEL: 'nomic', EMBEDDING_API_KEY: 'k', EMBEDDING_TIMEOUT_MS: '500', EMBEDDING_BATCH: '8', MEMORY_NAMESPACE_QUOTA: '5', MEMORY_EXPIRY_SWEEP_MS: '60000' });
    expect(c.embedding).toEqual({ provider: 'openai', dim: 1536, url: 'http://localhost:11434', model: 'nomic', apiKey: 'k', timeoutMs: 500, batch: 8 });
    expect(c.memoryNamespaceQuota).toBe(5);
    expect(c.memoryExpirySweepMs).toBe(60_000);
  });

  it.each([
    [{ EMBEDDING_PROVIDER: 'magic' }, 'EMBEDDING_PROVIDER'],
    [{ EMBEDDING_PROVIDER: 'openai' }, 'EMBEDDING_URL'],
    [{ EMBEDDING_URL: 'ftp://x' }, 'EMBEDDING_URL'],
    [{ EMBEDDING_DIM: '1' }, 'EMBEDDING_DIM'],
    [{ EMBEDDING_TIMEOUT_MS: '0' }, 'EMBEDDING_TIMEOUT_MS'],
    [{ EMBEDDING_BATCH: 'many' }, 'EMBEDDING_BATCH'],
    [{ MEMORY_NAMESPACE_QUOTA: '0' }, 'MEMORY_NAMESPACE_QUOTA'],
    [{ MEMORY_EXPIRY_SWEEP_MS: '0' }, 'MEMORY_EXPIRY_SWEEP_MS'],
  ])('refuses %o naming %s', (env, name) => {
    expect(() => readConfig(env)).toThrow(ConfigError);
    expect(() => readConfig(env)).toThrow(new RegExp(`^${name} `));
  });
});
