/**
 * A stand-in peer organization for tests: node:http on 127.0.0.1 answering `/federation/*`. Every request's
 * proof is checked with node:crypto straight from the documented formula (not our verifier); `respond`
 * decides each answer: a status (the body then carries `data.id`, the peer's copy id), a status with a body
 * of its own (a hostile peer's answer, sent as is), a promise of a status (a slow peer) or 'hang'.
 */
import { createHash, createHmac } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PeerCall {
  path: string;
  peerId: string;
  body: any;
  nonce: string;
  /** the proof verified against `secret` (body digest and HMAC) */
  verified: boolean;
}

export interface PeerReceiver {
  url: string;
  calls: PeerCall[];
  secret: string | undefined;
  respond: (c: PeerCall) => number | Promise<number> | 'hang' | { status: number; body: string };
  close(): Promise<void>;
}

export async function startPeerReceiver(respond: PeerReceiver['respond'] = () => 200): Promise<PeerReceiver> {
  const hanging = new Set<ServerResponse>();
  const rx: PeerReceiver = {
    url: '',
    calls: [],
    secret: undefined,
    respond,
    close: async () => {
      for (const r of hanging) r.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const proof = JSON.parse(String(req.headers['x-federation-proof'] ?? '{}'));
      const digest = createHash('sha256').update(raw).digest('hex');
      const signed = `POST\n${req.url}\n${proof.ts}\n${proof.nonce}\n${digest}`;
      const verified = !!rx.secret && proof.body_sha256 === digest && createHmac('sha256', rx.secret).update(signed).digest('hex') === proof.signature;
      const call: PeerCall = { path: req.url!, peerId: String(req.headers['x-federation-peer-id']), body: JSON.parse(raw), nonce: proof.nonce, verified };
      rx.calls.push(call);
      const answer = rx.respond(call);
      if (answer === 'hang') return void hanging.add(res);
      if (typeof answer === 'object' && !(answer instanceof Promise)) return void res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
      const reply = (status: number) => {
        const ok = status >= 200 && status < 300;
        const body = ok ? { data: { id: `copy-of-${call.body.signal?.id ?? call.body.signal_id}` } } : { error: { code: 'INTERNAL_SERVER_ERROR', message: 'down' } };
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (typeof answer === 'number') return reply(answer);
      hanging.add(res);
      let gone = false;
      res.on('close', () => (gone = true));
      void answer.then((status) => {
        hanging.delete(res);
        if (!gone) reply(status);
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return rx;
}
