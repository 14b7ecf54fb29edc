import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, tempDir, type RedisServer } from '../helpers/redis.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * A service process started as `startService` starts it, with V8's natives syntax on so it can ask whether each
 * builtin prototype has fast properties, after start-up and after it has answered requests. A prototype left in
 * dictionary mode makes every method call on its primitives slow (`src/prototypes.ts`): `@redis/client`, which
 * every build loads, leaves `String.prototype` so.
 */
function dictionaryPrototypes(env: Record<string, string>): Promise<{ afterStart: string[]; afterRequests: string[] }> {
  const script = `
    import { readConfig } from './src/config.ts';
    import { startService } from './src/app.ts';
    import { createLogger } from './src/log.ts';
    import { bootstrap } from './test/helpers/client.ts';
    const fast = new Function('o', 'return %HasFastProperties(o)');
    const builtins = [Object, Function, Array, String, Number, Boolean, Symbol, BigInt, Date, RegExp, Error, Map, Set, WeakMap, Promise, ArrayBuffer, DataView, Uint8Array, Object.getPrototypeOf(Uint8Array)];
    const slow = () => builtins.filter((C) => !fast(C.prototype)).map((C) => C.name);
    const config = readConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...JSON.parse(process.env.PROTO_ENV) });
    const svc = await startService(config, createLogger('silent'));
    const afterStart = slow();
    const base = 'http://127.0.0.1:' + svc.port;
    const root = await bootstrap(base);
    const emitted = await root.client.post('/emit', { signal_type: 'task', content: 'x' });
    if (emitted.status !== 201) throw new Error('emit answered ' + emitted.status);
    await (await fetch(base + '/health')).text();
    console.log(JSON.stringify({ afterStart, afterRequests: slow() }));
    await svc.close();
    process.exit(0);
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, PROTO_ENV: JSON.stringify(env) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`exit ${code}: ${err}`))));
  });
}

describe('builtin prototypes in a running service', () => {
  let redis: RedisServer;
  let dir: string;
  beforeAll(async () => {
    [redis, dir] = await Promise.all([startRedis(), tempDir('prototypes')]);
  });
  afterAll(async () => {
    await Promise.all([redis?.stop(), dir && rm(dir, { recursive: true, force: true })]);
  });

  it.each([
    ['embedded', () => ({ DATA_DIR: `${dir}/embedded` })],
    ['redis', () => ({ DATA_DIR: `${dir}/redis`, REDIS_URL: redis.url, REDIS_PREFIX: 'proto' })],
  ])('none is left in dictionary mode (%s)', async (_backend, env) => {
    expect(await dictionaryPrototypes(env())).toEqual({ afterStart: [], afterRequests: [] });
  }, 60_000);
});
