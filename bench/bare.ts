/**
 * The floor for the benchmark: a bare uWebSockets.js server with no routing table, auth, validation,
 * store or actor runtime. It answers `GET /health` and `POST /emit` with the same status lines, headers and
 * body sizes the service sends, so the gap between the two is what the service itself costs.
 *
 * Listens on 127.0.0.1, port BARE_PORT (default 0 = any free port) and prints `{"port":N,"msg":"bare listening"}`
 * on stdout when ready. Stops on SIGTERM / SIGINT.
 */
import uws from 'uWebSockets.js';
import type { HttpResponse } from 'uWebSockets.js';

const RID = 'req_01M80A3T90NKPBWPDE6RYAF8ER';

/** Same shape and size (79 bytes) as the service's `GET /health` reply. */
const HEALTH_BODY = JSON.stringify({ data: { status: 'ok' }, meta: { request_id: RID } });

/** Same shape and size (~650 bytes) as the service's `POST /emit` reply for the benchmark body. */
const EMIT_BODY = JSON.stringify({
  data: {
    id: '01M80A3TVQ1JMAF3CR1ZTSMVFR',
    signal_type: 'pulse',
    base_type: 'pulse',
    content: 'bench',
    urgency: 0.5,
    from_role: null,
    from_identity: '01M80A3TQNAPY4TN7ZX4N0YSAR',
    to_role: null,
    to_identity: null,
    to_ring: null,
    parent_id: null,
    sequence: 0,
    tags: [],
    target_capabilities: [],
    routing_policy: null,
    metadata: {},
    payload: {},
    resources: [],
    task_status: null,
    claimed_by: null,
    claimed_at: null,
    claim_expires_at: null,
    protocol_version: 'svc/1.0',
    delivery_count: 0,
    created_at: '2026-11-22T00:22:21.303Z',
    updated_at: '2026-11-22T00:22:21.303Z',
    delivery_state: 'pending',
  },
  meta: { request_id: RID },
});

function reply(res: HttpResponse, status: string, body: string): void {
  res.cork(() => {
    res.writeStatus(status);
    res.writeHeader('content-type', 'application/json');
    res.writeHeader('x-request-id', RID);
    res.end(body);
  });
}

const app = uws.App();

app.get('/health', (res) => {
  reply(res, '200 OK', HEALTH_BODY);
});

app.post('/emit', (res) => {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  // read (and drop) the whole body before answering, as the service does
  res.onData((_chunk, isLast) => {
    if (isLast && !aborted) reply(res, '201 Created', EMIT_BODY);
  });
});

app.any('/*', (res) => {
  res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end('{"error":"not_found"}');
});

const port = Number(process.env.BARE_PORT ?? 0);
let listenSocket: unknown;
app.listen('127.0.0.1', port, (sock) => {
  if (!sock) {
    console.error(`bare: cannot listen on 127.0.0.1:${port}`);
    process.exit(1);
  }
  listenSocket = sock;
  console.log(JSON.stringify({ port: uws.us_socket_local_port(sock), msg: 'bare listening' }));
});

const stop = () => {
  if (listenSocket) uws.us_listen_socket_close(listenSocket as never);
  listenSocket = undefined;
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
