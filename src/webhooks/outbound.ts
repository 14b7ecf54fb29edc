/**
 * Outbound HTTP for the delivery senders (webhooks, federation), off every request path: a bounded number of
 * attempts in flight per process (a queue of delivery ids), a time limit per POST, and the SSRF guard
 * (the connection goes only to an address just checked). Stopping aborts the POSTs in flight.
 */
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Logger } from '../log.js';
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

export class Outbound {
  private queue: string[] = [];
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

  enqueue(id: string): void {
    if (this.stopped) return;
    this.queue.push(id);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.inFlight < this.limits.maxInFlight && this.queue.length) {
      const id = this.queue.shift()!;
      this.inFlight++;
      void this.attempt(id)
        .catch((e) => this.log.warn({ err: e, delivery: id }, `${this.what} attempt not recorded; its sending timer retries it`))
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }

  /** One POST within the time limit; throws on a refused address, a network error or the timeout. */
  async post(url: URL, headers: Record<string, string>, body: string): Promise<Answer> {
    const addrs = await allowedAddresses(url.hostname, this.limits.allowPrivateNetwork);
    // connect only to an address just checked, never to a second DNS answer
    const lookup = ((_host: string, opts: { all?: boolean }, cb: (...a: unknown[]) => void) =>
      opts.all ? cb(null, addrs) : cb(null, addrs[0].address, addrs[0].family)) as unknown as LookupFunction;
    const abort = new AbortController();
    this.aborts.add(abort);
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.limits.timeoutMs} ms`)), this.limits.timeoutMs);
    try {
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

  /** Stops sending; attempts in flight are abandoned unrecorded and retried by their sending timers. */
  stop(): void {
    this.stopped = true;
    this.queue.length = 0;
    for (const a of this.aborts) a.abort(new Error('service stopping'));
  }
}
