/**
 * Property test (fast-check) of fair concurrency against a model: four tasks of one concurrency_key run random
 * claims, renewals, completions, failures, cancels and clock advances through the signal machine, each move
 * also planning the key's record of leased tasks as the commit does (`nextLeased`); a refusal by either
 * commits nothing. Due timers fire from `signalTimers`. After every step each task's state, the record and the
 * model agree, and the record never lists more than the limit. And FairTurns, which orders workflow.next's
 * callers, serves identities round-robin.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signalMachine, signalTimers, type SignalContext } from '../../actors/signal.js';
import { nextLeased } from '../../src/signals/concurrency.js';
import { AppError } from '../../src/errors.js';
import { FairTurns } from '../../src/surface/turns.js';

/** settles once `ok()` holds, checked after each pending callback */
const waitUntil = async (ok: () => boolean) => {
  while (!ok()) await new Promise((r) => setImmediate(r));
};
import { T0, runMachine, signalContext } from '../helpers/machine.js';

const TASKS = 4;
const WORKERS = ['w1', 'w2', 'w3'];
type Op =
  | { op: 'claim'; task: number; worker: number; lease: number }
  | { op: 'ack' | 'fail'; task: number; worker: number }
  | { op: 'cancel'; task: number }
  | { op: 'tick'; ms: number };

interface ModelTask {
  status: 'open' | 'leased' | 'done';
  holder: string | null;
  exp: number;
}

class Model {
  tasks: ModelTask[] = Array.from({ length: TASKS }, () => ({ status: 'open', holder: null, exp: 0 }));
  constructor(
    private limit: number,
    public now: number,
  ) {}
  leased = () => this.tasks.filter((t) => t.status === 'leased').length;
  private over = (t: ModelTask) => t.status === 'leased' && t.exp <= this.now;
  claim(i: number, w: string, lease: number) {
    const t = this.tasks[i];
    // a lapsed lease taken again keeps its slot: the task never left `leased` in one commit
    if (t.status === 'leased' && (t.holder === w || this.over(t))) Object.assign(t, { holder: w, exp: this.now + lease });
    else if (t.status === 'open' && this.leased() < this.limit) Object.assign(t, { status: 'leased', holder: w, exp: this.now + lease });
  }
  end(i: number, w: string, to: 'open' | 'done') {
    const t = this.tasks[i];
    if (t.status === 'leased' && t.holder === w && !this.over(t)) Object.assign(t, { status: to, holder: null });
  }
  cancel(i: number) {
    const t = this.tasks[i];
    if (t.status !== 'done') Object.assign(t, { status: 'done', holder: null });
  }
  fire() {
    for (const t of this.tasks) if (this.over(t)) Object.assign(t, { status: 'open', holder: null });
  }
}

describe('fair concurrency against a model', () => {
  it('the key record lists exactly the leased tasks, never more than the limit, and claims are refused as the model says', () => {
    const task = fc.integer({ min: 0, max: TASKS - 1 });
    const worker = fc.integer({ min: 0, max: WORKERS.length - 1 });
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('claim' as const), task, worker, lease: fc.integer({ min: 50, max: 2000 }) }),
      fc.record({ op: fc.constantFrom('ack' as const, 'fail' as const), task, worker }),
      fc.record({ op: fc.constant('cancel' as const), task }),
      fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 1500 }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.array(op, { maxLength: 60 }), (limit, ops) => {
        const m = new Model(limit, T0);
        let record: string[] = [];
        const recs = Array.from({ length: TASKS }, (_, i) => ({ value: 'pending', context: signalContext({ id: `t${i}`, concurrency_key: 'deploy', concurrency_limit: limit, max_attempts: 1000 }) as SignalContext }));
        const send = (i: number, event: Record<string, unknown> & { type: string }) => {
          const r = runMachine(signalMachine, recs[i].value, recs[i].context, { now: m.now, ...event });
          if (r.refused || r.unchanged) return;
          const next = { value: r.value, context: r.context };
          try {
            record = nextLeased(record, `t${i}`, next, recs[i]) ?? record;
          } catch (e) {
            expect((e as AppError).details).toMatchObject({ reason: 'concurrency_limit', concurrency_limit: limit });
            return;
          }
          recs[i] = next;
        };
        for (const o of ops) {
          if (o.op === 'claim') {
            send(o.task, { type: 'CLAIM', identity: WORKERS[o.worker], lease_ms: o.lease });
            m.claim(o.task, WORKERS[o.worker], o.lease);
          } else if (o.op === 'ack' || o.op === 'fail') {
            send(o.task, { type: 'ACK', identity: WORKERS[o.worker], outcome: o.op === 'ack' ? 'completed' : 'failed' });
            m.end(o.task, WORKERS[o.worker], o.op === 'ack' ? 'done' : 'open');
          } else if (o.op === 'cancel') {
            send(o.task, { type: 'CANCEL' });
            m.cancel(o.task);
          } else if (o.op === 'tick') {
            m.now += o.ms;
            recs.forEach((r, i) => {
              for (const t of signalTimers(r.value, r.context).filter((x) => x.at <= m.now)) send(i, { type: t.event });
            });
            m.fire();
          }
          const want = m.tasks.map((t) => ({ open: 'pending', leased: 'leased', done: 'acked' })[t.status]);
          expect(recs.map((r) => r.value)).toEqual(want);
          expect([...record].sort()).toEqual(recs.flatMap((r, i) => (r.value === 'leased' ? [`t${i}`] : [])));
          expect(record.length).toBeLessThanOrEqual(limit);
          m.tasks.forEach((t, i) => t.status === 'leased' && expect(recs[i].context.claimed_by).toBe(t.holder));
        }
      }),
      { numRuns: 300 },
    );
  });
});

