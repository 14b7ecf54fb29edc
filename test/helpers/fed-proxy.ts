/**
 * An HTTP proxy in front of one service instance, standing for the network between two federated orgs.
 * `policy` decides each request: `pass` forwards it and its answer; `drop` forwards it, lets the target
 * answer, then cuts the connection so the caller never sees the answer; `delay` forwards it and holds the
 * answer `delayMs` (past the caller's FEDERATION_TIMEOUT_MS); `down` cuts the connection without forwarding.
 */
import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type Policy = 'pass' | 'drop' | 'delay' | 'down';

export interface ProxiedCall {
  path: string;
  body: any;
  policy: Policy;
  /** the target's status (undefined when not forwarded) */
  status?: number;
  answer?: any;
}

export interface FedProxy {
  url: string;
  calls: ProxiedCall[];
  policy: (path: string, body: any) => Policy;
  delayMs: number;
  close(): Promise<void>;
}

function forward(target: URL, path: string, headers: IncomingHttpHeaders, body: Buffer): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, method: 'POST', path, headers: { ...headers, host: target.host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export async function startFedProxy(targetUrl: string, policy: FedProxy['policy'] = () => 'pass'): Promise<FedProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const proxy: FedProxy = {
    url: '',
    calls: [],
    policy,
    delayMs: 1500,
    close: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      let body: any;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const call: ProxiedCall = { path: req.url!, body, policy: proxy.policy(req.url!, body) };
      proxy.calls.push(call);
      if (call.policy === 'down') return void req.socket.destroy();
      try {
        const a = await forward(target, req.url!, req.headers, raw);
        call.status = a.status;
        call.answer = a.body.length ? JSON.parse(a.body.toString('utf8')) : undefined;
        if (call.policy === 'drop') return void req.socket.destroy();
        const send = () => {
          if (!res.destroyed) res.writeHead(a.status, { 'content-type': String(a.headers['content-type'] ?? 'application/json') }).end(a.body);
        };
        if (call.policy === 'delay') {
          const t = setTimeout(() => (timers.delete(t), send()), proxy.delayMs);
          timers.add(t);
        } else send();
      } catch {
        req.socket.destroy();
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
