/**
 * Task dispatch with credits (docs/realtime.md, Task dispatch): a worker on a socket or stream names how many
 * tasks it takes at once; the service claims ready tasks for it through the same walk and claim call as
 * `workflow.next` (priority, dependencies, not_before and every claim guard apply) and hands each over as a
 * `task` frame. A credit comes back when the task leaves the worker's hands: its `done` or `release` answer,
 * an ack or release over HTTP, or a lease that ended; each journal entry saying so is seen here. A new ready
 * task anywhere (emit, dependency release, not_before, retry back-off, release) is a journal entry too: it
 * wakes the workers with free credits, so nothing polls.
 */
import Type from 'typebox';
import { compile, Key, validate } from '../validation.js';
import type { Logger } from '../log.js';
import type { Principal } from '../identity/model.js';
import { isSignalEntry, type JournalEntry } from '../journal/journal.js';
import { takeableTypes, type Inbox } from '../signals/inbox.js';
import { isOpenTask, type Signal } from '../signals/kind.js';
import { lostRace, type Signals, type TaskResult } from '../signals/service.js';
import type { Hub, Subscriber } from './hub.js';
import type { SignalContext } from '../../actors/signal.js';
import type { ActorRecord } from '../runtime/runtime.js';
import type { Versioned } from '../store/port.js';

/** the most tasks one worker holds at once */
export const MAX_CAPACITY = 256;

export interface TaskFrame {
  type: 'task';
  signal: Signal;
  claim_token: number | null;
}

/** Where a worker's tasks go: a socket or an SSE stream. */
export interface TaskSink {
  /** false once the peer is gone (the task is then released) */
  send(frame: TaskFrame): boolean;
  /** the holder's current principal (its key re-checked as its pushes are) */
  principal(): Principal;
}

export interface WorkTerms {
  capacity: number;
  task_types?: string[];
  lease_ms?: number;
  quiet?: boolean;
}

export interface Answer extends TaskResult {
  signal_id: string;
  claim_token?: number;
  outcome?: 'completed' | 'failed';
  lease_ms?: number;
  progress?: number;
  note?: string;
}

const WorkBody = compile(
  Type.Object({
    capacity: Type.Integer({ minimum: 0, maximum: MAX_CAPACITY }),
    task_types: Type.Optional(Type.Array(Key('task_type'))),
    lease_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
    quiet: Type.Optional(Type.Boolean()),
  }),
);

/** A `work` op's terms (or /tasks/stream's query, read into the same shape). */
export function checkTerms(body: Record<string, unknown>): WorkTerms {
  const { capacity, task_types, lease_ms, quiet } = validate(WorkBody, body);
  return { capacity, task_types, lease_ms, quiet };
}

export class TaskDispatch {
  private workers = new Set<Worker>();
  /** tasks a worker of this process is claiming right now: the others pass them over */
  readonly claiming = new Set<string>();
  /** which worker holds each handed-over task */
  readonly holders = new Map<string, Worker>();
  private stopWatch: (() => void) | undefined;

  constructor(
    readonly signals: Signals,
    readonly inbox: Inbox,
    private hub: Hub,
    readonly log: Logger,
  ) {}

  start(): void {
    let open = true;
    const sub: Subscriber = {
      lastSeq: 0,
      get open() {
        return open;
      },
      wants: (e) => isSignalEntry(e) && e.signal.signal_type === 'task',
      deliver: (e) => {
        this.seen(e);
        return 'sent';
      },
      room: async () => open,
      fail: () => (open = false),
    };
    void this.hub.attach(sub);
    this.stopWatch = () => {
      open = false;
      this.hub.detach(sub);
    };
  }

  stop(): void {
    this.stopWatch?.();
  }

  worker(sink: TaskSink): Worker {
    const w = new Worker(this, sink);
    this.workers.add(w);
    return w;
  }

  forget(w: Worker): void {
    this.workers.delete(w);
  }

  /** A task change: a held task that left its holder's hands frees a credit; a task ready now wakes the idle workers. */
  private seen(e: JournalEntry): void {
    if (!isSignalEntry(e)) return;
    const s = e.signal;
    this.holders.get(s.id)?.changed(s);
    if (isOpenTask(s.delivery_state, s)) this.wake(s.payload?.task_type);
  }

