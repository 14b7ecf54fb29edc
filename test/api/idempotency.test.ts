/**
 * Idempotency-Key on the create routes: a retry with the same key and body answers the first reply and makes
 * no second record; the same key with another body is 409 IDEMPOTENCY_KEY_REUSED; keys are per identity;
 * concurrent retries create exactly one record; a refused request keeps no record; records expire after 24 h
 * (IDEMPOTENCY_TTL_MS); a reservation's `idempotency_key` is kept in the same store with the same expiry.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { Idempotency } from '../../src/http/idempotency.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

interface Answer {
  status: number;
  body: any;
  replayed: string | null;
}

async function post(m: Member, path: string, body: unknown, key?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${m.key}`, 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const r = await fetch(m.client.url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json(), replayed: r.headers.get('idempotent-replayed') };
}

const CREATE_ROUTES = ['POST /emit', 'POST /invite/create', 'POST /admin/api-keys', 'POST /memory/store', 'POST /workspace/folders', 'POST /workstreams', 'POST /roles', 'POST /rings', 'POST /fills'];

for (const backend of BACKENDS) {
  describe(`Idempotency-Key on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let root: Member;
    let member: Member;
    const signals = () => svc.store.count('signals');

    beforeAll(async () => {
      svc = await servers.start();
      root = await bootstrap(svc.url);
      member = await join(root.client, 'member');
    });

    it('the create routes of the live table carry the flag', () => {
      const flagged = svc.routes.filter((r) => r.idempotent).map((r) => `${r.method.toUpperCase()} ${r.path}`);
      expect(flagged.sort()).toEqual([...CREATE_ROUTES].sort());
    });

    it('POST /emit: a retry answers the first reply and makes no second signal; another body is 409', async () => {
      const before = await signals();
      const body = { signal_type: 'task', content: 'once' };
      const first = await post(member, '/emit', body, 'k-emit-1');
      expect(first.status).toBe(201);
      expect(first.replayed).toBeNull();
      const again = await post(member, '/emit', body, 'k-emit-1');
      expect(again.status).toBe(201);
      expect(again.replayed).toBe('true');
      expect(again.body.data).toEqual(first.body.data);
      expect(await signals()).toBe(before + 1);
      const other = await post(member, '/emit', { ...body, content: 'twice' }, 'k-emit-1');
      expectError(other, 409, 'IDEMPOTENCY_KEY_REUSED');
      expect(await signals()).toBe(before + 1);
      // without the header every request is its own
      expectOk(await member.client.post('/emit', body), 201);
      expect(await signals()).toBe(before + 2);
    });

    it('keys are per identity: the same key from another identity is its own request', async () => {
      const a = await post(member, '/emit', { signal_type: 'task', content: 'mine' }, 'shared-key');
      const b = await post(root, '/emit', { signal_type: 'task', content: 'yours' }, 'shared-key');
      expect([a.status, b.status]).toEqual([201, 201]);
      expect(a.body.data.id).not.toBe(b.body.data.id);
    });

    it('concurrent retries with one key create exactly one record', async () => {
      const before = await signals();
      const body = { signal_type: 'task', content: 'race' };
      const answers = await Promise.all(Array.from({ length: 12 }, () => post(member, '/emit', body, 'k-race')));
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
      expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
      expect(await signals()).toBe(before + 1);
    });

    it('a refused request keeps no record: its retry runs afresh', async () => {
      const refused = await post(member, '/emit', { signal_type: 'task', content: 'x', to_role: 'no-such-role' }, 'k-refused');
      expect(refused.status).toBeGreaterThanOrEqual(400);
      const fixed = await post(member, '/emit', { signal_type: 'task', content: 'x' }, 'k-refused');
      expect(fixed.status).toBe(201);
      expect(fixed.replayed).toBeNull();
    });

    it('the other create routes replay instead of creating twice (or conflicting)', async () => {
      const cases: [Member, string, unknown][] = [
        [root, '/invite/create', { name: 'idem-invitee', type: 'agent' }],
        [root, '/admin/api-keys', { owner: member.id }],
        [member, '/memory/store', { content: 'remember once', namespace: `agent:${member.id}` }],
        [member, '/workspace/folders', { name: 'idem-folder' }],
        [member, '/workstreams', { name: 'idem-stream' }],
        [root, '/roles', { name: 'idem-role' }],
        [root, '/rings', { name: 'idem-ring' }],
      ];
      for (const [who, path, body] of cases) {
        const first = await post(who, path, body, `k-${path}`);
        expect(first.status, `${path}: ${JSON.stringify(first.body)}`).toBe(201);
        const again = await post(who, path, body, `k-${path}`);
        expect({ path, status: again.status, replayed: again.replayed }).toEqual({ path, status: 201, replayed: 'true' });
        expect(again.body.data).toEqual(first.body.data);
      }
      const role = (await root.client.get('/roles')).body.data.find((r: any) => r.name === 'idem-role');
      const fill = { identity_id: member.id, role_id: role.id };
      const f1 = await post(root, '/fills', fill, 'k-fill');
      expect(f1.status).toBe(201);
      expect((await post(root, '/fills', fill, 'k-fill')).body.data).toEqual(f1.body.data);
    });

    it('a record expires after its TTL and the sweep removes it', async () => {
      let t = Date.now();
      const idem = new Idempotency(svc.store, 1000, () => t);
      let runs = 0;
      const exec = async () => ({ status: 201, data: { run: ++runs } });
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 1 });
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 1 });
      t += 1001;
      expect((await idem.once('someone', 'k', 'other request', exec)).data).toEqual({ run: 2 });
      t += 1001;
      expect(await idem.sweep(t)).toBeGreaterThanOrEqual(1);
      expect((await idem.once('someone', 'k', 'req', exec)).data).toEqual({ run: 3 });
    });

    it("a reservation's idempotency_key rides on the same store: replay, its own 409, and expiry with IDEMPOTENCY_TTL_MS", async () => {
      const short = await servers.start({ IDEMPOTENCY_TTL_MS: '1500' });
      const admin = await bootstrap(short.url);
      const agent = await join(admin.client, 'idem-agent');
      const body = { project: 'idem', paths: ['lib/**'], idempotency_key: 'r1' };
      const first = expectOk(await agent.client.post('/reservations', body));
      expect(first.granted).toHaveLength(1);
      expect(expectOk(await agent.client.post('/reservations', body))).toEqual(first);
      expectError(await agent.client.post('/reservations', { ...body, paths: ['lib/x'] }), 409, 'RESERVATION_IDEMPOTENCY_MISMATCH', 'idempotency_key');
      // the header on an idempotent route, in the same store with the same expiry
      const emit = await post(agent, '/emit', { signal_type: 'pulse', content: 'idem ttl' }, 'h1');
      expect((await post(agent, '/emit', { signal_type: 'pulse', content: 'idem ttl' }, 'h1')).replayed).toBe('true');
      expectOk(await agent.client.post(`/reservations/${first.granted[0].id}/release`, {}));
      await new Promise((r) => setTimeout(r, 1600));
      // expired: the same key runs afresh (a new grant), and another request is no longer refused
      const again = expectOk(await agent.client.post('/reservations', body));
      expect(again.granted).toHaveLength(1);
      expect(again.granted[0].id).not.toBe(first.granted[0].id);
      const fresh = await post(agent, '/emit', { signal_type: 'pulse', content: 'another body' }, 'h1');
      expect(fresh.status).toBe(emit.status);
      expect(fresh.replayed).toBeNull();
      expect(fresh.body.data.id).not.toBe(emit.body.data.id);
    });
  });
}
