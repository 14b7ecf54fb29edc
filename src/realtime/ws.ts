/**
 * The WebSocket push channel at /ws. Frames are JSON. The server pushes `signal` and `signal.updated`
 * frames with a commit-ordered cursor; the client sends ops answered by `result` or `error` frames that
 * carry the REST envelopes and codes.
 */
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import { AppError, errorBody, isAppError } from '../errors.js';
import { requestId } from '../ids.js';
import { bearerToken, principalForKey } from '../auth/keys.js';
import type { Principal } from '../identity/model.js';
import { validate } from '../validation.js';
import { AckBody, ClaimBody, EmitBody, ReceiptBody } from '../signals/schemas.js';
import type { JournalEntry } from '../signals/kind.js';
import { Audience, type Filters } from './audience.js';
import { CLOSE } from './close-codes.js';
import type { Realtime } from './realtime.js';
import { parseCursor, REPLAY_DRAIN_TIMEOUT_MS, type Subscriber } from './hub.js';

interface SocketData {
  principal: Principal;
  key: string;
  after: number | undefined;
  conn?: Connection;
}

const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined);

class Connection implements Subscriber {
  lastSeq = 0;
  /** the cursor of the last push frame sent: where a cut-off consumer resumes */
  private sentSeq = 0;
  closed = false;
  /** the close handler ran: the uWS socket must not be touched again */
  private peerGone = false;
  private drainWaiters: (() => void)[] = [];
  readonly audience: Audience;

  constructor(
    private ws: WebSocket<SocketData>,
    private rt: Realtime,
    principal: Principal,
    private key: string,
  ) {
    this.audience = new Audience(principal, rt.reach, false);
  }

  wants(e: JournalEntry): boolean {
    return this.audience.wants(e);
  }

  deliver(e: JournalEntry, seq: number): boolean {
    if (this.closed) return false;
    if (this.ws.getBufferedAmount() > this.rt.config.pushMaxBufferBytes) {
      this.fatal(CLOSE.slowConsumer, new AppError('PUSH_CONSUMER_TOO_SLOW', undefined, { cursor: String(this.sentSeq) }));
      return false;
    }
    this.frame({ type: e.type, signal: e.signal, cursor: String(seq) });
    this.sentSeq = seq;
    if (e.type === 'signal' && e.signal.delivery_state === 'pending' && this.audience.isRecipient(e)) this.rt.deliverer.pushed(e.signal.id);
    return true;
  }

  ready(): Promise<void> {
    if (this.closed || this.ws.getBufferedAmount() <= this.rt.config.pushMaxBufferBytes) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.fatal(CLOSE.slowConsumer, new AppError('PUSH_CONSUMER_TOO_SLOW', undefined, { cursor: String(this.sentSeq) }));
        resolve();
      }, REPLAY_DRAIN_TIMEOUT_MS);
      this.drainWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  drained(): void {
    if (this.peerGone || this.ws.getBufferedAmount() <= this.rt.config.pushMaxBufferBytes) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  frame(f: unknown): void {
    if (this.closed) return;
    const text = JSON.stringify(f);
    this.ws.cork(() => this.ws.send(text));
  }

  error(id: unknown, e: unknown): void {
    const err = isAppError(e) ? e : new AppError('INTERNAL_SERVER_ERROR');
    if (!isAppError(e)) this.rt.log.error({ err: e }, 'websocket op failed');
    this.frame({ type: 'error', id: id ?? null, error: errorBody(err, requestId(), this.rt.docsBase).error });
  }

  fatal(code: number, e: AppError): void {
    this.error(null, e);
    this.closed = true;
    // End on the next turn: a socket ended inside uWS's own open callback (where a ?after= replay runs)
    // loses its queued frames and the close frame, and the client sees 1006 instead of this code.
    setImmediate(() => {
      if (!this.peerGone) this.ws.end(code, e.code);
    });
  }

  async op(raw: string): Promise<void> {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(raw);
      if (!msg || typeof msg !== 'object' || Array.isArray(msg)) throw new Error();
    } catch {
      return this.error(null, new AppError('VALIDATION_INVALID_TYPE', 'A frame must be a JSON object', { field: 'frame' }));
    }
    const { op, id, ...body } = msg;
    try {
      const p = await principalForKey(this.rt.store, this.key, false);
      this.audience.principal = p;
      const data = await this.run(p, op, body);
      this.frame({ type: 'result', id: id ?? null, data });
    } catch (e) {
      if (isAppError(e) && e.code.startsWith('AUTH_KEY_')) return this.fatal(CLOSE.unauthorized, e);
      this.error(id, e);
    }
  }

  private async run(p: Principal, op: unknown, body: Record<string, unknown>): Promise<unknown> {
    const { signals, inbox, hub } = this.rt;
    switch (op) {
      case 'emit':
        return signals.emit(p, validate(EmitBody, body, 'SIGNAL_EMIT_VALIDATION_FAILED'));
      case 'claim': {
        const b = validate(ClaimBody, body);
        return signals.claim(p, b.signal_id, b.lease_ms);
      }
      case 'ack': {
        const b = validate(AckBody, body);
        return signals.ack(p, b.signal_id, b.outcome);
      }
      case 'inbox.acknowledge':
        return inbox.act(p, 'ACKNOWLEDGE', validate(ReceiptBody, body).signal_id);
      case 'inbox.resolve':
        return inbox.act(p, 'RESOLVE', validate(ReceiptBody, body).signal_id);
      case 'resume': {
        const after = parseCursor(body.after);
        await hub.resume(this, after);
        return { resumed_from: String(after), cursor: String(this.lastSeq) };
      }
      case 'subscribe': {
        const filters: Filters = { rings: strings(body.rings), types: strings(body.types) };
        if ((body.rings !== undefined && !filters.rings) || (body.types !== undefined && !filters.types)) {
          throw new AppError('VALIDATION_INVALID_TYPE', 'rings and types are arrays of strings', { field: body.rings !== undefined && !filters.rings ? 'rings' : 'types' });
        }
        this.audience.filters = filters;
        return { rings: filters.rings ?? [], types: filters.types ?? [] };
      }
      default:
        throw new AppError('RPC_METHOD_NOT_FOUND', `Unknown op ${JSON.stringify(op)}`, { field: 'op' });
    }
  }

  closedByPeer(): void {
    this.closed = true;
    this.peerGone = true;
    this.drained();
  }
}

