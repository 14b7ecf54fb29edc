/**
 * Organization over real HTTP, on both backends: roles and rings (create, list, show, update incl. rename,
 * delete), case-insensitive unique names, unknown ids, bad bodies, fills (create, filter, delete,
 * duplicates), admin-only writes and keyed reads.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, ULID } from './support.js';

const UNKNOWN = '01ARZ3NDEKTSV4RRFFQ69G5FAV';

describe.each(BACKENDS)('organization on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let alice: Member;
  let bob: Member;
  let anon: Client;

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    alice = await join(root.client, 'alice');
    bob = await join(root.client, 'bob');
    anon = new Client(svc.url);
  });

  const created = async (path: string, body: unknown) => expectOk(await root.client.post(path, body), 201);

  describe('roles', () => {
    it('create, list, show, update, rename and delete', async () => {
      const role = await created('/roles', { name: 'Reviewer', purpose: 'reviews code', domains: ['code'], duties: ['review', 'approve'] });
      expect(role).toMatchObject({ name: 'Reviewer', purpose: 'reviews code', domains: ['code'], duties: ['review', 'approve'] });
      expect(role.id).toMatch(ULID);
      expect(Number.isNaN(Date.parse(role.created_at))).toBe(false);

      const bare = await created('/roles', { name: 'Bare' });
      expect(bare).toMatchObject({ name: 'Bare', domains: [], duties: [] });

      const list = await alice.client.get('/roles');
      expect(list.status).toBe(200);
      expect(Array.isArray(list.body.data)).toBe(true);
      expect(list.body.data.map((r: any) => r.id)).toEqual(expect.arrayContaining([role.id, bare.id]));
      expect(list.body.data.find((r: any) => r.id === role.id)).toEqual(role);

      const shown = await alice.client.get(`/roles/${role.id}`);
      expect(shown.status).toBe(200);
      expect(shown.body.data).toEqual(role);

      // partial update keeps the other fields
      const upd = await root.client.put(`/roles/${role.id}`, { purpose: 'reviews everything' });
      expect(upd.status, JSON.stringify(upd.body)).toBe(200);
      expect(upd.body.data).toMatchObject({ id: role.id, name: 'Reviewer', purpose: 'reviews everything', domains: ['code'], duties: ['review', 'approve'], created_at: role.created_at });
      expect((await root.client.get(`/roles/${role.id}`)).body.data.purpose).toBe('reviews everything');

      // rename: the old name is free again, the new one is taken
      const ren = await root.client.put(`/roles/${role.id}`, { name: 'Auditor', duties: ['audit'] });
      expect(ren.status, JSON.stringify(ren.body)).toBe(200);
      expect(ren.body.data).toMatchObject({ id: role.id, name: 'Auditor', duties: ['audit'], domains: ['code'] });
      expectError(await root.client.post('/roles', { name: 'auditor' }), 409, 'ORG_ROLE_DUPLICATE');
      const reuse = await created('/roles', { name: 'Reviewer' });
      expect(reuse.id).not.toBe(role.id);

      // a change of case of its own name is not a duplicate
      const recase = await root.client.put(`/roles/${role.id}`, { name: 'AUDITOR' });
      expect(recase.status, JSON.stringify(recase.body)).toBe(200);
      expect(recase.body.data.name).toBe('AUDITOR');
      expectError(await root.client.post('/roles', { name: 'Auditor' }), 409, 'ORG_ROLE_DUPLICATE');

      const del = await root.client.del(`/roles/${role.id}`);
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      expect(del.body.data).toMatchObject({ id: role.id, name: 'AUDITOR' });
      expectError(await root.client.get(`/roles/${role.id}`), 404, 'ORG_ROLE_NOT_FOUND');
      expect((await root.client.get('/roles')).body.data.map((r: any) => r.id)).not.toContain(role.id);
      // the name of a deleted role can be used again
      expect((await root.client.post('/roles', { name: 'auditor' })).status).toBe(201);
    });

    it('refuses duplicate names case-insensitively, on create and on rename', async () => {
      const a = await created('/roles', { name: 'Planner' });
      const b = await created('/roles', { name: 'Builder' });
      expectError(await root.client.post('/roles', { name: 'Planner' }), 409, 'ORG_ROLE_DUPLICATE');
      expectError(await root.client.post('/roles', { name: 'planner' }), 409, 'ORG_ROLE_DUPLICATE');
      expectError(await root.client.post('/roles', { name: 'PLANNER', purpose: 'x' }), 409, 'ORG_ROLE_DUPLICATE');
      expectError(await root.client.put(`/roles/${b.id}`, { name: 'Planner' }), 409, 'ORG_ROLE_DUPLICATE');
      expectError(await root.client.put(`/roles/${b.id}`, { name: 'pLaNnEr' }), 409, 'ORG_ROLE_DUPLICATE');
      // the refused rename changed nothing
      expect((await root.client.get(`/roles/${b.id}`)).body.data.name).toBe('Builder');
      expect((await root.client.get(`/roles/${a.id}`)).body.data.name).toBe('Planner');
      const names = (await root.client.get('/roles')).body.data.map((r: any) => r.name.toLowerCase());
      expect(names.filter((n: string) => n === 'planner')).toHaveLength(1);
    });

    it('answers unknown ids with ORG_ROLE_NOT_FOUND', async () => {
      expectError(await root.client.get(`/roles/${UNKNOWN}`), 404, 'ORG_ROLE_NOT_FOUND');
      expectError(await root.client.put(`/roles/${UNKNOWN}`, { purpose: 'x' }), 404, 'ORG_ROLE_NOT_FOUND');
      expectError(await root.client.del(`/roles/${UNKNOWN}`), 404, 'ORG_ROLE_NOT_FOUND');
    });

    it('refuses bad bodies with ORG_VALIDATION_FAILED naming the field', async () => {
      expectError(await root.client.post('/roles', {}), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/roles', { name: '' }), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/roles', { name: 7 }), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/roles', { name: 'ok', purpose: 3 }), 400, 'ORG_VALIDATION_FAILED', 'purpose');
      expectError(await root.client.post('/roles', { name: 'ok', domains: 'code' }), 400, 'ORG_VALIDATION_FAILED', 'domains');
      expectError(await root.client.post('/roles', { name: 'ok', duties: [1] }), 400, 'ORG_VALIDATION_FAILED', 'duties.0');
      const r = await created('/roles', { name: 'Validated' });
      expectError(await root.client.put(`/roles/${r.id}`, { name: '' }), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.put(`/roles/${r.id}`, { domains: {} }), 400, 'ORG_VALIDATION_FAILED', 'domains');
      expect((await root.client.get('/roles')).body.data.map((x: any) => x.name)).not.toContain('ok');
    });
  });

  describe('rings', () => {
    it('create, list, show, update (members, rename) and delete', async () => {
      const ring = await created('/rings', { name: 'Core', purpose: 'the core team', members: [alice.id, bob.id, alice.id] });
      expect(ring).toMatchObject({ name: 'Core', purpose: 'the core team' });
      expect([...ring.members].sort()).toEqual([alice.id, bob.id].sort());
      expect(ring.id).toMatch(ULID);
      const empty = await created('/rings', { name: 'Empty' });
      expect(empty.members).toEqual([]);

      const list = await bob.client.get('/rings');
      expect(list.status).toBe(200);
      expect(Array.isArray(list.body.data)).toBe(true);
      expect(list.body.data.find((r: any) => r.id === ring.id)).toEqual(ring);
      expect(list.body.data.map((r: any) => r.id)).toContain(empty.id);

      expect((await bob.client.get(`/rings/${ring.id}`)).body.data).toEqual(ring);

      const upd = await root.client.put(`/rings/${ring.id}`, { members: [bob.id, root.id] });
      expect(upd.status, JSON.stringify(upd.body)).toBe(200);
      expect([...upd.body.data.members].sort()).toEqual([bob.id, root.id].sort());
      expect(upd.body.data).toMatchObject({ name: 'Core', purpose: 'the core team' });

      const ren = await root.client.put(`/rings/${ring.id}`, { name: 'Inner' });
      expect(ren.status).toBe(200);
      expect(ren.body.data).toMatchObject({ id: ring.id, name: 'Inner', purpose: 'the core team' });
      expect([...ren.body.data.members].sort()).toEqual([bob.id, root.id].sort());
      expectError(await root.client.post('/rings', { name: 'INNER' }), 409, 'ORG_RING_DUPLICATE');
      expect((await root.client.post('/rings', { name: 'core' })).status).toBe(201);

      const del = await root.client.del(`/rings/${ring.id}`);
      expect(del.status).toBe(200);
      expect(del.body.data.id).toBe(ring.id);
      expectError(await root.client.get(`/rings/${ring.id}`), 404, 'ORG_RING_NOT_FOUND');
      expect((await root.client.get('/rings')).body.data.map((r: any) => r.id)).not.toContain(ring.id);
      expect((await root.client.post('/rings', { name: 'Inner' })).status).toBe(201);
    });

    it('refuses duplicate names case-insensitively, on create and on rename', async () => {
      const a = await created('/rings', { name: 'Blue Team' });
      const b = await created('/rings', { name: 'Red Team' });
      expectError(await root.client.post('/rings', { name: 'Blue Team' }), 409, 'ORG_RING_DUPLICATE');
      expectError(await root.client.post('/rings', { name: 'blue team' }), 409, 'ORG_RING_DUPLICATE');
      expectError(await root.client.put(`/rings/${b.id}`, { name: 'BLUE TEAM' }), 409, 'ORG_RING_DUPLICATE');
      expect((await root.client.get(`/rings/${b.id}`)).body.data.name).toBe('Red Team');
      const own = await root.client.put(`/rings/${a.id}`, { name: 'blue TEAM' });
      expect(own.status, JSON.stringify(own.body)).toBe(200);
      expect(own.body.data.name).toBe('blue TEAM');
    });

    it('answers unknown ids with ORG_RING_NOT_FOUND', async () => {
      expectError(await root.client.get(`/rings/${UNKNOWN}`), 404, 'ORG_RING_NOT_FOUND');
      expectError(await root.client.put(`/rings/${UNKNOWN}`, { purpose: 'x' }), 404, 'ORG_RING_NOT_FOUND');
      expectError(await root.client.del(`/rings/${UNKNOWN}`), 404, 'ORG_RING_NOT_FOUND');
    });

    it('refuses bad bodies and unknown member ids with ORG_VALIDATION_FAILED', async () => {
      expectError(await root.client.post('/rings', {}), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/rings', { name: '' }), 400, 'ORG_VALIDATION_FAILED', 'name');
      expectError(await root.client.post('/rings', { name: 'r', members: 'x' }), 400, 'ORG_VALIDATION_FAILED', 'members');
      expectError(await root.client.post('/rings', { name: 'r', members: [alice.id, UNKNOWN] }), 400, 'ORG_VALIDATION_FAILED', 'members');
      expect((await root.client.get('/rings')).body.data.map((x: any) => x.name)).not.toContain('r');
      const ring = await created('/rings', { name: 'Checked', members: [alice.id] });
      expectError(await root.client.put(`/rings/${ring.id}`, { members: [UNKNOWN] }), 400, 'ORG_VALIDATION_FAILED', 'members');
      expectError(await root.client.put(`/rings/${ring.id}`, { name: 5 }), 400, 'ORG_VALIDATION_FAILED', 'name');
      expect((await root.client.get(`/rings/${ring.id}`)).body.data.members).toEqual([alice.id]);
    });
  });

  describe('fills', () => {
    it('create, list with filters, duplicates and delete', async () => {
      const writer = await created('/roles', { name: 'Writer' });
      const editor = await created('/roles', { name: 'Editor' });
      const f1 = await created('/fills', { identity_id: alice.id, role_id: writer.id });
      expect(f1).toMatchObject({ identity_id: alice.id, role_id: writer.id });
      expect(f1.id).toMatch(ULID);
      const f2 = await created('/fills', { identity_id: bob.id, role_id: writer.id });
      const f3 = await created('/fills', { identity_id: alice.id, role_id: editor.id });

      expectError(await root.client.post('/fills', { identity_id: alice.id, role_id: writer.id }), 409, 'ORG_FILL_DUPLICATE');

      const all = await bob.client.get('/fills');
      expect(all.status).toBe(200);
      expect(Array.isArray(all.body.data)).toBe(true);
      expect(all.body.data.map((f: any) => f.id)).toEqual(expect.arrayContaining([f1.id, f2.id, f3.id]));
      const byRole = (await bob.client.get(`/fills?role_id=${writer.id}`)).body.data;
      expect(byRole.map((f: any) => f.id).sort()).toEqual([f1.id, f2.id].sort());
      const byIdentity = (await bob.client.get(`/fills?identity_id=${alice.id}`)).body.data;
      expect(byIdentity.map((f: any) => f.id).sort()).toEqual([f1.id, f3.id].sort());
      const both = (await bob.client.get(`/fills?identity_id=${alice.id}&role_id=${editor.id}`)).body.data;
      expect(both.map((f: any) => f.id)).toEqual([f3.id]);
      expect((await bob.client.get(`/fills?role_id=${UNKNOWN}`)).body.data).toEqual([]);

      const del = await root.client.del(`/fills/${f1.id}`);
      expect(del.status, JSON.stringify(del.body)).toBe(200);
      expect(del.body.data).toMatchObject({ id: f1.id, identity_id: alice.id, role_id: writer.id });
      expectError(await root.client.del(`/fills/${f1.id}`), 404, 'ORG_FILL_NOT_FOUND');
      expect((await root.client.get(`/fills?role_id=${writer.id}`)).body.data.map((f: any) => f.id)).toEqual([f2.id]);
      // after the delete the same pair can be filled again
      expect((await root.client.post('/fills', { identity_id: alice.id, role_id: writer.id })).status).toBe(201);

      // deleting a role removes its fills
      expect((await root.client.del(`/roles/${editor.id}`)).status).toBe(200);
      expect((await root.client.get(`/fills?role_id=${editor.id}`)).body.data).toEqual([]);
      expect((await root.client.get(`/fills?identity_id=${alice.id}`)).body.data.map((f: any) => f.role_id)).toEqual([writer.id]);
      expectError(await root.client.del(`/fills/${f3.id}`), 404, 'ORG_FILL_NOT_FOUND');
    });

    it('refuses unknown identity, unknown role, unknown fill id and bad bodies', async () => {
      const role = await created('/roles', { name: 'Filler' });
      expectError(await root.client.post('/fills', { identity_id: UNKNOWN, role_id: role.id }), 404, 'IDENTITY_NOT_FOUND');
      expectError(await root.client.post('/fills', { identity_id: alice.id, role_id: UNKNOWN }), 404, 'ORG_ROLE_NOT_FOUND');
      expectError(await root.client.del(`/fills/${UNKNOWN}`), 404, 'ORG_FILL_NOT_FOUND');
      expectError(await root.client.post('/fills', {}), 400, 'ORG_VALIDATION_FAILED', 'identity_id');
      expectError(await root.client.post('/fills', { identity_id: alice.id }), 400, 'ORG_VALIDATION_FAILED', 'role_id');
      expectError(await root.client.post('/fills', { identity_id: '', role_id: role.id }), 400, 'ORG_VALIDATION_FAILED', 'identity_id');
      expectError(await root.client.post('/fills', { identity_id: alice.id, role_id: 9 }), 400, 'ORG_VALIDATION_FAILED', 'role_id');
      expect((await root.client.get(`/fills?role_id=${role.id}`)).body.data).toEqual([]);
    });
  });

  describe('access', () => {
    it('refuses every write by a non-admin with AUTH_ADMIN_REQUIRED and changes nothing', async () => {
      const role = await created('/roles', { name: 'Guarded' });
      const ring = await created('/rings', { name: 'Guarded Ring' });
      const fill = await created('/fills', { identity_id: bob.id, role_id: role.id });
      const writes: [string, string, unknown][] = [
        ['POST', '/roles', { name: 'Sneaky' }],
        ['PUT', `/roles/${role.id}`, { name: 'Renamed' }],
        ['DELETE', `/roles/${role.id}`, undefined],
        ['POST', '/rings', { name: 'Sneaky Ring' }],
        ['PUT', `/rings/${ring.id}`, { members: [alice.id] }],
        ['DELETE', `/rings/${ring.id}`, undefined],
        ['POST', '/fills', { identity_id: alice.id, role_id: role.id }],
        ['DELETE', `/fills/${fill.id}`, undefined],
        // a bad body from a non-admin is still an auth refusal
        ['POST', '/roles', {}],
      ];
      for (const [method, path, body] of writes) expectError(await alice.client.req(method, path, body), 403, 'AUTH_ADMIN_REQUIRED');
      for (const [method, path, body] of writes) expectError(await anon.req(method, path, body), 401, 'AUTH_KEY_MISSING');

      expect((await root.client.get(`/roles/${role.id}`)).body.data.name).toBe('Guarded');
      expect((await root.client.get(`/rings/${ring.id}`)).body.data.members).toEqual([]);
      expect((await root.client.get(`/fills?role_id=${role.id}`)).body.data.map((f: any) => f.id)).toEqual([fill.id]);
      const names = (await root.client.get('/roles')).body.data.map((r: any) => r.name);
      expect(names).not.toContain('Sneaky');
    });

    it('lets any key read, and refuses reads without a key with AUTH_KEY_MISSING', async () => {
      const role = await created('/roles', { name: 'Readable' });
      const ring = await created('/rings', { name: 'Readable Ring' });
      for (const path of ['/roles', `/roles/${role.id}`, '/rings', `/rings/${ring.id}`, '/fills', `/fills?role_id=${role.id}`]) {
        const r = await alice.client.get(path);
        expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(200);
        expectError(await anon.get(path), 401, 'AUTH_KEY_MISSING');
        expectError(await anon.as('svc_not-a-key').get(path), 401, 'AUTH_KEY_INVALID');
      }
    });
  });
});
