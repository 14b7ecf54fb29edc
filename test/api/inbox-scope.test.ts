/**
 * Inbox `scope` over real HTTP on both backends: a comma list of direct, role, ring, broadcast keeps only
 * signals addressed that way, on /inbox/identity/:id, /inbox/@name and a role's inbox; a bad scope is refused.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member, type Res } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { emitOk, expectError, expectOk } from './support.js';

describe.each(BACKENDS)('inbox scope on %s', (backend) => {
  const servers = serversOn(backend);
  let root: Member;
  let m: Member;
  const sent: Record<string, string> = {};

  beforeAll(async () => {
    const svc = await servers.start();
    root = await bootstrap(svc.url);
    m = await join(root.client, 'scoped');
    const role = expectOk(await root.client.post('/roles', { name: 'reviewer' }), 201);
    expectOk(await root.client.post('/fills', { identity_id: m.id, role_id: role.id }), 201);
    expectOk(await root.client.post('/rings', { name: 'core', members: [m.id] }), 201);
    sent.direct = (await emitOk(root, { signal_type: 'pulse', content: 'to you', to_identity: m.id })).id;
    sent.role = (await emitOk(root, { signal_type: 'pulse', content: 'to reviewers', to_role: 'reviewer' })).id;
    sent.ring = (await emitOk(root, { signal_type: 'pulse', content: 'to core', to_ring: 'core' })).id;
    sent.broadcast = (await emitOk(root, { signal_type: 'pulse', content: 'to everyone' })).id;
  });

  const ids = (r: Res): string[] => expectOk(r).signals.map((s: any) => s.id).sort();
  const of = (...names: string[]) => names.map((n) => sent[n]).sort();

  it('keeps only what the scope names; no scope keeps all', async () => {
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}`))).toEqual(of('direct', 'role', 'ring', 'broadcast'));
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}?scope=direct`))).toEqual(of('direct'));
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}?scope=direct,role`))).toEqual(of('direct', 'role'));
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}?scope=ring, broadcast`))).toEqual(of('ring', 'broadcast'));
    expect(await ids(await m.client.get('/inbox/@scoped?scope=direct,role,ring'))).toEqual(of('direct', 'role', 'ring'));
    expect(await ids(await m.client.get('/inbox/reviewer?scope=role'))).toEqual(of('role'));
    expect(await ids(await m.client.get('/inbox/reviewer?scope=direct'))).toEqual([]);
  });

  it('a signal addressed to an identity and a role counts as both', async () => {
    const both = (await emitOk(root, { signal_type: 'pulse', content: 'you, as reviewer', to_identity: m.id, to_role: 'reviewer' })).id;
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}?scope=direct`))).toEqual([...of('direct'), both].sort());
    expect(await ids(await m.client.get(`/inbox/identity/${m.id}?scope=role`))).toEqual([...of('role'), both].sort());
  });

  it('refuses an unknown scope', async () => {
    expectError(await m.client.get(`/inbox/identity/${m.id}?scope=direct,everyone`), 400, 'VALIDATION_INVALID_TYPE', 'scope');
    expectError(await m.client.get(`/inbox/identity/${m.id}?scope=`), 400, 'VALIDATION_INVALID_TYPE', 'scope');
  });
});
