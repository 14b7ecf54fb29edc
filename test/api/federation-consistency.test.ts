/**
 * The two copies of a federated task agree under retries and races (docs/federation.md, Renewals, Repeats and
 * conflicts, Wrapped refusals), on both backends: two real instances, org A (the origin) and org B (the
 * receiver), each calling the other through a proxy that can pass, drop or delay answers (past
 * FEDERATION_TIMEOUT_MS) or be down. A renewal reaches the origin; a completion reaching the origin after its
 * lease lapsed is accepted when nobody holds the task and is a conflict recorded on both sides when somebody
 * does; repeated claim, ack, cancel and deliver calls whose first answer was lost or late answer 200; a
 * cancel meeting a completion is a conflict on both sides, never FED_DELIVERY_FAILED; and a hostile origin's
 * refusal of a forwarded claim or ack never reaches B's agent as its own code.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { bootstrap, join, type Client, type Member } from '../helpers/client.js';
import { startFedProxy, type FedProxy, type Policy } from '../helpers/fed-proxy.js';
import { signedPost } from '../helpers/federation.js';
import { startPeerReceiver, type PeerReceiver } from '../helpers/peer-receiver.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const until = <T>(what: string, probe: () => T | Promise<T>, timeoutMs = 30_000) => waitFor(what, probe, (v) => !!v, timeoutMs, 50);
const ENV = { ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_TIMEOUT_MS: '2000', TASK_LEASE_MS: '60000' };

const signalOf = async (c: Client, id: string) => (expectOk(await c.get(`/thread/${id}`)).signals as any[]).find((x) => x.id === id);
const copyOf = async (c: Client, originId: string) => (expectOk(await c.get('/signals/list?type=task&limit=100')).signals as any[]).find((x) => x.federation?.remote_id === originId);
const deliveries = async (c: Client, peerId: string) => (expectOk(await c.get('/admin/peers')) as any[]).find((p) => p.id === peerId).deliveries;
const a2aCancel = (c: Client, id: string) =>
  fetch(`${c.url}/a2a`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id } }) });

/** A policy losing the first answers to each path as listed (then passing): e.g. `{ '/federation/ack': ['drop', 'delay'] }`. */
function losing(plan: Record<string, Policy[]>): (path: string) => Policy {
  const left = Object.fromEntries(Object.entries(plan).map(([k, v]) => [k, [...v]]));
  return (path) => left[path]?.shift() ?? 'pass';
}

/** Calls to one path by their signal: what the proxy saw, in order. */
const callsFor = (p: FedProxy, path: string, signalId: string) => p.calls.filter((c) => c.path === path && (c.body?.signal_id === signalId || c.body?.signal?.id === signalId));

