/**
 * The SSE stream at /signals/stream. The key comes in the `token` query parameter (EventSource cannot set
 * headers); auth errors are answered as JSON before the stream starts. Each event is `event: signal` (or
 * `signal.updated`), `id:` the journal cursor, `data:` the Signal; `Last-Event-ID` (header or
 * `last_event_id` query) resumes without a gap.
 */
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { AppError, errorBody } from '../errors.js';
import { commaList } from '../validation.js';
import { requestId } from '../ids.js';
import { principalForKey } from '../auth/keys.js';
import { rateHeaders } from '../auth/rate-limit.js';
import { exchange, statusLine, type Exchange } from '../http/uws.js';
import type { Principal } from '../identity/model.js';
import { frameOf, perEntry, type JournalEntry } from '../journal/journal.js';
import { Audience } from './audience.js';
import { closeCodeOf, Credential } from './credential.js';
import { Drain } from './drain.js';
import { parseCursor, type ConnectionInfo, type Delivery, type Subscriber } from './hub.js';
import type { Realtime } from './realtime.js';
import { checkTerms, type WorkTerms, type Worker } from './dispatch.js';

class Stream implements Subscriber {
  lastSeq = 0;
  readonly connection: ConnectionInfo;
  /**
   * Bytes written since the response last had nothing buffered. uWS does not report how much of a
   * streamed response it holds (getWriteOffset counts only tryEnd), but a write that returns true left
   * nothing buffered, so this bounds what is really buffered from above and is exact for a reader that
   * has stopped reading.
   */
  private backlog = 0;
  private drain: Drain;
  private heartbeat: NodeJS.Timeout;
  private done = false;
  private credential: Credential;
  /** a /tasks/stream's worker: task events by credits */
  private worker: Worker | undefined;

  constructor(
    private x: Exchange,
    private rt: Realtime,
    private principal: Principal,
    private audience: Audience,
    rid: string,
    token: string,
    /** the journal cursor before the key was checked */
    verifiedAt: number,
    /** gives back the client address's place (src/realtime/held.ts) */
    private release: () => void,
  ) {
    this.connection = { transport: 'sse', identity_id: principal.identity.id, key_id: principal.key.id, opened_at: new Date().toISOString() };
    this.credential = new Credential(rt.store, token, audience, verifiedAt, () => rt.hub.reindex(this), (e) => this.closeWith(e));
    this.drain = new Drain(() => this.backlog <= rt.config.pushMaxBufferBytes);
    const res = x.res;
    res.cork(() => {
      res.writeStatus(statusLine(200));
      res.writeHeader('content-type', 'text/event-stream');
      res.writeHeader('cache-control', 'no-cache');
      res.writeHeader('x-accel-buffering', 'no');
      res.writeHeader('x-request-id', rid);
      for (const [name, value] of Object.entries(principal.rate ? rateHeaders(principal.rate) : {})) res.writeHeader(name, value);
    });
    // called only while something is buffered: a write from here flushes the buffer first, and returns
    // true only if all of it went out
    res.onWritable(() => {
      if (!this.done) this.write(':\n');
      return true;
    });
    this.write(`retry: 1000\n: cursor ${rt.hub.cursor}\n\n`);
    this.heartbeat = setInterval(() => {
      if (this.backlog === 0) this.write(': heartbeat\n\n');
    }, rt.config.sseHeartbeatMs);
    rt.presence.connected(principal.identity.id, principal.key.id);
    x.onAbort = () => this.finish();
  }

  /** Takes tasks by `terms`; each goes out as `event: task` (answered over HTTP: POST /ack, /tasks/:id/heartbeat). */
  work(terms: WorkTerms): void {
    this.worker = this.rt.dispatch.worker({
      send: (f) => {
        if (this.done) return false;
        this.write(`event: task\ndata: ${JSON.stringify({ signal: f.signal, claim_token: f.claim_token })}\n\n`);
        return true;
      },
      principal: () => this.audience.principal,
    });
    this.worker.work(terms);
  }

  private get res(): HttpResponse {
    return this.x.res;
  }

  get open(): boolean {
    return !this.done;
  }

  get identityId(): string | undefined {
    return this.audience.identityId;
  }

  /** While the key is re-checked every entry waits (`deliver` is full) and is decided under the rights it settles on. */
  wants(e: JournalEntry, seq: number): boolean {
    return this.credential.pending(e, seq) || (!this.worker?.mutes(e, this.identityId) && this.audience.wants(e));
  }

  deliver(e: JournalEntry, seq: number, live: boolean): Delivery {
    if (this.done) return 'gone';
    if (this.backlog > this.rt.config.pushMaxBufferBytes || this.credential.pending(e, seq)) return 'full';
    this.write(eventBytes(e, seq));
    const pushed = this.rt.deliverer.consider(e, seq, this.audience);
    if (pushed && live) this.audience.sentLive(seq, pushed);
    return 'sent';
  }

