/**
 * The actor host. `send(kind, id, event)` loads the persisted record, runs the event through the pure
 * machine (`machine.transition`, as XState's `transition()` does), and commits the new record with a version
 * check together with the index and timer writes it implies, in one store commit. A lost race reloads and
 * retries; a refused event becomes its rule's error code. Durable timers are polled from the store and delivered as events.
 */
import { createActor, type AnyActorScope, type AnyStateMachine, type AnyMachineSnapshot, type EventObject } from 'xstate';
import { AppError, type ErrorCode } from '../errors.js';
import { now as clock, iso } from '../clock.js';
import type { Logger } from '../log.js';
import type { Op, Store, Versioned } from '../store/port.js';
import { refuseLostClaim } from '../store/idempotency.js';

export interface ActorRecord<C = unknown> {
  value: string;
  context: C;
  /** the last transitions, oldest first, capped at HISTORY_CAP: kept in the record so a commit writes no extra key */
  history?: Transition[];
}

export interface Transition {
  event: string;
  /** null for the creation */
  from: string | null;
  to: string;
  at: string;
  /** the request that caused it; null for timer events and work outside a request */
  request_id: string | null;
}

/** Told every committed transition (metrics). */
export type TransitionListener = (kind: string, id: string, t: Transition, prev: ActorRecord | undefined, next: ActorRecord) => void;

export interface ActorKind<C = any> {
  name: string;
  machine: AnyStateMachine;
  /** code when the actor does not exist */
  notFound: ErrorCode;
  /** code when an event has no transition in the current state */
  invalid: ErrorCode;
  /** index entries ([index, member]) the record implies; diffed on every commit */
  indexes(rec: ActorRecord<C>): [string, string][];
  timers(rec: ActorRecord<C>): { event: string; at: number }[];
  /** the log entries (one or several) every commit of this kind appends atomically (the push journal), if any; `event` is the one that moved it (absent on create) */
  journal?(rec: ActorRecord<C>, prev: ActorRecord<C> | undefined, event?: Record<string, unknown>): LogAppend | LogAppend[] | undefined;
  /**
   * Unique records the state claims (one central claw per org): written with expect:0 when claimed, deleted
   * when released, in the same commit. A commit that loses one to another holder fails with its code.
   */
  uniques?(rec: ActorRecord<C>): { key: string; code: ErrorCode }[];
  /**
   * Called after a `send` committed (fire-and-forget: its result and errors never reach the caller). Effects
   * a pure machine cannot run (an HTTP POST) start here, after the state saying they should is durable.
   */
  committed?(id: string, rec: ActorRecord<C>, prev: ActorRecord<C> | undefined): void | Promise<void>;
  /** context fields no read shows, operators' inspection included (a peer's shared secret) */
  hidden?: string[];
  /**
   * Fields a timer event carries that live outside the actor (other actors' state), read just before the event
   * is sent, so the machine stays pure and its transition records what it was told (a signal's due check).
   */
  timerEvent?(id: string, event: string, rt: Runtime): Promise<Record<string, unknown>>;
  /**
   * Ops of other actors' moves that must ride in the commit of this move (re-planned on every attempt), for a
   * consequence that may not be lost to a crash between two commits (a failed federation delivery marks its signal).
   */
  alongside?(id: string, rec: ActorRecord<C>, prev: ActorRecord<C> | undefined, rt: Runtime, requestId?: string): Promise<Op[]>;
}

export interface LogAppend {
  log: string;
  entry: unknown;
}

export interface Committed<C> {
  id: string;
  record: ActorRecord<C>;
  /** the joined actor's new record, when its move rode in this commit (`SendOptions.join`) */
  joined?: ActorRecord;
}

/** Another actor's move offered to a send's commit: taken on the first attempt only, and only if it moves. */
export interface Join {
  kind: string;
  id: string;
  /** its stored record as the caller read it: a stale one fails the shared commit, which then goes again without it */
  loaded: Versioned<ActorRecord>;
  event: Record<string, unknown> & { type: string };
}

