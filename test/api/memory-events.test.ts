/**
 * memory.stored / memory.updated / memory.forgotten on the push journal, over WebSocket and SSE on both
 * backends: each goes to the namespace's readers (owner, role fillers, ring members, every member for org,
 * share grantees), and a key's memory_scopes narrow it; outsiders and scoped-out keys get nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { PushSocket, SseStream, waitFor } from '../helpers/push.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectOk } from './support.js';

const TYPES = ['memory.stored', 'memory.updated', 'memory.forgotten'];

for (const backend of BACKENDS) {
  describe(`memory events on ${backend}`, () => {
    const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
    let svc: Service;
    let root: Member;
    let alice: Member; // fills role Ops, member of ring Core
    let carol: Member; // member of ring Core
    let bob: Member; // outsider
    let scopedKey: string; // alice's key narrowed to the org namespace
    const sockets: PushSocket[] = [];
    const streams: SseStream[] = [];

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      [alice, carol, bob] = await Promise.all([join(root.client, 'mev-alice'), join(root.client, 'mev-carol'), join(root.client, 'mev-bob')]);
      const role = expectOk(await root.client.post('/roles', { name: 'Ops' }), 201);
      expectOk(await root.client.post('/fills', { identity_id: alice.id, role_id: role.id }), 201);
      expectOk(await root.client.post('/rings', { name: 'Core', members: [alice.id, carol.id] }), 201);
      scopedKey = expectOk(await root.client.post('/admin/api-keys', { owner: alice.id, permissions: { memory_scopes: ['org'] } }), 201).api_key;
    });
    afterAll(async () => {
      for (const s of streams) s.close();
      await Promise.all(sockets.map((s) => s.close()));
    });

    const socket = async (key: string, label: string) => {
      const s = await PushSocket.open(svc.url, key, { label });
      sockets.push(s);
      return s;
    };
    const stream = async (key: string, label: string) => {
      const s = await SseStream.open(svc.url, { token: key, type: TYPES.join(',') }, label, TYPES);
      streams.push(s);
      return s;
    };
    const seen = (s: PushSocket) => (s.frames as any[]).filter((f) => TYPES.includes(f.type)).map((f) => `${f.type} ${f.memory.id}`);
    const streamed = (s: SseStream) => s.events.map((e) => `${e.type} ${e.signal.id}`);
    const store = async (m: Member, namespace: string, content: string) => expectOk(await m.client.post('/memory/store', { namespace, content }), 201);

    it('each event reaches the namespace readers only, narrowed by memory_scopes, on both transports', async () => {
      // the Redis run is on RediSearch like the other memory tests, not the in-process fallback
      expect(expectOk(await new Client(svc.url).get('/health/detailed')).vector_index.kind).toBe(backend === 'redis' ? 'redisearch' : 'hnsw');
      const ws = { alice: await socket(alice.key, 'alice'), carol: await socket(carol.key, 'carol'), bob: await socket(bob.key, 'bob'), scoped: await socket(scopedKey, 'scoped') };
      const sse = { alice: await stream(alice.key, 'alice sse'), carol: await stream(carol.key, 'carol sse'), bob: await stream(bob.key, 'bob sse'), scoped: await stream(scopedKey, 'scoped sse') };

      const inRole = await store(alice, 'role:Ops', 'the on-call rota moves to Mondays');
      const inRing = await store(carol, 'ring:core', 'core ring retro notes');
      const mine = await store(alice, `agent:${alice.id}`, 'alice private scratchpad');
      expectOk(await alice.client.patch(`/memory/${mine.id}`, { content: 'alice private scratchpad, revised', tags: ['v2'] }));
      expectOk(await alice.client.post('/memory/forget', { id: mine.id }));
      const everyone = await store(bob, 'org', 'the org-wide holiday calendar is published');

      const want = {
        alice: [`memory.stored ${inRole.id}`, `memory.stored ${inRing.id}`, `memory.stored ${mine.id}`, `memory.updated ${mine.id}`, `memory.forgotten ${mine.id}`, `memory.stored ${everyone.id}`],
        carol: [`memory.stored ${inRing.id}`, `memory.stored ${everyone.id}`],
        bob: [`memory.stored ${everyone.id}`],
        scoped: [`memory.stored ${everyone.id}`],
      };
      // the org memory committed last: once a stream has it, it has passed every earlier event
      for (const who of ['alice', 'carol', 'bob', 'scoped'] as const) {
        await waitFor(() => seen(ws[who]).includes(`memory.stored ${everyone.id}`), 5000, `${who}: the org memory on the socket`);
        await waitFor(() => streamed(sse[who]).includes(`memory.stored ${everyone.id}`), 5000, `${who}: the org memory on the stream`);
        expect(seen(ws[who])).toEqual(want[who]);
        expect(streamed(sse[who])).toEqual(want[who]);
      }
      const updated: any = ws.alice.frames.find((f) => f.type === 'memory.updated');
      expect(updated.memory).toMatchObject({ id: mine.id, namespace: `agent:${alice.id}`, content: 'alice private scratchpad, revised', tags: ['v2'], version: 2 });
      expect(updated.memory).not.toHaveProperty('embedding');
      expect((ws.alice.frames as any[]).find((f) => f.type === 'memory.forgotten').memory.deleted_at).not.toBeNull();
    });

    it('a share grantee gets the shared namespace events; a refused store pushes nothing', async () => {
      const [sb, sc] = [await socket(bob.key, 'bob2'), await socket(carol.key, 'carol2')];
      expectOk(await root.client.post('/memory/admin/share', { namespace: 'ring:core', grantee_type: 'identity', grantee: bob.id }), 201);
      expect((await bob.client.post('/memory/store', { namespace: 'ring:core', content: 'not allowed' })).status).toBe(403);
      const shared = await store(alice, 'ring:core', 'core ring shares this with bob');
      const last = await store(alice, 'org', 'a later org memory');
      await waitFor(() => seen(sb).includes(`memory.stored ${last.id}`) && seen(sc).includes(`memory.stored ${last.id}`), 5000, 'the later org memory reached bob and carol');
      expect(seen(sb)).toEqual([`memory.stored ${shared.id}`, `memory.stored ${last.id}`]);
      expect(seen(sc)).toEqual([`memory.stored ${shared.id}`, `memory.stored ${last.id}`]);
    });
  });
}
