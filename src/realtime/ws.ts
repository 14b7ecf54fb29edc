/**
 * The WebSocket push channel at /ws. Frames are JSON. The server pushes `signal` and `signal.updated`
 * frames with a commit-ordered cursor; the client sends ops answered by `result` or `error` frames that
 * carry the REST envelopes and codes.
 */
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { AppError, clientError, errorBody, isAppError } from '../errors.js';
import { requestId } from '../ids.js';
import { bearerToken, principalForKey } from '../auth/keys.js';
import { rateHeaders } from '../auth/rate-limit.js';
import type { Principal } from '../identity/model.js';
import { validate } from '../validation.js';
import { AckBody, ClaimBody, EmitBody, HeartbeatBody, ReceiptBody } from '../signals/schemas.js';
import { frameOf, perEntry, type JournalEntry } from '../journal/journal.js';
import { Audience, type Filters } from './audience.js';
import { closeCodeOf, Credential } from './credential.js';
import { CLOSE } from './close-codes.js';
import type { Realtime } from './realtime.js';
import { Drain } from './drain.js';
import { parseCursor, type ConnectionInfo, type Delivery, type Subscriber } from './hub.js';
import { checkTerms, type Answer, type Worker } from './dispatch.js';

interface SocketData {
  principal: Principal;
  key: string;
  after: number | undefined;
  /** the journal cursor before the key was checked */
  verifiedAt: number;
  conn?: Connection;
  /** the upgrade's own view of the connection its open made (uWS hands the open handler a copy of this data) */
  opened: { conn?: Connection };
  /** gives back the client address's place (src/realtime/held.ts) */
  release: () => void;
}

/** the largest frame a client may send; a larger one is refused with a PAYLOAD_TOO_LARGE error frame (docs/realtime.md) */
export const MAX_PAYLOAD = 1024 * 1024;
/** what uWS accepts at all: a frame over this is not read, the connection is dropped (the client sees 1006) */
export const MAX_FRAME = 2 * MAX_PAYLOAD;

/** The ops a client may send (docs/realtime.md); `Connection.ops` has one handler for each. */
export const WS_OPS = ['emit', 'claim', 'ack', 'heartbeat', 'inbox.acknowledge', 'inbox.resolve', 'resume', 'subscribe', 'work', 'done', 'release'] as const;
export type WsOp = (typeof WS_OPS)[number];
const isOp = (op: unknown): op is WsOp => typeof op === 'string' && (WS_OPS as readonly string[]).includes(op);
/** ops a socket may have waiting or running; one more is refused with RATE_LIMIT_EXCEEDED and not run */
export const MAX_PENDING_OPS = 64;
/** an entry's push frame: the same bytes for every socket (sent as a text frame) */
const frameBytes = perEntry((e, seq) => {
  const { subject, data } = frameOf(e);
  return JSON.stringify({ type: e.type, [subject]: data, cursor: String(seq) });
});

/** upgrades checked in one event-loop turn; the rest wait in arrival order, so a reconnect storm leaves requests room */
export const UPGRADES_PER_TURN = 64;

/** Runs queued upgrade checks UPGRADES_PER_TURN a turn, yielding to I/O between turns. */
class Admission {
  private queue: (() => Promise<void>)[] = [];
  private head = 0;
  private scheduled = false;

  add(job: () => Promise<void>): void {
    this.queue.push(job);
    if (!this.scheduled) this.schedule();
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(() => void this.turn());
  }

  private async turn(): Promise<void> {
    const batch = this.queue.slice(this.head, this.head + UPGRADES_PER_TURN);
    this.head += batch.length;
    if (this.head === this.queue.length) (this.queue = []), (this.head = 0);
    await Promise.all(batch.map((job) => job()));
    if (this.queue.length > this.head) this.schedule();
    else this.scheduled = false;
  }
}

/** uWS `send()` results */
const DROPPED = 2;

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined);

/**
 * Buffer limits of one socket. Pushes go out only while the buffer holds at most PUSH_MAX_BUFFER_BYTES;
 * op answers may use one frame of room beyond that. uWS's own limit (which drops a send) sits above both
 * plus the closing error frame, so no frame this code sends is dropped; a dropped one is still handled.
 */
