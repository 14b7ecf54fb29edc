/**
 * Real push clients for the realtime tests: a WebSocket client over the `ws` package that collects every
 * frame and answers ops by id, a refused-upgrade probe, an SSE client over the `eventsource` package, and
 * bounded waiting. Nothing here retries an assertion: a wait either sees its condition or fails naming it.
 */
import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';
import { EventSource } from 'eventsource';
import { expect } from 'vitest';
import WebSocket from 'ws';
import { waitFor as poll } from './wait.js';

/** The one wait (`test/helpers/wait.ts`) in the form the push tests call it: a predicate, a limit, what it waits for. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, ms = 5000, what: string | (() => string) = 'condition'): Promise<void> {
  await poll(what, predicate, (ok) => ok, ms, 10);
}

/** Waits until `seen()` holds every id in `ids`; fails naming how many are missing. */
async function waitForIds(what: string, seen: () => string[], ids: string[], ms: number, why: () => string = () => ''): Promise<void> {
  const missing = () => {
    const got = new Set(seen());
    return ids.filter((id) => !got.has(id));
  };
  await waitFor(() => missing().length === 0, ms, () => `${what} for ${ids.length} ids, have ${seen().length} (missing ${missing().length})${why()}`);
}

export const wsUrl = (httpUrl: string) => httpUrl.replace(/^http/, 'ws') + '/ws';

export interface Frame {
  type: string;
  id?: unknown;
  identity_id?: string;
  signal?: any;
  cursor?: string;
  data?: any;
  error?: { code: string; message: string; request_id: string; details: any; docs_url: string };
}

export interface OpenOptions {
  /** resume cursor on the URL */
  after?: string;
  /** how the key travels: the Authorization header (default) or the token query parameter */
  via?: 'header' | 'query';
  /** a name for failure messages */
  label?: string;
}

let opCounter = 0;

/** One WebSocket connection to /ws; every frame it receives lands in `frames`, in arrival order. */
export class PushSocket {
  readonly frames: Frame[] = [];
  closeInfo: { code: number; reason: string } | undefined;
  /** the client's own error, if it failed the connection (a 1006 without one is the peer's doing) */
  clientError: Error | undefined;
  /** set to stop recording frames (what a client that stopped processing would have seen) */
  recording = true;
  private closedP: Promise<{ code: number; reason: string }>;