export interface SendOptions<C> {
  /** for timer events: a refused or ignored event is not an error */
  quiet?: boolean;
  /** the code for a missing actor, where the route names its own */
  notFound?: ErrorCode;
  /** actors created on their first event (inbox receipts): the record to start from when none is stored */
  create?: () => ActorRecord<C>;
  /**
   * ops committed together with the transition (an audit entry, a record the move creates), given the new and
   * the previous record. Called again on every attempt, so reads it makes are fresh; an error it throws ends the send.
   */
  extra?: (rec: ActorRecord<C>, prev: ActorRecord<C>) => Op[] | Promise<Op[]>;
  /** the stored record the caller has just read: the first attempt starts from it instead of reading again (a stale one fails its version check and is read afresh) */
  loaded?: Versioned<ActorRecord<C>>;
  /** the request this send serves (the principal's `requestId`), recorded in the transition; none for timers and background work */
  requestId?: string;
  /**
   * A move of another actor to commit with this one (a worker's `done` claims its next task in the ack's
   * commit). Best effort: a refused move, or a commit that fails for any reason, drops it and the send goes
   * on alone; `Committed.joined` says whether it was made.
   */
  join?: Join;
}

const MAX_RETRIES = 50;
const TIMER_HOLD_MS = 30_000;
const TIMER_BACKOFF_CAP_MS = 2_000;
/** backoff after a lost compare-and-set: full jitter, doubling from BACKOFF_BASE_MS up to BACKOFF_CAP_MS */
const BACKOFF_BASE_MS = 1;
const BACKOFF_CAP_MS = 50;

/** How long to wait before attempt `attempt` (0 = the first, which never waits): random in [0, min(cap, base·2^(attempt-1))]. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  if (attempt <= 0) return 0;
  return random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
}

const pause = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : Promise.resolve());

export const actorKey = (kind: string, id: string) => `actor:${kind}:${id}`;
/** Every actor is in its kind's index for its state; members are `kind:id` so one scan can merge kinds. */
export const actorStateIndex = (kind: string, state: string) => `actors:${kind}:${state}`;
const HISTORY_CAP = 10;

const withHistory = <C>(rec: ActorRecord<C>, prev: ActorRecord<C> | undefined, event: string, at: number, requestId: string | undefined): ActorRecord<C> => ({
  ...rec,
  history: [...(prev?.history ?? []).slice(1 - HISTORY_CAP), { event, from: prev ? prev.value : null, to: rec.value, at: iso(at), request_id: requestId ?? null }],
});

export class Runtime {
  private kinds = new Map<string, ActorKind>();
  private steps = new Map<string, Step>();
  private queues = new Map<string, Promise<unknown>>();
  private timerLoop: NodeJS.Timeout | undefined;
  private stopped = false;
  private listeners: TransitionListener[] = [];

  constructor(
    readonly store: Store,
    private log: Logger,
    private pollMs: number,
  ) {}

  register(kind: ActorKind): void {
    this.kinds.set(kind.name, kind);
    this.steps.set(kind.name, stepper(kind.name, kind.machine));
  }

  kindNames(): string[] {
    return [...this.kinds.keys()];
  }

  /** The top-level states of a kind's machine (values are flat). */
  statesOf(kind: string): string[] {
    return Object.keys(this.kind(kind).machine.config.states ?? {});
  }

  /** The durable timers a record implies: by construction exactly the ones its commits left in the store. */
  timersOf(kind: string, rec: ActorRecord): { event: string; at: number }[] {
    return this.kind(kind).timers(rec);
  }

  /** The record's context less the kind's hidden fields: what inspection may show. */
  shownContext(kind: string, rec: ActorRecord): unknown {
    const hidden = this.kind(kind).hidden;
    if (!hidden?.length || !rec.context || typeof rec.context !== 'object') return rec.context;
    return Object.fromEntries(Object.entries(rec.context).filter(([k]) => !hidden.includes(k)));
  }