  /** A task is ready to take: the workers with free credits for its type walk again. */
  wake(taskType: unknown): void {
    const type = typeof taskType === 'string' ? taskType : undefined;
    for (const w of this.workers) if (w.takes(type)) w.fill();
  }
}

export class Worker {
  private terms: WorkTerms = { capacity: 0 };
  /** handed-over tasks and their claim tokens */
  readonly held = new Map<string, number | null>();
  private claims = 0;
  /** `done`s waiting for the walk that picks their next tasks */
  private wanting: ((task: Versioned<ActorRecord<SignalContext>> | undefined) => void)[] = [];
  private filling = false;
  private again = false;
  private closed = false;

  constructor(
    private d: TaskDispatch,
    private sink: TaskSink,
  ) {}

  get quiet(): boolean {
    return this.terms.quiet === true;
  }

  /** New terms; the answer says what the worker holds now. Lowering capacity keeps the tasks already held. */
  work(terms: WorkTerms): { capacity: number; held: number; task_types: string[]; quiet: boolean } {
    this.terms = terms;
    this.fill();
    return { capacity: terms.capacity, held: this.held.size, task_types: terms.task_types ?? [], quiet: this.quiet };
  }

  takes(taskType: string | undefined): boolean {
    if (this.closed || this.held.size + this.claims >= this.terms.capacity) return false;
    const types = this.terms.task_types;
    return !types?.length || (taskType !== undefined && types.includes(taskType));
  }

  /**
   * Ordinary pushes a quiet worker goes without: changes of tasks of the types it works, other than tasks it
   * emitted itself (their progress and results are the emitter's business).
   */
  mutes(e: JournalEntry, identityId: string | undefined): boolean {
    if (!this.quiet || !isSignalEntry(e) || e.signal.signal_type !== 'task' || e.signal.from_identity === identityId) return false;
    const types = this.terms.task_types;
    const type = e.signal.payload?.task_type;
    return !types?.length || (typeof type === 'string' && types.includes(type));
  }

  /** Whether this worker holds the task under this token: its answers are then this worker's. */
  holds(signalId: string): boolean {
    return this.held.has(signalId);
  }

  /** The worker's answer about a task it holds: done and release free the credit, heartbeat keeps it. */
  async answer(p: Principal, op: 'done' | 'release' | 'heartbeat', a: Answer): Promise<Signal> {
    const token = a.claim_token ?? this.held.get(a.signal_id) ?? undefined;
    if (op === 'heartbeat') return this.d.signals.heartbeat(p, a.signal_id, { lease_ms: a.lease_ms ?? this.terms.lease_ms, claim_token: token, progress: a.progress, note: a.note });
    const outcome = op === 'release' ? 'failed' : (a.outcome ?? 'completed');
    // the credit this done frees is filled in the ack's own commit: the walk runs first, the claim rides along
    const next = op === 'done' && this.free() >= 0 ? await this.nextTask() : undefined;
    try {
      const { acked, claimed } = await this.d.signals.ackThenClaim(p, a.signal_id, outcome, token, { result: a.result, resources: a.resources }, next && { task: next, leaseMs: this.terms.lease_ms });
      if (claimed) this.handOver(p, claimed);
      this.drop(a.signal_id);
      return acked;
    } finally {
      if (next) {
        this.picked(next);
        // not claimed after all: the other workers passed it over while it was picked here
        if (!this.d.holders.has(next.value.context.id)) this.d.wake(next.value.context.payload?.task_type);
      }
    }
  }

  /**
   * A held task changed elsewhere: once it is no longer claimed under our token, the credit is free again.
   * Tokens only grow, so an entry from before our claim (a lagging push) is told apart and ignored.
   */
  changed(s: Signal): void {
    const ours = this.held.get(s.id);
    if (ours === undefined) return;
    const token = s.claim_token ?? 0;
    if (token > (ours ?? 0) || (token === ours && s.delivery_state !== 'leased')) this.drop(s.id);
  }

  private drop(id: string): void {
    if (!this.held.delete(id)) return;
    if (this.d.holders.get(id) === this) this.d.holders.delete(id);
    this.fill();
  }

