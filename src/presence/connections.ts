/**
 * The open sockets and streams of every instance, as the console lists them. Each instance's push hub holds
 * its own; on a shared store (Redis) each instance also publishes them, one record per instance that expires
 * unless refreshed on presence's beat, rewritten on open and close (one write at a time, the latest state
 * after it) and withdrawn on shutdown, so a crashed instance's connections vanish once its record expires.
 */
import { hostname } from 'node:os';
import type { Store } from '../store/port.js';

export interface ConnectionInfo {
  transport: 'websocket' | 'sse';
  identity_id: string;
  key_id: string;
  opened_at: string;
}

export interface ConnectionQuery {
  identity_id?: string;
  key_id?: string;
}

export type ConnectionRow = ConnectionInfo & { cursor: string; catching_up: boolean };

export interface ConnectionLister {
  connections(q?: ConnectionQuery): ConnectionRow[];
  /** `fn` is called whenever a connection is attached or detached */
  onChange(fn: () => void): void;
}

interface Published {
  instance: string;
  /** ms: past it, the instance is taken for gone */
  expires_at: number;
  connections: ConnectionRow[];
  /** connections beyond MAX_PUBLISHED, not published */
  more: number;
}

export const boardIndex = 'connections:instances';
const boardKey = (instance: string) => `connections:instance:${instance}`;
/** one record per instance stays small: beyond this many its connections are counted, not listed */
export const MAX_PUBLISHED = 2000;
/** instances read per listing */
const MAX_INSTANCES = 200;

let servicesInProcess = 0;

/** host:pid, and a sequence number for a second service in one process (tests), so two never share a record. */
export function instanceName(): string {
  const n = ++servicesInProcess;
  return `${hostname()}:${process.pid}${n > 1 ? `#${n}` : ''}`;
}

export interface BoardOptions {
  /** how long a published record lives without a refresh (a few of presence's beats) */
  ttlMs: number;
  now?: () => number;
}

export class ConnectionBoard {
  private running: Promise<void> | undefined;
  private again = false;
  private listed = false;
  private stopped = false;
  private now: () => number;
  /** only a store other instances share is written: embedded is one process */
  private shared: boolean;

  constructor(
    private store: Store,
    readonly instance: string,
    private local: ConnectionLister,
    private opts: BoardOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.shared = store.backend !== 'embedded';
    if (this.shared) local.onChange(() => void this.publish());
  }

  /** Writes this instance's connections (or withdraws an empty list); a publish asked for while one runs follows it, once. */
  publish(): Promise<void> {
    if (!this.shared || this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.write()
      .catch(() => undefined)
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          void this.publish();
        }
      });
    return this.running;
  }

  private async write(): Promise<void> {
    const rows = this.local.connections();
    if (!rows.length) return this.withdraw();
    const record: Published = { instance: this.instance, expires_at: this.now() + this.opts.ttlMs, connections: rows.slice(0, MAX_PUBLISHED), more: Math.max(0, rows.length - MAX_PUBLISHED) };
    await this.store.commit([
      { op: 'put', key: boardKey(this.instance), value: record },
      { op: 'index', index: boardIndex, member: this.instance },
    ]);
    this.listed = true;
  }

  private async withdraw(): Promise<void> {
    if (!this.listed) return;
    await this.store.commit([
      { op: 'del', key: boardKey(this.instance) },
      { op: 'index', index: boardIndex, member: this.instance, remove: true },
    ]);
    this.listed = false;
  }

  /** This instance's connections live, the others' as last published (expired records skipped and swept). */
  async list(q: ConnectionQuery = {}): Promise<(ConnectionRow & { instance: string })[]> {
    const mine = this.local.connections(q).map((c) => ({ ...c, instance: this.instance }));
    if (!this.shared) return mine;
    const others = (await this.store.range(boardIndex, { limit: MAX_INSTANCES })).filter((m) => m !== this.instance);
    const records = await this.store.getMany<Published>(others.map(boardKey));
    const t = this.now();
    const rows = [...mine];
    records.forEach((r, i) => {
      if (!r || r.value.expires_at <= t) return void this.sweep(others[i], r?.version ?? 0).catch(() => undefined);
      for (const c of r.value.connections) if (matches(c, q)) rows.push({ ...c, instance: r.value.instance });
    });
    return rows;
  }

  /** Drops a gone instance's record and index member, unless it was refreshed since it was read. */
  private async sweep(instance: string, version: number): Promise<void> {
    await this.store.commit([
      { op: 'del', key: boardKey(instance), expect: version },
      { op: 'index', index: boardIndex, member: instance, remove: true },
    ]);
  }

  /** Stops publishing and withdraws this instance's record (a crash leaves it to expire instead). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await this.withdraw().catch(() => undefined);
  }
}

export const matches = (c: ConnectionInfo, q: ConnectionQuery): boolean => (!q.identity_id || c.identity_id === q.identity_id) && (!q.key_id || c.key_id === q.key_id);
