/** The one config reader: environment read once, validated, frozen. A bad value stops startup naming the variable. */
import { isIP } from 'node:net';
import { resolve } from 'node:path';

export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  /** BASE_URL was not set: it follows the port actually bound (PORT=0 picks one) */
  baseUrlDefaulted: boolean;
  /** browser origins allowed besides BASE_URL's own (serialized origins: scheme://host[:port]) */
  allowedOrigins: readonly string[];
  dataDir: string;
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes (host:port); exclusive with redisUrl */
  redisClusterNodes: string[] | undefined;
  redisPrefix: string;
  /** Redis: how long an operation waits for a lost connection to come back before answering DB_CONNECT_FAILED */
  dbConnectTimeoutMs: number;
  /** Redis: how long an operation waits for Redis's reply before answering DB_QUERY_TIMEOUT */
  dbQueryTimeoutMs: number;
  taskLeaseMs: number;
  maxDeliveryAttempts: number;
  /** a task's back-off after its first failed attempt, doubling with each (0: retried at once) */
  taskRetryBackoffMs: number;
  /** the longest back-off a task waits */
  taskRetryBackoffMaxMs: number;
  logLevel: string;
  bodyLimitBytes: number;
  timerPollMs: number;
  /** the longest ttl_s a reservation may ask for */
  reservationMaxTtlS: number;
  /** how long an Idempotency-Key (or a reservation's idempotency_key) is remembered */
  idempotencyTtlMs: number;
  /** how long a running request holds its Idempotency-Key without renewing it (a crashed attempt's key frees after it) */
  idempotencyLeaseMs: number;
  strictSignalTypes: boolean;
  pushMaxBufferBytes: number;
  pushDrainTimeoutMs: number;
  sseHeartbeatMs: number;
  /** presence's beat: an identity's last_seen and a key's last use are written at most this often per process */
  presenceTouchMs: number;
  wsIdleTimeoutS: number;
  /** WebSockets and SSE streams one client address may hold open at once */
  maxConnectionsPerAddress: number;
  journalRetainEntries: number;
  /** when set, GET /metrics wants `Authorization: Bearer <METRICS_TOKEN>` */
  metricsToken: string | undefined;
  maxUploadBytes: number;
  /** set when S3_ENDPOINT is: blobs go to S3 (or MinIO) instead of DATA_DIR/blobs */
  s3: S3Config | undefined;
  /** webhooks: how long a delivery keeps retrying before it is `failed` */
  webhookRetryWindowMs: number;
  /** webhooks: the first retry's delay; each further retry doubles it (up to an hour) */
  webhookBackoffBaseMs: number;
  /** webhooks: one attempt's time limit */
  webhookTimeoutMs: number;
  /** webhooks: attempts in flight per process */
  webhookMaxInFlight: number;
  /** webhooks may target private, loopback and link-local addresses (tests, closed networks) */
  allowPrivateNetwork: boolean;
  /** federation: how long a call to a peer (deliver, ack, cancel) keeps retrying before FED_DELIVERY_FAILED */
  federationRetryWindowMs: number;
  /** federation: the first retry's delay; each further retry doubles it (up to an hour) */
  federationBackoffBaseMs: number;
  /** federation: one call's time limit (also the forwarded claim's) */
  federationTimeoutMs: number;
  /** federation: background calls in flight per process */
  federationMaxInFlight: number;
  /** federation: requests a minute one peer may make to the proof routes when its record names none; 0 = no limit */
  federationPeerRateLimit: number;
  /** federation: bytes of signal copies one peer may store here when its record names none; 0 = no limit */
  federationPeerStorageQuotaBytes: number;
  /** the settings whose value came from the environment (GET /admin/config says env or default) */
  fromEnv: readonly string[];
  siweNonceTtlMs: number;
  siweSessionTtlMs: number;
  authRequestEnabled: boolean;
  /** requests per minute per key when the key names none; 0 = no limit */
  rateLimitDefault: number;
  /** requests per minute per client address to the public routes (keyless calls); 0 = no limit */
  rateLimitPublic: number;
  /** proxies whose X-Forwarded-For names the client (IP addresses); empty: the socket's peer is the client */
  trustedProxies: readonly string[];
  registryRpcUrl: string | undefined;
  registryAddress: `0x${string}` | undefined;
  registryTimeoutMs: number;
  embedding: EmbeddingConfig;
  memoryNamespaceQuota: number;
  /** how often the expiry sweeper purges memories whose expires_at passed (reads hide them meanwhile) */
  memoryExpirySweepMs: number;
  /** how often the blob sweep removes content no committed record names (0: never; docs/storage.md) */
  blobSweepMs: number;
  /** how old such content must be before the sweep removes it: longer than any upload takes to commit */
  blobSweepGraceMs: number;
  /** how long a memory job's worker holds it between batches before another may take it */
  memoryJobLeaseMs: number;
  workspaceDelete: WorkspaceDeleteConfig;
}