  private constructor(
    readonly ws: WebSocket,
    readonly label: string,
  ) {
    ws.on('message', (data) => {
      if (!this.recording) return;
      this.frames.push(JSON.parse(data.toString()));
    });
    ws.on('error', (e) => (this.clientError = e));
    this.closedP = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
      }),
    );
  }

  /**
   * Connects and waits for the welcome frame. A socket that ends before its welcome never opened (the service
   * sends the welcome once the upgrade has returned, and uWS now and then closes a socket inside an async
   * upgrade: docs/realtime.md): like any client, this one connects again, at most twice more.
   */
  static async open(httpUrl: string, key: string, opts: OpenOptions = {}): Promise<PushSocket> {
    for (let attempt = 1; ; attempt++) {
      const s = await PushSocket.connect(httpUrl, key, opts);
      await waitFor(() => s.frames.some((f) => f.type === 'welcome') || s.closeInfo !== undefined, 5000, `${s.label}: welcome frame`);
      if (s.frames.some((f) => f.type === 'welcome')) return s;
      if (attempt === 3 || s.closeInfo?.code !== 1006) throw new Error(`${s.label}: closed ${s.closeInfo?.code} before its welcome frame`);
    }
  }

  private static async connect(httpUrl: string, key: string, opts: OpenOptions): Promise<PushSocket> {
    const q = new URLSearchParams();
    if (opts.via === 'query') q.set('token', key);
    if (opts.after !== undefined) q.set('after', opts.after);
    const qs = q.toString();
    const ws = new WebSocket(wsUrl(httpUrl) + (qs ? `?${qs}` : ''), opts.via === 'query' ? {} : { headers: { authorization: `Bearer ${key}` } });
    const s = new PushSocket(ws, opts.label ?? 'socket');
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`${s.label}: upgrade refused with ${res.statusCode}`)));
    });
    return s;
  }

  get welcome(): Frame {
    return this.frames.find((f) => f.type === 'welcome')!;
  }

  /** push frames (signal and signal.updated), in arrival order */
  pushes(): Frame[] {
    return this.frames.filter((f) => f.type === 'signal' || f.type === 'signal.updated');
  }

  /** ids of the new-signal pushes, in arrival order */
  signalIds(): string[] {
    return this.frames.filter((f) => f.type === 'signal').map((f) => f.signal.id);
  }

  updates(signalId?: string): Frame[] {
    return this.frames.filter((f) => f.type === 'signal.updated' && (signalId === undefined || f.signal.id === signalId));
  }

  lastCursor(): string | undefined {
    const p = this.pushes();
    return p.length ? p[p.length - 1].cursor : undefined;
  }

  send(raw: string): void {
    this.ws.send(raw);
  }

  /** Sends `{op, id, ...fields}` and waits for the result or error frame carrying that id. */
  async op(op: unknown, fields: Record<string, unknown> = {}, ms = 5000): Promise<Frame> {
    const id = `op-${++opCounter}`;
    this.ws.send(JSON.stringify({ op, id, ...fields }));
    let answer: Frame | undefined;
    await waitFor(
      () => (answer = this.frames.find((f) => (f.type === 'result' || f.type === 'error') && f.id === id)) !== undefined,
      ms,
      `${this.label}: answer to op ${JSON.stringify(op)} (${id})`,
    );
    return answer!;
  }

  /** `op` that must succeed: returns its data. */
  async ok(op: string, fields: Record<string, unknown> = {}): Promise<any> {
    const f = await this.op(op, fields);
    expect(f.type, `${this.label} ${op}: ${JSON.stringify(f)}`).toBe('result');
    return f.data;
  }

  /** Waits until the socket has received a `signal` frame for every id. */
  waitSignals(ids: string[], ms = 5000): Promise<void> {
    return waitForIds(`${this.label}: signal frames`, () => this.signalIds(), ids, ms, () => this.ended());
  }

  /** for a failed wait: how the socket ended, if it did, and the last frame that was not a push */
  private ended(): string {
    const last = this.frames.filter((f) => f.type !== 'signal' && f.type !== 'signal.updated').pop();
    return (this.closeInfo ? `; closed ${this.closeInfo.code} ${this.closeInfo.reason}` : '; still open') + (this.clientError ? `; client error ${this.clientError.message}` : '') + (last ? `; last other frame ${JSON.stringify(last)}` : '');
  }

  async waitUpdate(signalId: string, match: (signal: any) => boolean, what: string, ms = 5000): Promise<Frame> {
    let hit: Frame | undefined;
    await waitFor(() => (hit = this.updates(signalId).find((f) => match(f.signal))) !== undefined, ms, () => `${this.label}: signal.updated ${what} for ${signalId}; updates seen: ${JSON.stringify(this.updates(signalId).map((f) => f.signal.delivery_state))}`);
    return hit!;
  }

  closed(): Promise<{ code: number; reason: string }> {
    return this.closedP;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close();
    await this.closedP;
  }
}

/** Opens a socket that must be refused: the HTTP status and the JSON body sent instead of the upgrade. */
export async function refusedUpgrade(httpUrl: string, key: string | undefined, opts: { via?: 'header' | 'query'; after?: string } = {}): Promise<{ status: number; body: any }> {
  const q = new URLSearchParams();
  if (key !== undefined && opts.via === 'query') q.set('token', key);
  if (opts.after !== undefined) q.set('after', opts.after);
  const qs = q.toString();
  const headers: Record<string, string> = key !== undefined && opts.via !== 'query' ? { authorization: `Bearer ${key}` } : {};
  const ws = new WebSocket(wsUrl(httpUrl) + (qs ? `?${qs}` : ''), { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted; expected a refusal'));
    });
    ws.once('error', (e) => reject(e));
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch {
          reject(new Error(`refusal body is not JSON: ${text}`));
        }
      });
    });
  });
}

/** Cursors are decimal strings; asserts each push cursor is greater than the one before. */
export function expectIncreasing(frames: Frame[], label: string): void {
  for (let i = 1; i < frames.length; i++) {
    const a = BigInt(frames[i - 1].cursor!);
    const b = BigInt(frames[i].cursor!);
    if (!(b > a)) throw new Error(`${label}: cursor ${frames[i].cursor} (frame ${i}) does not follow ${frames[i - 1].cursor}`);
  }
}

