/**
 * Routing on emit over real HTTP, on both backends: which identity inboxes a signal to a role, a ring, an
 * identity or nobody (broadcast) lands in; target_capabilities; unknown targets; strict and lenient signal
 * types; fields kept as given; threads and their sequences; signals of a deleted role or ring stay readable.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { CORE_BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk, listAll } from './support.js';
import { upload } from '../helpers/blobs.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(CORE_BACKENDS)('signal routing on %s', (backend) => {
  const servers = serversOn(backend);

  describe('one organization', () => {
    let svc: Service;
    let root: Member;
    /** fills builders, has gpu */
    let a1: Member;
    /** fills builders, in ring core, no capabilities */
    let a2: Member;
    /** in ring core, has gpu and py */
    let b1: Member;
    /** neither role nor ring */
    let outsider: Member;
    let everyone: Member[];

    /** Ids in the member's own identity inbox (read by the admin, so nothing is marked delivered). */
    async function inboxIds(m: Member, query = ''): Promise<string[]> {
      return expectOk(await root.client.get(`/inbox/identity/${m.id}?limit=100${query}`)).signals.map((s: any) => s.id);
    }

    /** The members whose inbox holds the signal, by name. */
    async function reached(id: string): Promise<string[]> {
      const out: string[] = [];
      for (const m of everyone) if ((await inboxIds(m)).includes(id)) out.push(m.name);
      return out.sort();
    }

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      a1 = await join(root.client, 'a1', { capabilities: ['gpu'] });
      a2 = await join(root.client, 'a2');
      b1 = await join(root.client, 'b1', { capabilities: ['gpu', 'py'] });
      outsider = await join(root.client, 'outsider', { capabilities: ['gpu', 'py'] });
      everyone = [root, a1, a2, b1, outsider];
      const role = await root.client.post('/roles', { name: 'builders' });
      expect(role.status).toBe(201);
      for (const m of [a1, a2]) expect((await root.client.post('/fills', { identity_id: m.id, role_id: role.body.data.id })).status).toBe(201);
      expect((await root.client.post('/rings', { name: 'core', members: [a2.id, b1.id] })).status).toBe(201);
    });

    describe('who a signal reaches', () => {
      it('to_role reaches the identity inboxes of its fillers only, and the role inbox', async () => {
        const s = await emitOk(outsider, { signal_type: 'task', content: 'build it', to_role: 'builders' });
        expect(s).toMatchObject({ to_role: 'builders', to_ring: null, to_identity: null });
        expect(await reached(s.id)).toEqual(['a1', 'a2']);
        const roleInbox = await outsider.client.get('/inbox/builders?limit=100');
        expect(roleInbox.status, JSON.stringify(roleInbox.body)).toBe(200);
        expect(roleInbox.body.data.signals.map((x: any) => x.id)).toContain(s.id);
      });

      it('role and ring names match case-insensitively on emit', async () => {
        const s = await emitOk(root, { signal_type: 'pulse', content: 'case', to_role: 'BUILDERS' });
        expect(await reached(s.id)).toEqual(['a1', 'a2']);
        const r = await emitOk(root, { signal_type: 'pulse', content: 'case', to_ring: 'Core' });
        expect(await reached(r.id)).toEqual(['a2', 'b1']);
      });

      it('to_ring reaches its members only', async () => {
        const s = await emitOk(root, { signal_type: 'sense', content: 'ring news', to_ring: 'core' });
        expect(s).toMatchObject({ to_ring: 'core', to_role: null, to_identity: null });
        expect(await reached(s.id)).toEqual(['a2', 'b1']);
      });

      it('to_identity reaches only that identity (not even the admin or the sender)', async () => {
        const s = await emitOk(a1, { signal_type: 'query', content: 'just you', to_identity: b1.id });
        expect(s.to_identity).toBe(b1.id);
        expect(await reached(s.id)).toEqual(['b1']);
      });

      it('a signal with no target is a broadcast that reaches everyone, the sender included', async () => {
        const s = await emitOk(a2, { signal_type: 'alert', content: 'all hands' });
        expect(s).toMatchObject({ to_role: null, to_ring: null, to_identity: null });
        expect(await reached(s.id)).toEqual(['a1', 'a2', 'b1', 'outsider', 'root']);
        // a member who joins later sees it too
        const late = await join(root.client, 'late');
        expect(await inboxIds(late)).toContain(s.id);
      });

      it('role and ring together reach the union of both', async () => {
        const s = await emitOk(root, { signal_type: 'pulse', content: 'both', to_role: 'builders', to_ring: 'core' });
        expect(await reached(s.id)).toEqual(['a1', 'a2', 'b1']);
      });

      it('target_capabilities narrows role, ring and broadcast delivery to identities having all of them', async () => {
        const role = await emitOk(root, { signal_type: 'task', content: 'gpu builders', to_role: 'builders', target_capabilities: ['gpu'] });
        expect(role.target_capabilities).toEqual(['gpu']);
        expect(await reached(role.id)).toEqual(['a1']);

        const ring = await emitOk(root, { signal_type: 'task', content: 'gpu+py core', to_ring: 'core', target_capabilities: ['gpu', 'py'] });
        expect(await reached(ring.id)).toEqual(['b1']);
        const ringGpu = await emitOk(root, { signal_type: 'task', content: 'gpu core', to_ring: 'core', target_capabilities: ['gpu'] });
        expect(await reached(ringGpu.id)).toEqual(['b1']);

        const nobody = await emitOk(root, { signal_type: 'task', content: 'quantum builders', to_role: 'builders', target_capabilities: ['quantum'] });
        expect(await reached(nobody.id)).toEqual([]);

        const broadcast = await emitOk(root, { signal_type: 'pulse', content: 'py people', target_capabilities: ['py'] });
        expect(await reached(broadcast.id)).toEqual(['b1', 'outsider']);

        // direct delivery always reaches, whatever capabilities are asked for
        const direct = await emitOk(root, { signal_type: 'query', content: 'direct', to_identity: a2.id, target_capabilities: ['gpu'] });
        expect(await reached(direct.id)).toEqual(['a2']);
      });

      it('follows fills and ring membership as they change', async () => {
        const s = await emitOk(root, { signal_type: 'pulse', content: 'moving target', to_ring: 'core' });
        const ring = (await root.client.get('/rings')).body.data.find((r: any) => r.name === 'core');
        expect((await root.client.put(`/rings/${ring.id}`, { members: [a1.id, a2.id, b1.id] })).status).toBe(200);
        expect(await reached(s.id)).toEqual(['a1', 'a2', 'b1']);
        expect((await root.client.put(`/rings/${ring.id}`, { members: [a2.id, b1.id] })).status).toBe(200);
        expect(await reached(s.id)).toEqual(['a2', 'b1']);

        // fills: an identity that starts filling a role sees the role's earlier signals; one that stops, no longer
        const role = expectOk(await root.client.post('/roles', { name: 'latecomers' }), 201);
        const early = await emitOk(root, { signal_type: 'task', content: 'sent before anyone filled it', to_role: 'latecomers' });
        expect(await reached(early.id)).toEqual([]);
        const fill = expectOk(await root.client.post('/fills', { identity_id: outsider.id, role_id: role.id }), 201);
        expect(await reached(early.id)).toEqual(['outsider']);
        expect(expectOk(await outsider.client.get(`/inbox/identity/${outsider.id}?limit=100`)).signals.map((x: any) => x.id)).toContain(early.id);
        expectOk(await root.client.del(`/fills/${fill.id}`));
        expect(await reached(early.id)).toEqual([]);
      });

      it('routing by a role survives its rename', async () => {
        const role = (await root.client.post('/roles', { name: 'scouts' })).body.data;
        expect((await root.client.post('/fills', { identity_id: outsider.id, role_id: role.id })).status).toBe(201);
        const s = await emitOk(root, { signal_type: 'pulse', content: 'scouting', to_role: 'scouts' });
        expect((await root.client.put(`/roles/${role.id}`, { name: 'rangers' })).status).toBe(200);
        expect(await reached(s.id)).toEqual(['outsider']);
        expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 'x', to_role: 'scouts' }), 404, 'SIGNAL_NOT_FOUND', 'to_role');
        expect((await emitOk(root, { signal_type: 'pulse', content: 'renamed', to_role: 'rangers' })).to_role).toBe('rangers');
      });
    });

    describe('routing_policy', () => {
      it('is all by default: every recipient keeps the signal when one of them acknowledges or acks it', async () => {
        const s = await emitOk(root, { signal_type: 'query', content: 'for everyone in builders', to_role: 'builders' });
        expect(s.routing_policy).toBe('all');
        expectOk(await a1.client.post('/inbox/acknowledge', { signal_id: s.id }));
        expectOk(await a2.client.post('/ack', { signal_id: s.id }));
        expect(await reached(s.id)).toEqual(['a1', 'a2']);
        expect((await emitOk(root, { signal_type: 'pulse', content: 'explicit', routing_policy: 'all' })).routing_policy).toBe('all');
      });

      it('any_one: the first recipient to acknowledge takes it and it leaves the other recipients\' inboxes', async () => {
        const s = await emitOk(root, { signal_type: 'query', content: 'one builder please', to_role: 'builders', routing_policy: 'any_one' });
        expect(s.routing_policy).toBe('any_one');
        expect(await reached(s.id)).toEqual(['a1', 'a2']);
        // someone it does not reach acting on it takes nothing
        expectOk(await outsider.client.post('/inbox/acknowledge', { signal_id: s.id }));
        expect(await reached(s.id)).toEqual(['a1', 'a2']);
        expectOk(await a2.client.post('/inbox/acknowledge', { signal_id: s.id }));
        expect(await reached(s.id)).toEqual(['a2']);
        // the later acknowledgement of the other recipient does not take it back
        expectOk(await a1.client.post('/inbox/acknowledge', { signal_id: s.id }));
        expect(await reached(s.id)).toEqual(['a2']);
        expect(expectOk(await a1.client.get(`/inbox/identity/${a1.id}?limit=100`)).signals.map((x: any) => x.id)).not.toContain(s.id);
      });

      it('any_one: resolve and ack take it too, for ring and broadcast recipients', async () => {
        const viaRing = await emitOk(root, { signal_type: 'alert', content: 'one of core', to_ring: 'core', routing_policy: 'any_one' });
        expectOk(await b1.client.post('/inbox/resolve', { signal_id: viaRing.id }));
        expect(await reached(viaRing.id)).toEqual([]);
        expect(expectOk(await root.client.get(`/inbox/identity/${b1.id}?limit=100&include_resolved=true`)).signals.map((x: any) => x.id)).toContain(viaRing.id);

        const broadcast = await emitOk(root, { signal_type: 'query', content: 'anyone at all', routing_policy: 'any_one' });
        expect(await reached(broadcast.id)).toEqual(['a1', 'a2', 'b1', 'outsider', 'root']);
        expectOk(await outsider.client.post('/ack', { signal_id: broadcast.id }));
        expect(await reached(broadcast.id)).toEqual(['outsider']);
      });

      it('any_one: concurrent acknowledgements by every recipient leave it with exactly one of them', async () => {
        const s = await emitOk(root, { signal_type: 'query', content: 'race', routing_policy: 'any_one' });
        await Promise.all(everyone.map(async (m) => expectOk(await m.client.post('/inbox/acknowledge', { signal_id: s.id }))));
        expect(await reached(s.id)).toHaveLength(1);
      });

      it('refuses any other value with SIGNAL_EMIT_VALIDATION_FAILED naming routing_policy', async () => {
        for (const routing_policy of ['first_claim', 'ALL', '', 1]) {
          expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 'x', routing_policy }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'routing_policy');
        }
      });
    });

    describe('emit validation', () => {
      it('refuses unknown to_role, to_ring, to_identity and parent_id with SIGNAL_NOT_FOUND naming the field', async () => {
        const before = (await listAll(root.client)).length;
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', to_role: 'nobody' }), 404, 'SIGNAL_NOT_FOUND', 'to_role');
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'nowhere' }), 404, 'SIGNAL_NOT_FOUND', 'to_ring');
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', to_identity: UNKNOWN }), 404, 'SIGNAL_NOT_FOUND', 'to_identity');
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', parent_id: UNKNOWN }), 404, 'SIGNAL_NOT_FOUND', 'parent_id');
        // a valid role with an unknown ring is refused as a whole
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', to_role: 'builders', to_ring: 'nowhere' }), 404, 'SIGNAL_NOT_FOUND', 'to_ring');
        expect((await listAll(root.client)).length).toBe(before);
      });

      it('accepts a non-canonical type and flags it in metadata; canonical types are not flagged', async () => {
        const custom = await emitOk(a1, { signal_type: 'celebration', content: 'party', metadata: { mood: 'happy' } });
        expect(custom).toMatchObject({ signal_type: 'celebration', base_type: 'custom', metadata: { mood: 'happy', noncanonical_type: true } });
        const bare = await emitOk(a1, { signal_type: 'celebration', content: 'no metadata' });
        expect(bare.metadata).toEqual({ noncanonical_type: true });
        for (const t of ['pulse', 'sense', 'task', 'query', 'alert', 'artifact', 'proposal', 'shift']) {
          const s = await emitOk(a1, { signal_type: t, content: t, metadata: { k: t } });
          expect(s).toMatchObject({ signal_type: t, base_type: t });
          expect(s.metadata).toEqual({ k: t });
        }
      });

      it('refuses urgency outside 0..1 with SIGNAL_EMIT_VALIDATION_FAILED', async () => {
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: 1.01 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'urgency');
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: -1 }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'urgency');
        expectError(await a1.client.post('/emit', { signal_type: 'pulse', content: 'x', urgency: '0.5' }), 400, 'SIGNAL_EMIT_VALIDATION_FAILED', 'urgency');
      });

      it('appends attachments (deprecated) to resources, in emit, list, inbox and thread', async () => {
        const artifact = async (name: string) => expectOk(await upload(root.client.url, root.key, '/artifacts/upload', name, { fields: { name }, type: 'text/plain' }), 201).id;
        const [r1, a1Id, x] = await Promise.all([artifact('r1'), artifact('a1'), artifact('x')]);
        const s = await emitOk(root, { signal_type: 'artifact', content: 'files', to_identity: a1.id, resources: [{ kind: 'artifact', id: r1 }], attachments: [{ artifact_id: a1Id }] });
        const want = [{ kind: 'artifact', id: r1 }, { kind: 'artifact', id: a1Id }];
        expect(s.resources).toEqual(want);
        expect(s).not.toHaveProperty('attachments');
        expect((await listAll(root.client)).find((x) => x.id === s.id).resources).toEqual(want);
        expect(expectOk(await root.client.get(`/inbox/identity/${a1.id}?limit=100`)).signals.find((x: any) => x.id === s.id).resources).toEqual(want);
        expect(expectOk(await root.client.get(`/thread/${s.id}`)).signals[0].resources).toEqual(want);
        const only = await emitOk(root, { signal_type: 'artifact', content: 'only attachments', attachments: [x] });
        expect(only.resources).toEqual([{ kind: 'artifact', id: x }]);
      });

      it('keeps tags, metadata and payload exactly as given, in emit, list, inbox and thread', async () => {
        const tags = ['project:apollo', 'Mixed Case', 'ünïcode', 'x'];
        const metadata = { nested: { deep: [1, 'two', { three: null }] }, flag: false, n: 1.25, empty: {} };
        const payload = { task_type: 'build', steps: [{ name: 'a', ok: true }], blob: 'x'.repeat(300) };
        const s = await emitOk(a1, { signal_type: 'task', content: 'round trip', tags, metadata, payload, to_identity: b1.id });
        expect(s).toMatchObject({ tags, metadata, payload });
        const listed = (await listAll(root.client)).find((x) => x.id === s.id);
        expect(listed).toMatchObject({ tags, metadata, payload });
        const inbox = (await b1.client.get(`/inbox/identity/${b1.id}?limit=100`)).body.data.signals.find((x: any) => x.id === s.id);
        expect(inbox).toMatchObject({ tags, metadata, payload, content: 'round trip' });
        const thread = (await b1.client.get(`/thread/${s.id}`)).body.data.signals;
        expect(thread).toHaveLength(1);
        expect(thread[0]).toMatchObject({ tags, metadata, payload });
      });
    });

    describe('threads', () => {
      it('numbers a thread 0, 1, 2, … in commit order and any member id returns the whole thread in order', async () => {
        const r = await emitOk(root, { signal_type: 'query', content: 'root' });
        expect(r).toMatchObject({ sequence: 0, parent_id: null, thread_id: r.id });
        const c1 = await emitOk(a1, { signal_type: 'pulse', content: 'reply 1', parent_id: r.id });
        const c2 = await emitOk(b1, { signal_type: 'pulse', content: 'reply to reply', parent_id: c1.id });
        const c3 = await emitOk(a2, { signal_type: 'pulse', content: 'reply 2', parent_id: r.id });
        expect([c1, c2, c3].map((s) => [s.sequence, s.parent_id, s.thread_id])).toEqual([
          [1, r.id, r.id],
          [2, c1.id, r.id],
          [3, r.id, r.id],
        ]);
        const want = [r.id, c1.id, c2.id, c3.id];
        for (const id of want) {
          const t = await outsider.client.get(`/thread/${id}`);
          expect(t.status, JSON.stringify(t.body)).toBe(200);
          expect(t.body.data.signals.map((s: any) => s.id)).toEqual(want);
          expect(t.body.data.signals.map((s: any) => s.sequence)).toEqual([0, 1, 2, 3]);
        }
        // another thread is its own
        const other = await emitOk(root, { signal_type: 'pulse', content: 'other root' });
        expect((await root.client.get(`/thread/${other.id}`)).body.data.signals.map((s: any) => s.id)).toEqual([other.id]);
      });

      it('concurrent replies get distinct consecutive sequences, and the thread lists them in sequence order', async () => {
        const r = await emitOk(root, { signal_type: 'proposal', content: 'busy thread' });
        const members = [a1, a2, b1, outsider, root];
        const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => emitOk(members[i % members.length], { signal_type: 'pulse', content: `r${i}`, parent_id: r.id })));
        expect(replies.map((s) => s.sequence).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
        const t = (await a1.client.get(`/thread/${replies[7].id}`)).body.data.signals;
        expect(t.map((s: any) => s.sequence)).toEqual(Array.from({ length: 21 }, (_, i) => i));
        expect(t[0].id).toBe(r.id);
        const bySeq = new Map(replies.map((s) => [s.sequence, s.id]));
        expect(t.slice(1).map((s: any) => s.id)).toEqual(t.slice(1).map((s: any) => bySeq.get(s.sequence)));
      });

      it('GET /thread of an unknown id → 404 SIGNAL_NOT_FOUND', async () => {
        expectError(await a1.client.get(`/thread/${UNKNOWN}`), 404, 'SIGNAL_NOT_FOUND');
      });
    });

    describe('deleted targets', () => {
      it('signals routed to a deleted role stay readable via /signals/list?to_role= and /thread', async () => {
        const role = (await root.client.post('/roles', { name: 'temporary' })).body.data;
        expect((await root.client.post('/fills', { identity_id: a1.id, role_id: role.id })).status).toBe(201);
        const s = await emitOk(root, { signal_type: 'task', content: 'for the temps', to_role: 'temporary' });
        const reply = await emitOk(a1, { signal_type: 'pulse', content: 'on it', parent_id: s.id, to_role: 'temporary' });
        expect((await root.client.del(`/roles/${role.id}`)).status).toBe(200);

        const listed = await a2.client.get('/signals/list?to_role=temporary');
        expect(listed.status).toBe(200);
        expect(listed.body.data.signals.map((x: any) => x.id)).toEqual([reply.id, s.id]);
        expect(listed.body.data.signals[1]).toMatchObject({ to_role: 'temporary', content: 'for the temps' });
        const t = await a2.client.get(`/thread/${reply.id}`);
        expect(t.status).toBe(200);
        expect(t.body.data.signals.map((x: any) => x.id)).toEqual([s.id, reply.id]);
        // the name no longer routes
        expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 'x', to_role: 'temporary' }), 404, 'SIGNAL_NOT_FOUND', 'to_role');
        // a new role of the same name does not inherit the old signals in its inbox
        expect((await root.client.post('/roles', { name: 'temporary' })).status).toBe(201);
        expect((await a2.client.get('/inbox/temporary')).body.data.signals).toEqual([]);
      });

      it('signals routed to a deleted ring stay readable via /signals/list?to_ring= and /thread', async () => {
        const ring = (await root.client.post('/rings', { name: 'ephemeral', members: [b1.id] })).body.data;
        const s = await emitOk(root, { signal_type: 'alert', content: 'ring gone soon', to_ring: 'ephemeral' });
        expect((await root.client.del(`/rings/${ring.id}`)).status).toBe(200);
        const listed = await b1.client.get('/signals/list?to_ring=ephemeral');
        expect(listed.body.data.signals.map((x: any) => x.id)).toEqual([s.id]);
        expect((await b1.client.get(`/thread/${s.id}`)).body.data.signals.map((x: any) => x.id)).toEqual([s.id]);
        expectError(await root.client.post('/emit', { signal_type: 'pulse', content: 'x', to_ring: 'ephemeral' }), 404, 'SIGNAL_NOT_FOUND', 'to_ring');
      });
    });
  });

  describe('STRICT_SIGNAL_TYPES=true', () => {
    let root: Member;
    beforeAll(async () => {
      const svc = await servers.start({ STRICT_SIGNAL_TYPES: 'true' });
      root = await bootstrap(svc.url);
    });

    it('refuses a type outside the canonical eight with SIGNAL_EMIT_INVALID_TYPE and accepts the eight', async () => {
      expectError(await root.client.post('/emit', { signal_type: 'celebration', content: 'party' }), 400, 'SIGNAL_EMIT_INVALID_TYPE', 'signal_type');
      expectError(await root.client.post('/emit', { signal_type: 'Pulse', content: 'case matters' }), 400, 'SIGNAL_EMIT_INVALID_TYPE', 'signal_type');
      for (const t of ['pulse', 'sense', 'task', 'query', 'alert', 'artifact', 'proposal', 'shift']) {
        expect((await emitOk(root, { signal_type: t, content: t })).metadata).toEqual({});
      }
      expect((await listAll(root.client)).map((s) => s.signal_type)).not.toContain('celebration');
    });
  });
});
