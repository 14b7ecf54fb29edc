import { pino, type DestinationStream, type Logger } from 'pino';

/** Codes every background loop (timer polls, push catch-up, journal trim) meets many times a second while the store is away or full. */
const OUTAGE_CODES = new Set(['DB_CONNECT_FAILED', 'DB_QUERY_TIMEOUT', 'STORE_FULL']);
/** an outage error is logged once per message per window, the next line carrying how many it stood for */
export const OUTAGE_LOG_WINDOW_MS = 10_000;
const MAX_TRACKED = 100;

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const windows = new Map<string, { until: number; suppressed: number }>();
  const opts = {
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: {
      logMethod(this: Logger, args: Parameters<Logger['info']>, method: (...a: unknown[]) => void) {
        const [obj, msg] = args as unknown[];
        const code = (obj as { err?: { code?: unknown } } | null)?.err?.code;
        if (typeof code !== 'string' || !OUTAGE_CODES.has(code)) return method.apply(this, args);
        const key = `${code}\u0000${String(msg)}`;
        const now = performance.now();
        const w = windows.get(key);
        if (w && now < w.until) {
          w.suppressed++;
          return;
        }
        if (windows.size >= MAX_TRACKED) windows.clear();
        windows.set(key, { until: now + OUTAGE_LOG_WINDOW_MS, suppressed: 0 });
        return method.apply(this, w?.suppressed ? [{ ...(obj as object), suppressed: w.suppressed }, ...args.slice(1)] : args);
      },
    },
  };
  // stdout written asynchronously (flushed on exit): a synchronous write per request line cost a syscall each
  return pino(opts, destination ?? batched(pino.destination({ dest: 1, sync: false })));
}

type Boom = ReturnType<typeof pino.destination>;
/** the batches a process exit must still hand over (one per logger; weak, so a test's loggers can go) */
const unflushed = new Set<WeakRef<{ flushSync(): void }>>();
process.once('exit', () => {
  for (const r of unflushed) r.deref()?.flushSync();
});

/** how long a line may wait for the lines after it, to share their write */
const LOG_BATCH_MS = 20;
/** pending lines past this size are handed over at the end of the turn */
const LOG_BATCH_BYTES = 64 * 1024;

/**
 * The lines of up to `LOG_BATCH_MS` handed to SonicBoom as one write, in the order they were logged. SonicBoom
 * measures its whole pending buffer on every write (`Buffer.byteLength`, which flattens it), so under load a
 * write per line copied the buffer once per line: a third of what `GET /health` allocated; and each `fs.write`
 * costs ~8 µs of the event loop's time here (the hand-off to libuv's threadpool), whatever its size, so a
 * write per event-loop turn was a tenth of a `GET /health`'s CPU (docs/benchmarks.md).
 */
function batched(dest: Boom): DestinationStream & { flushSync(): void; flush(cb?: (err?: Error) => void): void } {
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  let soon = false;
  const handOver = () => {
    clearTimeout(timer);
    timer = undefined;
    soon = false;
    if (!pending) return;
    const lines = pending;
    pending = '';
    dest.write(lines);
  };
  const batch = {
    write(line: string) {
      pending += line;
      timer ??= setTimeout(handOver, LOG_BATCH_MS).unref();
      if (pending.length >= LOG_BATCH_BYTES && !soon) {
        soon = true;
        setImmediate(handOver);
      }
    },
    flush(cb?: (err?: Error) => void) {
      handOver();
      dest.flush(cb);
    },
    flushSync() {
      handOver();
      dest.flushSync();
    },
  };
  unflushed.add(new WeakRef(batch));
  return batch;
}

export interface RequestLine {
  requestId: string;
  identityId?: string;
  method: string;
  route: string;
  status: number;
  ms: number;
}

const str = (v: string | undefined) => (v === undefined ? 'null' : JSON.stringify(v));

/**
 * The line pino would write for `log.info({request_id, identity_id, method, route, status, ms}, 'request')`,
 * built by hand and written to the same destination: pino's generic path (hooks, a serializer walk over the
 * object, its chindings) cost more per request than the rest of `GET /health` (docs/benchmarks.md).
 */
export function requestLogger(log: Logger): (a: RequestLine) => void {
  const stream = (log as unknown as Record<symbol, { write(s: string): void }>)[pino.symbols.streamSym];
  const info = log.levels.values.info;
  return (a) => {
    if (log.levelVal > info) return;
    stream.write(
      `{"level":${info},"time":"${new Date().toISOString()}","request_id":${str(a.requestId)},"identity_id":${str(a.identityId)},"method":${str(a.method)},"route":${str(a.route)},"status":${a.status},"ms":${Math.round(a.ms * 10) / 10},"msg":"request"}\n`,
    );
  };
}
export type { Logger };
