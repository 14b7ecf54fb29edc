/** Marks pushed signals delivered, once per signal and process (a role of many sockets makes one attempt). */
import type { Signals } from '../signals/service.js';

const FORGET_MS = 10_000;

export class Deliverer {
  private recent = new Set<string>();
  constructor(private signals: Signals) {}

  pushed(signalId: string): void {
    if (this.recent.has(signalId)) return;
    this.recent.add(signalId);
    setTimeout(() => this.recent.delete(signalId), FORGET_MS).unref();
    void this.signals.deliver(signalId).catch(() => this.recent.delete(signalId));
  }
}
