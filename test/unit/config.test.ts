import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { configReport, ConfigError, readConfig, SETTING_NAMES } from '../../src/config.js';
import { childEnv } from '../helpers/server.js';

describe('config', () => {
  it('reports every variable the reader reads, with its source, secrets masked', () => {
    const src = readFileSync(new URL('../../src/config.ts', import.meta.url), 'utf8').split('interface Setting {')[0];
    const read = new Set([...src.matchAll(/(?:int|bool)\(env, '([A-Z0-9_]+)'|env\.([A-Z0-9_]+)|need\('([A-Z0-9_]+)'\)/g)].map((m) => m[1] ?? m[2] ?? m[3]));
    expect([...read].sort()).toEqual([...SETTING_NAMES].sort());
    const r = configReport(readConfig({ PORT: '8080', REDIS_URL: 'redis://user:pw@h:1', S3_ENDPOINT: 'http://minio:9000', S3_ACCESS_KEY: 'ak', S3_SECRET_KEY: 'sk' }));
    const row = (n: string) => r.find((x) => x.name === n);
    expect(row('PORT')).toEqual({ name: 'PORT', value: 8080, source: 'env', secret: false });
    expect(row('HOST')).toEqual({ name: 'HOST', value: '0.0.0.0', source: 'default', secret: false });
    expect(row('REDIS_URL')).toMatchObject({ value: 'redis://********:********@h:1', source: 'env', secret: true });
    expect(row('S3_SECRET_KEY')).toMatchObject({ value: '********', source: 'env' });
    expect(row('S3_BUCKET')).toMatchObject({ value: 'svc-blobs', source: 'default' });
    expect(JSON.stringify(r)).not.toMatch(/pw|"sk"|"ak"/);
  });

  it('has the documented defaults', () => {
    const c = readConfig({});
    expect(c).toMatchObject({ port: 3000, host: '0.0.0.0', baseUrl: 'http://localhost:3000', redisUrl: undefined, taskLeaseMs: 300_000, maxDeliveryAttempts: 5, logLevel: 'info', bodyLimitBytes: 1_048_576, strictSignalTypes: false, dbConnectTimeoutMs: 2000, dbQueryTimeoutMs: 5000 });
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
    const c = readConfig({ PORT: '8080', HOST: '127.0.0.1', BASE_URL: 'https://hub.example/', DATA_DIR: '/tmp/x', REDIS_URL: 'redis://h:1', TASK_LEASE_MS: '1000', MAX_DELIVERY_ATTEMPTS: '2', LOG_LEVEL: 'warn', STRICT_SIGNAL_TYPES: 'true', DB_CONNECT_TIMEOUT_MS: '750', DB_QUERY_TIMEOUT_MS: '1500' });
    expect(c).toMatchObject({ port: 8080, host: '127.0.0.1', baseUrl: 'https://hub.example', dataDir: '/tmp/x', redisUrl: 'redis://h:1', taskLeaseMs: 1000, maxDeliveryAttempts: 2, logLevel: 'warn', strictSignalTypes: true, dbConnectTimeoutMs: 750, dbQueryTimeoutMs: 1500 });
  });

  it('ALLOWED_ORIGINS: a comma list of origins, kept in their serialized form', () => {
    expect(readConfig({}).allowedOrigins).toEqual([]);
    expect(readConfig({ ALLOWED_ORIGINS: 'https://a.example, http://b.example:8080/,HTTP://C.example' }).allowedOrigins).toEqual(['https://a.example', 'http://b.example:8080', 'http://c.example']);
    for (const bad of ['a.example', 'https://a.example/path', 'ftp://a.example', 'null', '*']) expect(() => readConfig({ ALLOWED_ORIGINS: bad })).toThrow(/^ALLOWED_ORIGINS must be a comma list of origins/);
  });

  it('Redis Cluster: REDIS_CLUSTER_NODES is a comma list of host:port seeds, exclusive with REDIS_URL', () => {
    expect(readConfig({}).redisClusterNodes).toBeUndefined();
    expect(readConfig({ REDIS_CLUSTER_NODES: 'r1:7000, r2:7001,10.0.0.3:7002' }).redisClusterNodes).toEqual(['r1:7000', 'r2:7001', '10.0.0.3:7002']);
    expect(configReport(readConfig({ REDIS_CLUSTER_NODES: 'r1:7000,r2:7001' })).find((s) => s.name === 'REDIS_CLUSTER_NODES')).toMatchObject({ value: 'r1:7000,r2:7001', source: 'env' });
    for (const bad of ['r1', 'r1:', 'redis://r1:7000', 'r1:70000', ',']) expect(() => readConfig({ REDIS_CLUSTER_NODES: bad })).toThrow(/^REDIS_CLUSTER_NODES must be a comma list of host:port/);
    expect(() => readConfig({ REDIS_CLUSTER_NODES: 'r1:7000', REDIS_URL: 'redis://h:1' })).toThrow(/^REDIS_URL and REDIS_CLUSTER_NODES are exclusive/);
  });

  it('blobs: files under DATA_DIR unless S3_ENDPOINT is set; then S3 with its settings', () => {
    expect(readConfig({})).toMatchObject({ maxUploadBytes: 100 * 1024 * 1024, s3: undefined });
    expect(readConfig({ MAX_UPLOAD_BYTES: '2048' }).maxUploadBytes).toBe(2048);
    const s3 = { S3_ENDPOINT: 'http://minio:9000', S3_ACCESS_KEY: 'ak', S3_SECRET_KEY: 'sk' };
    expect(readConfig(s3).s3).toEqual({ endpoint: 'http://minio:9000', accessKey: 'ak', secretKey: 'sk', bucket: 'svc-blobs', region: 'us-east-1', useSSL: false });
    expect(readConfig({ ...s3, S3_BUCKET: 'team-files', S3_REGION: 'eu-west-1', S3_USE_SSL: 'true' }).s3).toMatchObject({ bucket: 'team-files', region: 'eu-west-1', useSSL: true });
    expect(() => readConfig({ S3_ENDPOINT: 'http://minio:9000', S3_ACCESS_KEY: 'ak' })).toThrow(/^S3_SECRET_KEY is required/);
    expect(() => readConfig({ S3_ENDPOINT: 'http://minio:9000', S3_SECRET_KEY: 'sk' })).toThrow(/^S3_ACCESS_KEY is required/);
    expect(() => readConfig({ ...s3, S3_BUCKET: 'Bad_Bucket' })).toThrow(/^S3_BUCKET must be a valid bucket name/);
    expect(() => readConfig({ ...s3, S3_USE_SSL: 'yes' })).toThrow(/^S3_USE_SSL must be true or false/);
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
    ['DB_CONNECT_TIMEOUT_MS', '0'],
    ['DB_CONNECT_TIMEOUT_MS', 'soon'],
    ['DB_QUERY_TIMEOUT_MS', '-5'],
    ['DB_QUERY_TIMEOUT_MS', '2.5'],
    ['DB_QUERY_TIMEOUT_MS', '600001'],
    ['MAX_UPLOAD_BYTES', '0'],
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

  it('workspace deletion: page size, answer wait and sweep lease, with their defaults and bounds', () => {
    expect(readConfig({}).workspaceDelete).toEqual({ pageSize: 1000, waitMs: 10_000, leaseMs: 15_000 });
    expect(readConfig({ WORKSPACE_DELETE_PAGE_SIZE: '5', WORKSPACE_DELETE_WAIT_MS: '0', WORKSPACE_DELETE_LEASE_MS: '1000' }).workspaceDelete).toEqual({ pageSize: 5, waitMs: 0, leaseMs: 1000 });
    expect(() => readConfig({ WORKSPACE_DELETE_PAGE_SIZE: '0' })).toThrow(ConfigError);
    expect(() => readConfig({ WORKSPACE_DELETE_PAGE_SIZE: '10001' })).toThrow(ConfigError);
  });

  it('a bad value stops `npm start` with one line naming the variable', async () => {
    const run = promisify(execFile);
    const err = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: childEnv({ PORT: 'abc' }) }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(err.stderr.trim().split('\n')).toEqual(['config error: PORT must be an integer from 0 to 65535, got "abc"']);
  });
});
