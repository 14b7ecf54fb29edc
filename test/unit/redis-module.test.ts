/**
 * The RediSearch module the Redis memory tests load lives in the repository (vendor/redis-modules) and is
 * loaded only when its sha256 matches the one SHA256SUMS records: the real file passes and loads into a
 * private redis-server; a changed copy is refused before any server starts.
 */
import { copyFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createClient } from 'redis';
import { REDISEARCH_MODULE, startRedis, tempDir, verifyModule } from '../helpers/redis.js';

describe('the vendored RediSearch module', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('lives inside the repository and loads into redis-server after its checksum is checked', async () => {
    expect(REDISEARCH_MODULE).toMatch(/\/vendor\/redis-modules\/redisearch\.so$/);
    await verifyModule(REDISEARCH_MODULE);
    const redis = await startRedis({ args: ['--loadmodule', REDISEARCH_MODULE] });
    const c = createClient({ url: redis.url });
    try {
      await c.connect();
      const modules = JSON.stringify(await c.sendCommand(['MODULE', 'LIST']));
      expect(modules).toContain('"search"');
    } finally {
      await c.quit().catch(() => undefined);
      await redis.stop();
    }
  });

  it('refuses a module whose bytes differ from its SHA256SUMS line, before starting any server', async () => {
    const dir = await tempDir('module-sum');
    dirs.push(dir);
    const copy = join(dir, 'redisearch.so');
    await copyFile(REDISEARCH_MODULE, copy);
    await writeFile(join(dir, 'SHA256SUMS'), `${'0'.repeat(64)}  redisearch.so\n`);
    await expect(startRedis({ args: ['--loadmodule', copy] })).rejects.toThrow(/sha256 f330552b[0-9a-f]+, SHA256SUMS records 0{64}/);
  });

  it('refuses a module with no SHA256SUMS line', async () => {
    const dir = await tempDir('module-nosum');
    dirs.push(dir);
    const copy = join(dir, 'other.so');
    await copyFile(REDISEARCH_MODULE, copy);
    await writeFile(join(dir, 'SHA256SUMS'), `${'0'.repeat(64)}  redisearch.so\n`);
    await expect(verifyModule(copy)).rejects.toThrow(/no line for it in SHA256SUMS/);
  });
});
