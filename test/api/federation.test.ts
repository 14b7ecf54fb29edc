/**
 * The receiving side of federation over real HTTP on both backends: trust (both forms, list, establish),
 * proof auth with every failure code from hand-crafted requests, and the four peer calls (deliver, claim,
 * ack, cancel) with their scope, hop, idempotency, conflict and cross-org rules. Outbound signals are made
 * by marking an emitted task as sent to the peer in the store (the sending side is docs/federation.md's
 * outbound delivery, tested with two processes in test/e2e).
 */
import { startPeerReceiver } from '../helpers/peer-receiver.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import type { SignalContext } from '../../actors/signal.js';
import { actorKey, type ActorRecord } from '../../src/runtime/runtime.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { Nonces } from '../../src/federation/nonces.js';
import { makeProof, SKEW_MS } from '../../src/federation/proof.js';
import { signedPost } from '../helpers/federation.js';
import { PushSocket } from '../helpers/push.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { emitOk, expectError, expectOk, findSignal, listAll, waitFor } from './support.js';

interface Issued {
  peer_id: string;
  shared_secret: string;
  expires_at: string;
}

let endpoints = 0;
const endpoint = () => `https://peer${++endpoints}.example`;

for (const backend of BACKENDS) {
  describe(`federation, receiving side, on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let worker: Member;
    let trust: Issued;
    let restarted: Started | undefined;
    afterAll(async () => restarted?.close());

    const trustWith = async (body: Record<string, unknown> = {}): Promise<Issued> =>
      expectOk(await root.client.post('/federation/trust', { name: 'Peer org', endpoint: endpoint(), allowed_scopes: ['task', 'pulse'], ...body }), 201);
    const call = (path: string, body: unknown, t: Issued = trust, extra: Partial<Parameters<typeof signedPost>[3]> = {}) => signedPost(svc.url, path, body, { peerId: t.peer_id, secret: t.shared_secret, ...extra });
    const deliver = (signal: Record<string, unknown>, hops = 0, t: Issued = trust) => call('/federation/deliver', { signal: { id: ulid(), signal_type: 'task', content: 'from the peer', ...signal }, hops }, t);

    /** Marks a signal emitted here as sent to `peerId` (what the outbound delivery records on a `to_peer` emit). */
    async function markOutbound(signalId: string, peerId: string): Promise<void> {
      const key = actorKey('signal', signalId);
      const cur = await svc.store.get<ActorRecord<SignalContext>>(key);
      const federation = { peer_id: peerId, remote_id: null, direction: 'outbound' as const, hops: 0 };
      const res = await svc.store.commit([{ op: 'put', key, value: { ...cur!.value, context: { ...cur!.value.context, federation } }, expect: cur!.version }]);
      expect(res.ok).toBe(true);
    }
    const outboundTask = async (peerId = trust.peer_id) => {
      const s = await emitOk(root, { signal_type: 'task', content: 'for the peer' });
      await markOutbound(s.id, peerId);
      return s.id as string;
    };

    beforeAll(async () => {
      svc = await servers.start({ ALLOW_PRIVATE_NETWORK: 'true' });
      root = await bootstrap(svc.url);
      worker = await join(root.client, 'worker');
      const role = expectOk(await root.client.post('/roles', { name: 'builders' }), 201);
      expectOk(await root.client.post('/fills', { identity_id: worker.id, role_id: role.id }), 201);
      trust = await trustWith();
    });

    it('POST /federation/trust creates an active peer with a secret shown once; GET lists it; bad bodies are DISC_VALIDATION_FAILED', async () => {
      const t = await trustWith({ expires_in: 3600 });
      expect(t).toEqual({ peer_id: expect.any(String), shared_secret: expect.stringMatching(/^[0-9a-f]{64}$/), expires_at: expect.any(String) });
      expect(Math.abs(Date.parse(t.expires_at) - (Date.now() + 3600_000))).toBeLessThan(120_000);
      const list = expectOk(await root.client.get('/federation/trust'));
      expect(list.active_peers).toBeGreaterThanOrEqual(2);
      expect(list.peers).toContainEqual(expect.objectContaining({ id: t.peer_id, name: 'Peer org', has_trust: true, expires_at: t.expires_at }));
      expect(JSON.stringify(list)).not.toContain(t.shared_secret);
      const peer = expectOk(await root.client.get(`/org/company/peers/${t.peer_id}`));
      expect(peer).toMatchObject({ status: 'active', has_trust: true });
      expect(JSON.stringify(peer)).not.toContain(t.shared_secret);
      expect(JSON.stringify(expectOk(await root.client.get(`/admin/actors/peer/${t.peer_id}`)))).not.toContain(t.shared_secret);

      expectError(await root.client.post('/federation/trust', { endpoint: endpoint() }), 400, 'DISC_VALIDATION_FAILED');
      expectError(await root.client.post('/federation/trust', { name: 'x', endpoint: 'not a url' }), 400, 'DISC_VALIDATION_FAILED', 'endpoint');
      expectError(await root.client.post('/federation/trust', { name: 'x', endpoint: endpoint(), expires_in: 0 }), 400, 'DISC_VALIDATION_FAILED');
      const dup = expectOk(await root.client.get(`/org/company/peers/${t.peer_id}`)).endpoint;
      expectError(await root.client.post('/federation/trust', { name: 'x', endpoint: dup }), 409, 'DISC_PEER_DUPLICATE', 'endpoint');
    });

    it('the other operator records the trust under the same peer_id, and calls signed with it pass there', async () => {
      const other = await servers.start();
      const otherRoot = await bootstrap(other.url);
      const recorded = expectOk(await otherRoot.client.post('/federation/trust', { ...trust, name: 'Org A', endpoint: svc.url, allowed_scopes: ['task'] }), 201);
      expect(recorded).toEqual(trust);
      expect(expectOk(await otherRoot.client.get('/federation/trust')).peers).toEqual([expect.objectContaining({ id: trust.peer_id, name: 'Org A', has_trust: true, expires_at: trust.expires_at })]);
      const res = await signedPost(other.url, '/federation/deliver', { signal: { id: ulid(), signal_type: 'task', content: 'hello' }, hops: 0 }, { peerId: trust.peer_id, secret: trust.shared_secret });
      expect(expectOk(res)).toMatchObject({ source_org: trust.peer_id, federation: { peer_id: trust.peer_id, direction: 'inbound', hops: 1 } });
      expectError(await otherRoot.client.post('/federation/trust', { ...trust, name: 'x', endpoint: endpoint(), expires_at: new Date(Date.now() - 1000).toISOString() }), 400, 'DISC_VALIDATION_FAILED', 'expires_at');
      await other.close();
    });

    it('POST /org/company/peers/:id/establish issues the trust of a registered peer; calls then pass', async () => {
      const p = expectOk(await root.client.post('/org/company/peers', { name: 'Registered', endpoint: endpoint(), allowed_scopes: ['task'] }), 201);
      expectError(await deliver({}, 0, { peer_id: p.id, shared_secret: 'x'.repeat(64), expires_at: '' }), 403, 'FED_PEER_DENIED');
      const t = expectOk(await root.client.post(`/org/company/peers/${p.id}/establish`, { expires_in: 600 }));
      expect(t).toMatchObject({ peer_id: p.id, shared_secret: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect(expectOk(await root.client.get(`/org/company/peers/${p.id}`))).toMatchObject({ status: 'active', has_trust: true, expires_at: t.expires_at });
      expectOk(await deliver({}, 0, t));
    });

    it('every proof failure has its own code, checked in order', async () => {
      const body = { signal: { id: ulid(), signal_type: 'task', content: 'x' }, hops: 0 };
      expectError(await call('/federation/deliver', body, trust, { peerId: null }), 401, 'FED_PEER_MISSING');
      expectError(await call('/federation/deliver', body, trust, { proofHeader: null }), 401, 'FED_PROOF_MISSING');
      expectError(await call('/federation/deliver', body, trust, { proofHeader: 'not json' }), 401, 'FED_PROOF_INVALID');
      expectError(await call('/federation/deliver', body, trust, { nonce: 'abcd' }), 401, 'FED_PROOF_INVALID', 'nonce');
      expectError(await call('/federation/deliver', body, trust, { peerId: ulid() }), 403, 'FED_PEER_DENIED');
      expectError(await call('/federation/deliver', body, trust, { peerId: 'x'.repeat(4000) }), 403, 'FED_PEER_DENIED');

      const suspended = await trustWith();
      expectOk(await root.client.patch(`/org/company/peers/${suspended.peer_id}/status`, { status: 'suspended' }));
      expectError(await call('/federation/deliver', body, suspended), 403, 'FED_PEER_DENIED');

      const untrusted = expectOk(await root.client.post('/org/company/peers', { name: 'No trust', endpoint: endpoint(), allowed_scopes: ['task'] }), 201);
      expectOk(await root.client.patch(`/org/company/peers/${untrusted.id}/status`, { status: 'active' }));
      expectError(await call('/federation/deliver', body, { ...trust, peer_id: untrusted.id }), 403, 'FED_TRUST_NOT_ESTABLISHED');

      expectError(await call('/federation/deliver', body, { ...trust, shared_secret: 'f'.repeat(64) }), 401, 'FED_PROOF_FAILED');
      expectError(await call('/federation/deliver', body, trust, { send: JSON.stringify({ ...body, hops: 0, signal: { ...body.signal, content: 'tampered' } }) }), 401, 'FED_PROOF_FAILED');
      const skewed = await call('/federation/deliver', body, trust, { ts: Date.now() - 6 * 60_000 });
      expectError(skewed, 401, 'FED_PROOF_INVALID', 'ts');
      expect(skewed.body.error.details.reason).toBe('skew');
      expectError(await call('/federation/deliver', body, trust, { ts: Date.now() + 6 * 60_000 }), 401, 'FED_PROOF_INVALID', 'ts');

      // a proof signed for another path does not pass here
      const cancel = JSON.stringify({ signal_id: ulid(), agent: 'a' });
      expectError(await call('/federation/cancel', cancel, trust, { proof: makeProof(trust.shared_secret, 'POST', '/federation/claim', cancel, Date.now()) }), 401, 'FED_PROOF_FAILED');
    });

    it('a nonce is single use, also across a restart on the same data', async () => {
      const body = { signal: { id: ulid(), signal_type: 'task', content: 'once' }, hops: 0 };
      const once = await call('/federation/deliver', body);
      expectOk(once);
      expectError(await call('/federation/deliver', body, trust, { proof: once.proof }), 403, 'FED_REPLAY_DETECTED');
      // a new service process on the same data: the same data dir, or the same Redis server and prefix
      await svc.close();
      const env = svc.env;
      svc = restarted = { ...(await startServer(env)), env };
      // the restarted server listens on another port: the members' clients follow it
      root = { ...root, client: new Client(svc.url, root.key) };
      worker = { ...worker, client: new Client(svc.url, worker.key) };
      expectError(await call('/federation/deliver', body, trust, { proof: once.proof }), 403, 'FED_REPLAY_DETECTED');
      // while a fresh proof of the same call passes (the redelivery answers the stored copy)
      expect(expectOk(await call('/federation/deliver', body)).id).toBe(once.body.data.id);
    });

    it('a remembered nonce is forgotten once its window closed', async () => {
      const used = await deliver({});
      expectOk(used);
      const key = `fed-nonce:${trust.peer_id}:${used.proof.nonce}`;
      expect(await svc.store.get(key)).toBeDefined();
      const nonces = new Nonces(svc.store);
      await nonces.sweep(Date.now());
      expect(await svc.store.get(key)).toBeDefined();
      while ((await nonces.sweep(Date.now() + SKEW_MS + 60_000)) > 0);
      expect(await svc.store.get(key)).toBeUndefined();
    });

    it('an expired trust is FED_TRUST_EXPIRED once its timer fired; has_trust stays', async () => {
      const t = await trustWith({ expires_in: 1 });
      const peer = await waitFor('the trust expiry timer', async () => expectOk(await root.client.get(`/org/company/peers/${t.peer_id}`)), (p) => p.trust_expired === true, 20_000, 100);
      expect(peer.has_trust).toBe(true);
      expectError(await deliver({}, 0, t), 403, 'FED_TRUST_EXPIRED');
      expect(expectOk(await root.client.get('/federation/trust')).peers).toContainEqual(expect.objectContaining({ id: t.peer_id, has_trust: true }));
    });

    it('deliver: routed to the role filler (WebSocket push), idempotent on redelivery; scope and hop limits', async () => {
      const sock = await PushSocket.open(svc.url, worker.key, { label: 'worker' });
      try {
        const originId = ulid();
        const body = { id: originId, signal_type: 'task', content: 'build it', to_role: 'builders', from_identity: 'agent-7', urgency: 0.9, tags: ['x'], payload: { n: 1 } };
        const copy = expectOk(await deliver(body));
        expect(copy).toMatchObject({ signal_type: 'task', content: 'build it', to_role: 'builders', urgency: 0.9, tags: ['x'], payload: { n: 1 }, task_status: 'open', source_org: trust.peer_id, from_identity: `peer:${trust.peer_id}:agent-7` });
        expect(copy.federation).toEqual({ peer_id: trust.peer_id, remote_id: originId, direction: 'inbound', hops: 1 });
        expect(copy.id).not.toBe(originId);
        await waitFor('the push of the inbound copy', () => sock.signalIds(), (ids) => ids.includes(copy.id), 20_000);
        expect(sock.frames.find((f) => f.type === 'signal' && f.signal.id === copy.id)!.signal.source_org).toBe(trust.peer_id);
        expect(expectOk(await worker.client.get(`/inbox/identity/${worker.id}`)).signals.map((s: any) => s.id)).toContain(copy.id);

        const redelivered = expectOk(await deliver(body));
        expect(redelivered.id).toBe(copy.id);
        const sameOrigin = (await listAll(worker.client)).filter((s: any) => s.federation?.remote_id === originId);
        expect(sameOrigin).toHaveLength(1);
      } finally {
        sock.ws.close();
      }
      // redeliveries racing each other still make one copy
      const racedId = ulid();
      const raced = await Promise.all(Array.from({ length: 6 }, () => deliver({ id: racedId, to_role: 'builders' })));
      expect(new Set(raced.map((r) => expectOk(r).id)).size).toBe(1);
      expect((await listAll(worker.client)).filter((s: any) => s.federation?.remote_id === racedId)).toHaveLength(1);

      expectError(await deliver({ signal_type: 'alert' }), 403, 'FED_SCOPE_DENIED');
      expectError(await deliver({}, 1), 400, 'FED_HOP_LIMIT');
      expectError(await deliver({ source_org: 'another-org' }), 400, 'FED_HOP_LIMIT');
      expectError(await deliver({ to_role: 'nobody-fills-this' }), 404, 'SIGNAL_NOT_FOUND', 'to_role');
      expectError(await call('/federation/deliver', { signal: { signal_type: 'task' }, hops: 0 }), 400, 'VALIDATION_FIELD_REQUIRED');
    });

    it('claim and ack at the origin: the lease and conflict rules of local claims; the claimant is peer:<peer_id>:<agent>', async () => {
      const id = await outboundTask();
      const claimed = expectOk(await call('/federation/claim', { signal_id: id, agent: 'a1' }));
      expect(claimed).toMatchObject({ id, delivery_state: 'leased', claimed_by: `peer:${trust.peer_id}:a1` });
      expectOk(await call('/federation/claim', { signal_id: id, agent: 'a1' }));
      expectError(await call('/federation/claim', { signal_id: id, agent: 'a2' }), 409, 'SIGNAL_CLAIM_CONFLICT');
      expectError(await worker.client.post('/claim', { signal_id: id }), 409, 'SIGNAL_CLAIM_CONFLICT');
      // another holder's lease running: the peer's completion cannot be taken (docs/federation.md, Repeats and conflicts)
      expectError(await call('/federation/ack', { signal_id: id, agent: 'a2' }), 409, 'FED_STATE_CONFLICT');
      expect(expectOk(await call('/federation/ack', { signal_id: id, agent: 'a1' }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
      expect(await findSignal(root.client, id)).toMatchObject({ task_status: 'completed' });
      expectError(await call('/federation/cancel', { signal_id: id, agent: 'a1' }), 409, 'FED_STATE_CONFLICT');
      expectError(await call('/federation/claim', { signal_id: id, agent: 'a1' }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');

      // a local agent holding the lease wins over the peer's agents
      const local = await outboundTask();
      expectOk(await worker.client.post('/claim', { signal_id: local }));
      expectError(await call('/federation/claim', { signal_id: local, agent: 'a1' }), 409, 'SIGNAL_CLAIM_CONFLICT');
    });

    it('claim at the origin answers claim_token; after the lease lapsed and was granted again the older token cannot ack', async () => {
      const id = await outboundTask();
      expect(expectOk(await call('/federation/claim', { signal_id: id, agent: 'a1', lease_ms: 300 }))).toMatchObject({ claimed_by: `peer:${trust.peer_id}:a1`, claim_token: 1 });
      await waitFor('the lease to lapse', () => findSignal(root.client, id), (s: any) => s.delivery_state === 'pending', 10_000, 20);
      expect(expectOk(await call('/federation/claim', { signal_id: id, agent: 'a1' }))).toMatchObject({ claim_token: 2 });
      const stale = await call('/federation/ack', { signal_id: id, agent: 'a1', claim_token: 1 });
      expectError(stale, 403, 'SIGNAL_ACK_UNAUTHORIZED');
      expect(stale.body.error.details).toEqual({ reason: 'stale_claim' });
      expectError(await call('/federation/claim', { signal_id: id, agent: 'a1', claim_token: 1 }), 403, 'SIGNAL_ACK_UNAUTHORIZED');
      expect(expectOk(await call('/federation/ack', { signal_id: id, agent: 'a1', claim_token: 2 }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed', claim_token: 2 });
    });

    it('cancel at the origin (the receiver declines), with or without a claim', async () => {
      const open = await outboundTask();
      expect(expectOk(await call('/federation/cancel', { signal_id: open, agent: 'a1' }))).toMatchObject({ id: open, task_status: 'cancelled' });
      const held = await outboundTask();
      expectOk(await call('/federation/claim', { signal_id: held, agent: 'a1' }));
      expect(expectOk(await call('/federation/cancel', { signal_id: held, agent: 'a1' }))).toMatchObject({ task_status: 'cancelled', claimed_by: null });
      expect((await findSignal(root.client, held)).task_status).toBe('cancelled');
    });

    it('cancel at the receiver (the origin withdraws) marks the inbound copy; a conflict once completed', async () => {
      const originId = ulid();
      const copy = expectOk(await deliver({ id: originId, to_role: 'builders' }));
      expect(expectOk(await call('/federation/cancel', { signal_id: originId, agent: 'origin-agent' }))).toMatchObject({ id: copy.id, task_status: 'cancelled' });
      expect((await findSignal(worker.client, copy.id)).task_status).toBe('cancelled');

      // a claim of an inbound copy is forwarded to its origin: a stand-in origin that agrees
      const origin = await startPeerReceiver();
      try {
        const t = await trustWith({ endpoint: origin.url });
        const doneOrigin = ulid();
        const done = expectOk(await deliver({ id: doneOrigin, to_role: 'builders' }, 0, t));
        expectOk(await worker.client.post('/claim', { signal_id: done.id }));
        expectOk(await worker.client.post('/ack', { signal_id: done.id }));
        expectError(await call('/federation/cancel', { signal_id: doneOrigin, agent: 'origin-agent' }, t), 409, 'FED_STATE_CONFLICT');
      } finally {
        await origin.close();
      }
    });

    it('a peer acting on a signal not federated to it: POLICY_CROSS_ORG_DENIED', async () => {
      const localOnly = (await emitOk(root, { signal_type: 'task', content: 'ours' })).id;
      const other = await trustWith();
      const toOther = await outboundTask(other.peer_id);
      for (const path of ['/federation/claim', '/federation/ack', '/federation/cancel']) {
        expectError(await call(path, { signal_id: localOnly, agent: 'a1' }), 403, 'POLICY_CROSS_ORG_DENIED');
        expectError(await call(path, { signal_id: toOther, agent: 'a1' }), 403, 'POLICY_CROSS_ORG_DENIED');
      }
      // another peer's inbound copy is not this peer's to cancel
      const theirs = ulid();
      const copy = expectOk(await deliver({ id: theirs }, 0, other));
      expectError(await call('/federation/cancel', { signal_id: copy.id, agent: 'a1' }), 403, 'POLICY_CROSS_ORG_DENIED');
      expectError(await call('/federation/claim', { signal_id: ulid(), agent: 'a1' }), 404, 'SIGNAL_NOT_FOUND');
      expect((await findSignal(root.client, toOther)).task_status).toBe('open');
    });
  });
}
