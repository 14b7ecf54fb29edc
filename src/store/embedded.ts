/**
 * Embedded adapter: LMDB in DATA_DIR. One service process writes it (pub/sub is in-process); other processes,
 * such as `npm run actors`, may read beside it. Every write (commit, claimTimers, releaseTimer, trimLog) is
 * one LMDB write transaction and answers only once lmdb reports that transaction flushed to disk; lmdb-js
 * batches the transactions queued meanwhile into one write and one fdatasync, so concurrent commits share a
 * flush; commits of one event-loop turn also share one transaction (group commit, see `commitBatch`). Version checks run inside the transaction, so a failed check writes nothing.
 */
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import { batched } from './batch.js';
import { outOfRoom } from './full.js';
import type { CountRange, DueTimer, LogEntry, Op, RangeOptions, Store, Versioned } from './port.js';

/** The embedded store, with its LMDB environment for diagnostics (tests read its `flushed` state). */
export interface EmbeddedStore extends Store {
  readonly lmdb: RootDatabase;
}

const SEP = '\u0000';
/** meta key prefix of an index's member count, kept by every commit that adds or removes a member */
const COUNT = 'count' + SEP;
/** meta key marking that the counts exist (a data dir from before them is counted once on open) */
const COUNTED = 'counted-v1';
const END = '\u0001';
const K = (s: string) => Buffer.from(s, 'utf8');
/** LMDB's largest key at its default page size */
const MAX_KEY_BYTES = 1978;
const S = (b: unknown) => (b as Buffer).toString('utf8');
const pad = (n: number) => String(Math.max(0, Math.floor(n))).padStart(16, '0');
/** Bytewise (UTF-8) order, as LMDB sorts keys; JS `<` compares UTF-16 code units, which differs above U+FFFF. */
const cmpBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** `{v, d}` as msgpackr writes it without records: map16 of 2 entries, then the key "v" (`de 0002 a1 76`). */
const HEAD = Buffer.from([0xde, 0x00, 0x02, 0xa1, 0x76]);

/** The version a stored record starts with, when it is laid out as this build writes it and the version an unsigned int. */
function headVersion(b: Buffer): number | undefined {
  if (b.length < HEAD.length + 1 || HEAD.compare(b, 0, HEAD.length) !== 0) return undefined;
  const at = HEAD.length;
  const t = b[at];
  if (t <= 0x7f) return t;
  if (t === 0xcc && b.length > at + 1) return b[at + 1];
  if (t === 0xcd && b.length > at + 2) return b.readUInt16BE(at + 1);
  if (t === 0xce && b.length > at + 4) return b.readUInt32BE(at + 1);
  return undefined;
}

type Applied = { ok: true; seqs: number[]; published: [string, LogEntry][] } | { ok: false; conflict: string };

interface Rec {
  v: number;
  d: unknown;
}

