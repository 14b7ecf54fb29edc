/**
 * Runs the HTTP POST of a webhook delivery that committed to `queued`, through the shared outbound queue
 * (bounded in flight, a time limit per attempt, the SSRF guard): when a slot is free the attempt starts
 * (`START`, the fence against a stale queue entry), is POSTed, and its outcome goes back to the actor as
 * `RESULT`. A process that dies mid-send leaves the actor `sending`; its `SEND_TIMEOUT` timer retries. One that
 * dies with the delivery still queued leaves it `queued`; its `REQUEUE` timer queues it again.
 */
import type { DeliveryContext } from '../../actors/webhook-delivery.js';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime/runtime.js';
import { DELIVERY, sign, webhookKeys, type Webhook } from './model.js';
import { Outbound, startAttempt } from './outbound.js';

export class Sender {
  private out: Outbound;

  constructor(
    private rt: Runtime,
    config: Pick<Config, 'webhookTimeoutMs' | 'webhookMaxInFlight' | 'allowPrivateNetwork'>,
    log: Logger,
  ) {
    const limits = { timeoutMs: config.webhookTimeoutMs, maxInFlight: config.webhookMaxInFlight, allowPrivateNetwork: config.allowPrivateNetwork };
    this.out = new Outbound(limits, (id) => this.attempt(id), log, 'webhook');
  }

  enqueue(id: string): void {
    this.out.enqueue(id);
  }

  private async attempt(id: string): Promise<void> {
    const c = await startAttempt<DeliveryContext>(this.rt, DELIVERY, id);
    if (!c) return;
    const hook = (await this.rt.store.get<Webhook>(webhookKeys.webhook(c.webhook_id)))?.value;
    const outcome = hook?.active ? await this.post(hook, c) : { ok: false, give_up: true, response_code: null, latency_ms: null, error: hook ? 'the webhook is inactive' : 'the webhook was deleted' };
    if (this.out.isStopped) return;
    this.out.recorded(await this.rt.send(DELIVERY, id, { type: 'RESULT', attempt: c.attempt_count, ...outcome }, { quiet: true }), id, c.attempt_count);
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
      const { status } = await this.out.post(new URL(hook.url), headers, body);
      const ok = status >= 200 && status < 300;
      return { ok, response_code: status, latency_ms: latency(), error: ok ? null : `HTTP ${status}` };
    } catch (e) {
      return { ok: false, response_code: null, latency_ms: latency(), error: (e as Error).message };
    }
  }

  /** Stops sending; attempts in flight are abandoned unrecorded and retried by their sending timers. */
  stop(): void {
    this.out.stop();
  }
}
