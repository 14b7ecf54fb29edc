/**
 * A real webhook endpoint for tests: node:http on 127.0.0.1. Every request is verified with the
 * independent `standardwebhooks` implementation; `respond` decides each answer (a status, or 'hang').
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
  close(): Promise<void>;
}

export async function startReceiver(respond: (r: Received) => number | 'hang' = () => 200): Promise<Receiver> {
  const requests: Received[] = [];
  const hanging = new Set<ServerResponse>();
  const delivered = new Map<string, Received>();
  const rx: Receiver = {
    url: '',
    requests,
    secret: undefined,
    unique: () => delivered,
    close: async () => {
      for (const res of hanging) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
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
      const answer = respond(r);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      if (verified && answer >= 200 && answer < 300 && !delivered.has(id)) delivered.set(id, r);
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return rx;
}