  onTransition(fn: TransitionListener): void {
    this.listeners.push(fn);
  }

  private kind(name: string): ActorKind {
    const k = this.kinds.get(name);
    if (!k) throw new Error(`unknown actor kind ${name}`);
    return k;
  }

  async load<C>(kind: string, id: string): Promise<Versioned<ActorRecord<C>> | undefined> {
    return this.store.get<ActorRecord<C>>(actorKey(kind, id));
  }

  async loadMany<C>(kind: string, ids: string[]): Promise<(ActorRecord<C> | undefined)[]> {
    return (await this.loadStoredMany<C>(kind, ids)).map((r) => r?.value);
  }

  /** The records with their stored versions, in one read (a send may start from each: `SendOptions.loaded`). */
  loadStoredMany<C>(kind: string, ids: string[]): Promise<(Versioned<ActorRecord<C>> | undefined)[]> {
    return this.store.getMany<ActorRecord<C>>(ids.map((id) => actorKey(kind, id)));
  }

  /** Ops that create an actor in its initial state with the given context (expect absent), for the request `requestId` serves. */
  createOps<C>(kind: string, id: string, record: ActorRecord<C>, requestId?: string): Op[] {
    const k = this.kind(kind);
    record = withHistory(record, undefined, 'create', clock(), requestId);
    return [
      { op: 'put', key: actorKey(kind, id), value: record, expect: 0 },
      ...indexesOf(k, id, record).map(([index, member]): Op => ({ op: 'index', index, member })),
      ...k.timers(record).map((t): Op => ({ op: 'timer', key: timerKey(kind, id, t.event), at: t.at })),
      ...journalOps(k, record, undefined),
      ...(k.uniques?.(record) ?? []).map((u): Op => ({ op: 'put', key: u.key, value: { kind, id }, expect: 0 })),
    ];
  }

  /** Runs one event through an actor. Serial per actor in this process; compare-and-set across processes. */
  send<C>(kind: string, id: string, event: Record<string, unknown> & { type: string }, opts: SendOptions<C> = {}): Promise<Committed<C> | undefined> {
    return this.serial(actorKey(kind, id), () => this.apply<C>(this.kind(kind), id, event, opts));
  }

