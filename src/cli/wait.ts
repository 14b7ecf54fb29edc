/**
 * `svc wait`: holds the push WebSocket from the cursor kept on disk until something new and unacknowledged
 * lands in the caller's inbox. A `?after=` replay comes first; the answer to a `subscribe` op sent at open
 * marks its end (ops on a resuming socket wait for the replay), so a backlog is judged whole: an item
 * already acked, or a task someone else took, later in the replay is not shown.
 */
import WebSocket from 'ws';
import { CliError } from './http.js';
import type { Files } from './files.js';
import type { SignalLike } from './format.js';
import { worthWaking } from '../../actors/signal-wake.js';

interface Joined {
  url: string;
  key: string;
  identity_id: string;
}

const wsUrl = (url: string, after?: string) => `${url.replace(/^http/, 'ws')}/ws${after ? `?after=${encodeURIComponent(after)}` : ''}`;

/** The journal cursor now (the welcome frame's): where a newly joined caller's wake-ups start. */
export function openCursor(c: Joined, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(c.url), { headers: { authorization: `Bearer ${c.key}` } });
    const timer = setTimeout(() => (ws.terminate(), reject(new Error('no welcome'))), timeoutMs);
    ws.on('message', (raw) => {
      const f = JSON.parse(String(raw));
      if (f.type !== 'welcome') return;
      clearTimeout(timer);
      ws.close();
      resolve(String(f.cursor));
    });
    ws.on('error', (e) => (clearTimeout(timer), reject(e)));
  });
}

type Signal = SignalLike & { delivery_state?: string; claimed_by?: string | null };

export interface WaitOptions {
  types?: string[];
  timeoutS?: number;
  /** a line on stderr once the socket is live (tests wait for it) */
  verbose?: boolean;
}

/** The new items, or null when the timeout passed first. The cursor and the shown ids are saved either way. */
export async function waitForItems(c: Joined, files: Files, o: WaitOptions): Promise<Signal[] | null> {
  const state = files.state();
  const seen = new Set(state.seen);
  let cursor = state.cursor;
  const pending = new Map<string, Signal>();
  const wanted = (s: Signal) => s.from_identity !== c.identity_id && !seen.has(s.id) && (!o.types?.length || o.types.includes(s.signal_type)) && worthWaking(s, c.identity_id);

  const ws = new WebSocket(wsUrl(c.url, cursor), { headers: { authorization: `Bearer ${c.key}` } });
  const result = await new Promise<Signal[] | null>((resolve, reject) => {
    let live = false;
    const finish = (items: Signal[] | null) => {
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => {});
      ws.terminate();
      resolve(items);
    };
    const timer = o.timeoutS ? setTimeout(() => finish(null), o.timeoutS * 1000) : undefined;
    const flush = () => pending.size && finish([...pending.values()]);
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        const err = (() => { try { return JSON.parse(body).error; } catch { return undefined; } })();
        clearTimeout(timer);
        reject(new CliError(err?.code ?? 'INTERNAL_HTTP_ERROR', err?.message ?? `/ws answered ${res.statusCode}`, 1, err?.details ?? null));
      });
    });
    ws.on('error', (e) => (clearTimeout(timer), reject(new CliError('SERVICE_UNREACHABLE', `${c.url}: ${e.message}`))));
    ws.on('close', (code) => (clearTimeout(timer), reject(new CliError('SERVICE_UNREACHABLE', `the push socket closed (${code})`))));
    ws.on('message', (raw) => {
      const f = JSON.parse(String(raw));
      if (f.type === 'welcome') {
        cursor ??= f.cursor;
        ws.send(JSON.stringify({ op: 'subscribe', id: 'replayed', ...(o.types?.length ? { types: o.types } : {}) }));
      } else if (f.type === 'signal' || f.type === 'signal.updated') {
        cursor = f.cursor ?? cursor;
        const s = f.signal as Signal;
        if (f.type === 'signal' && wanted(s)) pending.set(s.id, s);
        else if (pending.has(s.id) && !worthWaking(s, c.identity_id)) pending.delete(s.id);
        if (live) flush();
      } else if (f.type === 'result' && f.id === 'replayed') {
        live = true;
        if (o.verbose) process.stderr.write(`waiting as ${c.identity_id} after cursor ${cursor}\n`);
        flush();
      } else if (f.type === 'error' && f.id === null) {
        clearTimeout(timer);
        reject(new CliError(f.error.code, f.error.message, 1, f.error.details ?? null));
      }
    });
  }).catch((e) => {
    ws.removeAllListeners();
    ws.on('error', () => {});
    ws.terminate();
    // a cursor the journal no longer holds: start again from now next time (`svc inbox --unread` shows the rest)
    if (e instanceof CliError && e.code === 'PUSH_CURSOR_EXPIRED') files.saveState({ ...files.state(), cursor: undefined });
    throw e;
  });
  const latest = files.state();
  files.saveState({ ...latest, cursor, seen: [...latest.seen, ...(result ?? []).map((s) => s.id).filter((id) => !latest.seen.includes(id))] });
  return result;
}
