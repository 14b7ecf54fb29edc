/**
 * An outbound delivery's result is fenced by its attempt number, on a real store with real processes (issue
 * 24.8), for webhooks and for federation alike: two instances on one Redis; the one sending attempt 1 is stopped (SIGSTOP) while its request hangs,
 * the other takes the attempt up once its hold ran out and sends attempt 2; the stopped process, resumed, ends
 * its attempt (its time limit ran out while it was stopped) and its late result records nothing: no attempt carries it,
 * and the delivery ends delivered by a later attempt. Redis only: a result can only be late against another
 * process sharing the store, and an embedded store has one process.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, type Member } from '../helpers/client.js';
import { serversOn, spawnServer, startServer, type ChildServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { startPeerReceiver } from '../helpers/peer-receiver.js';
import { emitOk, expectOk, waitFor } from '../api/support.js';

const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 30_000) => waitFor(what, probe, (v) => !!v, timeoutMs, 25);

describe('a stalled webhook sender on Redis', () => {
  const servers = serversOn('redis');
  const children: ChildServer[] = [];
  afterAll(async () => {
    for (const c of children) c.proc.kill('SIGCONT');
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
  });

  /**
   * The stall both senders are tried with: instance A (its own process, a 2 s time limit, so the delivery's hold
   * is 5 s) sends attempt 1 to a receiver that hangs, and is SIGSTOPped; instance B, whose own limit is long
   * (only the stalled sender can end an attempt with "no answer within 2000 ms"), takes the attempt up once the
   * hold ran out and sends attempt 2; then the receiver answers again and A resumes, until A logs its late
   * result fenced off. Answers B and the bootstrapped root for the checks; B is the caller's to close once
   * this answered.
   */
  async function stallTheFirstSender(o: {
    what: 'webhook' | 'federation';
    env: Record<string, string>;
    /** the other instance's long time limit */
    longLimit: Record<string, string>;
    /** sets up the receiver's side and emits the signal to send */
    begin: (root: Member) => Promise<void>;
    /** how many attempts reached the receiver */
    sent: () => number;
    /** the receiver answers again */
    unhang: () => void;
  }): Promise<{ b: Service; root: Member }> {
    const env = await servers.env(o.env);
    const a = await spawnServer(env);
    children.push(a);
    let log = '';
    a.proc.stdout!.on('data', (d) => (log += d));
    const root = await bootstrap(a.url);
    await o.begin(root);
    await until('attempt 1 at the receiver', () => o.sent() === 1);
    a.proc.kill('SIGSTOP');
    const b = await startServer({ ...env, ...o.longLimit });
    try {
      await until('attempt 2, from the other instance once the hold ran out', () => o.sent() === 2);
      o.unhang();
      a.proc.kill('SIGCONT');
      const fenced = new RegExp(`"msg":"${o.what} result fenced off: recorded nothing"`);
      await until('the stalled sender to report its result fenced off', () => fenced.test(log));
      return { b, root };
    } catch (e) {
      await b.close();
      throw e;
    }
  }

  it("its late result records nothing once the attempt was taken up on the other instance", async () => {
    let hang = true;
    const rx = await startReceiver(() => (hang ? 'hang' : 204));
    let webhookId = '';
    let b: Service | undefined;
    try {
      const stalled = await stallTheFirstSender({
        what: 'webhook',
        env: { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' },
        longLimit: { WEBHOOK_TIMEOUT_MS: '30000' },
        begin: async (root) => {
          const w = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.emitted'] }), 201);
          rx.secret = w.secret;
          webhookId = w.id;
          await emitOk(root, { signal_type: 'pulse', content: 'fenced' });
        },
        sent: () => rx.requests.length,
        unhang: () => (hang = false),
      });
      b = stalled.b;
      rx.release(204);

      const deliveries = async () => expectOk(await new Client(stalled.b.url, stalled.root.key).get(`/admin/webhooks/${webhookId}/deliveries`)).deliveries;
      const d = await until('the delivery delivered', async () => (await deliveries()).find((x: any) => x.status === 'delivered'));
      expect(d.attempts[0]).toMatchObject({ attempt: 1, status: 'failed', response_code: null });
      expect(d.attempts[0].error).toMatch(/no result/);
      // the stalled sender's own outcome (its time limit ran out while it was stopped) is on no attempt
      expect(d.attempts.filter((x: any) => /within 2000 ms/.test(x.error ?? '')), JSON.stringify(d.attempts)).toEqual([]);
      expect(d.attempts.at(-1)).toMatchObject({ status: 'succeeded' });
      expect(rx.requests.every((r) => r.id === d.id)).toBe(true);
    } finally {
      await b?.close();
      await rx.close();
    }
  }, 120_000);

  it('a stalled federation sender: its late result records nothing, the signal keeps the copy id of the attempt that was taken up', async () => {
    let hang = true;
    const peer = await startPeerReceiver(() => (hang ? 'hang' : 200));
    let signalId = '';
    let b: Service | undefined;
    try {
      const stalled = await stallTheFirstSender({
        what: 'federation',
        env: { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_TIMEOUT_MS: '2000' },
        longLimit: { FEDERATION_TIMEOUT_MS: '30000' },
        begin: async (root) => {
          const t = expectOk(await root.client.post('/federation/trust', { name: 'org-b', endpoint: peer.url, allowed_scopes: ['task'], expires_in: 3600 }), 201);
          peer.secret = t.shared_secret;
          signalId = (await emitOk(root, { signal_type: 'task', content: 'fenced', to_peer: t.peer_id, to_role: 'ops' })).id;
        },
        sent: () => peer.calls.length,
        unhang: () => (hang = false),
      });
      b = stalled.b;

      const admin = new Client(stalled.b.url, stalled.root.key);
      const [listed] = expectOk(await admin.get('/admin/actors?kind=federation-delivery&limit=10')).actors;
      const d = await until('the delivery delivered', async () => {
        const r = expectOk(await admin.get(`/admin/actors/federation-delivery/${listed.id}`));
        return r.state === 'delivered' && r;
      });
      const attempts = d.context.attempts as any[];
      expect(attempts[0]).toMatchObject({ attempt: 1, status: 'failed', response_code: null });
      expect(attempts.filter((x) => /within 2000 ms/.test(x.error ?? '')), JSON.stringify(attempts)).toEqual([]);
      expect(attempts.at(-1)).toMatchObject({ status: 'succeeded', response_code: 200 });
      expect(peer.calls.every((c) => c.verified && c.body.signal.id === signalId)).toBe(true);
      const thread = expectOk(await admin.get(`/thread/${signalId}`)).signals as any[];
      expect(thread.find((x) => x.id === signalId).federation.remote_id).toBe(`copy-of-${signalId}`);
    } finally {
      await b?.close();
      await peer.close();
    }
  }, 120_000);
});
