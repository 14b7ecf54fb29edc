/** Helpers of the push benches: agents made through the real invite path, and the service's event-loop lag. */
import { Client, join } from '../test/helpers/client.js';
import { LOOP_DELAY_RESOLUTION_MS } from '../src/metrics/metrics.js';

/** The service's event-loop stalls since the last scrape (the scrape resets them): the delay beyond the sampling tick. */
export async function loopLag(url: string): Promise<{ max_ms: number; p99_ms: number; cpu_s: number }> {
  const text = await (await fetch(url + '/metrics')).text();
  if (!text.includes('nodejs_eventloop_lag_max_seconds')) throw new Error(`no event-loop lag in /metrics: ${text.slice(0, 200)}`);
  // the histogram's samples are the interval between ticks: what exceeds the tick is the stall
  const get = (name: string) => Math.max(0, Number(new RegExp(`^${name}(?:\\{[^}]*\\})? ([\\d.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000 - LOOP_DELAY_RESOLUTION_MS);
  // the service process's CPU time so far (user + system), to divide a run's share by its emits
  const cpu_s = Number(/^process_cpu_seconds_total(?:\{[^}]*\})? ([\d.e+-]+)$/m.exec(text)?.[1] ?? NaN);
  return { max_ms: +get('nodejs_eventloop_lag_max_seconds').toFixed(2), p99_ms: +get('nodejs_eventloop_lag_p99_seconds').toFixed(2), cpu_s };
}

/** Creates `n` agents (`parallel` joins at a time, 20 by default); answers their ids and keys. */
export async function agents(url: string, adminKey: string, n: number, prefix: string, parallel = 20): Promise<{ id: string; key: string }[]> {
  const c = new Client(url, adminKey);
  const out: { id: string; key: string }[] = [];
  for (let i = 0; i < n; i += parallel) out.push(...(await Promise.all(Array.from({ length: Math.min(parallel, n - i) }, (_, j) => join(c, `${prefix}-${i + j}`)))).map((m) => ({ id: m.id, key: m.key })));
  return out;
}

