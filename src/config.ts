/** The one config reader: environment read once, validated, frozen. A bad value stops startup naming the variable. */
import { resolve } from 'node:path';

export interface Config {
  port: number;
  host: string;
  baseUrl: string;
  /** BASE_URL was not set: it follows the port actually bound (PORT=0 picks one) */
  baseUrlDefaulted: boolean;
  dataDir: string;
  redisUrl: string | undefined;
  redisPrefix: string;
  taskLeaseMs: number;
  maxDeliveryAttempts: number;
  logLevel: string;
  bodyLimitBytes: number;
  timerPollMs: number;
  strictSignalTypes: boolean;
  pushMaxBufferBytes: number;
  sseHeartbeatMs: number;
  wsIdleTimeoutS: number;
  journalRetainEntries: number;
  /** when set, GET /metrics wants `Authorization: Bearer <METRICS_TOKEN>` */
  metricsToken: string | undefined;
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
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const redisPrefix = env.REDIS_PREFIX || 'svc';
  if (!/^[A-Za-z0-9_.-]+$/.test(redisPrefix)) throw new ConfigError(`REDIS_PREFIX must be letters, digits, _ . -, got "${redisPrefix}"`);
  return Object.freeze({
    port,
    host,
    baseUrl,
    baseUrlDefaulted: !env.BASE_URL,
    dataDir: resolve(env.DATA_DIR || './data'),
    redisUrl,
    redisPrefix,
    taskLeaseMs: int(env, 'TASK_LEASE_MS', 300_000, 1),
    maxDeliveryAttempts: int(env, 'MAX_DELIVERY_ATTEMPTS', 5, 1, 1000),
    logLevel,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1),
    timerPollMs: int(env, 'TIMER_POLL_MS', 100, 5, 60_000),
    strictSignalTypes: bool(env, 'STRICT_SIGNAL_TYPES', false),
    pushMaxBufferBytes: int(env, 'PUSH_MAX_BUFFER_BYTES', 1024 * 1024, 1024),
    sseHeartbeatMs: int(env, 'SSE_HEARTBEAT_MS', 15_000, 10),
    // uWebSockets.js pings an idle socket before this runs out and closes one that stays silent
    wsIdleTimeoutS: int(env, 'WS_IDLE_TIMEOUT_S', 60, 8, 960),
    journalRetainEntries: int(env, 'JOURNAL_RETAIN_ENTRIES', 1_000_000, 10),
    metricsToken: env.METRICS_TOKEN || undefined,
  });
}
