/**
 * Runs the HTTP POST of a delivery that committed to `sending`, off every request path: a bounded number
 * in flight per process, a time limit per attempt, the SSRF guard, and the outcome sent back to the actor
 * as `RESULT`. A process that dies mid-send leaves the actor `sending`; its `SEND_TIMEOUT` timer retries.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { DeliveryContext } from '../../actors/webhook-delivery.js';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime/runtime.js';
import { allowedAddresses } from './address.js';
import { DELIVERY, sign, webhookKeys, type Webhook } from './model.js';

/** Response bytes read (and dropped) before the socket is released. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export class Sender {
  private queue: string[] = [];
  private inFlight = 0;
  private stopped = false;
  private aborts = new Set<AbortController>();

  constructor(
    private rt: Runtime,
    private config: Pick<Config, 'webhookTimeoutMs' | 'webhookMaxInFlight' | 'allowPrivateNetwork'>,
    private log: Logger,
  ) {}

  enqueue(id: string): void {
    if (this.stopped) return;
    this.queue.push(id);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.inFlight < this.config.webhookMaxInFlight && this.queue.length) {
      const id = this.queue.shift()!;
      this.inFlight++;
      void this.attempt(id)
        .catch((e) => this.log.warn({ err: e, delivery: id }, 'webhook attempt not recorded; its sending timer retries it'))
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }

  private async attempt(id: string): Promise<void> {
    const cur = await this.rt.load<DeliveryContext>(DELIVERY, id);
    if (!cur || cur.value.value !== 'sending') return;
    const c = cur.value.context;
    const hook = (await this.rt.store.get<Webhook>(webhookKeys.webhook(c.webhook_id)))?.value;
    const outcome = hook?.active ? await this.post(hook, c) : { ok: false, give_up: true, response_code: null, latency_ms: null, error: hook ? 'the webhook is inactive' : 'the webhook was deleted' };
    if (this.stopped) return;
    await this.rt.send(DELIVERY, id, { type: 'RESULT', attempt: c.attempt_count, ...outcome }, { quiet: true });
  }

  private async post(hook: Webhook, c: DeliveryContext) {
    const body = JSON.stringify(c.payload);
    const ts = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': 'svc-webhooks/1',
      'webhook-id': c.id,
      'webhook-timestamp': String(ts),
      'webhook-signature': sign(hook.secret, c.id, ts, body),
    };
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    try {
      const code = await this.request(new URL(hook.url), headers, body);
      const ok = code >= 200 && code < 300;
      return { ok, response_code: code, latency_ms: latency(), error: ok ? null : `HTTP ${code}` };
    } catch (e) {
      return { ok: false, response_code: null, latency_ms: latency(), error: (e as Error).message };
    }
  }

  private async request(url: URL, headers: Record<string, string>, body: string): Promise<number> {
    const addrs = await allowedAddresses(url.hostname, this.config.allowPrivateNetwork);
    // connect only to an address just checked, never to a second DNS answer
    const lookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      opts.all ? cb(null, addrs) : cb(null, addrs[0].address, addrs[0].family)) as unknown as LookupFunction;
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.config.webhookTimeoutMs} ms`)), this.config.webhookTimeoutMs);
    try {
      return await new Promise<number>((resolve, reject) => {
        const req = (url.protocol === 'https:' ? https : http).request(url, { method: 'POST', headers, lookup, signal: abort.signal }, (res) => {
          let seen = 0;
          res.on('data', (chunk: Buffer) => {
            seen += chunk.length;
            if (seen > MAX_RESPONSE_BYTES) res.destroy();
          });
          res.on('close', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', (e) => reject(abort.signal.aborted && abort.signal.reason instanceof Error ? abort.signal.reason : e));
        req.end(body);
      });
    } finally {
      clearTimeout(timer);
      this.aborts.delete(abort);
    }
  }

  /** Stops sending; attempts in flight are abandoned unrecorded and retried by their sending timers. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    for (const a of this.aborts) a.abort(new Error('service stopping'));
  }
}