function limits(rt: Realtime): { push: number; answer: number; uws: number } {
  const frameRoom = Math.max(rt.config.bodyLimitBytes, MAX_PAYLOAD) + 64 * 1024;
  const push = rt.config.pushMaxBufferBytes;
  return { push, answer: push + frameRoom, uws: Math.min(push + 3 * frameRoom, 2 ** 31 - 1) };
}

class Connection implements Subscriber {
  lastSeq = 0;
  readonly connection: ConnectionInfo;
  /** the cursor of the last push frame uWS accepted: where a cut-off consumer resumes */
  private sentSeq: number;
  closed = false;
  /** the close handler ran: the uWS socket must not be touched again */
  private peerGone = false;
  private drain: Drain;
  /** ops run one at a time, in arrival order, after the connect-time replay */
  private queue: Promise<void> = Promise.resolve();
  private pending = 0;
  readonly audience: Audience;
  private credential: Credential;
  private limits: { push: number; answer: number };
  /** set by the first `work` op: the tasks dispatched to this socket */
  private worker: Worker | undefined;
  /** held tasks whose answer runs now: a second answer about one waits in the op queue */
  private answering = new Set<string>();

  constructor(
    private ws: WebSocket<SocketData>,
    private rt: Realtime,
    principal: Principal,
    private key: string,
    verifiedAt: number,
    /** the `?after=` cursor the socket resumes from */
    private after: number | undefined,
  ) {
    this.audience = new Audience(principal, rt.reach, false);
    this.connection = { transport: 'websocket', identity_id: principal.identity.id, key_id: principal.key.id, opened_at: new Date().toISOString() };
    this.credential = new Credential(rt.store, key, this.audience, verifiedAt, () => rt.hub.reindex(this), (e) => this.fatal(closeCodeOf(e), e));
    this.limits = limits(rt);
    this.sentSeq = rt.hub.cursor;
    this.drain = new Drain(() => this.ws.getBufferedAmount() <= this.limits.push);
  }

  get open(): boolean {
    return !this.closed;
  }

  get identityId(): string | undefined {
    return this.audience.identityId;
  }

  /** While the key is re-checked every entry waits (`deliver` is full) and is decided under the rights it settles on. */
  wants(e: JournalEntry, seq: number): boolean {
    return this.credential.pending(e, seq) || (!this.worker?.mutes(e, this.identityId) && this.audience.wants(e));
  }

  deliver(e: JournalEntry, seq: number, live: boolean): Delivery {
    if (this.closed) return 'gone';
    if (this.ws.getBufferedAmount() > this.limits.push || this.credential.pending(e, seq)) return 'full';
    if (this.sendText(frameBytes(e, seq)) === DROPPED) return 'full';
    this.sentSeq = seq;
    const pushed = this.rt.deliverer.consider(e, seq, this.audience);
    if (pushed && live) this.audience.sentLive(seq, pushed);
    return 'sent';
  }

  hasRoom(): boolean {
    return !this.closed && !this.credential.busy && this.ws.getBufferedAmount() <= this.limits.push;
  }

  /** Waits for the buffer to drain to the push limit; a socket that makes no room in time is cut off with 4008. */
  async room(): Promise<boolean> {
    await this.credential.settled();
    if (this.closed) return false;
    if (await this.drain.wait(this.rt.config.pushDrainTimeoutMs)) return true;
    this.tooSlow();
    return false;
  }

  fail(err: unknown): void {
    if (isAppError(err) && err.code === 'PUSH_CURSOR_EXPIRED') return this.fatal(CLOSE.cursorExpired, err);
    this.rt.log.warn({ err }, 'websocket replay failed');
    // a backend error keeps its own code (503 unreachable, 504 slow); anything else is reported as unreachable
    const reason = isAppError(err) && err.code.startsWith('DB_') ? err : new AppError('DB_CONNECT_FAILED', 'Replay failed; reconnect and resume from your last cursor');
    this.fatal(CLOSE.internal, reason);
  }

  drained(): void {
    this.drain.notify();
  }

  private send(f: unknown): number {
    return this.sendText(JSON.stringify(f));
  }

  private sendText(text: string | Buffer): number {
    let r = 0;
    this.ws.cork(() => (r = this.ws.send(text)));
    return r;
  }