  private async apply<C>(k: ActorKind<C>, id: string, event: Record<string, unknown> & { type: string }, opts: SendOptions<C>): Promise<Committed<C> | undefined> {
    const key = actorKey(k.name, id);
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      await pause(backoffMs(attempt));
      const stored = attempt === 0 && opts.loaded ? opts.loaded : await this.store.get<ActorRecord<C>>(key);
      const cur = stored ?? (opts.create ? { version: 0, value: opts.create() } : undefined);
      if (!cur) {
        if (opts.quiet) return undefined;
        throw new AppError(opts.notFound ?? k.notFound);
      }
      const move = this.quietly(opts, () => this.move(k, id, cur, stored !== undefined, event, opts.requestId));
      if (!move) {
        if (opts.quiet) return undefined;
        throw new AppError(k.invalid);
      }
      const { record, before, ops, claimed } = move;
      ops.push(...((await k.alongside?.(id, record, before, this, opts.requestId)) ?? []), ...((await opts.extra?.(record, cur.value)) ?? []));
      const joined = attempt === 0 && opts.join && opts.join.id !== id ? await this.joinedMove(opts.join, ops, opts.requestId) : undefined;
      const res = await this.store.commit(joined ? [...ops, ...joined.ops] : ops);
      if (res.ok) {
        this.afterCommit(k, id, record, before);
        this.told(k.name, id, record, before);
        if (!joined) return { id, record };
        const jk = this.kind(joined.kind);
        this.afterCommit(jk, joined.id, joined.record, joined.before);
        this.told(jk.name, joined.id, joined.record, joined.before);
        return { id, record, joined: joined.record };
      }
      const lost = claimed.find((u) => u.key === res.conflict);
      if (lost) throw new AppError(lost.code);
      refuseLostClaim(res);
    }
    throw new AppError('INTERNAL_SERVER_ERROR', `actor ${k.name}:${id} too contended`);
  }

  /**
   * A join's ops with its kind's `alongside`; undefined when the machine or an alongside rule refuses or ignores
   * the event, or when it writes a record the send writes too (two tasks of one concurrency key): both were
   * planned from the same read, so the later write would undo the earlier.
   */
  private async joinedMove(j: Join, sent: Op[], requestId: string | undefined) {
    const k = this.kind(j.kind);
    const move = this.quietly({ quiet: true }, () => this.move(k, j.id, j.loaded, true, j.event, requestId));
    if (!move) return undefined;
    const along = await Promise.resolve(k.alongside?.(j.id, move.record, move.before, this, requestId)).catch((e: unknown) => (e instanceof AppError ? undefined : Promise.reject(e)));
    if (k.alongside && !along) return undefined;
    const ops = [...move.ops, ...(along ?? [])];
    const written = new Set(sent.flatMap((o) => (o.op === 'put' || o.op === 'del' ? [o.key] : [])));
    if (ops.some((o) => (o.op === 'put' || o.op === 'del') && written.has(o.key))) return undefined;
    return { kind: j.kind, id: j.id, record: move.record, before: move.before, ops };
  }

  /** a quiet send ignores a refusal */
  private quietly<T>(opts: { quiet?: boolean }, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (e) {
      if (opts.quiet && e instanceof AppError) return undefined;
      throw e;
    }
  }

  /**
   * The ops of one event's move on a loaded record, for a plan that commits it with other writes (an identity's
   * deletion removes its membership in the same commit); undefined when the event changes nothing. The caller
   * commits them (a lost version check means: load again and re-plan); listeners and `committed` are not told.
   */
  moveOps<C>(kind: string, id: string, cur: Versioned<ActorRecord<C>>, event: Record<string, unknown> & { type: string }, requestId?: string): { record: ActorRecord<C>; ops: Op[]; claimed: { key: string; code: ErrorCode }[] } | undefined {
    const m = this.move(this.kind(kind) as ActorKind<C>, id, cur, true, event, requestId);
    return m && { record: m.record, ops: m.ops, claimed: m.claimed };
  }

  /** Runs the event through the machine; a refusal throws its code, no transition answers undefined. */
  private move<C>(k: ActorKind<C>, id: string, cur: Versioned<ActorRecord<C>>, stored: boolean, event: Record<string, unknown> & { type: string }, requestId: string | undefined) {
    // A copy by spread: a context decoded from msgpack past 16 keys is a dictionary (its decoder adds keys one by one),
    // which every assign of the machine copies slowly, ~6 µs each; a spread copies into a fast object and leaves V8 the
    // key order's transitions, so later decodes of the same shape come out fast as well (docs/benchmarks.md).
    const snap = k.machine.resolveState({ value: cur.value.value, context: { ...(cur.value.context as object) } as any });
    const at = (event.now as number) ?? clock();
    const [next, actions] = this.steps.get(k.name)!(snap, { ...event, now: at } as EventObject);
    const refusal = (actions as { type: string; params?: { code?: ErrorCode; details?: Record<string, unknown> } }[]).find((a) => a.type === 'refuse');
    if (refusal) throw new AppError(refusal.params?.code ?? k.invalid, undefined, refusal.params?.details ?? null);
    if (next.value === snap.value && next.context === snap.context) return undefined;
    const key = actorKey(k.name, id);
    const before = stored ? cur.value : undefined;
    const record = withHistory<C>({ value: next.value as string, context: next.context as C }, cur.value, event.type, at, requestId);
    const ops: Op[] = [
      { op: 'put', key, value: record, expect: cur.version },
      ...diffIndexes(before ? indexesOf(k, id, before) : [], indexesOf(k, id, record)),
      ...diffTimers(k.name, id, before ? k.timers(before) : [], k.timers(record)),
      ...journalOps(k, record, before, event),
    ];
    const claimed = diffUniques(k, id, before, record, ops);
    return { record, before, ops, claimed };
  }

  private afterCommit<C>(k: ActorKind<C>, id: string, record: ActorRecord<C>, before: ActorRecord<C> | undefined): void {
    if (!k.committed) return;
    try {
      void Promise.resolve(k.committed(id, record, before)).catch((e) => this.log.warn({ err: e, kind: k.name, id }, 'committed hook failed'));
    } catch (e) {
      this.log.warn({ err: e, kind: k.name, id }, 'committed hook failed');
    }
  }

  /**
   * Commits ops that need a compare-and-set retry loop (a read-decide-write over plain records). A lost race
   * backs off with jitter before it plans again, so contenders spread out instead of colliding in lockstep.
   */
  async retry<T>(plan: () => Promise<{ ops?: Op[]; result: T }>): Promise<T> {
    for (let attempt = 0; attempt < MAX_RETRIES; attempt++) {
      await pause(backoffMs(attempt));
      const p = await plan();
      if (!p.ops) return p.result;
      const res = await this.store.commit(p.ops);
      if (res.ok) return p.result;
      // a lost Idempotency-Key claim does not come back: no retry can commit this request's effect
      refuseLostClaim(res);
    }
    throw new AppError('INTERNAL_SERVER_ERROR', 'write too contended');
  }

  /**
   * Runs `fn` after every earlier call with the same key in this process has settled. Writers of one hot
   * record (an actor, a thread's counter) queue here, so compare-and-set retries are needed only across processes.
   */
  serial<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => {});
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }

  startTimers(): void {
    // the next poll is scheduled only after this one finished, so polls never overlap; while the store fails,
    // polls back off (doubling up to TIMER_BACKOFF_CAP_MS) instead of hammering a backend that is down
    let delay = this.pollMs;
    const tick = async () => {
      if (this.stopped) return;
      try {
        await this.fireDueTimers();
        delay = this.pollMs;
      } catch (e) {
        this.log.warn({ err: e }, 'timer poll failed');
        delay = Math.min(TIMER_BACKOFF_CAP_MS, delay * 2);
      }
      if (!this.stopped) this.timerLoop = setTimeout(tick, delay);
    };
    this.timerLoop = setTimeout(tick, 0);
  }

  async fireDueTimers(): Promise<number> {
    let fired = 0;
    // a read first: claiming is a write (a transaction and a flush on LMDB), which an idle poll need not make
    const next = await this.store.nextTimerAt();
    if (next === undefined || next > clock()) return 0;
    for (;;) {
      const due = await this.store.claimTimers(clock(), 100, TIMER_HOLD_MS);
      await Promise.all(
        due.map(async (t) => {
          const [kind, id, type] = JSON.parse(t.key) as [string, string, string];
          try {
            const fields = (await this.kind(kind).timerEvent?.(id, type, this)) ?? {};
            await this.send(kind, id, { ...fields, type }, { quiet: true });
            await this.store.releaseTimer(t);
            fired++;
          } catch (e) {
            this.log.warn({ err: e, timer: t.key }, 'timer event failed; retried after hold');
          }
        }),
      );
      if (due.length < 100) return fired;
    }
  }

  private told(kind: string, id: string, rec: ActorRecord, prev: ActorRecord | undefined): void {
    const t = rec.history!.at(-1)!;
    for (const fn of this.listeners) {
      try {
        fn(kind, id, t, prev, rec);
      } catch (e) {
        this.log.warn({ err: e }, 'transition listener failed');
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timerLoop) clearTimeout(this.timerLoop);
    await Promise.allSettled([...this.queues.values()]);
  }
}

