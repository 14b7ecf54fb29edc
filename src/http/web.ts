/**
 * Web-standard answers on uWebSockets.js: a route may answer with a fetch `Response` (the MCP and A2A
 * SDKs speak `Request → Response`), whose body is streamed with the same abort and cork rules as every
 * other write: nothing is written after the client left, and a full send buffer waits for `onWritable`.
 */
import { statusLine, type Exchange } from './uws.js';

const REASON: Record<number, string> = { 202: 'Accepted', 405: 'Method Not Allowed', 406: 'Not Acceptable', 415: 'Unsupported Media Type' };
const line = (s: number) => (statusLine(s).includes(' ') ? statusLine(s) : `${s} ${REASON[s] ?? 'Status'}`);

const controllers = new WeakMap<Exchange, AbortController>();

/** An AbortSignal that fires when the client goes away. */
export function abortSignal(x: Exchange): AbortSignal {
  let c = controllers.get(x);
  if (!c) {
    const ac = new AbortController();
    controllers.set(x, ac);
    const prev = x.onAbort;
    x.onAbort = () => {
      prev?.();
      ac.abort();
    };
    if (x.aborted) ac.abort();
    c = ac;
  }
  return c.signal;
}

/** `extra`: the front end's own headers (x-request-id, RateLimit-*), written after the Response's. */
export async function sendWeb(x: Exchange, r: globalThis.Response, extra: Record<string, string>): Promise<void> {
  if (x.aborted) return void (await r.body?.cancel().catch(() => {}));
  const head = () => {
    x.status = r.status;
    x.res.writeStatus(line(r.status));
    r.headers.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'transfer-encoding') x.res.writeHeader(k, v);
    });
    for (const k in extra) if (!r.headers.has(k)) x.res.writeHeader(k, extra[k]);
  };
  if (!r.body) {
    x.res.cork(() => {
      head();
      x.res.end();
    });
    x.aborted = true;
    return;
  }
  // a stream sends its head at once (an SSE comment line), so the client sees the answer before the first event
  const stream = (r.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if (!stream) return sendWhole(x, r, head);
  const reader = r.body.getReader();
  const signal = abortSignal(x);
  const gone = new Promise<void>((res) => signal.addEventListener('abort', () => res(), { once: true }));
  signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
  x.res.cork(() => {
    head();
    x.res.write(': stream\n\n');
  });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (x.aborted) return;
      if (done) break;
      let ok = true;
      x.res.cork(() => (ok = x.res.write(value)));
      if (!ok) await Promise.race([gone, new Promise<void>((res) => x.res.onWritable(() => (res(), true)))]);
    }
  } catch {
    // the producer failed mid-stream: end what was sent; the client sees the stream close
  }
  if (x.aborted) return;
  x.res.cork(() => x.res.end());
  x.aborted = true;
}

async function sendWhole(x: Exchange, r: globalThis.Response, head: () => void): Promise<void> {
  const body = Buffer.from(await r.arrayBuffer());
  if (x.aborted) return;
  x.res.cork(() => {
    head();
    x.res.end(body);
  });
  x.aborted = true;
}