export async function openEmbeddedStore(dataDir: string): Promise<EmbeddedStore> {
  mkdirSync(dataDir, { recursive: true });
  // Plain msgpack maps, not msgpackr records: without shared structures every value carried its own record
  // definitions, rebuilt into a reader on every read (slower, bigger, and a tenth of all allocation under
  // load). Values written as records before stay readable: each one defines its records itself.
  const root: RootDatabase = open({ path: dataDir, noSubdir: false, maxDbs: 16, useRecords: false } as never);
  // Binary keys: lmdb-js's default key encoding reads a NUL inside a string key as an array separator.
  const db = <V>(name: string) => root.openDB<V, Buffer>({ name, keyEncoding: 'binary' } as never);
  const recs = db<Rec>('recs');
  const idx = db<true>('idx');
  const timers = db<true>('timers');
  const timerAt = db<number>('timer_at');
  const logs = db<unknown>('logs');
  const meta = db<number>('meta');
  await claimFormat(root, meta, dataDir);
  await countIndexesOnce(root, idx, meta);
  const bus = new EventEmitter();
  bus.setMaxListeners(0);

  /**
   * One write transaction, answered after it is flushed. With overlappingSync (lmdb's default here) a
   * transaction's promise stands for "committed and visible"; `root.flushed`, read right after queueing, is
   * the flush of the batch this transaction joined (or of a later one, which covers it), so every commit of
   * a batch waits on the same fdatasync.
   */
  const write = async <T>(fn: () => T): Promise<T> => {
    const committed = root.transaction(fn) as Promise<T>;
    const flushed = new Promise<void>((resolve, reject) => root.flushed.then(() => resolve(), reject));
    try {
      const [result] = await Promise.all([committed, flushed]);
      return result;
    } catch (e) {
      throw await writeError(e, dataDir);
    }
  };

  const getRec = <T>(key: string): Versioned<T> | undefined => {
    const k = K(key);
    // LMDB throws on a key past its size limit; no record was ever written under one (a client's overlong id)
    if (k.length > MAX_KEY_BYTES) return undefined;
    const r = recs.get(k);
    return r ? { version: r.v, value: r.d as T } : undefined;
  };
  /** A record's version read off its head, without decoding its value (a signal's is ~2 KB); an earlier build's layout is decoded. */
  const storedVersion = (key: string): number => {
    const k = K(key);
    const raw = recs.getBinaryFast(k);
    return raw === undefined ? 0 : (headVersion(raw) ?? recs.get(k)?.v ?? 0);
  };
  /**
   * The counters one write transaction moves (index sizes, log sequences), each read once and written once
   * when the transaction's lists are applied: a group commit's lists move the same few counters many times.
   */
  const tally = () => {
    const moved = new Map<string, number>();
    return {
      add(key: string, by: number): number {
        const n = (moved.get(key) ?? meta.get(K(key)) ?? 0) + by;
        moved.set(key, n);
        return n;
      },
      write(): void {
        for (const [key, n] of moved) meta.putSync(K(key), n);
      },
    };
  };
  const setTimer = (key: string, at: number | null) => {
    const old = timerAt.get(K(key));
    if (old !== undefined) timers.removeSync(K(pad(old) + SEP + key));
    if (at === null) timerAt.removeSync(K(key));
    else {
      timerAt.putSync(K(key), at);
      timers.putSync(K(pad(at) + SEP + key), true);
    }
  };

  /** One op list inside the open write transaction: every check (and key size) first, so a refusal writes nothing. */
  function apply(ops: Op[], counters: ReturnType<typeof tally>): Applied | Error {
    for (const o of ops) {
      const k = o.op === 'index' ? o.index + SEP + o.member : o.op === 'append' ? o.log + SEP + pad(0) : o.op === 'timer' ? pad(0) + SEP + o.key : o.key;
      if (Buffer.byteLength(k) > MAX_KEY_BYTES) return new Error(`store key too long (${Buffer.byteLength(k)} bytes)`);
    }
    // once per key and list, the check and the put sharing it
    const versions = new Map<string, number>();
    const version = (key: string): number => {
      let v = versions.get(key);
      if (v === undefined) versions.set(key, (v = storedVersion(key)));
      return v;
    };
    for (const o of ops) {
      if ((o.op === 'put' || o.op === 'del' || o.op === 'check') && o.expect !== undefined) {
        if (version(o.key) !== o.expect) return { ok: false, conflict: o.key };
      }
    }
    const published: [string, LogEntry][] = [];
    for (const o of ops) {
      switch (o.op) {
        case 'put': {
          const v = version(o.key) + 1;
          recs.putSync(K(o.key), { v, d: o.value });
          versions.set(o.key, v);
          break;
        }
        case 'del':
          recs.removeSync(K(o.key));
          versions.set(o.key, 0);
          break;
        case 'index': {
          // the index's size moves with each real change, so count() reads one number instead of walking the index
          const k = K(o.index + SEP + o.member);
          const had = idx.get(k) !== undefined;
          if (o.remove && had) idx.removeSync(k);
          else if (!o.remove && !had) idx.putSync(k, true);
          else break;
          counters.add(COUNT + o.index, o.remove ? -1 : 1);
          break;
        }
        case 'timer':
          setTimer(o.key, o.at);
          break;
        case 'append': {
          const seq = counters.add('seq' + SEP + o.log, 1);
          logs.putSync(K(o.log + SEP + pad(seq)), o.entry);
          published.push([o.log, { seq, entry: o.entry }]);
          break;
        }
        case 'check':
          break;
      }
    }
    return { ok: true, seqs: published.map(([, e]) => e.seq), published };
  }

  /**
   * Group commit: the op lists committed in one event-loop turn share one write transaction and one flush,
   * each checked and applied in turn (a later list sees the earlier ones' writes, as if committed one after
   * another), and each answered only after that flush. A list whose check fails writes nothing and fails
   * alone; one that throws while writing aborts the shared transaction, so then each list runs on its own.
   */
  const commitBatch = batched<Op[], Applied>(async (lists) => {
    let results: (Applied | Error)[];
    const applyAll = (all: Op[][]) => {
      const counters = tally();
      const out = all.map((ops) => apply(ops, counters));
      counters.write();
      return out;
    };
    try {
      results = await write(() => applyAll(lists));
    } catch (e) {
      if (lists.length === 1) throw e;
      results = await Promise.all(lists.map((ops) => write(() => applyAll([ops])[0]).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))))));
    }
    for (const r of results) if (!(r instanceof Error) && r.ok) for (const [log, e] of r.published) bus.emit(log, e);
    return results;
  });

  return {
    backend: 'embedded',
    lmdb: root,
    async get<T>(key: string) {
      return getRec<T>(key);
    },
    async getMany<T>(keys: string[]) {
      return keys.map((k) => getRec<T>(k));
    },
    async commit(ops) {
      const res = await commitBatch(ops);
      return res.ok ? { ok: true, seqs: res.seqs } : res;
    },
    async range(index: string, o: RangeOptions) {
      const lo = index + SEP + (o.gt ?? '');
      const hi = o.lt !== undefined ? index + SEP + o.lt : index + END;
      const out: string[] = [];
      // reverse `end` is exclusive: without gt, stop at the bare index name so the '' member is included
      const it = o.reverse
        ? idx.getKeys({ start: K(hi), end: K(o.gt !== undefined ? lo : index), reverse: true })
        : idx.getKeys({ start: K(lo), end: K(hi) });
      for (const k of it) {
        const member = S(k).slice(index.length + 1);
        if (o.gt !== undefined && cmpBytes(member, o.gt) <= 0) continue;
        if (o.lt !== undefined && cmpBytes(member, o.lt) >= 0) continue;
        out.push(member);
        if (out.length >= o.limit) break;
      }
      return out;
    },
    async count(index: string, between?: CountRange) {
      if (!between || (between.gt === undefined && between.lt === undefined)) return meta.get(K(COUNT + index)) ?? 0;
      const start = K(index + SEP + (between.gt ?? ''));
      const end = K(between.lt !== undefined ? index + SEP + between.lt : index + END);
      // lmdb's start is inclusive: a member equal to gt is taken back out
      const atStart = between.gt !== undefined && idx.get(start) !== undefined ? 1 : 0;
      return idx.getCount({ start, end }) - atStart;
    },
    async claimTimers(now: number, limit: number, holdMs: number) {
      return write(() => {
        const due: DueTimer[] = [];
        // snapshot first: setTimer writes into the range being iterated (with holdMs 0 a live cursor revisits)
        for (const k of [...timers.getKeys({ start: K(''), end: K(pad(now) + END), limit })]) {
          const key = S(k).slice(17);
          const claim = now + holdMs;
          setTimer(key, claim);
          due.push({ key, claim });
        }
        return due;
      });
    },
    async releaseTimer(t: DueTimer) {
      await write(() => {
        if (timerAt.get(K(t.key)) === t.claim) setTimer(t.key, null);
      });
    },
    async nextTimerAt() {
      for (const k of timers.getKeys({ limit: 1 })) return Number(S(k).slice(0, 16));
      return undefined;
    },
    async readLog<T>(log: string, afterSeq: number, limit: number) {
      const out: LogEntry<T>[] = [];
      for (const { key, value } of logs.getRange({ start: K(log + SEP + pad(afterSeq + 1)), end: K(log + END), limit })) {
        out.push({ seq: Number(S(key).slice(log.length + 1)), entry: value as T });
      }
      return out;
    },
    async lastSeq(log: string) {
      return meta.get(K('seq' + SEP + log)) ?? 0;
    },
    async logStart(log: string) {
      return meta.get(K('start' + SEP + log)) ?? 1;
    },
    async trimLog(log: string, before: number, limit: number) {
      return write(() => {
        const start = meta.get(K('start' + SEP + log)) ?? 1;
        if (before <= start) return start;
        let next = before;
        let n = 0;
        for (const k of [...logs.getKeys({ start: K(log + SEP + pad(start)), end: K(log + SEP + pad(before)), limit: limit + 1 })]) {
          if (n++ === limit) {
            next = Number(S(k).slice(log.length + 1));
            break;
          }
          logs.removeSync(k as Buffer);
        }
        meta.putSync(K('start' + SEP + log), next);
        return next;
      });
    },
    async subscribe<T>(log: string, fn: (e: LogEntry<T>) => void) {
      const h = fn as (e: LogEntry) => void;
      bus.on(log, h);
      return async () => void bus.off(log, h);
    },
    async ping() {
      const t = performance.now();
      recs.get(K('\u0000ping'));
      return performance.now() - t;
    },
    async close() {
      bus.removeAllListeners();
      await root.close();
    },
  };
}

