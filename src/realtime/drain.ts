/** Waiting for a send buffer to make room: the one helper both push transports use. */
export class Drain {
  private waiters = new Set<() => void>();
  private closed = false;

  constructor(private hasRoom: () => boolean) {}

  /** Resolves true once there is room; false when the channel closes or `timeoutMs` passes first. */
  wait(timeoutMs: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.hasRoom()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(ok);
      };
      const check = () => {
        if (this.closed) done(false);
        else if (this.hasRoom()) done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      this.waiters.add(check);
    });
  }

  /** The channel wrote some of its buffer out: waiters look again. */
  notify(): void {
    for (const w of [...this.waiters]) w();
  }

  close(): void {
    this.closed = true;
    this.notify();
  }
}