  private tooSlow(): void {
    if (!this.closed) this.fatal(CLOSE.slowConsumer, new AppError('PUSH_CONSUMER_TOO_SLOW', undefined, { cursor: String(this.sentSeq) }));
  }

  /** An answer or error frame. A client that leaves its answers unread is a slow consumer. */
  frame(f: unknown): void {
    if (this.closed) return;
    if (this.ws.getBufferedAmount() > this.limits.answer || this.send(f) === DROPPED) this.tooSlow();
  }

  /** `rid`: the op's own request id, the one its transitions and its log line carry */
  error(id: unknown, e: unknown, rid = requestId()): void {
    if (clientError(e).hidden) this.rt.log.error({ err: e, request_id: rid }, 'websocket op failed');
    this.frame({ type: 'error', id: id ?? null, error: errorBody(e, rid, this.rt.docsBase).error });
  }

  fatal(code: number, e: AppError, rid = requestId()): void {
    if (this.closed) return;
    this.send({ type: 'error', id: null, error: errorBody(e, rid, this.rt.docsBase).error });
    this.closed = true;
    this.credential.close();
    this.drain.close();
    this.worker?.close();
    // End on the next turn: a socket ended inside uWS's own open callback (where a ?after= replay starts)
    // loses its queued frames and the close frame, and the client sees 1006 instead of this code.
    setImmediate(() => {
      if (!this.peerGone) this.ws.end(code, e.code);
    });
  }

  /** Runs `task` after everything queued before it. */
  private then(task: () => Promise<void>): void {
    this.pending++;
    this.queue = this.queue
      .then(() => (this.closed ? undefined : task()))
      .catch((err) => this.rt.log.error({ err }, 'websocket op failed'))
      .finally(() => this.pending--);
  }

  /** The welcome frame, then live pushes (or the `?after=` replay first): unless uWS closed the socket in its upgrade. */
  start(): void {
    if (this.closed) return;
    this.frame({ type: 'welcome', identity_id: this.audience.principal.identity.id, cursor: String(this.rt.hub.cursor) });
    this.attach(this.after);
  }

  /** The connect-time attach (and its replay) runs first: ops wait behind it. */
  /** Live at once from the welcome's cursor (nothing committed after it is missed); a `?after=` replay runs before any op. */
  attach(after: number | undefined): void {
    if (after === undefined) return void this.rt.hub.attach(this).catch((err) => this.fail(err));
    this.sentSeq = after;
    this.then(() => this.rt.hub.attach(this, after).catch((err) => this.fail(err)));
  }

  /** A frame over MAX_PAYLOAD: refused unparsed, in its turn among the ops; the socket stays open. */
  oversized(size: number): void {
    this.then(async () => this.error(null, new AppError('PAYLOAD_TOO_LARGE', `A frame may carry at most ${MAX_PAYLOAD} bytes`, { limit: MAX_PAYLOAD, size })));
  }

  received(raw: string): void {
    let msg: Record<string, unknown> | undefined;
    try {
      msg = JSON.parse(raw);
      if (!msg || typeof msg !== 'object' || Array.isArray(msg)) msg = undefined;
    } catch {
      msg = undefined;
    }
    if (msg && this.isAnswer(msg)) return this.answer(msg);
    if (this.pending >= MAX_PENDING_OPS) {
      return this.error(msg?.id, new AppError('RATE_LIMIT_EXCEEDED', `At most ${MAX_PENDING_OPS} ops may wait on one socket; wait for answers before sending more`, { limit: MAX_PENDING_OPS }));
    }
    const m = msg;
    if (!m) return this.then(async () => this.error(null, new AppError('VALIDATION_INVALID_TYPE', 'A frame must be a JSON object', { field: 'frame' })));
    this.then(() => this.op(m));
  }

  /**
   * An answer about a task this socket was given runs at once, beside the op queue: answers of one turn then
   * share a group commit, and they are bounded by the worker's capacity rather than by MAX_PENDING_OPS.
   */
  private isAnswer(m: Record<string, unknown>): boolean {
    const id = m.signal_id;
    return (m.op === 'done' || m.op === 'release' || m.op === 'heartbeat') && typeof id === 'string' && this.worker?.holds(id) === true && !this.answering.has(id);
  }