/**
 * The data format a dir was last opened with. Format 2 values are plain msgpack maps, which a format 1 build
 * (msgpackr records) would decode as Map objects, so a dir is marked on open and a build refuses a format newer
 * than its own rather than misread it. Builds from before the marker cannot check it: docs/operators.md.
 */
export const DATA_FORMAT = 2;
const FORMAT = 'format';

async function claimFormat(root: RootDatabase, meta: Database<number, Buffer>, dataDir: string): Promise<void> {
  const found = meta.get(K(FORMAT));
  if (found === DATA_FORMAT) return;
  if (found !== undefined && found > DATA_FORMAT) {
    await root.close();
    throw new Error(`DATA_DIR ${dataDir} holds data format ${found}, written by a newer build; this build reads formats up to ${DATA_FORMAT}. Run that build or a later one.`);
  }
  await root.transaction(() => meta.putSync(K(FORMAT), DATA_FORMAT));
}

/** A data dir written before index counts were kept: count every index once, in one write. */
async function countIndexesOnce(root: RootDatabase, idx: Database<true, Buffer>, meta: Database<number, Buffer>): Promise<void> {
  if (meta.get(K(COUNTED)) !== undefined) return;
  await root.transaction(() => {
    const counts = new Map<string, number>();
    for (const k of idx.getKeys()) {
      const key = S(k);
      const index = key.slice(0, key.indexOf(SEP));
      counts.set(index, (counts.get(index) ?? 0) + 1);
    }
    for (const [index, n] of counts) meta.putSync(K(COUNT + index), n);
    meta.putSync(K(COUNTED), 1);
  });
}