/** A line whose first caller holds its turn until `open()`; each pick notes its caller once it holds the baton. */
function gatedLine() {
  const turns = new FairTurns();
  const served: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const call = (who: string, o: { gets?: boolean; first?: boolean } = {}) =>
    turns.take(
      'job',
      who,
      async (baton) => {
        await baton;
        if (o.first) await gate;
        served.push(who);
        return { picked: who, served: o.gets ?? true };
      },
      async (picked) => picked,
    );
  return { turns, served, open, call };
}

describe('FairTurns', () => {
  it('serves the least recently served identity first, ties in arrival order', async () => {
    const { turns, served, open, call } = gatedLine();
    // a1 holds the line while a2, a3, a4, b1, b2 and c1 queue behind it
    const all = [call('a', { first: true }), call('a'), call('a'), call('a'), call('b'), call('b'), call('c')];
    expect(turns.order('job')).toEqual(['a', 'a', 'a', 'b', 'b', 'c']);
    open();
    await Promise.all(all);
    expect(served).toEqual(['a', 'b', 'c', 'a', 'b', 'a', 'a']);
  });

  it('a caller left unserved keeps its place ahead of those served', async () => {
    const { served, open, call } = gatedLine();
    const all = [call('a', { first: true }), call('b', { gets: false }), call('a'), call('b')];
    open();
    await Promise.all(all);
    expect(served).toEqual(['a', 'b', 'b', 'a']);
  });

  it('a turn picks for every caller waiting when it began, runs their finishes side by side, and the next turn waits for them', async () => {
    const turns = new FairTurns();
    const log: string[] = [];
    const commits: Array<() => void> = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const call = (who: string, first = false) =>
      turns.take(
        'job',
        who,
        async (baton) => {
          await baton;
          if (first) await gate;
          log.push(`pick ${who}`);
          return { picked: who, served: true };
        },
        (picked) =>
          new Promise<string>((done) => {
            log.push(`finish ${picked}`);
            commits.push(() => done(picked));
          }),
      );
    const first = [call('a1', true), call('b1'), call('c1')];
    open();
    await waitUntil(() => commits.length === 1);
    commits.shift()!();
    await waitUntil(() => commits.length === 2);
    // b1 and c1, who waited through a1's turn, are picked in one turn and commit side by side; d1 arriving now waits
    expect(log).toEqual(['pick a1', 'finish a1', 'pick b1', 'finish b1', 'pick c1', 'finish c1']);
    const late = call('d1');
    commits.shift()!();
    await new Promise((r) => setImmediate(r));
    expect(log).not.toContain('pick d1');
    commits.shift()!();
    await waitUntil(() => commits.length === 1);
    expect(log.slice(-2)).toEqual(['pick d1', 'finish d1']);
    commits.shift()!();
    expect(await Promise.all([...first, late])).toEqual(['a1', 'b1', 'c1', 'd1']);
  });

  it("a turn's picks read side by side, and each takes only once it holds the baton, in round-robin order", async () => {
    const turns = new FairTurns();
    const log: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const call = (who: string, identity: string, first = false) =>
      turns.take(
        'job',
        identity,
        async (baton) => {
          log.push(`read ${who}`);
          if (first) await gate;
          await baton;
          log.push(`take ${who}`);
          return { picked: who, served: true };
        },
        async (picked) => picked,
      );
    // a1 holds the first turn; a2, b1 and c1 form the second: all three read before any takes
    const all = [call('a1', 'a', true), call('a2', 'a'), call('b1', 'b'), call('c1', 'c')];
    open();
    expect(await Promise.all(all)).toEqual(['a1', 'a2', 'b1', 'c1']);
    expect(log).toEqual(['read a1', 'take a1', 'read a2', 'read b1', 'read c1', 'take b1', 'take c1', 'take a2']);
  });
});