export interface WorkspaceDeleteConfig {
  /** children deleted per commit */
  pageSize: number;
  /** how long DELETE waits for a folder's deletion before answering 202 with its progress */
  waitMs: number;
  /** how long a running deletion's sweep holds it between pages before another instance may take it over */
  leaseMs: number;
}

export interface S3Config {
  endpoint: string;
  accessKey: string;
  secretKey: string;
  bucket: string;
  region: string;
  useSSL: boolean;
}

export interface EmbeddingConfig {
  provider: 'hash' | 'openai' | 'none';
  dim: number;
  url: string | undefined;
  model: string;
  apiKey: string | undefined;
  timeoutMs: number;
  batch: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function s3Config(env: Env): S3Config | undefined {
  const endpoint = env.S3_ENDPOINT || undefined;
  if (!endpoint) return undefined;
  const need = (name: string): string => {
    const v = env[name];
    if (!v) throw new ConfigError(`${name} is required when S3_ENDPOINT is set`);
    return v;
  };
  const bucket = env.S3_BUCKET || 'svc-blobs';
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw new ConfigError(`S3_BUCKET must be a valid bucket name, got "${bucket}"`);
  return { endpoint, accessKey: need('S3_ACCESS_KEY'), secretKey: need('S3_SECRET_KEY'), bucket, region: env.S3_REGION || 'us-east-1', useSSL: bool(env, 'S3_USE_SSL', false) };
}

function origins(env: Env): readonly string[] {
  const raw = env.ALLOWED_ORIGINS;
  if (!raw) return Object.freeze([]);
  return Object.freeze(
    raw.split(',').map((s) => s.trim()).filter(Boolean).map((o) => {
      let u: URL | undefined;
      try {
        u = new URL(o);
      } catch {
        u = undefined;
      }
      const bare = u && u.pathname === '/' && !u.search && !u.hash && !u.username;
      if (!u || !bare || (u.protocol !== 'http:' && u.protocol !== 'https:')) throw new ConfigError(`ALLOWED_ORIGINS must be a comma list of origins (http(s)://host[:port], no path), got "${o}"`);
      return u.origin;
    }),
  );
}

function ipList(name: string, raw: string | undefined): readonly string[] {
  const list = (raw ?? '').split(',').map((x) => x.trim()).filter(Boolean);
  const bad = list.find((x) => !isIP(x.replace(/^\[(.*)\]$/, '$1')));
  if (bad !== undefined) throw new ConfigError(`${name} must be a comma list of IP addresses, got "${bad}"`);
  return Object.freeze(list);
}

function clusterNodes(env: Env): string[] | undefined {
  const raw = env.REDIS_CLUSTER_NODES;
  if (!raw) return undefined;
  const nodes = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = nodes.find((n) => !/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9A-Fa-f:]+\]:\d{1,5}$/.test(n) || Number(n.slice(n.lastIndexOf(':') + 1)) > 65535);
  if (!nodes.length || bad !== undefined) throw new ConfigError(`REDIS_CLUSTER_NODES must be a comma list of host:port, got "${raw}"`);
  return Object.freeze(nodes) as string[];
}