  private answer(m: Record<string, unknown>): void {
    const id = m.signal_id as string;
    this.answering.add(id);
    void this.op(m).finally(() => this.answering.delete(id));
  }

  private workerFor(): Worker {
    this.worker ??= this.rt.dispatch.worker({
      send: (f) => {
        this.frame(f);
        return !this.closed;
      },
      principal: () => this.audience.principal,
    });
    return this.worker;
  }

  private async op(msg: Record<string, unknown>): Promise<void> {
    const { op, id, ...body } = msg;
    const rid = requestId();
    try {
      const p: Principal = { ...(await principalForKey(this.rt.store, this.key, false)), requestId: rid };
      this.credential.adopt(p);
      await this.rt.limits.consume(p);
      const data = await this.run(p, op, body);
      this.frame({ type: 'result', id: id ?? null, data });
    } catch (e) {
      if (isAppError(e) && e.code.startsWith('AUTH_KEY_')) return this.fatal(CLOSE.unauthorized, e, rid);
      if (isAppError(e) && e.code === 'POLICY_MEMBERSHIP_REQUIRED') return this.fatal(CLOSE.forbidden, e, rid);
      this.error(id, e, rid);
    }
  }

  private run(p: Principal, op: unknown, body: Record<string, unknown>): Promise<unknown> {
    if (!isOp(op)) throw new AppError('RPC_METHOD_NOT_FOUND', `Unknown op ${JSON.stringify(op)}`, { field: 'op' });
    return this.ops[op](p, body);
  }

  /** One handler per op of WS_OPS (the type holds the two together). */
  private readonly ops: Record<WsOp, (p: Principal, body: Record<string, unknown>) => Promise<unknown>> = {
    emit: (p, body) => this.rt.signals.emit(p, validate(EmitBody, body, 'SIGNAL_EMIT_VALIDATION_FAILED')),
    claim: (p, body) => {
      const b = validate(ClaimBody, body);
      return this.rt.signals.claim(p, b.signal_id, b.lease_ms, b.claim_token);
    },
    ack: (p, body) => {
      const b = validate(AckBody, body);
      return this.rt.signals.ack(p, b.signal_id, b.outcome, b.claim_token, b);
    },
    heartbeat: (p, body) => {
      const b = validate(HeartbeatBody, body);
      return this.rt.signals.heartbeat(p, b.signal_id, b);
    },
    work: async (_p, body) => this.workerFor().work(checkTerms(body)),
    done: (p, body) => this.finish(p, 'done', body),
    release: (p, body) => this.finish(p, 'release', body),
    'inbox.acknowledge': (p, body) => this.rt.inbox.act(p, 'ACKNOWLEDGE', validate(ReceiptBody, body).signal_id),
    'inbox.resolve': (p, body) => this.rt.inbox.act(p, 'RESOLVE', validate(ReceiptBody, body).signal_id),
    resume: async (_p, body) => {
      const after = parseCursor(body.after);
      await this.rt.hub.assertResumable(after);
      // from here on, a cut-off consumer resumes from what this replay got to
      this.sentSeq = after;
      await this.rt.hub.resume(this, after);
      return { resumed_from: String(after), cursor: String(this.lastSeq) };
    },
    subscribe: async (_p, body) => {
      const filters: Filters = { rings: strings(body.rings), types: strings(body.types) };
      if ((body.rings !== undefined && !filters.rings) || (body.types !== undefined && !filters.types)) {
        throw new AppError('VALIDATION_INVALID_TYPE', 'rings and types are arrays of strings', { field: body.rings !== undefined && !filters.rings ? 'rings' : 'types' });
      }
      this.audience.filters = filters;
      return { rings: filters.rings ?? [], types: filters.types ?? [] };
    },
  };

  /** done or release: a task this socket was given frees its credit; any other is acked as the ack op would */
  private finish(p: Principal, op: 'done' | 'release', body: Record<string, unknown>): Promise<unknown> {
    const b = validate(AckBody, body) as Answer;
    if (this.worker?.holds(b.signal_id)) return this.worker.answer(p, op, b);
    return this.rt.signals.ack(p, b.signal_id, op === 'release' ? 'failed' : (b.outcome ?? 'completed'), b.claim_token, b);
  }