type Step = (snap: AnyMachineSnapshot, event: EventObject) => [AnyMachineSnapshot, { type: string; params?: unknown }[]];

/**
 * XState's `transition(machine, snapshot, event)` with its inert actor scope made once per machine: `transition()`
 * builds a new actor for every call, which runs the machine's initial state and was two thirds of a transition's
 * cost (19 -> 6 us for a signal's DELIVER). Sharing the scope is safe for a machine that invokes nothing and
 * schedules no delayed event (its actor system is never used), which every hosted machine must be: refused here.
 */
function stepper(kind: string, machine: AnyStateMachine): Step {
  const nodes = (n: AnyStateMachine['root']): AnyStateMachine['root'][] => [n, ...Object.values(n.states).flatMap(nodes)];
  if (nodes(machine.root).some((n) => n.after.length || n.invoke.length)) throw new Error(`actor kind ${kind}: a hosted machine may not invoke actors or use delayed transitions`);
  const self = createActor(machine);
  let actions: { type: string; params?: unknown }[] = [];
  const scope = {
    self,
    id: '',
    sessionId: '',
    system: self.system,
    logger: () => {},
    defer: () => {},
    stopChild: () => {},
    emit: () => {},
    actionExecutor: (a: { type: string; params?: unknown }) => void actions.push(a),
  } as unknown as AnyActorScope;
  return (snap, event) => {
    actions = [];
    const next = machine.transition(snap, event, scope) as AnyMachineSnapshot;
    return [next, actions];
  };
}

