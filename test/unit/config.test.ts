import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ConfigError, readConfig } from '../../src/config.js';
import { childEnv } from '../helpers/server.js';

describe('config', () => {
  it('has the documented defaults', () => {
    const c = readConfig({});
    expect(c).toMatchObject({ port: 3000, host: '0.0.0.0', baseUrl: 'http://localhost:3000', redisUrl: undefined, taskLeaseMs: 300_000, maxDeliveryAttempts: 5, logLevel: 'info', bodyLimitBytes: 1_048_576, strictSignalTypes: false });
    expect(c.dataDir.endsWith('/data')).toBe(true);
    expect(Object.isFrozen(c)).toBe(true);
    expect(c).toMatchObject({ siweNonceTtlMs: 300_000, siweSessionTtlMs: 86_400_000, authRequestEnabled: false, rateLimitDefault: 600, registryRpcUrl: undefined, registryAddress: undefined, registryTimeoutMs: 5000 });
  });

  it('reads the identity settings', () => {
    const registryAddress = '0x000000000000000000000000000000000000dEaD';
    const c = readConfig({ SIWE_NONCE_TTL_MS: '100', SIWE_SESSION_TTL_MS: '2000', AUTH_REQUEST_ENABLED: 'true', RATE_LIMIT_DEFAULT: '0', REGISTRY_RPC_URL: 'http://chain:8545', REGISTRY_ADDRESS: registryAddress, REGISTRY_TIMEOUT_MS: '50' });
    expect(c).toMatchObject({ siweNonceTtlMs: 100, siweSessionTtlMs: 2000, authRequestEnabled: true, rateLimitDefault: 0, registryRpcUrl: 'http://chain:8545', registryAddress, registryTimeoutMs: 50 });
  });

  it('reads every variable', () => {
    const c = readConfig({ PORT: '8080', HOST: '127.0.0.1', BASE_URL: 'https://hub.example/', DATA_DIR: '/tmp/x', REDIS_URL: 'redis://h:1', TASK_LEASE_MS: '1000', MAX_DELIVERY_ATTEMPTS: '2', LOG_LEVEL: 'warn', STRICT_SIGNAL_TYPES: 'true' });
    expect(c).toMatchObject({ port: 8080, host: '127.0.0.1', baseUrl: 'https://hub.example', dataDir: '/tmp/x', redisUrl: 'redis://h:1', taskLeaseMs: 1000, maxDeliveryAttempts: 2, logLevel: 'warn', strictSignalTypes: true });
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['TASK_LEASE_MS', '0'],
    ['TASK_LEASE_MS', '1.5'],
    ['MAX_DELIVERY_ATTEMPTS', '-1'],
    ['LOG_LEVEL', 'loud'],
    ['REDIS_URL', 'http://nope'],
    ['BASE_URL', 'not a url'],
    ['STRICT_SIGNAL_TYPES', 'maybe'],
    ['BODY_LIMIT_BYTES', 'big'],
    ['SIWE_NONCE_TTL_MS', '0'],
    ['SIWE_SESSION_TTL_MS', 'day'],
    ['AUTH_REQUEST_ENABLED', 'yes'],
    ['RATE_LIMIT_DEFAULT', '-1'],
    ['REGISTRY_RPC_URL', 'ftp://chain'],
    ['REGISTRY_RPC_URL', 'http://chain:8545'],
    ['REGISTRY_ADDRESS', '0x1234'],
  ])('refuses %s=%s naming the variable', (name, value) => {
    expect(() => readConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => readConfig({ [name]: value })).toThrow(new RegExp(`^${name} `));
  });

  it('a bad value stops `npm start` with one line naming the variable', async () => {
    const run = promisify(execFile);
    const err = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: childEnv({ PORT: 'abc' }) }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr.trim().split('\n')).toEqual(['config error: PORT must be an integer from 0 to 65535, got "abc"']);
  });
});