/** Where the Redis backend is, if any: one server, or a cluster's seed nodes. */
export function redisTarget(c: Pick<Config, 'redisUrl' | 'redisClusterNodes'>): { url: string } | { clusterNodes: string[] } | undefined {
  if (c.redisClusterNodes) return { clusterNodes: c.redisClusterNodes };
  return c.redisUrl ? { url: c.redisUrl } : undefined;
}

/** the longest back-off a task's retry may be given (one day), by config or per task */
export const RETRY_BACKOFF_LIMIT_MS = 86_400_000;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function readConfig(env: Env = process.env): Readonly<Config> {
  const port = int(env, 'PORT', 3000, 0, 65535);
  const host = env.HOST || '0.0.0.0';
  const baseUrl = (env.BASE_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  try {
    new URL(baseUrl);
  } catch {
    throw new ConfigError(`BASE_URL must be an absolute URL, got "${env.BASE_URL}"`);
  }
  const redisUrl = env.REDIS_URL || undefined;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) throw new ConfigError(`REDIS_URL must start with redis:// or rediss://, got "${redisUrl}"`);
  const redisClusterNodes = clusterNodes(env);
  if (redisUrl && redisClusterNodes) throw new ConfigError('REDIS_URL and REDIS_CLUSTER_NODES are exclusive: set one (a single Redis, or the seed nodes of a Redis Cluster)');
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const redisPrefix = env.REDIS_PREFIX || 'svc';
  if (!/^[A-Za-z0-9_.-]+$/.test(redisPrefix)) throw new ConfigError(`REDIS_PREFIX must be letters, digits, _ . -, got "${redisPrefix}"`);
  const registryRpcUrl = env.REGISTRY_RPC_URL || undefined;
  if (registryRpcUrl && !/^(https?|wss?):\/\//.test(registryRpcUrl)) throw new ConfigError(`REGISTRY_RPC_URL must be an http(s) or ws(s) URL, got "${registryRpcUrl}"`);
  const registryAddress = env.REGISTRY_ADDRESS || undefined;
  if (registryAddress && !/^0x[0-9a-fA-F]{40}$/.test(registryAddress)) throw new ConfigError(`REGISTRY_ADDRESS must be a 0x-prefixed 20-byte hex address, got "${registryAddress}"`);
  if (!registryRpcUrl !== !registryAddress) throw new ConfigError('REGISTRY_RPC_URL and REGISTRY_ADDRESS must be set together');
  const provider = env.EMBEDDING_PROVIDER || 'hash';
  if (provider !== 'hash' && provider !== 'openai' && provider !== 'none') throw new ConfigError(`EMBEDDING_PROVIDER must be hash, openai or none, got "${provider}"`);
  const embeddingUrl = env.EMBEDDING_URL || undefined;
  if (embeddingUrl && !/^https?:\/\//.test(embeddingUrl)) throw new ConfigError(`EMBEDDING_URL must start with http:// or https://, got "${embeddingUrl}"`);
  if (provider === 'openai' && !embeddingUrl) throw new ConfigError('EMBEDDING_URL is required when EMBEDDING_PROVIDER is openai');
  const embedding: EmbeddingConfig = Object.freeze({
    provider,
    dim: int(env, 'EMBEDDING_DIM', 384, 2, 4096),
    url: embeddingUrl?.replace(/\/+$/, ''),
    model: env.EMBEDDING_MODEL || 'text-embedding-3-small',
    apiKey: env.EMBEDDING_API_KEY || undefined,
    timeoutMs: int(env, 'EMBEDDING_TIMEOUT_MS', 10_000, 1),
    batch: int(env, 'EMBEDDING_BATCH', 64, 1, 2048),
  });
  return Object.freeze({
    port,
    host,
    baseUrl,
    baseUrlDefaulted: !env.BASE_URL,
    allowedOrigins: origins(env),
    dataDir: resolve(env.DATA_DIR || './data'),
    redisUrl,
    redisClusterNodes,
    redisPrefix,
    dbConnectTimeoutMs: int(env, 'DB_CONNECT_TIMEOUT_MS', 2000, 1, 600_000),
    dbQueryTimeoutMs: int(env, 'DB_QUERY_TIMEOUT_MS', 5000, 1, 600_000),
    taskLeaseMs: int(env, 'TASK_LEASE_MS', 300_000, 1),
    maxDeliveryAttempts: int(env, 'MAX_DELIVERY_ATTEMPTS', 5, 1, 1000),
    taskRetryBackoffMs: int(env, 'TASK_RETRY_BACKOFF_MS', 0, 0, RETRY_BACKOFF_LIMIT_MS),
    taskRetryBackoffMaxMs: int(env, 'TASK_RETRY_BACKOFF_MAX_MS', 3_600_000, 0, RETRY_BACKOFF_LIMIT_MS),
    logLevel,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1),
    timerPollMs: int(env, 'TIMER_POLL_MS', 100, 5, 60_000),
    reservationMaxTtlS: int(env, 'RESERVATION_MAX_TTL_S', 86_400, 1, 30 * 86_400),
    idempotencyTtlMs: int(env, 'IDEMPOTENCY_TTL_MS', 86_400_000, 1000, 30 * 86_400_000),
    idempotencyLeaseMs: int(env, 'IDEMPOTENCY_LEASE_MS', 10_000, 300, 600_000),
    strictSignalTypes: bool(env, 'STRICT_SIGNAL_TYPES', false),
    // at most 256 MiB: uWS takes a socket's buffer limit as a 32-bit integer, with room for op answers above it
    pushMaxBufferBytes: int(env, 'PUSH_MAX_BUFFER_BYTES', 1024 * 1024, 1024, 256 * 1024 * 1024),
    pushDrainTimeoutMs: int(env, 'PUSH_DRAIN_TIMEOUT_MS', 30_000, 100, 600_000),
    sseHeartbeatMs: int(env, 'SSE_HEARTBEAT_MS', 15_000, 10),
    presenceTouchMs: int(env, 'PRESENCE_TOUCH_MS', 30_000, 10, 300_000),
    // uWebSockets.js pings an idle socket before this runs out and closes one that stays silent
    wsIdleTimeoutS: int(env, 'WS_IDLE_TIMEOUT_S', 60, 8, 960),
    maxConnectionsPerAddress: int(env, 'MAX_CONNECTIONS_PER_ADDRESS', 10_000, 1, 1_000_000),
    journalRetainEntries: int(env, 'JOURNAL_RETAIN_ENTRIES', 1_000_000, 10),
    metricsToken: env.METRICS_TOKEN || undefined,
    maxUploadBytes: int(env, 'MAX_UPLOAD_BYTES', 100 * 1024 * 1024, 1),
    s3: s3Config(env),
    webhookRetryWindowMs: int(env, 'WEBHOOK_RETRY_WINDOW_MS', 24 * 3600_000, 1000),
    webhookBackoffBaseMs: int(env, 'WEBHOOK_BACKOFF_BASE_MS', 1000, 10, 3600_000),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 600_000),
    webhookMaxInFlight: int(env, 'WEBHOOK_MAX_IN_FLIGHT', 16, 1, 1000),
    allowPrivateNetwork: bool(env, 'ALLOW_PRIVATE_NETWORK', false),
    federationRetryWindowMs: int(env, 'FEDERATION_RETRY_WINDOW_MS', 24 * 3600_000, 1000),
    federationBackoffBaseMs: int(env, 'FEDERATION_BACKOFF_BASE_MS', 1000, 10, 3600_000),
    federationTimeoutMs: int(env, 'FEDERATION_TIMEOUT_MS', 10_000, 100, 600_000),
    federationMaxInFlight: int(env, 'FEDERATION_MAX_IN_FLIGHT', 16, 1, 1000),
    federationPeerRateLimit: int(env, 'FEDERATION_PEER_RATE_LIMIT', 600, 0),
    federationPeerStorageQuotaBytes: int(env, 'FEDERATION_PEER_STORAGE_QUOTA_BYTES', 100 * 1024 * 1024, 0),
    fromEnv: Object.freeze(SETTINGS.map((x) => x.name).filter((n) => env[n] !== undefined && env[n] !== '')),
    siweNonceTtlMs: int(env, 'SIWE_NONCE_TTL_MS', 300_000, 1),
    siweSessionTtlMs: int(env, 'SIWE_SESSION_TTL_MS', 86_400_000, 1),
    authRequestEnabled: bool(env, 'AUTH_REQUEST_ENABLED', false),
    rateLimitDefault: int(env, 'RATE_LIMIT_DEFAULT', 600, 0),
    rateLimitPublic: int(env, 'RATE_LIMIT_PUBLIC', 60, 0),
    trustedProxies: ipList('TRUSTED_PROXIES', env.TRUSTED_PROXIES),
    registryRpcUrl,
    registryAddress: registryAddress as `0x${string}` | undefined,
    registryTimeoutMs: int(env, 'REGISTRY_TIMEOUT_MS', 5000, 1),
    embedding,
    memoryNamespaceQuota: int(env, 'MEMORY_NAMESPACE_QUOTA', 10_000, 1),
    memoryExpirySweepMs: int(env, 'MEMORY_EXPIRY_SWEEP_MS', 1000, 1),
    blobSweepMs: int(env, 'BLOB_SWEEP_MS', 3_600_000, 0),
    blobSweepGraceMs: int(env, 'BLOB_SWEEP_GRACE_MS', 3_600_000, 1),
    memoryJobLeaseMs: int(env, 'MEMORY_JOB_LEASE_MS', 15_000, 1),
    workspaceDelete: {
      pageSize: int(env, 'WORKSPACE_DELETE_PAGE_SIZE', 1000, 1, 10_000),
      waitMs: int(env, 'WORKSPACE_DELETE_WAIT_MS', 10_000, 0, 600_000),
      leaseMs: int(env, 'WORKSPACE_DELETE_LEASE_MS', 15_000, 100),
    },
  });
}

