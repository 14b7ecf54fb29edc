/**
 * Round-robin among identities waiting for the same thing (docs/signals.md, Fair concurrency). A turn serves
 * every caller waiting when it begins: their picks run one at a time, the next always the caller whose identity
 * was served least recently (never served first), ties in arrival order; then their finishes (the claims' commits)
 * run side by side, so they share a group commit. Callers arriving meanwhile wait for the next turn. So an identity
 * with many calls in flight gets one pick for each pick of every other identity waiting, not its calls' share of
 * the line, and a turn costs one commit however many it serves.
 */
interface Waiter {
  identity: string;
  arrived: number;
  /** picks, starts the finish, and answers whether the identity was served and when the finish is settled */
  run: () => Promise<{ served: boolean; settled: Promise<unknown> }>;
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
   * Runs `pick` in the caller's turn on `line` (it answers whether the identity was served, which counts then),
   * then `finish` with what it picked, beside the other finishes of the turn; the next turn starts once all of
   * them are settled.
   */
  take<P, T>(line: string, identity: string, pick: () => Promise<{ picked: P; served: boolean }>, finish: (picked: P) => Promise<T>): Promise<T> {
    const l = this.lines.get(line) ?? this.open(line);
    return new Promise<T>((resolve, reject) => {
      const run = async () => {
        const r = await pick().catch((e: unknown) => (reject(e), undefined));
        if (!r) return { served: false, settled: Promise.resolve() };
        const done = finish(r.picked);
        done.then(resolve, reject);
        return { served: r.served, settled: done.catch(() => undefined) };
      };
      l.waiting.push({ identity, arrived: this.count++, run });
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
    const settled: Promise<unknown>[] = [];
    while (turn.length) {
      let next = 0;
      for (let i = 1; i < turn.length; i++) if (this.rank(l, turn[i], turn[next]) < 0) next = i;
      const [w] = turn.splice(next, 1);
      const r = await w.run();
      if (r.served) l.served.set(w.identity, this.count++);
      settled.push(r.settled);
    }
    await Promise.all(settled);
  }
}