  hasRoom(): boolean {
    return !this.credential.busy && this.backlog <= this.rt.config.pushMaxBufferBytes;
  }

  /** Waits for the reader to take the backlog; a stream that makes no room in time is ended (EventSource resumes it). */
  async room(): Promise<boolean> {
    await this.credential.settled();
    if (this.done) return false;
    if (await this.drain.wait(this.rt.config.pushDrainTimeoutMs)) return true;
    this.end();
    return false;
  }

  fail(err: unknown): void {
    // once the stream has started, an error can only end it; EventSource reconnects and resumes
    this.rt.log.warn({ err }, 'sse replay failed');
    this.end();
  }

  private write(chunk: string | Buffer): void {
    let ok = true;
    this.res.cork(() => (ok = this.res.write(chunk)));
    if (ok) {
      this.backlog = 0;
      this.drain.notify();
    } else this.backlog += Buffer.byteLength(chunk);
  }

  /**
   * The key no longer authenticates: a `closed` event with the WebSocket close code and the error, then the
   * end (EventSource's reconnect is then refused with the same error).
   */
  private closeWith(e: AppError): void {
    if (this.done) return;
    if (this.backlog === 0) this.write(`event: closed\ndata: ${JSON.stringify({ code: closeCodeOf(e), error: errorBody(e, requestId(), this.rt.docsBase).error })}\n\n`);
    this.end();
  }

  /**
   * Ends the stream. One with a backlog is closed at once: its reader is not reading, and an end queued
   * behind the backlog would hold the connection open.
   */
  end(): void {
    if (this.done) return;
    if (!this.x.aborted) {
      this.x.aborted = true;
      if (this.backlog > 0) this.res.close();
      else this.res.cork(() => this.res.end());
    }
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.worker?.close();
    this.credential.close();
    clearInterval(this.heartbeat);
    this.drain.close();
    this.rt.hub.detach(this);
    this.rt.presence.disconnected(this.principal.identity.id, this.principal.key.id);
    this.release();
  }
}

/** an entry's SSE event: the same bytes for every stream */
const eventBytes = perEntry((e, seq) => `id: ${seq}\nevent: ${e.type}\ndata: ${JSON.stringify(frameOf(e).data)}\n\n`);

/** /tasks/stream's terms from its query: capacity, task_types (comma list), lease_ms, quiet=true */
function termsOf(q: URLSearchParams): WorkTerms {
  const int = (name: string) => (q.has(name) ? Number(q.get(name)) : undefined);
  const quiet = q.get('quiet');
  const terms = { capacity: int('capacity') ?? 1, task_types: commaList(q.get('task_types')), lease_ms: int('lease_ms'), quiet: quiet === null ? undefined : quiet === 'true' || quiet === '1' };
  return checkTerms(Object.fromEntries(Object.entries(terms).filter(([, v]) => v !== undefined)));
}

export function mountSse(app: TemplatedApp, rt: Realtime, fail: (x: Exchange, rid: string, e: unknown) => void): void {
  mountStream(app, rt, fail, '/signals/stream', false);
  mountStream(app, rt, fail, '/tasks/stream', true);
}

/** /signals/stream, or /tasks/stream: the same stream that also takes tasks by credits (docs/realtime.md, Task dispatch) */
function mountStream(app: TemplatedApp, rt: Realtime, fail: (x: Exchange, rid: string, e: unknown) => void, path: string, working: boolean): void {
  app.get(path, (res, req) => {
    const x = exchange(res);
    const q = new URLSearchParams(req.getQuery() ?? '');
    const lastEventId = req.getHeader('last-event-id') || q.get('last_event_id') || undefined;
    const origin = req.getHeader('origin') || undefined;
    const address = rt.addressOf(res, req.getHeader('x-forwarded-for'));
    const rid = requestId();
    let stream: Stream | undefined;
    let release = () => {};
    void (async () => {
      try {
        rt.origins.check(origin);
        release = rt.held.take(address);
        const terms = working ? termsOf(q) : undefined;
        const token = q.get('token');
        if (!token) throw new AppError('AUTH_KEY_MISSING', 'Pass the API key in the token query parameter');
        const verifiedAt = rt.hub.cursor;
        const principal = await principalForKey(rt.store, token, false);
        // opening a stream spends a unit of the key's budget, as a request does
        await rt.limits.consume(principal);
        const after = lastEventId !== undefined ? parseCursor(lastEventId, 'last_event_id') : undefined;
        if (after !== undefined) await rt.hub.assertResumable(after);
        await rt.reach.load(principal.identity.id);
        if (x.aborted) return release();
        const audience = new Audience(principal, rt.reach, true, { rings: commaList(q.get('ring')), types: commaList(q.get('type')) });
        stream = new Stream(x, rt, principal, audience, rid, token, verifiedAt, release);
        await rt.hub.attach(stream, after);
        if (terms) stream.work(terms);
      } catch (e) {
        if (stream) stream.fail(e);
        else {
          release();
          fail(x, rid, e);
        }
      }
    })();
  });
}
