/**
 * The SSE stream at /signals/stream. The key comes in the `token` query parameter (EventSource cannot set
 * headers); auth errors are answered as JSON before the stream starts. Each event is `event: signal` (or
 * `signal.updated`), `id:` the journal cursor, `data:` the Signal; `Last-Event-ID` (header or
 * `last_event_id` query) resumes without a gap.
 */
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { AppError } from '../errors.js';
import { commaList } from '../validation.js';
import { requestId } from '../ids.js';
import { principalForKey } from '../auth/keys.js';
import { exchange, statusLine, type Exchange } from '../http/uws.js';
import type { Principal } from '../identity/model.js';
import type { JournalEntry } from '../signals/kind.js';
import { Audience } from './audience.js';
import { parseCursor, REPLAY_DRAIN_TIMEOUT_MS, type Subscriber } from './hub.js';
import type { Realtime } from './realtime.js';

class Stream implements Subscriber {
  lastSeq = 0;
  /** bytes written since the socket last reported it could take more */
  private backlog = 0;
  private watching = false;
  private waiters: (() => void)[] = [];
  private heartbeat: NodeJS.Timeout;
  private done = false;

  constructor(
    private x: Exchange,
    private rt: Realtime,
    private principal: Principal,
    private audience: Audience,
    rid: string,
  ) {
    const res = x.res;
    res.cork(() => {
      res.writeStatus(statusLine(200));
      res.writeHeader('content-type', 'text/event-stream');
      res.writeHeader('cache-control', 'no-cache');
      res.writeHeader('x-accel-buffering', 'no');
      res.writeHeader('x-request-id', rid);
      res.write(`retry: 1000\n: cursor ${rt.hub.cursor}\n\n`);
    });
    this.heartbeat = setInterval(() => this.write(': heartbeat\n\n'), rt.config.sseHeartbeatMs);
    rt.presence.connected(principal.identity.id);
    x.onAbort = () => this.finish();
  }

  private get res(): HttpResponse {
    return this.x.res;
  }

  wants(e: JournalEntry): boolean {
    return this.audience.wants(e);
  }

  deliver(e: JournalEntry, seq: number): boolean {
    const sent = this.write(`id: ${seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e.signal)}\n\n`);
    if (sent && e.type === 'signal' && e.signal.delivery_state === 'pending' && this.audience.isRecipient(e)) this.rt.deliverer.pushed(e.signal.id);
    return sent;
  }

  ready(): Promise<void> {
    if (this.done || this.backlog <= this.rt.config.pushMaxBufferBytes) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.end(), REPLAY_DRAIN_TIMEOUT_MS);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** A consumer over the buffer limit is ended; EventSource reconnects with Last-Event-ID and catches up. */
  private write(chunk: string): boolean {
    if (this.done) return false;
    if (this.backlog > this.rt.config.pushMaxBufferBytes) {
      this.end();
      return false;
    }
    let ok = true;
    this.res.cork(() => (ok = this.res.write(chunk)));
    if (!ok) {
      this.backlog += Buffer.byteLength(chunk);
      if (!this.watching) {
        this.watching = true;
        this.res.onWritable(() => {
          this.backlog = 0;
          this.watching = false;
          this.release();
          return true;
        });
      }
    }
    return true;
  }

  private release(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  end(): void {
    if (this.done) return;
    if (!this.x.aborted) {
      this.x.aborted = true;
      this.res.cork(() => this.res.end());
    }
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.heartbeat);
    this.rt.hub.detach(this);
    this.rt.presence.disconnected(this.principal.identity.id);
    this.release();
  }
}

export function mountSse(app: TemplatedApp, rt: Realtime, fail: (x: Exchange, rid: string, e: unknown) => void): void {
  app.get('/signals/stream', (res, req) => {
    const x = exchange(res);
    const q = new URLSearchParams(req.getQuery() ?? '');
    const lastEventId = req.getHeader('last-event-id') || q.get('last_event_id') || undefined;
    const rid = requestId();
    let stream: Stream | undefined;
    void (async () => {
      try {
        const token = q.get('token');
        if (!token) throw new AppError('AUTH_KEY_MISSING', 'Pass the API key in the token query parameter');
        const principal = await principalForKey(rt.store, token, false);
        const after = lastEventId !== undefined ? parseCursor(lastEventId, 'last_event_id') : undefined;
        if (after !== undefined) await rt.hub.assertResumable(after);
        await rt.reach.load(principal.identity.id);
        if (x.aborted) return;
        const audience = new Audience(principal, rt.reach, principal.identity.is_admin, { rings: commaList(q.get('ring')), types: commaList(q.get('type')) });
        stream = new Stream(x, rt, principal, audience, rid);
        await rt.hub.attach(stream, after);
      } catch (e) {
        // once the stream has started, an error can only end it; EventSource reconnects and resumes
        if (stream) {
          rt.log.warn({ err: e }, 'sse replay failed');
          stream.end();
        } else fail(x, rid, e);
      }
    })();
  });
}