  closedByPeer(): void {
    this.closed = true;
    this.credential.close();
    this.peerGone = true;
    this.drain.close();
    this.worker?.close();
  }
}

export function mountWebSocket(app: TemplatedApp, rt: Realtime): void {
  const admission = new Admission();
  app.ws<SocketData>('/ws', {
    idleTimeout: rt.config.wsIdleTimeoutS,
    sendPingsAutomatically: true,
    maxPayloadLength: MAX_FRAME,
    maxBackpressure: limits(rt).uws,
    upgrade: (res, req, context) => {
      const header = req.getHeader('authorization');
      const secKey = req.getHeader('sec-websocket-key');
      const secProtocol = req.getHeader('sec-websocket-protocol');
      const secExtensions = req.getHeader('sec-websocket-extensions');
      const origin = req.getHeader('origin') || undefined;
      const address = rt.addressOf(res, req.getHeader('x-forwarded-for'));
      const q = new URLSearchParams(req.getQuery() ?? '');
      let aborted = false;
      let release = () => {};
      res.onAborted(() => {
        aborted = true;
        release();
      });
      admission.add(async () => {
        if (aborted) return;
        const rid = requestId();
        try {
          rt.origins.check(origin);
          release = rt.held.take(address);
          const bearer = bearerToken(header);
          const key = bearer ?? q.get('token') ?? '';
          if (!key) throw new AppError('AUTH_KEY_MISSING');
          const verifiedAt = rt.hub.cursor;
          const principal = await principalForKey(rt.store, key, false);
          // the upgrade spends a unit of the key's budget, as a request does, and answers its RateLimit-* headers
          await rt.limits.consume(principal);
          const after = q.has('after') ? parseCursor(q.get('after')) : undefined;
          if (after !== undefined) await rt.hub.assertResumable(after);
          await rt.reach.load(principal.identity.id);
          if (aborted) return;
          const data: SocketData = { principal, key, after, verifiedAt, release, opened: {} };
          res.cork(() => {
            // uWS writes headers on a 101 only after its status line is written first
            if (principal.rate) {
              res.writeStatus('101 Switching Protocols');
              for (const [name, value] of Object.entries(rateHeaders(principal.rate))) res.writeHeader(name, value);
            }
            res.upgrade<SocketData>(data, secKey, secProtocol, secExtensions, context);
          });
          // The welcome marks an open socket, so it goes out once the upgrade has returned: this uWS build, upgrading
          // after an await, now and then closes the new socket inside the upgrade itself (1006 at the client); such
          // a socket gets no welcome, and to its client it is a connect that failed (docs/realtime.md).
          data.opened.conn?.start();
        } catch (e) {
          release();
          if (aborted) return;
          const err = clientError(e);
          if (err.hidden) rt.log.error({ err: e, request_id: rid }, 'websocket upgrade failed');
          res.cork(() => {
            res.writeStatus(`${err.status} ${err.code}`).writeHeader('content-type', 'application/json');
            for (const [name, value] of Object.entries(err.headers ?? {})) res.writeHeader(name, value);
            res.end(JSON.stringify(errorBody(e, rid, rt.docsBase)));
          });
        }
      });
    },
    open: (ws) => {
      const d = ws.getUserData();
      const conn = new Connection(ws, rt, d.principal, d.key, d.verifiedAt, d.after);
      d.conn = conn;
      d.opened.conn = conn;
      rt.presence.connected(d.principal.identity.id, d.principal.key.id);
    },
    drain: (ws) => ws.getUserData().conn?.drained(),
    message: (ws, message) => {
      const conn = ws.getUserData().conn;
      if (!conn) return;
      if (message.byteLength > MAX_PAYLOAD) return conn.oversized(message.byteLength);
      conn.received(Buffer.from(message).toString('utf8'));
    },
    close: (ws) => {
      const d = ws.getUserData();
      d.release();
      if (!d.conn) return;
      d.conn.closedByPeer();
      rt.hub.detach(d.conn);
      rt.presence.disconnected(d.principal.identity.id, d.principal.key.id);
    },
  });
}