export function mountWebSocket(app: TemplatedApp, rt: Realtime): void {
  app.ws<SocketData>('/ws', {
    idleTimeout: rt.config.wsIdleTimeoutS,
    sendPingsAutomatically: true,
    maxPayloadLength: 1024 * 1024,
    maxBackpressure: 64 * 1024 * 1024,
    upgrade: (res, req, context) => {
      const header = req.getHeader('authorization');
      const secKey = req.getHeader('sec-websocket-key');
      const secProtocol = req.getHeader('sec-websocket-protocol');
      const secExtensions = req.getHeader('sec-websocket-extensions');
      const q = new URLSearchParams(req.getQuery() ?? '');
      let aborted = false;
      res.onAborted(() => (aborted = true));
      void (async () => {
        const rid = requestId();
        try {
          const bearer = bearerToken(header);
          const key = bearer ?? q.get('token') ?? '';
          if (!key) throw new AppError('AUTH_KEY_MISSING');
          const principal = await principalForKey(rt.store, key, false);
          const after = q.has('after') ? parseCursor(q.get('after')) : undefined;
          if (after !== undefined) await rt.hub.assertResumable(after);
          await rt.reach.load(principal.identity.id);
          if (aborted) return;
          res.cork(() => res.upgrade<SocketData>({ principal, key, after }, secKey, secProtocol, secExtensions, context));
        } catch (e) {
          if (aborted) return;
          const err = isAppError(e) ? e : new AppError('INTERNAL_SERVER_ERROR');
          res.cork(() => {
            res.writeStatus(`${err.status} ${err.code}`).writeHeader('content-type', 'application/json').end(JSON.stringify(errorBody(err, rid, rt.docsBase)));
          });
        }
      })();
    },
    open: (ws) => {
      const d = ws.getUserData();
      const conn = new Connection(ws, rt, d.principal, d.key);
      d.conn = conn;
      rt.presence.connected(d.principal.identity.id);
      conn.frame({ type: 'welcome', identity_id: d.principal.identity.id, cursor: String(rt.hub.cursor) });
      rt.hub.attach(conn, d.after).catch((err) => {
        if (isAppError(err) && err.code === 'PUSH_CURSOR_EXPIRED') return conn.fatal(CLOSE.cursorExpired, err);
        rt.log.warn({ err }, 'websocket replay failed');
        conn.fatal(CLOSE.internal, new AppError('DB_CONNECT_FAILED', 'Replay failed; reconnect and resume from your last cursor'));
      });
    },
    drain: (ws) => ws.getUserData().conn?.drained(),
    message: (ws, message) => {
      const conn = ws.getUserData().conn;
      if (conn) void conn.op(Buffer.from(message).toString('utf8'));
    },
    close: (ws) => {
      const d = ws.getUserData();
      if (!d.conn) return;
      d.conn.closedByPeer();
      rt.hub.detach(d.conn);
      rt.presence.disconnected(d.principal.identity.id);
    },
  });
}
