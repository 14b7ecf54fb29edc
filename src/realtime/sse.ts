/**
 * The SSE stream at /signals/stream. The key comes in the `token` query parameter (EventSource cannot set
 * headers); auth errors are answered as JSON before the stream starts. Each event is `event: signal` (or
 * `signal.updated`), `id:` the journal cursor, `data:` the Signal; `Last-Event-ID` (header or
 * `last_event_id` query) resumes without a gap.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { AppError } from '../errors.js';
import { requestId } from '../ids.js';
import { principalForKey } from '../auth/keys.js';
import { exchange, statusLine } from '../http/uws.js';
import type { JournalEntry } from '../signals/kind.js';
import { Audience } from './audience.js';
import type { Subscriber } from './hub.js';
import type { Realtime } from './realtime.js';
import { parseCursor } from './ws.js';

const list = (v: string | null) => (v ? v.split(',').map((s) => s.trim()).filter(Boolean) : undefined);

export function mountSse(app: TemplatedApp, rt: Realtime, fail: (x: ReturnType<typeof exchange>, rid: string, e: unknown) => void): void {
  app.get('/signals/stream', (res, req) => {
    const x = exchange(res);
    const q = new URLSearchParams(req.getQuery() ?? '');
    const lastEventId = req.getHeader('last-event-id') || q.get('last_event_id') || undefined;
    const rid = requestId();
    void (async () => {
      try {
        const token = q.get('token');
        if (!token) throw new AppError('AUTH_KEY_MISSING', 'Pass the API key in the token query parameter');
        const principal = await principalForKey(rt.store, token, false);
        const after = lastEventId !== undefined ? parseCursor(lastEventId) : undefined;
        await rt.reach.load(principal.identity.id);
        if (x.aborted) return;
        const audience = new Audience(principal, rt.reach, principal.identity.is_admin, { rings: list(q.get('ring')), types: list(q.get('type')) });
        let backlog = 0;
        let waiting = false;
        const write = (chunk: string): boolean => {
          if (x.aborted) return false;
          if (backlog > rt.config.pushMaxBufferBytes) {
            x.aborted = true;
            res.cork(() => res.end());
            return false;
          }
          let ok = true;
          res.cork(() => (ok = res.write(chunk)));
          if (!ok) {
            backlog += Buffer.byteLength(chunk);
            if (!waiting) {
              waiting = true;
              res.onWritable(() => {
                backlog = 0;
                waiting = false;
                return true;
              });
            }
          }
          return true;
        };
        const sub: Subscriber = {
          lastSeq: 0,
          wants: (e: JournalEntry) => audience.wants(e),
          deliver: (e: JournalEntry, seq: number) => {
            const sent = write(`id: ${seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e.signal)}\n\n`);
            if (sent && e.type === 'signal' && e.signal.delivery_state === 'pending' && audience.isRecipient(e)) rt.deliverer.pushed(e.signal.id);
            return sent;
          },
        };
        res.cork(() => {
          res.writeStatus(statusLine(200));
          res.writeHeader('content-type', 'text/event-stream');
          res.writeHeader('cache-control', 'no-cache');
          res.writeHeader('x-accel-buffering', 'no');
          res.writeHeader('x-request-id', rid);
          res.write(`retry: 1000\n: cursor ${rt.hub.cursor}\n\n`);
        });
        const heartbeat = setInterval(() => write(': heartbeat\n\n'), rt.config.sseHeartbeatMs);
        rt.presence.connected(principal.identity.id);
        x.onAbort = () => {
          clearInterval(heartbeat);
          rt.hub.detach(sub);
          rt.presence.disconnected(principal.identity.id);
        };
        await rt.hub.attach(sub, after);
      } catch (e) {
        fail(x, rid, e);
      }
    })();
  });
}
