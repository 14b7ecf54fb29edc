/**
 * Memberships over real HTTP, WebSocket and SSE on both backends: list (paged), create (one per identity),
 * status moves and their refusals, a suspended identity refused on every transport with its open socket
 * and stream closed, its task lease left to run out and the task then redelivered, reinstatement, claw types with one central claw even under concurrent PATCHes.
 * Leaving `active` appends `identity.access_ended` (an admin stream's event) in the commit that ends it, and open
 * connections end through the re-check every auth write's `auth.changed` entry starts (docs/realtime.md),
 * whoever moves the membership; an identity's deletion removes its membership in the deletion's own commit.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { PushSocket, refusedUpgrade, SseStream } from '../helpers/push.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import type { Op, Store } from '../../src/store/port.js';
import { emitOk, expectError, expectOk, findSignal, ULID, waitFor } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';
const until = <T>(what: string, probe: () => T | Promise<T>, ms = 5000) => waitFor(what, probe, (v) => !!v, ms, 25);

describe.each(BACKENDS)('memberships on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let alice: Member;
  let bob: Member;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    alice = await join(root.client, 'alice');
    bob = await join(root.client, 'bob');
  });

  const all = async () => {
    const out: any[] = [];
    let after: string | null = null;
    do {
      const d: any = expectOk(await root.client.get(`/org/company/memberships?limit=1${after ? `&after=${after}` : ''}`));
      out.push(...d.memberships);
      after = d.has_more ? d.cursor : null;
    } while (after);
    return out;
  };
  const of = async (m: Member) => (await all()).find((x) => x.identity_id === m.id);

  it('every identity has one membership; paged list; duplicates and unknown ids refused', async () => {
    const list = await all();
    expect(list.map((m) => m.identity_id).sort()).toEqual([root.id, alice.id, bob.id].sort());
    for (const m of list) {
      expect(m).toMatchObject({ status: 'active', claw_type: null });
      expect(m.id).toMatch(ULID);
    }
    expectError(await root.client.post('/org/company/memberships', { identity_id: alice.id }), 409, 'ORG_MEMBERSHIP_DUPLICATE');
    expectError(await root.client.post('/org/company/memberships', { identity_id: UNKNOWN }), 404, 'IDENTITY_NOT_FOUND');
    expectError(await root.client.post('/org/company/memberships', {}), 400, 'ORG_VALIDATION_FAILED', 'identity_id');
    expectError(await root.client.patch(`/org/company/memberships/${UNKNOWN}/status`, { status: 'suspended' }), 404, 'ORG_MEMBERSHIP_NOT_FOUND');
    expectError(await root.client.patch(`/org/company/memberships/${UNKNOWN}/claw-type`, { claw_type: 'worker' }), 404, 'ORG_MEMBERSHIP_NOT_FOUND');
    const a = await of(alice);
    expectError(await root.client.patch(`/org/company/memberships/${a.id}/status`, { status: 'gone' }), 400, 'ORG_VALIDATION_FAILED', 'status');
    expectError(await root.client.patch(`/org/company/memberships/${a.id}/claw-type`, { claw_type: 'boss' }), 400, 'ORG_VALIDATION_FAILED', 'claw_type');
    expectError(await alice.client.get('/org/company/memberships'), 403, 'AUTH_ADMIN_REQUIRED');
    expectError(await alice.client.patch(`/org/company/memberships/${a.id}/status`, { status: 'suspended' }), 403, 'AUTH_ADMIN_REQUIRED');
  });

  it('a suspended identity is refused on REST, WebSocket and SSE, and its open socket and stream close; reinstated it works again', async () => {
    const m = await of(bob);
    const socket = await PushSocket.open(svc.url, bob.key, { label: 'bob socket' });
    const stream = await SseStream.open(svc.url, { token: bob.key }, 'bob stream', ['signal', 'membership.changed']);
    const rootSocket = await PushSocket.open(svc.url, root.key, { label: 'root socket' });
    // connections whose filters would not show a membership change close all the same
    const filtered = await SseStream.open(svc.url, { token: bob.key, type: 'pulse' }, 'bob filtered stream');
    const filteredSocket = await PushSocket.open(svc.url, bob.key, { label: 'bob filtered socket' });
    await filteredSocket.ok('subscribe', { types: ['pulse'] });
    await emitOk(bob, { signal_type: 'pulse', content: 'before' });

    const s = expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'suspended' }));
    expect(s).toMatchObject({ id: m.id, identity_id: bob.id, status: 'suspended' });
    expect(expectOk(await root.client.get('/org/company')).member_counts).toMatchObject({ total: 3, active: 2, suspended: 1 });

    // open connections end
    expect(await socket.closed()).toMatchObject({ code: 4403 });
    await until('the stream ended and its reconnect refused', () => stream.es.readyState === 2);
    expect(stream.events.some((e) => e.type === 'membership.changed' && e.signal.status === 'suspended')).toBe(true);
    expect(await filteredSocket.closed()).toMatchObject({ code: 4403 });
    await until('the filtered stream ended', () => filtered.es.readyState === 2);
    // new requests, sockets and streams are refused
    expectError(await bob.client.get('/roles'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    expectError(await bob.client.post('/emit', { signal_type: 'pulse', content: 'after' }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    const up = await refusedUpgrade(svc.url, bob.key);
    expect({ status: up.status, code: up.body.error.code }).toEqual({ status: 403, code: 'POLICY_MEMBERSHIP_REQUIRED' });
    const sse = await fetch(`${svc.url}/signals/stream?token=${bob.key}`);
    expect(sse.status).toBe(403);
    expect((await sse.json()).error.code).toBe('POLICY_MEMBERSHIP_REQUIRED');
    // others are unaffected
    expect(rootSocket.closeInfo).toBeUndefined();
    expectOk(await alice.client.get('/roles'));

    expect(expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'suspended' })).status).toBe('suspended');
    const back = expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'active' }));
    expect(back.status).toBe('active');
    await emitOk(bob, { signal_type: 'pulse', content: 'back' });
    const again = await PushSocket.open(svc.url, bob.key, { label: 'bob again' });
    await again.close();
    await rootSocket.close();
    stream.close();
  });

  it('a task leased by an identity that is then suspended keeps its lease until it ends, then returns for another claimer', async () => {
    const gina = await join(root.client, 'gina');
    const task = await emitOk(root, { signal_type: 'task', content: 'left half done' });
    const claim = expectOk(await gina.client.post('/claim', { signal_id: task.id, lease_ms: 2500 }));
    expect(claim).toMatchObject({ delivery_state: 'leased', claimed_by: gina.id });
    expectOk(await root.client.patch(`/org/company/memberships/${(await of(gina)).id}/status`, { status: 'suspended' }));
    // the suspension leaves the lease alone: still gina's, another claimer is refused, gina cannot ack it any more
    expect(await findSignal(root.client, task.id)).toMatchObject({ delivery_state: 'leased', claimed_by: gina.id, claim_expires_at: claim.claim_expires_at });
    expectError(await alice.client.post('/claim', { signal_id: task.id }), 409, 'SIGNAL_CLAIM_CONFLICT');
    expectError(await gina.client.post('/ack', { signal_id: task.id }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    // the lease timer releases it for redelivery, and another agent takes it
    const back = await waitFor('the lease ended by its timer', () => findSignal(root.client, task.id), (s) => s?.delivery_state === 'pending', 10_000);
    expect(back).toMatchObject({ claimed_by: null, claim_expires_at: null, delivery_count: claim.delivery_count + 1 });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(claim.claim_expires_at));
    expect(expectOk(await alice.client.post('/claim', { signal_id: task.id }))).toMatchObject({ delivery_state: 'leased', claimed_by: alice.id });
    expect(expectOk(await alice.client.post('/ack', { signal_id: task.id }))).toMatchObject({ delivery_state: 'acked', task_status: 'completed' });
  });

  it('removed is refused too; removed may be reinstated; removed cannot be suspended', async () => {
    const carol = await join(root.client, 'carol');
    const m = await of(carol);
    expect(expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'removed' })).status).toBe('removed');
    expectError(await carol.client.get('/roles'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    expectError(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'suspended' }), 409, 'ORG_MEMBERSHIP_INVALID_TRANSITION');
    expectError(await root.client.patch(`/org/company/memberships/${m.id}/claw-type`, { claw_type: 'worker' }), 409, 'ORG_MEMBERSHIP_INVALID_TRANSITION');
    // the same status again changes nothing
    expect(expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'removed' })).status).toBe('removed');
    expect(expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'active' })).status).toBe('active');
    expectOk(await carol.client.get('/roles'));
  });

  it('claw types: one central claw per org, also under two concurrent PATCHes; releasing it frees the slot', async () => {
    const a = await of(alice);
    const b = await of(bob);
    expect(expectOk(await root.client.patch(`/org/company/memberships/${a.id}/claw-type`, { claw_type: 'worker' })).claw_type).toBe('worker');
    const [ra, rb] = await Promise.all([
      root.client.patch(`/org/company/memberships/${a.id}/claw-type`, { claw_type: 'central' }),
      root.client.patch(`/org/company/memberships/${b.id}/claw-type`, { claw_type: 'central' }),
    ]);
    const wins = [ra, rb].filter((r) => r.status === 200);
    expect(wins).toHaveLength(1);
    expectError([ra, rb].find((r) => r.status !== 200)!, 409, 'ORG_CENTRAL_CLAW_EXISTS');
    const winner = wins[0].body.data;
    const loser = winner.id === a.id ? b : a;
    expect((await all()).filter((x) => x.claw_type === 'central').map((x) => x.id)).toEqual([winner.id]);
    expectError(await root.client.patch(`/org/company/memberships/${loser.id}/claw-type`, { claw_type: 'central' }), 409, 'ORG_CENTRAL_CLAW_EXISTS');
    // the central claw steps down: the slot is free
    expectOk(await root.client.patch(`/org/company/memberships/${winner.id}/claw-type`, { claw_type: 'observer' }));
    expect(expectOk(await root.client.patch(`/org/company/memberships/${loser.id}/claw-type`, { claw_type: 'central' })).claw_type).toBe('central');
    expectOk(await root.client.patch(`/org/company/memberships/${loser.id}/claw-type`, { claw_type: 'worker' }));
  });

  it('a new membership for an identity whose membership is gone', async () => {
    const dave = await join(root.client, 'dave');
    // the only way to lose a membership record is a store without one (identities made before memberships existed)
    await svc.store.commit([{ op: 'del', key: `actor:membership:${dave.id}` }]);
    expectError(await dave.client.get('/roles'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    const m = expectOk(await root.client.post('/org/company/memberships', { identity_id: dave.id }), 201);
    expect(m).toMatchObject({ identity_id: dave.id, status: 'active', claw_type: null });
    expectOk(await dave.client.get('/roles'));
  });
  it('a suspension by any sender (the admin actor route) ends access through the one entry in its commit; a reinstated member resuming from before it stays connected', async () => {
    const erin = await join(root.client, 'erin');
    const socket = await PushSocket.open(svc.url, erin.key, { label: 'erin socket' });
    const before = socket.welcome.cursor as string;
    const watch = await SseStream.open(svc.url, { token: root.key }, 'admin stream', ['membership.changed', 'identity.access_ended']);
    expectOk(await root.client.post(`/admin/actors/membership/${erin.id}/events`, { type: 'SUSPEND' }));
    expect(await socket.closed()).toMatchObject({ code: 4403 });
    expect(socket.frames.find((f) => f.type === 'error')?.error?.code).toBe('POLICY_MEMBERSHIP_REQUIRED');
    const ended = (await until('the access-ended entry', () => watch.events.find((e) => e.type === 'identity.access_ended' && e.signal.identity_id === erin.id)))!;
    expect(ended.signal).toEqual({ identity_id: erin.id, reason: 'suspended' });
    // one commit appended both, in order: the change, then the end of access
    const changed = watch.events.find((e) => e.type === 'membership.changed' && e.signal.identity_id === erin.id)!;
    expect(Number(ended.id)).toBe(Number(changed.id) + 1);
    watch.close();

    const m = await of(erin);
    expectOk(await root.client.patch(`/org/company/memberships/${m.id}/status`, { status: 'active' }));
    const resumed = await PushSocket.open(svc.url, erin.key, { label: 'erin resumed', after: before });
    await emitOk(root, { signal_type: 'pulse', content: 'welcome back', to_identity: erin.id });
    await until('the signal after the replay', () => resumed.signalIds().length === 1);
    expect(resumed.frames.some((f) => f.type === 'membership.changed' && (f as any).membership.status === 'suspended')).toBe(true);
    expect(resumed.closeInfo).toBeUndefined();
    await resumed.close();
  });

  it('deleting an identity removes its membership in the deletion commit: a crash right after that commit leaves no active membership', async () => {
    const frank = await join(root.client, 'frank');
    const memberKey = `actor:membership:${frank.id}`;
    const real = svc.runtime.store;
    const commits: Op[][] = [];
    let deleted = false;
    // the process dies right after the commit that deletes the identity: every later write is lost
    const crashing: Store = new Proxy(real, {
      get: (t, p) =>
        p === 'commit'
          ? async (ops: Op[]) => {
              if (deleted) throw new Error('process crashed');
              const res = await t.commit(ops);
              if (res.ok && ops.some((o) => o.op === 'del' && o.key === `identity:${frank.id}`)) {
                deleted = true;
                commits.push(ops);
              }
              return res;
            }
          : Reflect.get(t, p),
    });
    const start = await real.lastSeq('signals');
    (svc.runtime as { store: Store }).store = crashing;
    try {
      await root.client.del(`/admin/identity/${frank.id}`);
    } finally {
      (svc.runtime as { store: Store }).store = real;
    }
    expect(deleted).toBe(true);
    const rec = await real.get<{ value: string }>(memberKey);
    expect(rec?.value.value).toBe('removed');
    expect(await real.get(`identity:${frank.id}`)).toBeUndefined();
    // the one commit holds the identity's deletion, the membership's move and their journal entries (the first access-ended entry closes its sockets as deleted)
    const [ops] = commits;
    expect(ops.find((o) => o.op === 'put' && o.key === memberKey)).toMatchObject({ value: { value: 'removed' } });
    const appended = (await real.readLog<{ type: string; data: any }>('signals', start, 100)).map((e) => e.entry);
    expect(appended.filter((e) => e.data?.identity_id === frank.id).map((e) => [e.type, e.data.reason ?? e.data.status])).toEqual([
      ['identity.access_ended', 'deleted'],
      ['membership.changed', 'removed'],
      ['identity.access_ended', 'removed'],
    ]);
    expect(ops.filter((o) => o.op === 'append' && o.log === 'signals')).toHaveLength(3);
    expect(expectOk(await root.client.get('/org/company')).member_counts.active).toBe((await all()).filter((x) => x.status === 'active').length);
  });
  it('memberships stored in the old format (`membership:<identity id>`, before the actor) move to the actor form at startup, once', async () => {
    const own = await servers.start();
    const admin = await bootstrap(own.url);
    const [a, b] = [await join(admin.client, 'old-a'), await join(admin.client, 'old-b')];
    const ids: Record<string, string> = {};
    // rewrite their memberships as a store from before the actor holds them: one plain record, no index, no claim
    for (const [m, status] of [[a, 'suspended'], [b, 'active']] as const) {
      const c = ((await own.store.get<any>(`actor:membership:${m.id}`))!.value as any).context;
      ids[m.id] = c.id;
      await own.store.commit([
        { op: 'del', key: `actor:membership:${m.id}` },
        { op: 'del', key: `membership-id:${c.id}` },
        { op: 'index', index: 'memberships', member: `${c.id}|${m.id}`, remove: true },
        { op: 'index', index: 'memberships:status:active', member: `${c.id}|${m.id}`, remove: true },
        { op: 'index', index: 'actors:membership:active', member: `membership:${m.id}`, remove: true },
        { op: 'put', key: `membership:${m.id}`, value: { id: c.id, identity_id: m.id, company_id: c.company_id, status, claw_type: 'central', created_at: c.created_at, updated_at: c.updated_at } },
      ]);
    }
    // nor the marker this build's first start left: that store was never started by a build with the migration
    await own.store.commit([{ op: 'del', key: 'migration:membership-actor' }]);
    await own.close();
    // the first start moves them; the second finds nothing to do and the same state
    for (let start = 0; start < 2; start++) {
      const svcN = await startServer(own.env);
      try {
        const client = new Client(svcN.url, admin.key);
        const list = expectOk(await client.get('/org/company/memberships?limit=100')).memberships;
        const byIdentity = Object.fromEntries(list.map((m: any) => [m.identity_id, m]));
        expect(list).toHaveLength(3);
        // the older of two central claws keeps the claim; the other keeps its membership without it
        expect(byIdentity[a.id]).toMatchObject({ id: ids[a.id], status: 'suspended', claw_type: 'central' });
        expect(byIdentity[b.id]).toMatchObject({ id: ids[b.id], status: 'active', claw_type: null });
        expect(expectOk(await client.get('/org/company')).member_counts).toEqual({ total: 3, active: 2, suspended: 1, removed: 0 });
        expectError(await client.patch(`/org/company/memberships/${ids[b.id]}/claw-type`, { claw_type: 'central' }), 409, 'ORG_CENTRAL_CLAW_EXISTS');
        expectError(await new Client(svcN.url, a.key).get('/roles'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
        expectOk(await new Client(svcN.url, b.key).get('/roles'));
        expect(await svcN.store.getMany([`membership:${a.id}`, `membership:${b.id}`])).toEqual([undefined, undefined]);
      } finally {
        await svcN.close();
      }
    }
  });
});
