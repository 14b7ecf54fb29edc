/**
 * Outbound HTTP for the delivery senders (webhooks, federation), off every request path: a bounded number of
 * attempts in flight per process (a queue of delivery ids, each at most once), a time limit per POST, and the
 * SSRF guard (the connection goes only to an address just checked). Stopping aborts the POSTs in flight.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { AttemptsContext } from '../../actors/outbound-delivery.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime/runtime.js';
import { allowedAddresses } from './address.js';

/** Response bytes read before the socket is released; a longer answer is cut (and kept only this far). */
const MAX_RESPONSE_BYTES = 64 * 1024;

export interface OutboundLimits {
  timeoutMs: number;
  maxInFlight: number;
  allowPrivateNetwork: boolean;
}

export interface Answer {
  status: number;
  /** the response body as text, at most MAX_RESPONSE_BYTES */
  body: string;
}

/**
 * Starts the attempt of a `queued` delivery as its queue entry gets a slot: the commit to `sending` is a
 * compare-and-set on the delivery, so exactly one entry (of this process or another) starts each attempt and
 * its clock runs from here, just before the request is written. Undefined when the delivery has moved past the
 * entry (started elsewhere, already sent, ...): that entry sends nothing.
 */
export async function startAttempt<C extends AttemptsContext>(rt: Runtime, kind: string, id: string): Promise<C | undefined> {
  const started = await rt.send<C>(kind, id, { type: 'START' }, { quiet: true });
  return started?.record.value === 'sending' ? started.record.context : undefined;
}

export class Outbound {
  private queue: string[] = [];
  /** the ids in `queue`: a delivery queued again while still waiting keeps its place */
  private waiting = new Set<string>();
  private inFlight = 0;
  private stopped = false;
  private aborts = new Set<AbortController>();

  constructor(
    private limits: OutboundLimits,
    private attempt: (id: string) => Promise<void>,
    private log: Logger,
    private what: string,
  ) {}

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Says when an attempt's result recorded nothing: its delivery moved on (the attempt timed out and another began) or is gone. */
  recorded(moved: unknown, id: string, attempt: number): void {
    if (!moved) this.log.info({ delivery: id, attempt }, `${this.what} result fenced off: recorded nothing`);
  }

  enqueue(id: string): void {
    if (this.stopped || this.waiting.has(id)) return;
    this.waiting.add(id);
    this.queue.push(id);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.inFlight < this.limits.maxInFlight && this.queue.length) {
      const id = this.queue.shift()!;
      this.waiting.delete(id);
      this.inFlight++;
      void this.attempt(id)
        .catch((e) => this.log.warn({ err: e, delivery: id }, `${this.what} attempt not recorded; its delivery's timer retries it`))
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }

  /**
   * One POST within the time limit, which covers the address check too (a slow DNS answer cannot stretch an
   * attempt past its sending timer); throws on a refused address, a network error or the timeout.
   */
  async post(url: URL, headers: Record<string, string>, body: string): Promise<Answer> {
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.limits.timeoutMs} ms`)), this.limits.timeoutMs);
    try {
      const addrs = await abortable(allowedAddresses(url.hostname, this.limits.allowPrivateNetwork), abort.signal);
      // connect only to an address just checked, never to a second DNS answer
      const lookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
        opts.all ? cb(null, addrs) : cb(null, addrs[0].address, addrs[0].family)) as unknown as LookupFunction;
      return await new Promise<Answer>((resolve, reject) => {
        const req = (url.protocol === 'https:' ? https : http).request(url, { method: 'POST', headers, lookup, signal: abort.signal }, (res) => {
          const chunks: Buffer[] = [];
          let seen = 0;
          res.on('data', (chunk: Buffer) => {
            seen += chunk.length;
            if (seen > MAX_RESPONSE_BYTES) res.destroy();
            else chunks.push(chunk);
          });
          const done = () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
          res.on('close', done);
          res.on('error', done);
        });
        req.on('error', (e) => reject(abort.signal.aborted && abort.signal.reason instanceof Error ? abort.signal.reason : e));
        req.end(body);
      });
    } finally {
      clearTimeout(timer);
      this.aborts.delete(abort);
    }
  }

  /** Stops sending; attempts in flight are abandoned unrecorded (retried by their SEND_TIMEOUT), queued ones are queued again by their REQUEUE. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    this.waiting.clear();
    for (const a of this.aborts) a.abort(new Error('service stopping'));
  }
}

/** `p`, or the signal's reason once it aborts first. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
