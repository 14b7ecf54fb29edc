/**
 * Every route of the live table flagged `idempotent: true` commits its answer in the commit of its effect
 * (docs/reliability.md, A claim belongs to a live attempt). Per route, on both backends, a real request with
 * an `Idempotency-Key` runs its real handler; the process "dies" the moment its first write other than the
 * idempotency records commits: that commit lands, nothing after it does (not the answer, not the claim's
 * release, not a lease renewal). The retry, once the dead attempt's lease lapsed, must answer the route's own
 * status and write nothing but idempotency records (no second effect), and a further retry replays it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyRecords, type Claim } from '../../src/store/idempotency.js';
import type { Op, Store } from '../../src/store/port.js';
import { upload } from '../helpers/blobs.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { emitOk, expectOk, waitFor } from './support.js';

const ENV = { IDEMPOTENCY_LEASE_MS: '300', ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };

interface Attempt {
  rec: string;
  attempt: string;
}

/**
 * The Idempotency-Key attempt the calling async chain runs in. The service hands each attempt's claim to its
 * handler explicitly; the harness follows the attempt's async chain itself, so that it can tell the dead
 * attempt's later commits from its retry's.
 */
const attempts = new AsyncLocalStorage<Claim>();
const runAttempt = IdempotencyRecords.prototype.runAttempt;
IdempotencyRecords.prototype.runAttempt = function (this: IdempotencyRecords, c: Claim, exec: (c: Claim) => Promise<unknown>, keep: (out: unknown) => unknown) {
  return runAttempt.call(this, c, (claim) => attempts.run(claim, () => exec(claim)), keep);
} as typeof runAttempt;

function attemptHere(): Attempt | undefined {
  const c = attempts.getStore();
  return c && { rec: c.rec, attempt: c.attempt };
}

const isIdem = (op: Op) => ('key' in op && op.key.startsWith('idem:')) || (op.op === 'index' && op.index.startsWith('idem:'));
const writesOf = (ops: Op[]) => ops.filter((op) => op.op !== 'check' && !isIdem(op)).map((op) => ('key' in op ? op.key : op.op === 'index' ? op.index : op.log));

type Phase = { at: 'off' } | { at: 'first' } | { at: 'dead'; dead: Attempt; carried: boolean } | { at: 'retry'; dead: Attempt; carried: boolean; writes: string[] };

/**
 * The crash, between the effect's commit and anything after it. `svc.store` wraps the backend's store object,
 * whose own `commit` every write reaches at call time: replacing that property puts this harness under every
 * service's writes without changing one of them.
 */
function crashHarness(svc: Started) {
  const original = Object.getOwnPropertyDescriptor(svc.store, 'commit')!.value as Store['commit'];
  let phase: Phase = { at: 'off' };
  const killed = () => Promise.reject(new Error('the process died after the effect committed'));
  const commit = async (ops: Op[]) => {
    const here = attemptHere();
    if (phase.at === 'first' && here && writesOf(ops).length > 0) {
      const carried = ops.some((op) => op.op === 'put' && op.key === here.rec && (op.value as { effect?: unknown }).effect !== undefined);
      phase = { at: 'dead', dead: here, carried };
      await original(ops);
      return killed();
    }
    if (phase.at === 'dead') {
      const { dead } = phase;
      if (here?.attempt === dead.attempt) return killed();
      const touches = ops.some((op) => 'key' in op && (op.key === dead.rec || op.key === `${dead.rec}:lease`));
      const takeover = ops.some((op) => op.op === 'put' && op.key === dead.rec && (op.value as { attempt?: string }).attempt !== dead.attempt);
      if (touches && !takeover) return killed();
      if (takeover) phase = { at: 'retry', dead, carried: phase.carried, writes: [] };
    }
    if (phase.at === 'retry' && here && here.attempt !== phase.dead.attempt) phase.writes.push(...writesOf(ops));
    return original(ops);
  };
  Object.defineProperty(svc.store, 'commit', { value: commit, writable: true, configurable: true });
  return {
    arm: () => void (phase = { at: 'first' }),
    /** what the crashed attempt committed and what its retry wrote; disarms */
    outcome: () => {
      const p = phase;
      phase = { at: 'off' };
      return p.at === 'retry' ? { crashed: true, carried: p.carried, retryWrites: p.writes } : { crashed: p.at !== 'first' && p.at !== 'off', carried: p.at === 'dead' && p.carried, retryWrites: ['(no retry took the claim over)'] };
    },
  };
}

