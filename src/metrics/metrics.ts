/**
 * Prometheus metrics (prom-client) on a registry of our own, so two services in one process (tests) do
 * not share counters. Store latency comes from a decorator around the store; counts that live in the
 * store (signals by delivery state) are read at scrape time, never kept on the write path.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Store } from '../store/port.js';
import type { ActorRecord, Transition } from '../runtime/runtime.js';
import { SIGNAL, signalIndexes } from '../signals/kind.js';

export const DELIVERY_STATES = ['waiting', 'blocked', 'pending', 'delivered', 'leased', 'acked', 'dead_letter'] as const;

export interface RequestDone {
  requestId: string;
  method: string;
  /** the route pattern (`/thread/:id`), never the raw path */
  route: string;
  status: number;
  ms: number;
  identityId?: string;
}

/** how often the event-loop delay is sampled: the reported delays include it (an idle loop shows this much) */
export const LOOP_DELAY_RESOLUTION_MS = 20;

export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  readonly pushConnections: Gauge;
  readonly leaseExpiries: Counter;
  readonly deadLetters: Counter;
  readonly webhookAttempts: Counter<'outcome'>;
  readonly federationAttempts: Counter<'outcome'>;
  readonly storeDuration: Histogram<'op'>;
  private open = { count: () => 0 };

  constructor(store: Store) {
    const registers = [this.registry];
    // includes nodejs_eventloop_lag_seconds and the event loop delay percentiles
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: LOOP_DELAY_RESOLUTION_MS });
    this.registry.setDefaultLabels({ backend: store.backend });
    this.httpRequests = new Counter({ name: 'svc_http_requests_total', help: 'HTTP requests answered, by route pattern and status', labelNames: ['method', 'route', 'status'], registers });
    this.httpDuration = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'HTTP request latency from the first byte to the answer, by route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    const open = this.open;
    this.pushConnections = new Gauge({
      name: 'svc_push_connections',
      help: 'Open push connections of this process: WebSocket sockets and SSE streams',
      registers,
      collect() {
        this.set(open.count());
      },
    });
    new Gauge({
      name: 'svc_signals',
      help: 'Signals by delivery state (read from the store indexes at scrape time)',
      labelNames: ['delivery_state'],
      registers,
      async collect() {
        const counts = await Promise.all(DELIVERY_STATES.map((s) => store.count(signalIndexes.byState(s))));
        DELIVERY_STATES.forEach((s, i) => this.set({ delivery_state: s }, counts[i]));
      },
    });
    this.leaseExpiries = new Counter({ name: 'svc_lease_expiries_total', help: 'Task leases that ran out and were released by this process', registers });
    this.deadLetters = new Counter({ name: 'svc_dead_letters_total', help: 'Signals this process moved to dead_letter', registers });
    this.webhookAttempts = new Counter({ name: 'svc_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome', labelNames: ['outcome'], registers });
    this.federationAttempts = new Counter({ name: 'svc_federation_attempts_total', help: 'Federation delivery attempts to peers, by outcome', labelNames: ['outcome'], registers });
    this.storeDuration = new Histogram({
      name: 'svc_store_operation_duration_seconds',
      help: 'Store operation latency, by operation',
      labelNames: ['op'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    });
  }

  /** labelled children by `method route status`: prom-client hashes a label object on every unlabelled call */
  private requestSeries = new Map<string, { count: { inc(): void }; duration: { observe(v: number): void } }>();

  request(r: RequestDone): void {
    const id = `${r.method} ${r.route} ${r.status}`;
    let s = this.requestSeries.get(id);
    if (!s) {
      const labels = { method: r.method, route: r.route, status: String(r.status) };
      this.requestSeries.set(id, (s = { count: this.httpRequests.labels(labels), duration: this.httpDuration.labels(labels) }));
    }
    s.count.inc();
    s.duration.observe(r.ms / 1000);
  }

  /** where the open push connections are counted (the push hub) */
  countConnections(count: () => number): void {
    this.open.count = count;
  }

  /** A transition this process committed: a lease that had run out when its signal moved, a move into dead_letter. */
  transition(kind: string, t: Transition, prev: ActorRecord | undefined): void {
    if (kind !== SIGNAL || !prev) return;
    const lease = (prev.context as { claim_expires_at?: string | null }).claim_expires_at;
    if (t.from === 'leased' && lease && Date.parse(lease) <= Date.parse(t.at)) this.leaseExpiries.inc();
    if (t.to === 'dead_letter' && t.from !== 'dead_letter') this.deadLetters.inc();
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

const TIMED = ['get', 'getMany', 'commit', 'range', 'count', 'claimTimers', 'releaseTimer', 'nextTimerAt', 'readLog', 'lastSeq', 'logStart', 'trimLog', 'ping'] as const;

/** The store with every operation timed. */
export function instrumentStore(store: Store, metrics: Metrics): Store {
  const timed: Partial<Store> = {};
  for (const name of TIMED) {
    const fn = (store[name] as (...a: unknown[]) => Promise<unknown>).bind(store);
    const series = metrics.storeDuration.labels({ op: name });
    (timed as Record<string, unknown>)[name] = async (...args: unknown[]) => {
      const start = performance.now();
      try {
        return await fn(...args);
      } finally {
        series.observe((performance.now() - start) / 1000);
      }
    };
  }
  return new Proxy(store, {
    get(t, p) {
      if (p in timed) return timed[p as keyof Store];
      const v = Reflect.get(t, p);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}