/** The kind's own indexes plus its state index. */
const indexesOf = <C>(k: ActorKind<C>, id: string, rec: ActorRecord<C>): [string, string][] => [...k.indexes(rec), [actorStateIndex(k.name, rec.value), `${k.name}:${id}`]];

function journalOps<C>(k: ActorKind<C>, rec: ActorRecord<C>, prev: ActorRecord<C> | undefined, event?: Record<string, unknown>): Op[] {
  const j = k.journal?.(rec, prev, event);
  return (Array.isArray(j) ? j : j ? [j] : []).map((a): Op => ({ op: 'append', log: a.log, entry: a.entry }));
}

/** Adds the unique-record ops of a move to `ops`; answers the records newly claimed. */
function diffUniques<C>(k: ActorKind<C>, id: string, before: ActorRecord<C> | undefined, after: ActorRecord<C>, ops: Op[]): { key: string; code: ErrorCode }[] {
  if (!k.uniques) return [];
  const held = new Set((before ? k.uniques(before) : []).map((u) => u.key));
  const next = k.uniques(after);
  const keep = new Set(next.map((u) => u.key));
  for (const key of held) if (!keep.has(key)) ops.push({ op: 'del', key });
  const claimed = next.filter((u) => !held.has(u.key));
  for (const u of claimed) ops.push({ op: 'put', key: u.key, value: { kind: k.name, id }, expect: 0 });
  return claimed;
}

export const timerKey = (kind: string, id: string, event: string) => JSON.stringify([kind, id, event]);

function diffIndexes(before: [string, string][], after: [string, string][]): Op[] {
  const key = ([i, m]: [string, string]) => i + '\u0000' + m;
  const a = new Set(after.map(key));
  const b = new Set(before.map(key));
  return [
    ...before.filter((e) => !a.has(key(e))).map(([index, member]): Op => ({ op: 'index', index, member, remove: true })),
    ...after.filter((e) => !b.has(key(e))).map(([index, member]): Op => ({ op: 'index', index, member })),
  ];
}

function diffTimers(kind: string, id: string, before: { event: string; at: number }[], after: { event: string; at: number }[]): Op[] {
  const ops: Op[] = [];
  const next = new Map(after.map((t) => [t.event, t.at]));
  for (const t of before) if (!next.has(t.event)) ops.push({ op: 'timer', key: timerKey(kind, id, t.event), at: null });
  const prev = new Map(before.map((t) => [t.event, t.at]));
  for (const t of after) if (prev.get(t.event) !== t.at) ops.push({ op: 'timer', key: timerKey(kind, id, t.event), at: t.at });
  return ops;
}