/** Asserts the ids are exactly `expected` (as a set) with no id twice. */
export function expectExactlyOnce(ids: string[], expected: string[], label: string): void {
  const seen = new Map<string, number>();
  for (const id of ids) seen.set(id, (seen.get(id) ?? 0) + 1);
  const dups = [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id}×${n}`);
  expect(dups, `${label}: duplicates`).toEqual([]);
  const missing = expected.filter((id) => !seen.has(id));
  expect(missing, `${label}: missing ${missing.length} of ${expected.length}`).toEqual([]);
  const extra = ids.filter((id) => !expected.includes(id));
  expect(extra, `${label}: unexpected`).toEqual([]);
}

export interface SseEvent {
  type: string;
  id: string;
  signal: any;
}

/** An EventSource on /signals/stream collecting `signal` and `signal.updated` events. */
export class SseStream {
  readonly events: SseEvent[] = [];
  errors = 0;
  opens = 0;

  private constructor(
    readonly es: EventSource,
    readonly label: string,
    types: string[],
  ) {
    for (const type of types) {
      es.addEventListener(type, (ev: MessageEvent) => this.events.push({ type, id: ev.lastEventId, signal: JSON.parse(ev.data) }));
    }
    es.addEventListener('error', () => this.errors++);
    es.addEventListener('open', () => this.opens++);
  }

  /** `types`: the event names to collect (each event's data lands in `signal`, whatever its subject). */
  static async open(httpUrl: string, params: Record<string, string>, label = 'stream', types = ['signal', 'signal.updated']): Promise<SseStream> {
    const es = new EventSource(`${httpUrl}/signals/stream?${new URLSearchParams(params)}`);
    const s = new SseStream(es, label, types);
    await waitFor(() => s.opens > 0 || es.readyState === EventSource.CLOSED, 5000, `${label}: stream open`);
    if (s.opens === 0) throw new Error(`${label}: stream did not open`);
    return s;
  }

  signalIds(): string[] {
    return this.events.filter((e) => e.type === 'signal').map((e) => e.signal.id);
  }

  /** Waits until the stream has received a `signal` event for every id. */
  waitSignals(ids: string[], ms = 5000): Promise<void> {
    return waitForIds(`${this.label}: signal events`, () => this.signalIds(), ids, ms);
  }

  close(): void {
    this.es.close();
  }
}

/** Runs `n` tasks with at most `width` in flight. */
export async function pool<T>(n: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

/**
 * A plain TCP relay in front of a server: `cut()` drops every relayed connection and holds new ones
 * unanswered until `release()`, so a client sees a real network disconnect and a reconnect that only
 * gets through when the test says so.
 */
export class Relay {
  private sockets = new Set<Socket>();
  private held: Socket[] = [];
  private holding = false;

  private constructor(
    private server: Server,
    private targetPort: number,
  ) {
    server.on('connection', (c) => (this.holding ? (c.pause(), this.held.push(c), this.sockets.add(c)) : this.pipe(c)));
  }

  static async start(targetPort: number): Promise<Relay> {
    const server = createServer();
    const relay = new Relay(server, targetPort);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return relay;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private pipe(c: Socket): void {
    const up = connect(this.targetPort, '127.0.0.1');
    for (const [a, b] of [[c, up], [up, c]] as const) {
      this.sockets.add(a);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        this.sockets.delete(a);
        b.destroy();
      });
    }
    c.pipe(up);
    up.pipe(c);
  }

  cut(): void {
    this.holding = true;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  release(): void {
    this.holding = false;
    for (const c of this.held.splice(0)) this.pipe(c);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    for (const c of this.held) c.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A socket and an SSE stream held by one key. */
export interface Held {
  ws: PushSocket;
  sse: SseStream;
}

/** Opens a socket and a stream of one key (the stream collects `types`, `closed` always among them). */
export async function hold(httpUrl: string, key: string, label: string, types = ['signal', 'memory.stored']): Promise<Held> {
  return { ws: await PushSocket.open(httpUrl, key, { label: `${label} socket` }), sse: await SseStream.open(httpUrl, { token: key }, `${label} stream`, [...types, 'closed']) };
}

/** Both ended by the server: the socket with an error frame and the close code, the stream with its `closed` event, then refused on reconnect. */
export async function expectHeldEnded(h: Held, code: number, error: string, ms = 5000): Promise<void> {
  const why = () => `${h.ws.label}: ${h.ws.clientError ? `client error ${h.ws.clientError.message}` : 'no client error'}; last frames ${JSON.stringify(h.ws.frames.slice(-2))}`;
  expect(await h.ws.closed(), why()).toMatchObject({ code, reason: error });
  expect(h.ws.frames[h.ws.frames.length - 1]).toMatchObject({ type: 'error', error: { code: error } });
  let ev: SseEvent | undefined;
  await waitFor(() => (ev = h.sse.events.find((e) => e.type === 'closed')) !== undefined, ms, `${h.sse.label}: closed event`);
  expect(ev!.signal).toMatchObject({ code, error: { code: error } });
  await waitFor(() => h.sse.es.readyState === EventSource.CLOSED, ms, `${h.sse.label}: EventSource gave up`);
}