interface Call {
  who: Member;
  path: string;
  status: number;
  body?: unknown;
  /** a streamed upload's raw body and query fields */
  upload?: { content: string; name: string };
}

interface Answer {
  status: number;
  data: unknown;
  replayed: string | null;
}

async function send(url: string, c: Call, key: string): Promise<Answer> {
  if (c.upload) {
    const r = await upload(url, c.who.key, c.path, c.upload.content, { type: 'text/plain', fields: { name: c.upload.name }, headers: { 'idempotency-key': key } });
    return { status: r.status, data: r.body?.data, replayed: r.headers.get('idempotent-replayed') };
  }
  const r = await fetch(url + c.path, { method: 'POST', headers: { authorization: `Bearer ${c.who.key}`, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(c.body ?? {}) });
  return { status: r.status, data: ((await r.json()) as { data?: unknown }).data, replayed: r.headers.get('idempotent-replayed') };
}

for (const backend of BACKENDS) {
  describe(`an Idempotency-Key's answer rides in its effect's commit, on every idempotent route (${backend})`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let member: Member;
    let fixtures: Record<string, () => Promise<Call>>;

    beforeAll(async () => {
      svc = await servers.start(ENV);
      root = await bootstrap(svc.url);
      member = await join(root.client, 'crash-member');
      const ns = `agent:${member.id}`;
      const memory = async (content: string) => expectOk(await member.client.post('/memory/store', { namespace: ns, content, allow_duplicate: true }), 201).id as string;
      const rx = await startReceiver();
      const hook = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events: ['signal.emitted'] }), 201);
      fixtures = {
        'POST /emit': async () => ({ who: member, path: '/emit', status: 201, body: { signal_type: 'pulse', content: 'crash emit' } }),
        'POST /invite/create': async () => ({ who: root, path: '/invite/create', status: 201, body: { name: 'crash-invitee', type: 'agent' } }),
        'POST /admin/api-keys': async () => ({ who: root, path: '/admin/api-keys', status: 201, body: { owner: member.id } }),
        'POST /admin/api-keys/:id/rotate': async () => {
          const k = expectOk(await root.client.post('/admin/api-keys', { owner: member.id }), 201);
          return { who: root, path: `/admin/api-keys/${k.id}/rotate`, status: 200 };
        },
        'POST /memory/store': async () => ({ who: member, path: '/memory/store', status: 201, body: { namespace: ns, content: 'crash memory', allow_duplicate: true } }),
        'POST /memory/relate': async () => ({ who: member, path: '/memory/relate', status: 201, body: { from_id: await memory('crash from'), to_id: await memory('crash to'), relation: 'knows' } }),
        'POST /memory/admin/share': async () => ({ who: root, path: '/memory/admin/share', status: 201, body: { namespace: ns, grantee_type: 'identity', grantee: root.id } }),
        'POST /memory/admin/re-embed': async () => ({ who: root, path: '/memory/admin/re-embed', status: 202, body: { namespace: ns } }),
        'POST /memory/admin/export': async () => ({ who: root, path: '/memory/admin/export', status: 202, body: { namespace: ns } }),
        'POST /memory/admin/import': async () => ({ who: root, path: '/memory/admin/import', status: 202, body: { ndjson: JSON.stringify({ namespace: ns, content: 'crash import' }) } }),
        'POST /workspace/folders': async () => ({ who: member, path: '/workspace/folders', status: 201, body: { name: 'crash-folder' } }),
        'POST /workspace/files/upload': async () => ({ who: member, path: '/workspace/files/upload', status: 201, upload: { content: 'crash file', name: 'crash.txt' } }),
        'POST /artifacts/upload': async () => ({ who: member, path: '/artifacts/upload', status: 201, upload: { content: 'crash artifact', name: 'crash-artifact' } }),
        'POST /workstreams': async () => ({ who: member, path: '/workstreams', status: 201, body: { name: 'crash-stream' } }),
        'POST /workstreams/:id/links': async () => {
          const w = expectOk(await member.client.post('/workstreams', { name: 'crash-links' }), 201);
          return { who: member, path: `/workstreams/${w.id}/links`, status: 201, body: { kind: 'memory', id: await memory('crash linked') } };
        },
        'POST /roles': async () => ({ who: root, path: '/roles', status: 201, body: { name: 'crash-role' } }),
        'POST /rings': async () => ({ who: root, path: '/rings', status: 201, body: { name: 'crash-ring' } }),
        'POST /fills': async () => {
          const role = expectOk(await root.client.post('/roles', { name: 'crash-filled' }), 201);
          return { who: root, path: '/fills', status: 201, body: { identity_id: member.id, role_id: role.id } };
        },
        'POST /org/company/memberships': async () => {
          const dave = await join(root.client, 'crash-dave');
          // an identity without a membership record (one made before memberships existed)
          await svc.store.commit([{ op: 'del', key: `actor:membership:${dave.id}` }]);
          return { who: root, path: '/org/company/memberships', status: 201, body: { identity_id: dave.id } };
        },
        'POST /org/company/peers': async () => ({ who: root, path: '/org/company/peers', status: 201, body: { name: 'Crash peer', endpoint: 'https://crash-peer.example' } }),
        'POST /federation/trust': async () => ({ who: root, path: '/federation/trust', status: 201, body: { name: 'Crash trust', endpoint: 'https://crash-trust.example' } }),
        'POST /admin/webhooks': async () => ({ who: root, path: '/admin/webhooks', status: 201, body: { url: rx.url, events: ['signal.acked'] } }),
        'POST /admin/webhooks/deliveries/:id/replay': async () => {
          await emitOk(root, { signal_type: 'pulse', content: 'crash replayed' });
          const d = await waitFor('a delivered delivery', async () => expectOk(await root.client.get(`/admin/webhooks/${hook.id}/deliveries?limit=100`)).deliveries.find((x: any) => x.status === 'delivered'), (x) => x !== undefined, 15_000);
          return { who: root, path: `/admin/webhooks/deliveries/${d.id}/replay`, status: 202 };
        },
      };
    });

    it('every idempotent route of the live table has a crash case here', () => {
      const flagged = svc.routes.filter((r) => r.idempotent).map((r) => `${r.method.toUpperCase()} ${r.path}`);
      expect(flagged.sort()).toEqual(Object.keys(fixtures).sort());
    });

    it('killed right after its effect committed: the effect carried the answer, the retry answers it and writes no second effect', async () => {
      const harness = crashHarness(svc);
      const results: Record<string, unknown> = {};
      const expected: Record<string, unknown> = {};
      for (const route of svc.routes.filter((r) => r.idempotent).map((r) => `${r.method.toUpperCase()} ${r.path}`)) {
        const call = await fixtures[route]!();
        const key = `crash ${route}`;
        harness.arm();
        await send(svc.url, call, key);
        const retry = await send(svc.url, call, key);
        const { crashed, carried, retryWrites } = harness.outcome();
        const replay = await send(svc.url, call, key);
        results[route] = { crashed, carried, retryWrites, retry: retry.status, replay: [replay.status, replay.replayed], same: JSON.stringify(replay.data) === JSON.stringify(retry.data) };
        expected[route] = { crashed: true, carried: true, retryWrites: [], retry: call.status, replay: [call.status, 'true'], same: true };
      }
      expect(results).toEqual(expected);
    });
  });
}
