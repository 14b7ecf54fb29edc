import { elapsed } from '../clock.js';
import { AppError } from '../errors.js';
import type { Store } from '../store/port.js';

export const VERSION = '0.1.0';
const PING_TIMEOUT_MS = 1000;

export class Health {
  private startedAt = elapsed();
  /** parts that add a line to /health/detailed (e.g. the vector index kind) */
  private details = new Map<string, () => unknown>();
  private inFlight: Promise<number> | undefined;
  constructor(private store: Store) {}

  report(name: string, fn: () => unknown): void {
    this.details.set(name, fn);
  }

  uptimeSeconds(): number {
    return Math.floor((elapsed() - this.startedAt) / 1000);
  }

  /**
   * Round-trip to the backend, or HEALTH_DB_UNREACHABLE. Callers arriving while a ping is out share it (a
   * probe answered by a ping sent at most one round trip before it), so a burst of probes costs the backend
   * one command and the process one timer.
   */
  ping(): Promise<number> {
    return (this.inFlight ??= this.pingOnce().finally(() => (this.inFlight = undefined)));
  }

  private async pingOnce(): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.store.ping(),
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('ping timeout')), PING_TIMEOUT_MS))),
      ]);
    } catch (e) {
      throw new AppError('HEALTH_DB_UNREACHABLE', `${this.store.backend} backend unreachable: ${(e as Error).message}`, { backend: this.store.backend });
    } finally {
      clearTimeout(timer);
    }
  }

  async summary() {
    await this.ping();
    return { status: 'ok' };
  }

  async detailed() {
    const latency = await this.ping();
    return {
      status: 'ok',
      backend: this.store.backend,
      database: { reachable: true, latency_ms: Math.round(latency * 1000) / 1000 },
      uptime_seconds: this.uptimeSeconds(),
      version: VERSION,
      ...Object.fromEntries([...this.details].map(([name, fn]) => [name, fn()])),
    };
  }
}
