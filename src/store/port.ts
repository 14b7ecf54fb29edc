/**
 * The store port. Atomicity contract: every op list given to `commit` is applied all together or not at
 * all; version checks (`expect`) are evaluated against the state at commit time, before any write, and a
 * failed check writes nothing. `append` entries get commit-ordered sequence numbers and are published on
 * the log's channel only once committed.
 */
export interface Versioned<T = unknown> {
  version: number;
  value: T;
}

export type Op =
  /** expect 0: the key must be absent; expect n: its version must be n. Omitted: unconditional. */
  | { op: 'put'; key: string; value: unknown; expect?: number }
  | { op: 'del'; key: string; expect?: number }
  | { op: 'check'; key: string; expect: number }
  /** Index members sort bytewise; a member is its own sort key. */
  | { op: 'index'; index: string; member: string; remove?: boolean }
  /** A durable timer due at `at` (ms); `at: null` cancels it. */
  | { op: 'timer'; key: string; at: number | null }
  | { op: 'append'; log: string; entry: unknown };

export type CommitResult = { ok: true; seqs: number[] } | { ok: false; conflict: string };

export interface RangeOptions {
  /** exclusive bounds on members */
  gt?: string;
  lt?: string;
  reverse?: boolean;
  limit: number;
}

export type CountRange = Pick<RangeOptions, 'gt' | 'lt'>;

export interface DueTimer {
  key: string;
  /** the score the claim moved the timer to; release with it */
  claim: number;
}

export interface LogEntry<T = unknown> {
  seq: number;
  entry: T;
}

export interface Store {
  readonly backend: 'embedded' | 'redis';
  get<T>(key: string): Promise<Versioned<T> | undefined>;
  getMany<T>(keys: string[]): Promise<(Versioned<T> | undefined)[]>;
  commit(ops: Op[]): Promise<CommitResult>;
  range(index: string, opts: RangeOptions): Promise<string[]>;
  /** Members of the index, or of those between the exclusive bounds (a bounded count: no member is read). */
  count(index: string, between?: CountRange): Promise<number>;
  /** Atomically takes timers due at `now`, moving each to `now + holdMs` so a crash re-delivers it later. */
  claimTimers(now: number, limit: number, holdMs: number): Promise<DueTimer[]>;
  /** Deletes a claimed timer unless a commit rescheduled it meanwhile. */
  releaseTimer(timer: DueTimer): Promise<void>;
  nextTimerAt(): Promise<number | undefined>;
  readLog<T>(log: string, afterSeq: number, limit: number): Promise<LogEntry<T>[]>;
  lastSeq(log: string): Promise<number>;
  /** The lowest sequence still stored: 1 until the log was trimmed. */
  logStart(log: string): Promise<number>;
  /** Drops entries below `before` (at most `limit` of them per call); answers the new start. */
  trimLog(log: string, before: number, limit: number): Promise<number>;
  /** Committed log entries, from any process sharing this store. */
  subscribe<T>(log: string, fn: (e: LogEntry<T>) => void): Promise<() => Promise<void>>;
  ping(): Promise<number>;
  close(): Promise<void>;
}
