/**
 * Connections held open (WebSockets and SSE streams) per client address, bounded by
 * MAX_CONNECTIONS_PER_ADDRESS: one address cannot pin the process's sockets and memory. A place is taken
 * before the key is checked and given back when the connection ends or is refused (docs/realtime.md).
 * Plain HTTP connections need no such count: the front end cuts one idle for 10 s (docs/reliability.md).
 */
import { AppError } from '../errors.js';

export class HeldConnections {
  private held = new Map<string, number>();

  constructor(private max: number) {}

  /** Takes a place for `address`, or throws RATE_LIMIT_EXCEEDED; call the answer once the connection ends. */
  take(address: string): () => void {
    const n = this.held.get(address) ?? 0;
    if (n >= this.max) throw new AppError('RATE_LIMIT_EXCEEDED', `This address holds its limit of ${this.max} open connections`, { limit: this.max, reason: 'connections' });
    this.held.set(address, n + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.held.get(address) ?? 1) - 1;
      if (left > 0) this.held.set(address, left);
      else this.held.delete(address);
    };
  }

  count(address: string): number {
    return this.held.get(address) ?? 0;
  }
}