/** lmdb-js's "Commit failed" carries its cause as the `commitError` promise; it is shared by the batch's failures */
const COMMIT_CAUSE_WAIT_MS = 1000;
/** the `commitError`s of failures some caller of `write` was answered */
const answered = new WeakSet<object>();

/**
 * Whether a rejection nobody handled is a failed write batch whose transactions were each answered: lmdb-js
 * also rejects the promise of its event-turn batch, which no caller holds, with the same failure (a full disk
 * logged one "unhandled rejection" per failed batch). main.ts leaves those out of its unhandled-rejection log.
 */
export const answeredWriteFailure = (reason: unknown): boolean => {
  const c = (reason as { commitError?: unknown } | null)?.commitError;
  return typeof c === 'object' && c !== null && answered.has(c);
};

/**
 * A failed write as the client should see it: its cause (awaited, which also keeps lmdb's `commitError` from
 * being an unhandled rejection), as STORE_FULL when the disk has no room.
 */
async function writeError(e: unknown, dataDir: string): Promise<unknown> {
  const pending = (e as { commitError?: Promise<unknown> } | null)?.commitError;
  let cause = e;
  if (pending) {
    answered.add(pending);
    let timer: NodeJS.Timeout | undefined;
    cause = await Promise.race([
      pending.then(
        () => e,
        (c: unknown) => c,
      ),
      new Promise<unknown>((resolve) => (timer = setTimeout(() => resolve(e), COMMIT_CAUSE_WAIT_MS))),
    ]);
    clearTimeout(timer);
  }
  return outOfRoom(cause, dataDir, 'embedded');
}
