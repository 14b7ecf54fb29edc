/**
 * Round-robin among identities waiting for the same thing (docs/signals.md, Fair concurrency). A turn serves
 * every caller waiting when it begins. Their picks start side by side (a pick's reads overlap the others'), but
 * each may take something only while it holds the turn's baton, handed on in order: next is always the caller
 * whose identity was served least recently (never served first), ties in arrival order. A finish (the claim's
 * commit) starts as soon as its pick is done, beside the others. Callers arriving meanwhile wait for the next
 * turn, which begins once every finish of this one is settled. So an identity with many calls in flight gets one
 * pick for each pick of every other identity waiting, a turn's reads overlap instead of running one after
 * another, and its claims share a group commit.
 */
interface Waiter {
  identity: string;
  arrived: number;
  /** hands this caller the baton */
  go: () => void;
  /** starts this caller's pick (its turn has begun, with what the turn's picks share); settles when the pick is done */
  run: (shared: Set<string>) => Promise<{ served: boolean; settled: Promise<unknown> }>;
}

interface Line {
  waiting: Waiter[];
  busy: boolean;
  /** the pick number of each identity's last service; forgotten when the line empties */
  served: Map<string, number>;
}

export class FairTurns {
  private lines = new Map<string, Line>();
  private count = 0;

  /**
   * Runs `pick` in the caller's turn on `line`: it may read at once, but takes nothing before `baton` settles,
   * and answers what it took and whether the identity was served (which counts then). `shared` is one set for
   * all picks of the turn (what they took, kept until the turn ends). Then `finish` runs with what it took,
   * beside the other finishes of the turn.
   */
  take<P, T>(line: string, identity: string, pick: (baton: Promise<void>, shared: Set<string>) => Promise<{ picked: P; served: boolean }>, finish: (picked: P) => Promise<T>): Promise<T> {
    const l = this.lines.get(line) ?? this.open(line);
    return new Promise<T>((resolve, reject) => {
      let go!: () => void;
      const baton = new Promise<void>((r) => (go = r));
      const run = async (shared: Set<string>) => {
        const r = await pick(baton, shared).catch((e: unknown) => (reject(e), undefined));
        if (!r) return { served: false, settled: Promise.resolve() };
        const done = finish(r.picked);
        done.then(resolve, reject);
        return { served: r.served, settled: done.catch(() => undefined) };
      };
      l.waiting.push({ identity, arrived: this.count++, go, run });
      this.advance(line, l);
    });
  }

  /** The identities waiting on a line, in the order their turns would come. */
  order(line: string): string[] {
    const l = this.lines.get(line);
    return l ? [...l.waiting].sort((a, b) => this.rank(l, a, b)).map((w) => w.identity) : [];
  }

  private open(line: string): Line {
    const l: Line = { waiting: [], busy: false, served: new Map() };
    this.lines.set(line, l);
    return l;
  }

  private rank(l: Line, a: Waiter, b: Waiter): number {
    return (l.served.get(a.identity) ?? -1) - (l.served.get(b.identity) ?? -1) || a.arrived - b.arrived;
  }

  private advance(line: string, l: Line): void {
    if (l.busy) return;
    if (!l.waiting.length) {
      this.lines.delete(line);
      return;
    }
    l.busy = true;
    const turn = l.waiting.splice(0);
    void this.serve(l, turn).finally(() => {
      l.busy = false;
      this.advance(line, l);
    });
  }

  private async serve(l: Line, turn: Waiter[]): Promise<void> {
    const shared = new Set<string>();
    const picks = new Map(turn.map((w) => [w, w.run(shared)]));
    const settled: Promise<unknown>[] = [];
    while (turn.length) {
      let next = 0;
      for (let i = 1; i < turn.length; i++) if (this.rank(l, turn[i], turn[next]) < 0) next = i;
      const [w] = turn.splice(next, 1);
      w.go();
      const r = await picks.get(w)!;
      if (r.served) l.served.set(w.identity, this.count++);
      settled.push(r.settled);
    }
    await Promise.all(settled);
  }
}