interface Setting {
  name: string;
  value(c: Config): unknown;
  secret?: boolean;
}

const s3 = (f: (s: S3Config) => unknown) => (c: Config) => (c.s3 ? f(c.s3) : null);

/** Every environment setting and where its value lives in Config; a unit test holds it to the names read above. */
const SETTINGS: Setting[] = [
  { name: 'PORT', value: (c) => c.port },
  { name: 'HOST', value: (c) => c.host },
  { name: 'BASE_URL', value: (c) => c.baseUrl },
  { name: 'ALLOWED_ORIGINS', value: (c) => c.allowedOrigins.join(',') || null },
  { name: 'DATA_DIR', value: (c) => c.dataDir },
  { name: 'REDIS_URL', value: (c) => c.redisUrl ?? null, secret: true },
  { name: 'REDIS_CLUSTER_NODES', value: (c) => c.redisClusterNodes?.join(',') ?? null },
  { name: 'REDIS_PREFIX', value: (c) => c.redisPrefix },
  { name: 'DB_CONNECT_TIMEOUT_MS', value: (c) => c.dbConnectTimeoutMs },
  { name: 'DB_QUERY_TIMEOUT_MS', value: (c) => c.dbQueryTimeoutMs },
  { name: 'TASK_LEASE_MS', value: (c) => c.taskLeaseMs },
  { name: 'MAX_DELIVERY_ATTEMPTS', value: (c) => c.maxDeliveryAttempts },
  { name: 'TASK_RETRY_BACKOFF_MS', value: (c) => c.taskRetryBackoffMs },
  { name: 'TASK_RETRY_BACKOFF_MAX_MS', value: (c) => c.taskRetryBackoffMaxMs },
  { name: 'LOG_LEVEL', value: (c) => c.logLevel },
  { name: 'BODY_LIMIT_BYTES', value: (c) => c.bodyLimitBytes },
  { name: 'TIMER_POLL_MS', value: (c) => c.timerPollMs },
  { name: 'STRICT_SIGNAL_TYPES', value: (c) => c.strictSignalTypes },
  { name: 'PUSH_MAX_BUFFER_BYTES', value: (c) => c.pushMaxBufferBytes },
  { name: 'PUSH_DRAIN_TIMEOUT_MS', value: (c) => c.pushDrainTimeoutMs },
  { name: 'SSE_HEARTBEAT_MS', value: (c) => c.sseHeartbeatMs },
  { name: 'PRESENCE_TOUCH_MS', value: (c) => c.presenceTouchMs },
  { name: 'WS_IDLE_TIMEOUT_S', value: (c) => c.wsIdleTimeoutS },
  { name: 'MAX_CONNECTIONS_PER_ADDRESS', value: (c) => c.maxConnectionsPerAddress },
  { name: 'JOURNAL_RETAIN_ENTRIES', value: (c) => c.journalRetainEntries },
  { name: 'MAX_UPLOAD_BYTES', value: (c) => c.maxUploadBytes },
  { name: 'S3_ENDPOINT', value: s3((x) => x.endpoint) },
  { name: 'S3_ACCESS_KEY', value: s3((x) => x.accessKey), secret: true },
  { name: 'S3_SECRET_KEY', value: s3((x) => x.secretKey), secret: true },
  { name: 'S3_BUCKET', value: s3((x) => x.bucket) },
  { name: 'S3_REGION', value: s3((x) => x.region) },
  { name: 'S3_USE_SSL', value: s3((x) => x.useSSL) },
  { name: 'SIWE_NONCE_TTL_MS', value: (c) => c.siweNonceTtlMs },
  { name: 'SIWE_SESSION_TTL_MS', value: (c) => c.siweSessionTtlMs },
  { name: 'AUTH_REQUEST_ENABLED', value: (c) => c.authRequestEnabled },
  { name: 'RATE_LIMIT_DEFAULT', value: (c) => c.rateLimitDefault },
  { name: 'RATE_LIMIT_PUBLIC', value: (c) => c.rateLimitPublic },
  { name: 'TRUSTED_PROXIES', value: (c) => c.trustedProxies.join(',') || null },
  { name: 'REGISTRY_RPC_URL', value: (c) => c.registryRpcUrl ?? null, secret: true },
  { name: 'REGISTRY_ADDRESS', value: (c) => c.registryAddress ?? null },
  { name: 'REGISTRY_TIMEOUT_MS', value: (c) => c.registryTimeoutMs },
  { name: 'WEBHOOK_RETRY_WINDOW_MS', value: (c) => c.webhookRetryWindowMs },
  { name: 'WEBHOOK_BACKOFF_BASE_MS', value: (c) => c.webhookBackoffBaseMs },
  { name: 'WEBHOOK_TIMEOUT_MS', value: (c) => c.webhookTimeoutMs },
  { name: 'WEBHOOK_MAX_IN_FLIGHT', value: (c) => c.webhookMaxInFlight },
  { name: 'ALLOW_PRIVATE_NETWORK', value: (c) => c.allowPrivateNetwork },
  { name: 'FEDERATION_RETRY_WINDOW_MS', value: (c) => c.federationRetryWindowMs },
  { name: 'FEDERATION_BACKOFF_BASE_MS', value: (c) => c.federationBackoffBaseMs },
  { name: 'FEDERATION_TIMEOUT_MS', value: (c) => c.federationTimeoutMs },
  { name: 'FEDERATION_MAX_IN_FLIGHT', value: (c) => c.federationMaxInFlight },
  { name: 'FEDERATION_PEER_RATE_LIMIT', value: (c) => c.federationPeerRateLimit },
  { name: 'FEDERATION_PEER_STORAGE_QUOTA_BYTES', value: (c) => c.federationPeerStorageQuotaBytes },
  { name: 'EMBEDDING_PROVIDER', value: (c) => c.embedding.provider },
  { name: 'EMBEDDING_DIM', value: (c) => c.embedding.dim },
  { name: 'EMBEDDING_URL', value: (c) => c.embedding.url ?? null },
  { name: 'EMBEDDING_MODEL', value: (c) => c.embedding.model },
  { name: 'EMBEDDING_API_KEY', value: (c) => c.embedding.apiKey ?? null, secret: true },
  { name: 'EMBEDDING_TIMEOUT_MS', value: (c) => c.embedding.timeoutMs },
  { name: 'EMBEDDING_BATCH', value: (c) => c.embedding.batch },
  { name: 'MEMORY_NAMESPACE_QUOTA', value: (c) => c.memoryNamespaceQuota },
  { name: 'MEMORY_EXPIRY_SWEEP_MS', value: (c) => c.memoryExpirySweepMs },
  { name: 'BLOB_SWEEP_MS', value: (c) => c.blobSweepMs },
  { name: 'BLOB_SWEEP_GRACE_MS', value: (c) => c.blobSweepGraceMs },
  { name: 'MEMORY_JOB_LEASE_MS', value: (c) => c.memoryJobLeaseMs },
  { name: 'WORKSPACE_DELETE_PAGE_SIZE', value: (c) => c.workspaceDelete.pageSize },
  { name: 'WORKSPACE_DELETE_WAIT_MS', value: (c) => c.workspaceDelete.waitMs },
  { name: 'WORKSPACE_DELETE_LEASE_MS', value: (c) => c.workspaceDelete.leaseMs },
  { name: 'METRICS_TOKEN', value: (c) => c.metricsToken ?? null, secret: true },
  { name: 'RESERVATION_MAX_TTL_S', value: (c) => c.reservationMaxTtlS },
  { name: 'IDEMPOTENCY_TTL_MS', value: (c) => c.idempotencyTtlMs },
  { name: 'IDEMPOTENCY_LEASE_MS', value: (c) => c.idempotencyLeaseMs },
];
export const SETTING_NAMES = SETTINGS.map((s) => s.name);

const MASK = '********';

export interface SettingReport {
  name: string;
  value: unknown;
  source: 'env' | 'default';
  secret: boolean;
}

/** GET /admin/config: every setting, its effective value (secrets masked) and whether the environment set it. */
export function configReport(c: Readonly<Config>): SettingReport[] {
  return SETTINGS.map((s) => {
    const v = s.value(c);
    return { name: s.name, value: s.secret && v !== null && v !== undefined ? maskSecret(s.name, String(v)) : v, source: c.fromEnv.includes(s.name) ? 'env' : 'default', secret: s.secret === true };
  });
}

/** A URL keeps its host (useful to an operator) and loses its credentials; anything else is masked whole. */
function maskSecret(name: string, v: string): string {
  if (name !== 'REDIS_URL' && name !== 'REGISTRY_RPC_URL') return MASK;
  try {
    const u = new URL(v);
    if (u.username) u.username = MASK;
    if (u.password) u.password = MASK;
    // RPC providers often carry the API key in the path or query
    if (name === 'REGISTRY_RPC_URL' && (u.pathname.length > 1 || u.search)) return `${u.protocol}//${u.host}/${MASK}`;
    return u.href;
  } catch {
    return MASK;
  }
}
