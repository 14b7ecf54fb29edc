/**
 * Round-robin among identities waiting for the same thing (docs/signals.md, Fair concurrency). Callers of one
 * line take turns one at a time; when a turn ends, the next is the waiting caller whose identity was served
 * least recently (never served first), ties in arrival order. So an identity with many calls in flight gets
 * one turn for each turn of every other identity waiting, not its calls' share of the line.
 */
interface Waiter {
  identity: string;
  arrived: number;
  start: () => void;
}

interface Line {
  waiting: Waiter[];
  busy: boolean;
  /** the turn number of each identity's last service; forgotten when the line empties */
  served: Map<string, number>;
}

export class FairTurns {
  private lines = new Map<string, Line>();
  private count = 0;

  /** Runs `fn` in the caller's turn on `line`; `fn` answers whether the identity was served (it counts then). */
  async take<T>(line: string, identity: string, fn: () => Promise<{ result: T; served: boolean }>): Promise<T> {
    const l = this.lines.get(line) ?? this.open(line);
    await new Promise<void>((start) => {
      l.waiting.push({ identity, arrived: this.count++, start });
      this.advance(line, l);
    });
    try {
      const r = await fn();
      if (r.served) l.served.set(identity, this.count++);
      return r.result;
    } finally {
      l.busy = false;
      this.advance(line, l);
    }
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
    let next = 0;
    for (let i = 1; i < l.waiting.length; i++) if (this.rank(l, l.waiting[i], l.waiting[next]) < 0) next = i;
    const [w] = l.waiting.splice(next, 1);
    l.busy = true;
    w.start();
  }
}