  /** Claims until the credits are used or nothing is ready; a wake-up meanwhile runs the walk once more. */
  fill(): void {
    if (this.closed) return;
    if (this.filling) return void (this.again = true);
    this.filling = true;
    void this.fillLoop()
      .catch((err) => this.d.log.warn({ err }, 'task dispatch failed'))
      .finally(() => {
        this.filling = false;
        if (this.again) {
          this.again = false;
          this.fill();
        }
      });
  }

  /** The next task for the credit a `done` frees: the `done`s of one event-loop turn share one walk. */
  private nextTask(): Promise<Versioned<ActorRecord<SignalContext>> | undefined> {
    return new Promise((resolve) => {
      this.wanting.push(resolve);
      if (this.wanting.length === 1) setImmediate(() => void this.pickForDones());
    });
  }

  private async pickForDones(): Promise<void> {
    const waiting = this.wanting.splice(0);
    const got = await this.pick(this.sink.principal(), waiting.length).catch((err: unknown) => {
      this.d.log.warn({ err }, 'task dispatch failed');
      return [];
    });
    waiting.forEach((resolve, i) => resolve(got[i]));
  }

  /** credits not used by held tasks or claims under way */
  private free(): number {
    return this.terms.capacity - this.held.size - this.claims;
  }

  private async fillLoop(): Promise<void> {
    for (;;) {
      this.again = false;
      const free = this.free();
      if (this.closed || free <= 0) return;
      if ((await this.claimSome(free)) === 0 && !this.again) return;
    }
  }

  /** Picks up to `n` ready tasks in one walk, then claims them together (one turn's commits share a group commit). */
  private async claimSome(n: number): Promise<number> {
    const p = this.sink.principal();
    const picked = await this.pick(p, n);
    const got = await Promise.all(picked.map((task) => this.claimOne(p, task)));
    return got.filter(Boolean).length;
  }

  /** Up to `n` ready tasks no worker of this process holds or is claiming, each counted as a claim under way until `picked`. */
  private async pick(p: Principal, n: number): Promise<Versioned<ActorRecord<SignalContext>>[]> {
    const types = takeableTypes(this.terms.task_types, p.key.permissions.task_types);
    if (types?.length === 0 || this.closed) return [];
    const picked: Versioned<ActorRecord<SignalContext>>[] = [];
    const skip = (id: string) => this.d.claiming.has(id) || this.d.holders.has(id);
    for await (const task of this.d.inbox.openTasks(p, skip, types)) {
      const id = task.value.context.id;
      if (skip(id)) continue;
      this.d.claiming.add(id);
      this.claims++;
      picked.push(task);
      if (picked.length === n) break;
    }
    return picked;
  }

  /** A picked task's claim has ended, taken or not. */
  private picked(task: Versioned<ActorRecord<SignalContext>>): void {
    this.claims--;
    this.d.claiming.delete(task.value.context.id);
  }

  private async claimOne(p: Principal, task: Versioned<ActorRecord<SignalContext>>): Promise<boolean> {
    try {
      this.handOver(p, await this.d.signals.claimRead(p, task, this.terms.lease_ms));
      return true;
    } catch (e) {
      if (!lostRace(e)) throw e;
      return false;
    } finally {
      this.picked(task);
    }
  }

  /** A task claimed for this worker: held under its token and sent, or released at once when the peer is gone. */
  private handOver(p: Principal, s: Signal): void {
    this.held.set(s.id, s.claim_token);
    this.d.holders.set(s.id, this);
    if (this.closed || !this.sink.send({ type: 'task', signal: s, claim_token: s.claim_token })) this.releaseOne(p, s.id);
  }

  private releaseOne(p: Principal, id: string): void {
    const token = this.held.get(id) ?? undefined;
    this.held.delete(id);
    if (this.d.holders.get(id) === this) this.d.holders.delete(id);
    // a release that fails (the lease already ended, or the task moved on) leaves the task to its timers
    this.d.signals.ack(p, id, 'failed', token).catch((err) => this.d.log.debug({ err, signal_id: id }, 'release on close refused'));
  }

  /** The socket or stream closed: its tasks are released at once (a failed attempt, as a lease that ended). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.d.forget(this);
    const p = this.sink.principal();
    for (const id of [...this.held.keys()]) this.releaseOne(p, id);
  }
}
