/**
 * A real webhook endpoint for tests: node:http on 127.0.0.1. Every request is verified with the
 * independent `standardwebhooks` implementation; `respond` decides each answer (a status, a promise of one: a
 * slow receiver, or 'hang': held open until `release` answers it or the sender gives up). It counts the
 * requests open at once.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Received {
  id: string;
  /** the n-th request carrying this webhook-id (1-based) */
  try: number;
  body: any;
  verified: boolean;
  verifyError: string | null;
}

export interface Receiver {
  url: string;
  /** every request, in arrival order */
  requests: Received[];
  /** the secret to verify with (set once the webhook is created) */
  secret: string | undefined;
  /** each event once: requests that verified, deduplicated by webhook-id, answered 2xx */
  unique(): Map<string, Received>;
  /** requests open now: arrived and not yet answered nor closed by the sender */
  readonly open: number;
  /** the most requests ever open at once */
  readonly maxOpen: number;
  /** Answers every hanging request with `status`; returns how many it answered. */
  release(status?: number): number;
  close(): Promise<void>;
}

export async function startReceiver(respond: (r: Received) => number | Promise<number> | 'hang' = () => 200): Promise<Receiver> {
  const requests: Received[] = [];
  const hanging = new Map<ServerResponse, Received>();
  const delivered = new Map<string, Received>();
  let open = 0;
  let maxOpen = 0;
  const settled = new WeakMap<ServerResponse, () => void>();
  /** Counts the request as no longer open before a byte of the answer leaves, so `open` never lags the sender. */
  const answer = (res: ServerResponse, r: Received, status: number) => {
    settled.get(res)?.();
    if (r.verified && status >= 200 && status < 300 && !delivered.has(r.id)) delivered.set(r.id, r);
    res.writeHead(status).end();
  };
  const rx: Receiver = {
    url: '',
    requests,
    secret: undefined,
    unique: () => delivered,
    get open() {
      return open;
    },
    get maxOpen() {
      return maxOpen;
    },
    release: (status = 200) => {
      const held = [...hanging];
      hanging.clear();
      for (const [res, r] of held) answer(res, r, status);
      return held.length;
    },
    close: async () => {
      for (const res of hanging.keys()) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    open++;
    maxOpen = Math.max(maxOpen, open);
    // counted down once: when answered, or when the sender abandons it (the connection closes)
    let counted = true;
    const done = () => {
      if (counted) open--;
      counted = false;
      hanging.delete(res);
    };
    settled.set(res, done);
    let gone = false;
    res.on('close', () => {
      gone = true;
      done();
    });
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id']);
      let verified = false;
      let verifyError: string | null = null;
      try {
        new Webhook(rx.secret!).verify(raw, req.headers as Record<string, string>);
        verified = true;
      } catch (e) {
        verifyError = (e as Error).message;
      }
      const r: Received = { id, try: requests.filter((x) => x.id === id).length + 1, body: JSON.parse(raw), verified, verifyError };
      requests.push(r);
      const status = respond(r);
      if (status === 'hang') hanging.set(res, r);
      else if (typeof status === 'number') answer(res, r, status);
      // a slow answer to a sender that gave up (closed the connection) is no delivery
      else void status.then((s) => !gone && answer(res, r, s));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return rx;
}