for (const backend of BACKENDS) {
  describe(`federation consistency under retries and races, on ${backend}`, () => {
    const servers = serversOn(backend);
    let a: Started;
    let b: Started;
    let rootA: Member;
    let rootB: Member;
    let alice: Member;
    let bob: Member;
    let peerId: string;
    let secret: string;
    /** in front of A (B's calls to A) and in front of B (A's calls to B) */
    let toA: FedProxy;
    let toB: FedProxy;
    const pass = () => 'pass' as Policy;

    beforeAll(async () => {
      [a, b] = await Promise.all([servers.start(ENV), servers.start(ENV)]);
      [toA, toB] = await Promise.all([startFedProxy(a.url), startFedProxy(b.url)]);
      // an answer held past the senders' FEDERATION_TIMEOUT_MS
      toA.delayMs = toB.delayMs = 3000;
      [rootA, rootB] = await Promise.all([bootstrap(a.url, 'root-a'), bootstrap(b.url, 'root-b')]);
      [alice, bob] = await Promise.all([join(rootA.client, 'alice'), join(rootB.client, 'bob')]);
      const ops = expectOk(await rootB.client.post('/roles', { name: 'ops' }), 201);
      expectOk(await rootB.client.post('/fills', { identity_id: bob.id, role_id: ops.id }), 201);
      const t = expectOk(await rootA.client.post('/federation/trust', { name: 'org-b', endpoint: toB.url, allowed_scopes: ['task'], expires_in: 3600 }), 201);
      peerId = t.peer_id;
      secret = t.shared_secret;
      expectOk(await rootB.client.post('/federation/trust', { ...t, name: 'org-a', endpoint: toA.url, allowed_scopes: ['task'] }), 201);
    });
    afterAll(async () => {
      await Promise.all([toA?.close(), toB?.close()]);
    });

    /** A task A sends to B's ops role, and B's copy of it. */
    async function federatedTask(content: string): Promise<{ origin: any; copy: any }> {
      const origin = await emitOk(rootA, { signal_type: 'task', content, to_peer: peerId, to_role: 'ops' });
      const copy = await until('the copy on B', () => copyOf(rootB.client, origin.id));
      await until('A recorded the copy id', async () => (await signalOf(rootA.client, origin.id)).federation.remote_id === copy.id);
      return { origin, copy };
    }

    /** Neither side recorded a failed call to the other. */
    async function noFailures(originId: string, copyId: string): Promise<void> {
      expect((await signalOf(rootA.client, originId)).federation.error ?? null).toBeNull();
      expect((await signalOf(rootB.client, copyId)).federation.error ?? null).toBeNull();
      for (const c of [rootA.client, rootB.client]) expect((await deliveries(c, peerId)).failed).toBe(0);
    }

    it('a renewal reaches the origin: claimed for 4 s, renewed for 60 s, completed after 4 s, both sides completed', async () => {
      const { origin, copy } = await federatedTask('renew then complete');
      expectOk(await bob.client.post('/claim', { signal_id: copy.id, lease_ms: 4000 }));
      // a witness lease taken after the first claim: its durable timer firing means the first 4 s lease has run out
      const witness = await emitOk(rootB, { signal_type: 'task', content: 'witness', to_identity: bob.id });
      expectOk(await bob.client.post('/claim', { signal_id: witness.id, lease_ms: 4000 }));
      expectOk(await bob.client.post('/claim', { signal_id: copy.id, lease_ms: 60_000 }));
      const atOrigin = await signalOf(rootA.client, origin.id);
      expect(atOrigin).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:${bob.id}`, claim_token: 1 });
      expect(Date.parse(atOrigin.claim_expires_at)).toBeGreaterThan(Date.now() + 30_000);

      await until('the witness lease expired', async () => (await signalOf(rootB.client, witness.id)).delivery_state !== 'leased', 20_000);
      expect(await signalOf(rootA.client, origin.id)).toMatchObject({ delivery_state: 'leased', claimed_by: `peer:${peerId}:${bob.id}` });
      expect(expectOk(await bob.client.post('/ack', { signal_id: copy.id }))).toMatchObject({ task_status: 'completed' });
      await until('A completed', async () => (await signalOf(rootA.client, origin.id)).task_status === 'completed');
      await until("B's ack delivered", async () => (await deliveries(rootB.client, peerId)).pending === 0);
      expect(await signalOf(rootB.client, copy.id)).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
      await noFailures(origin.id, copy.id);
      // a claim of the completed copy is refused here, without asking the origin
      const asked = callsFor(toA, '/federation/claim', origin.id).length;
      expectError(await bob.client.post('/claim', { signal_id: copy.id }), 422, 'SIGNAL_CLAIM_INVALID_STATUS');
      expect(callsFor(toA, '/federation/claim', origin.id)).toHaveLength(asked);
    });

    it("a completion reaching the origin after its lease lapsed is accepted while nobody holds the task", async () => {
      const { origin, copy } = await federatedTask('late but free');
      expectOk(await bob.client.post('/claim', { signal_id: copy.id, lease_ms: 1500 }));
      toA.policy = (path) => (path === '/federation/ack' ? 'down' : 'pass');
      try {
        expectOk(await bob.client.post('/ack', { signal_id: copy.id }));
        await until("A's lease lapsed (its timer)", async () => (await signalOf(rootA.client, origin.id)).delivery_state !== 'leased', 20_000);
        await until('an ack attempt failed while A was away', () => callsFor(toA, '/federation/ack', origin.id).length > 0);
      } finally {
        toA.policy = pass;
      }
      const done = await until('A completed', async () => {
        const s = await signalOf(rootA.client, origin.id);
        return s.task_status === 'completed' ? s : undefined;
      });
      expect(done).toMatchObject({ delivery_state: 'acked', claimed_by: `peer:${peerId}:${bob.id}` });
      await until("B's ack delivered", async () => (await deliveries(rootB.client, peerId)).pending === 0);
      expect((await signalOf(rootB.client, copy.id)).federation.conflict ?? null).toBeNull();
      await noFailures(origin.id, copy.id);
    });

    it('a completion reaching the origin after another agent took the task there is a conflict recorded on both sides', async () => {
      const { origin, copy } = await federatedTask('late and taken');
      expectOk(await bob.client.post('/claim', { signal_id: copy.id, lease_ms: 1500 }));
      toA.policy = (path) => (path === '/federation/ack' ? 'down' : 'pass');
      try {
        expectOk(await bob.client.post('/ack', { signal_id: copy.id }));
        await until("A's lease lapsed (its timer)", async () => (await signalOf(rootA.client, origin.id)).delivery_state !== 'leased', 20_000);
        expectOk(await alice.client.post('/claim', { signal_id: origin.id }));
      } finally {
        toA.policy = pass;
      }
      const mine = await until("B's copy records the origin's refusal", async () => {
        const s = await signalOf(rootB.client, copy.id);
        return s.federation.conflict ? s : undefined;
      });
      expect(mine).toMatchObject({ task_status: 'completed', federation: { conflict: { call: 'ack', outcome: 'completed', refused_by: 'peer', task_status: 'open', delivery_state: 'leased' } } });
      const theirs = await signalOf(rootA.client, origin.id);
      expect(theirs).toMatchObject({ delivery_state: 'leased', claimed_by: alice.id, task_status: 'open', federation: { conflict: { call: 'ack', outcome: 'completed', refused_by: 'here' } } });
      const refused = callsFor(toA, '/federation/ack', origin.id).filter((c) => c.status !== undefined);
      expect(refused.at(-1)).toMatchObject({ status: 409, answer: { error: { code: 'FED_STATE_CONFLICT' } } });
      await until("B's ack settled", async () => (await deliveries(rootB.client, peerId)).pending === 0);
      await noFailures(origin.id, copy.id);
    });

    it('a claim whose answer came after FEDERATION_TIMEOUT_MS is renewed by its retry; an ack, a cancel and a deliver whose answers were dropped or late answer 200 when retried', async () => {
      const { origin, copy } = await federatedTask('lost answers');
      toA.policy = losing({ '/federation/claim': ['delay'], '/federation/ack': ['drop', 'delay'] });
      try {
        // the origin granted the claim, but its answer came too late: B's agent is told so and retries
        expectError(await bob.client.post('/claim', { signal_id: copy.id }), 502, 'FED_DELIVERY_FAILED');
        await until('A applied the late claim', async () => (await signalOf(rootA.client, origin.id)).delivery_state === 'leased');
        expect(expectOk(await bob.client.post('/claim', { signal_id: copy.id }))).toMatchObject({ delivery_state: 'leased', claimed_by: bob.id });
        expect(await signalOf(rootA.client, origin.id)).toMatchObject({ claimed_by: `peer:${peerId}:${bob.id}`, claim_token: 1 });

        expectOk(await bob.client.post('/ack', { signal_id: copy.id }));
        await until('A completed', async () => (await signalOf(rootA.client, origin.id)).task_status === 'completed');
        await until("B's ack delivered", async () => (await deliveries(rootB.client, peerId)).pending === 0);
      } finally {
        toA.policy = pass;
      }
      // the first ack was applied and its answer lost, the second's came after the timeout; the retry (more than one on a slow machine) answered 200
      const acks = callsFor(toA, '/federation/ack', origin.id);
      expect(acks.map((c) => [c.policy, c.status])).toEqual([['drop', 200], ['delay', 200], ...acks.slice(2).map(() => ['pass', 200])]);
      expect(acks.length).toBeGreaterThan(2);
      expect(acks.at(-1)!.answer.data).toMatchObject({ id: origin.id, task_status: 'completed' });
      await noFailures(origin.id, copy.id);

      // B declines a task; the first answer to its cancel is dropped, and A's is delayed past the timeout on a deliver
      toA.policy = losing({ '/federation/cancel': ['drop', 'delay'] });
      toB.policy = losing({ '/federation/deliver': ['delay'] });
      try {
        const declined = await federatedTask('declined');
        const delivers = callsFor(toB, '/federation/deliver', declined.origin.id);
        expect(delivers.map((c) => [c.policy, c.status])).toEqual([['delay', 200], ...delivers.slice(1).map(() => ['pass', 200])]);
        expect(delivers.length).toBeGreaterThan(1);
        expect((await copyOf(rootB.client, declined.origin.id)).id).toBe(declined.copy.id);
        expect((await a2aCancel(rootB.client, declined.copy.id)).status).toBe(200);
        await until("A's task cancelled", async () => (await signalOf(rootA.client, declined.origin.id)).task_status === 'cancelled');
        await until("B's cancel delivered", async () => (await deliveries(rootB.client, peerId)).pending === 0);
        const cancels = callsFor(toA, '/federation/cancel', declined.origin.id);
        expect(cancels.map((c) => [c.policy, c.status])).toEqual([['drop', 200], ['delay', 200], ...cancels.slice(2).map(() => ['pass', 200])]);
        expect(cancels.length).toBeGreaterThan(2);
        await noFailures(declined.origin.id, declined.copy.id);
      } finally {
        toA.policy = pass;
        toB.policy = pass;
      }
    });

    it('a cancel meeting a completion is a conflict on both sides, never FED_DELIVERY_FAILED', async () => {
      const { origin, copy } = await federatedTask('cancelled while completed');
      expectOk(await bob.client.post('/claim', { signal_id: copy.id }));
      toA.policy = (path) => (path === '/federation/ack' ? 'down' : 'pass');
      try {
        expectOk(await bob.client.post('/ack', { signal_id: copy.id }));
        // A withdraws the task before B's completion reached it
        expect((await a2aCancel(rootA.client, origin.id)).status).toBe(200);
        await until("A's cancel refused by B's completed copy", async () => (await signalOf(rootA.client, origin.id)).federation.conflict);
      } finally {
        toA.policy = pass;
      }
      await until("B's ack refused by A's cancelled task", async () => (await signalOf(rootB.client, copy.id)).federation.conflict?.refused_by === 'peer');
      await until('both deliveries settled', async () => (await deliveries(rootA.client, peerId)).pending === 0 && (await deliveries(rootB.client, peerId)).pending === 0);
      expect(await signalOf(rootA.client, origin.id)).toMatchObject({ task_status: 'cancelled', federation: { error: null, conflict: { call: 'ack', outcome: 'completed', refused_by: 'here', task_status: 'cancelled' } } });
      expect(await signalOf(rootB.client, copy.id)).toMatchObject({ task_status: 'completed', federation: { conflict: { call: 'ack', outcome: 'completed', refused_by: 'peer', task_status: 'cancelled' } } });
      expect(callsFor(toB, '/federation/cancel', origin.id).at(-1)).toMatchObject({ status: 409, answer: { error: { code: 'FED_STATE_CONFLICT', details: { call: 'cancel', task_status: 'completed' } } } });
      await noFailures(origin.id, copy.id);
    });

    it("a peer's repeated calls answer the current state with or without a call id; another outcome is FED_STATE_CONFLICT", async () => {
      const as = { peerId, secret };
      const { origin } = await federatedTask('hand-made repeats');
      const call = (path: string, body: object, headers: Record<string, string> = {}) => signedPost(a.url, path, body, { ...as, headers });
      expectOk(await call('/federation/claim', { signal_id: origin.id, agent: 'x1' }));
      const first = expectOk(await call('/federation/ack', { signal_id: origin.id, agent: 'x1' }));
      for (const headers of [{}, { 'Idempotency-Key': ulid() }, { 'X-Federation-Call-Id': ulid() }] as Record<string, string>[])
        expect(expectOk(await call('/federation/ack', { signal_id: origin.id, agent: 'x1' }, headers))).toEqual(first);
      const other = await call('/federation/ack', { signal_id: origin.id, agent: 'x2' });
      expectError(other, 409, 'FED_STATE_CONFLICT');
      expect(other.body.error.details).toMatchObject({ call: 'ack', outcome: 'completed', task_status: 'completed' });
      expectError(await call('/federation/ack', { signal_id: origin.id, agent: 'x1', outcome: 'failed' }), 409, 'FED_STATE_CONFLICT');
      expectError(await call('/federation/cancel', { signal_id: origin.id, agent: 'x1' }), 409, 'FED_STATE_CONFLICT');

      const gone = await federatedTask('hand-made cancels');
      const cancelled = expectOk(await call('/federation/cancel', { signal_id: gone.origin.id, agent: 'x1' }));
      expect(cancelled.task_status).toBe('cancelled');
      expect(expectOk(await call('/federation/cancel', { signal_id: gone.origin.id, agent: 'x1' }))).toEqual(cancelled);
      expectError(await call('/federation/ack', { signal_id: gone.origin.id, agent: 'x1' }), 409, 'FED_STATE_CONFLICT');
      // a given-up task is given up again without change
      const freed = await federatedTask('hand-made give-up');
      expectOk(await call('/federation/claim', { signal_id: freed.origin.id, agent: 'x1' }));
      const released = expectOk(await call('/federation/ack', { signal_id: freed.origin.id, agent: 'x1', outcome: 'failed' }));
      expect(released).toMatchObject({ task_status: 'open', claimed_by: null });
      expect(expectOk(await call('/federation/ack', { signal_id: freed.origin.id, agent: 'x1', outcome: 'failed' }))).toEqual(released);
    });

    describe('a hostile origin', () => {
      let origin: PeerReceiver;
      let hostile: { peerId: string; secret: string };
      let answer: (path: string) => { status: number; body: string } | number = () => 200;
      beforeAll(async () => {
        origin = await startPeerReceiver((c) => answer(c.path));
        hostile = { peerId: ulid(), secret: randomBytes(32).toString('hex') };
        origin.secret = hostile.secret;
        const expires_at = new Date(Date.now() + 3600_000).toISOString();
        expectOk(await rootB.client.post('/federation/trust', { peer_id: hostile.peerId, shared_secret: hostile.secret, name: 'hostile', endpoint: origin.url, allowed_scopes: ['task'], expires_at }), 201);
      });
      afterAll(async () => origin?.close());

      const fromHostile = async () => expectOk(await signedPost(b.url, '/federation/deliver', { signal: { id: ulid(), signal_type: 'task', content: 'from a hostile origin', to_role: 'ops' }, hops: 0 }, hostile));
      const refusal = (status: number, code: string, message = 'Your API key was revoked') => ({ status, body: JSON.stringify({ error: { code, message, details: { reason: 'hostile' } } }) });

      it("its refusal of a forwarded claim is wrapped in a federation code, never answered as our agent's own", async () => {
        const copy = await fromHostile();
        const cases: [ReturnType<typeof refusal> | { status: number; body: string }, number, string, string | undefined][] = [
          [refusal(401, 'AUTH_KEY_REVOKED'), 502, 'FED_DELIVERY_FAILED', 'AUTH_KEY_REVOKED'],
          [refusal(403, 'POLICY_DENIED'), 502, 'FED_DELIVERY_FAILED', 'POLICY_DENIED'],
          [refusal(403, 'POLICY_MEMBERSHIP_REQUIRED'), 502, 'FED_DELIVERY_FAILED', 'POLICY_MEMBERSHIP_REQUIRED'],
          [refusal(429, 'RATE_LIMIT_EXCEEDED'), 502, 'FED_DELIVERY_FAILED', 'RATE_LIMIT_EXCEEDED'],
          [refusal(401, 'NOT_A_CODE_OF_OURS'), 502, 'FED_DELIVERY_FAILED', undefined],
          [{ status: 500, body: 'not json' }, 502, 'FED_DELIVERY_FAILED', undefined],
          [refusal(409, 'SIGNAL_CLAIM_CONFLICT'), 409, 'SIGNAL_CLAIM_CONFLICT', 'SIGNAL_CLAIM_CONFLICT'],
          [refusal(422, 'SIGNAL_CLAIM_INVALID_STATUS'), 409, 'FED_STATE_CONFLICT', 'SIGNAL_CLAIM_INVALID_STATUS'],
        ];
        for (const [peerAnswer, status, code, peerCode] of cases) {
          answer = () => peerAnswer;
          const r = await bob.client.post('/claim', { signal_id: copy.id });
          expectError(r, status, code);
          expect(r.body.error.details).toMatchObject({ peer_id: hostile.peerId, peer_status: peerAnswer.status });
          expect(r.body.error.details.peer_code).toBe(peerCode);
          expect(JSON.stringify(r.body)).not.toMatch(/Your API key|hostile/);
        }
        // nothing was leased here, and bob's key is untouched
        expect((await signalOf(rootB.client, copy.id)).claimed_by).toBeNull();
        expectOk(await bob.client.get(`/inbox/identity/${bob.id}`));
      });

      it('its refusal of a forwarded ack ends the delivery as FED_DELIVERY_FAILED on the copy; our agent sees its own ack succeed', async () => {
        const copy = await fromHostile();
        answer = (path) => (path === '/federation/ack' ? refusal(401, 'AUTH_KEY_REVOKED') : 200);
        expectOk(await bob.client.post('/claim', { signal_id: copy.id }));
        expect(expectOk(await bob.client.post('/ack', { signal_id: copy.id }))).toMatchObject({ task_status: 'completed' });
        const failed = await until('the ack delivery failed', async () => {
          const s = await signalOf(rootB.client, copy.id);
          return s.federation.error ? s : undefined;
        });
        expect(failed.federation.error).toBe('FED_DELIVERY_FAILED');
        expect(failed.federation.conflict ?? null).toBeNull();
        expectOk(await bob.client.get(`/inbox/identity/${bob.id}`));
      });
    });
  });
}
