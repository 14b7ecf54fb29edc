/**
 * Prometheus metrics (prom-client) on a registry of our own, so two services in one process (tests) do
 * not share counters. Store latency comes from a decorator around the store; counts that live in the
 * store (signals by delivery state) are read at scrape time, never kept on the write path.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
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
  private requests = new SeriesSet([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]);
  /** store operation latency by `op`, resolved once per operation by `instrumentStore` */
  readonly storeDuration = new SeriesSet([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5]);
  readonly pushConnections: Gauge;
  readonly leaseExpiries: Counter;
  readonly deadLetters: Counter;
  readonly webhookAttempts: Counter<'outcome'>;
  readonly federationAttempts: Counter<'outcome'>;
  private open = { count: () => 0 };

  constructor(store: Store) {
    const registers = [this.registry];
    // includes nodejs_eventloop_lag_seconds and the event loop delay percentiles
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: LOOP_DELAY_RESOLUTION_MS });
    this.registry.setDefaultLabels({ backend: store.backend });
    this.registry.registerMetric(this.requests.counter('svc_http_requests_total', 'HTTP requests answered, by route pattern and status') as never);
    this.registry.registerMetric(this.requests.histogram('svc_http_request_duration_seconds', 'HTTP request latency from the first byte to the answer, by route pattern and status') as never);
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
    this.registry.registerMetric(this.storeDuration.histogram('svc_store_operation_duration_seconds', 'Store operation latency, by operation') as never);
  }

  request(r: RequestDone): void {
    const id = `${r.method} ${r.route} ${r.status}`;
    this.requests.series(id, () => ({ method: r.method, route: r.route, status: String(r.status) })).observe(r.ms / 1000);
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
    const series = metrics.storeDuration.series(name, () => ({ op: name }));
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

type Labels = Record<string, string>;

/** One label set's count, sum and observations per bucket (not cumulative). */
class Series {
  count = 0;
  sum = 0;
  readonly hits: number[];
  constructor(
    readonly labels: Labels,
    private bounds: number[],
    /** told once, at the first observation: a series is exposed from then on, as prom-client's are */
    private first: (s: Series) => void,
  ) {
    this.hits = bounds.map(() => 0);
  }

  reset(): void {
    this.count = 0;
    this.sum = 0;
    this.hits.fill(0);
  }

  observe(seconds: number): void {
    if (this.count === 0) this.first(this);
    this.count++;
    this.sum += seconds;
    for (let i = 0; i < this.bounds.length; i++) {
      if (seconds > this.bounds[i]) continue;
      this.hits[i]++;
      break;
    }
  }
}

/**
 * Counts and latencies counted in place, one `Series` per label set. prom-client's labelled children convert,
 * check and hash their labels on every call (a tenth of a `GET /health`, docs/benchmarks.md); the registry
 * reads these at scrape time in prom-client's own value format, so the exposition is the same.
 */
class SeriesSet {
  private byId = new Map<string, Series>();
  /** the series observed at least once, in the order of their first observation */
  private shown = new Set<Series>();
  constructor(private bounds: number[]) {}

  /** the series of `id`, made with `labels()` the first time */
  series(id: string, labels: () => Labels): Series {
    let s = this.byId.get(id);
    if (!s) this.byId.set(id, (s = new Series(labels(), this.bounds, (x) => this.shown.add(x))));
    return s;
  }

  counter(name: string, help: string) {
    return this.metric(name, help, 'counter', () => [...this.shown].map((s) => ({ value: s.count, labels: s.labels })));
  }

  histogram(name: string, help: string) {
    return this.metric(name, help, 'histogram', () =>
      [...this.shown].flatMap((s) => {
        let acc = 0;
        const buckets = this.bounds.map((le, i) => ({ labels: { le }, sharedLabels: s.labels, value: (acc += s.hits[i]), metricName: `${name}_bucket` }));
        return [
          ...buckets,
          { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: `${name}_bucket` },
          { labels: {} as Labels, sharedLabels: s.labels, value: s.sum, metricName: `${name}_sum` },
          { labels: {} as Labels, sharedLabels: s.labels, value: s.count, metricName: `${name}_count` },
        ];
      }),
    );
  }

  /** what prom-client's registry asks of a metric: `getForPromString` for the text, `get` (labels splayed) for JSON */
  private metric(name: string, help: string, type: string, values: () => { labels: Record<string, string | number>; sharedLabels?: Labels; value: number; metricName?: string }[]) {
    const read = (splay: boolean) => ({ name, help, type, aggregator: 'sum', values: values().map((v) => (splay && v.sharedLabels ? { value: v.value, metricName: v.metricName, labels: { ...v.labels, ...v.sharedLabels } } : v)) });
    return {
      name,
      help,
      type,
      aggregator: 'sum',
      get: async () => read(true),
      getForPromString: async () => read(false),
      // zeroed, not dropped: callers hold their series (instrumentStore), which show again at their next observation
      reset: () => {
        for (const s of this.byId.values()) s.reset();
        this.shown.clear();
      },
    };
  }
}
