/**
 * Identity administration, invites and the audit log: show, update, delete (keys revoked, fills and rings
 * ended, signals kept), the last admin protected, invite expiry, the invite skill, the invite list, and an
 * audit entry for each audited action, none for a refused request.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { newWallet, walletProof } from '../helpers/wallet.js';
import { emitOk, expectError, expectOk, waitFor } from './support.js';

const entries = async (admin: Client, q: string) => expectOk(await admin.get(`/admin/audit?${q}`)).entries as any[];

for (const backend of BACKENDS) {
  describe(`identity admin on ${backend}`, () => {
    const servers = serversOn(backend);
    let url: string;
    let anon: Client;
    let root: Member;

    beforeAll(async () => {
      url = (await servers.start()).url;
      anon = new Client(url);
      root = await bootstrap(url);
    });

    it('GET and PUT /identities/:id; a taken name and an unknown id are refused', async () => {
      const m = await join(root.client, 'shown');
      const got = expectOk(await root.client.get(`/identities/${m.id}`));
      expect(got).toMatchObject({ id: m.id, name: 'shown', type: 'agent', is_admin: false, capabilities: [], wallet_address: null });
      expect(typeof got.last_seen).toBe('string');
      expectError(await root.client.get('/identities/nope'), 404, 'IDENTITY_NOT_FOUND');

      const up = expectOk(await root.client.put(`/identities/${m.id}`, { name: 'renamed', capabilities: ['code', 'review'], tags: ['t'], type: 'human' }));
      expect(up).toMatchObject({ id: m.id, name: 'renamed', capabilities: ['code', 'review'], tags: ['t'], type: 'human' });
      expect(expectOk(await root.client.get(`/identities/${m.id}`)).name).toBe('renamed');
      const e = (await entries(root.client, `action=identity.update&target=${m.id}`))[0];
      expect(e).toMatchObject({ actor: root.id, target: m.id, outcome: 'success' });
      expect(e.details.changed.sort()).toEqual(['capabilities', 'name', 'tags', 'type']);
      // the old name is free again, the new one taken
      await join(root.client, 'shown');
      expectError(await root.client.put(`/identities/${m.id}`, { name: 'Shown' }), 400, 'IDENTITY_VALIDATION_FAILED', 'name');
      expectError(await root.client.put(`/identities/${m.id}`, { capabilities: 'x' }), 400, 'IDENTITY_VALIDATION_FAILED', 'capabilities');
      expectError(await root.client.put('/identities/nope', { tags: [] }), 404, 'IDENTITY_NOT_FOUND');
      expect(await entries(root.client, `action=identity.update&target=${m.id}`)).toHaveLength(1);
    });

    it('capabilities set by PUT are what target_capabilities routing matches', async () => {
      const m = await join(root.client, 'capable');
      expectOk(await root.client.put(`/identities/${m.id}`, { capabilities: ['rare-skill'] }));
      const s = await emitOk(root, { signal_type: 'task', content: 'needs rare skill', target_capabilities: ['rare-skill'] });
      const inbox = expectOk(await m.client.get(`/inbox/identity/${m.id}`));
      const list = inbox.signals ?? inbox;
      expect(list.map((x: any) => x.id)).toContain(s.id);
    });

    it('the last admin can be neither demoted nor deleted; a second admin makes both possible', async () => {
      const s2 = await servers.start();
      const admin = await bootstrap(s2.url, 'only');
      expectError(await admin.client.put(`/identities/${admin.id}`, { is_admin: false }), 403, 'POLICY_DENIED');
      expectError(await admin.client.del(`/admin/identity/${admin.id}`), 403, 'POLICY_DENIED');
      const other = await join(admin.client, 'second');
      expectOk(await admin.client.put(`/identities/${other.id}`, { is_admin: true }));
      expectOk(await other.client.get('/admin/api-keys'));
      // concurrent mutual demotion: the admin set is versioned, so at most one succeeds
      const rs = await Promise.all([admin.client.put(`/identities/${other.id}`, { is_admin: false }), other.client.put(`/identities/${admin.id}`, { is_admin: false })]);
      expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
      const admins = (await Promise.all([admin, other].map(async (m) => (await m.client.get('/admin/api-keys')).status))).filter((s) => s === 200);
      expect(admins).toHaveLength(1);
    });

    it('DELETE /admin/identity/:id revokes its keys, ends fills and ring memberships, keeps its signals', async () => {
      const m = await join(root.client, 'leaver');
      const extra = expectOk(await root.client.post('/admin/api-keys', { owner: m.id }), 201);
      const role = expectOk(await root.client.post('/roles', { name: 'leaver-role' }), 201);
      const ring = expectOk(await root.client.post('/rings', { name: 'leaver-ring', members: [m.id, root.id] }), 201);
      const fill = expectOk(await root.client.post('/fills', { identity_id: m.id, role_id: role.id }), 201);
      const sig = await emitOk(m, { signal_type: 'note', content: 'my last words' });

      const gone = expectOk(await root.client.del(`/admin/identity/${m.id}`));
      expect(gone.id).toBe(m.id);
      expectError(await m.client.get('/roles'), 401, 'AUTH_KEY_REVOKED');
      expectError(await anon.as(extra.api_key).get('/roles'), 401, 'AUTH_KEY_REVOKED');
      const keys = expectOk(await root.client.get('/admin/api-keys')).filter((k: any) => k.owner === m.id);
      expect(keys.length).toBe(2);
      expect(keys.every((k: any) => k.revoked)).toBe(true);
      expectError(await root.client.get(`/identities/${m.id}`), 404, 'IDENTITY_NOT_FOUND');
      expect(expectOk(await root.client.get('/identities?limit=100')).identities.map((i: any) => i.id)).not.toContain(m.id);
      expect(expectOk(await root.client.get(`/fills?identity_id=${m.id}`))).toEqual([]);
      expectError(await root.client.del(`/fills/${fill.id}`), 404, 'ORG_FILL_NOT_FOUND');
      expect(expectOk(await root.client.get(`/rings/${ring.id}`)).members).toEqual([root.id]);
      expect(expectOk(await root.client.get(`/thread/${sig.id}`)).signals.map((s: any) => s.id)).toEqual([sig.id]);
      const e = (await entries(root.client, `action=identity.delete&target=${m.id}`))[0];
      expect(e).toMatchObject({ actor: root.id, details: { name: 'leaver', keys_revoked: 2 } });
      expectError(await root.client.del(`/admin/identity/${m.id}`), 404, 'IDENTITY_NOT_FOUND');
      expect(await entries(root.client, `action=identity.delete&target=${m.id}`)).toHaveLength(1);
      // the name is free again
      await join(root.client, 'leaver');
    });

    it('invites: expiry, the list (code only while redeemable), and the skill document', async () => {
      const soon = new Date(Date.now() + 400).toISOString();
      const expiring = expectOk(await root.client.post('/invite/create', { name: 'late', type: 'agent', expires_at: soon }), 201);
      expect(expiring.expires_at).toBe(soon);
      const open = expectOk(await root.client.post('/invite/create', { name: 'skilled', type: 'agent' }), 201);
      expectError(await root.client.post('/invite/create', { name: 'past', type: 'agent', expires_at: new Date(Date.now() - 1000).toISOString() }), 400, 'INVITE_VALIDATION_FAILED', 'expires_at');

      const skill = await fetch(`${url}/invite/${open.code}/skill`);
      expect(skill.status).toBe(200);
      expect(skill.headers.get('content-type')).toMatch(/^text\/markdown/);
      const md = await skill.text();
      const base = `http://localhost:${new URL(url).port}`;
      expect(md).toContain('# Join');
      expect(md).toContain('skilled');
      expect(md).toContain(`${base}/invite`);
      expect(md).toContain(open.code);
      expect(md).toContain(`ws://localhost:${new URL(url).port}/ws`);
      expect(md).toContain(`${base}/mcp`);
      expectError(await anon.get('/invite/inv_unknown/skill'), 404, 'INVITE_NOT_FOUND');

      await waitFor('the invite to expire', async () => Date.now(), (t) => t > Date.parse(soon) + 20, 5000, 50);
      expectError(await anon.post('/invite', { code: expiring.code, name: 'late', type: 'agent' }), 410, 'INVITE_EXPIRED');
      expectError(await anon.get(`/invite/${expiring.code}/skill`), 410, 'INVITE_EXPIRED');

      const red = expectOk(await anon.post('/invite', { code: open.code, name: 'skilled', type: 'agent' }), 201);
      expectError(await anon.get(`/invite/${open.code}/skill`), 409, 'INVITE_ALREADY_REDEEMED');

      const page = expectOk(await root.client.get('/admin/invites?limit=2'));
      expect(page.invites.map((i: any) => i.id)).toEqual([open.id, expiring.id]);
      expect(page.has_more).toBe(true);
      expect(page.invites[0]).toMatchObject({ code: null, redeemed_by: red.identity.id, name: 'skilled' });
      expect(typeof page.invites[0].redeemed_at).toBe('string');
      expect(page.invites[1]).toMatchObject({ code: null, redeemed_by: null, expires_at: soon });
      const fresh = expectOk(await root.client.post('/invite/create', { name: 'fresh', type: 'agent' }), 201);
      expect(expectOk(await root.client.get('/admin/invites?limit=1')).invites[0]).toMatchObject({ id: fresh.id, code: fresh.code });
      const rest = expectOk(await root.client.get(`/admin/invites?limit=100&after=${page.cursor}`));
      expect(rest.invites.map((i: any) => i.id)).not.toContain(open.id);
      expect(rest.has_more).toBe(false);

      expect((await entries(root.client, `action=invite.create&target=${fresh.id}`))[0]).toMatchObject({ actor: root.id, details: { name: 'fresh' } });
      expect((await entries(root.client, `action=invite.redeem&target=${open.id}`))[0]).toMatchObject({ actor: red.identity.id });
    });

    it('key creation, revocation and rotation are audited; a refused admin call writes nothing', async () => {
      const m = await join(root.client, 'keyed');
      const created = expectOk(await root.client.post('/admin/api-keys', { owner: m.id, rate_limit: 50 }), 201);
      const rotated = expectOk(await root.client.post(`/admin/api-keys/${created.id}/rotate`));
      expectOk(await root.client.post(`/admin/api-keys/${rotated.id}/revoke`));
      expect((await entries(root.client, `action=api_key.create&target=${created.id}`))[0]).toMatchObject({ actor: root.id, details: { owner: m.id } });
      expect((await entries(root.client, `action=api_key.rotate&target=${created.id}`))[0]).toMatchObject({ details: { new_key: rotated.id } });
      expect(await entries(root.client, `action=api_key.revoke&target=${rotated.id}`)).toHaveLength(1);

      const total = async () => (await entries(root.client, 'limit=100')).length;
      const before = await total();
      expectError(await m.client.post('/admin/api-keys', { owner: m.id }), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await m.client.put(`/identities/${m.id}`, { is_admin: true }), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await m.client.del(`/admin/identity/${root.id}`), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await m.client.get('/admin/audit'), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await root.client.post('/admin/api-keys/key_nope/revoke'), 404, 'NOT_FOUND');
      expectError(await root.client.post(`/admin/api-keys/${rotated.id}/rotate`), 403, 'POLICY_DENIED');
      expectError(await root.client.post('/admin/api-keys', { owner: 'nobody' }), 404, 'IDENTITY_NOT_FOUND');
      expect(await total()).toBe(before);
    });

    it('GET /admin/audit pages newest first and filters by actor, action, target and since', async () => {
      const s2 = await servers.start();
      const admin = await bootstrap(s2.url, 'auditor');
      const a = await join(admin.client, 'a1');
      // t0 strictly after the join's entries and strictly before the next ones
      const joined = Date.now();
      const t0 = new Date((await waitFor('the clock to move on', async () => Date.now(), (t) => t > joined))).toISOString();
      await waitFor('the clock to pass t0', async () => Date.now(), (t) => t > Date.parse(t0));
      const k = expectOk(await admin.client.post('/admin/api-keys', { owner: a.id }), 201);
      expectOk(await admin.client.post(`/admin/api-keys/${k.id}/revoke`));
      expectOk(await a.client.post('/auth/attach-wallet', await walletProof(new Client(s2.url), newWallet())));

      const all = expectOk(await admin.client.get('/admin/audit?limit=100')).entries;
      expect(all.map((e: any) => e.action)).toEqual(['identity.attach_wallet', 'api_key.revoke', 'api_key.create', 'invite.redeem', 'invite.create', 'invite.redeem', 'invite.create']);
      for (const e of all) expect(Object.keys(e).sort()).toEqual(['action', 'actor', 'at', 'details', 'id', 'outcome', 'request_id', 'target']);
      const p1 = expectOk(await admin.client.get('/admin/audit?limit=3'));
      expect(p1.entries.map((e: any) => e.id)).toEqual(all.slice(0, 3).map((e: any) => e.id));
      expect(p1.has_more).toBe(true);
      const p2 = expectOk(await admin.client.get(`/admin/audit?limit=100&after=${p1.cursor}`));
      expect(p2.entries.map((e: any) => e.id)).toEqual(all.slice(3).map((e: any) => e.id));
      expect(p2.has_more).toBe(false);

      expect(expectOk(await admin.client.get(`/admin/audit?actor=${a.id}`)).entries.map((e: any) => e.action)).toEqual(['identity.attach_wallet', 'invite.redeem']);
      expect(expectOk(await admin.client.get(`/admin/audit?target=${k.id}`)).entries.map((e: any) => e.action)).toEqual(['api_key.revoke', 'api_key.create']);
      expect(expectOk(await admin.client.get(`/admin/audit?since=${encodeURIComponent(t0)}`)).entries.map((e: any) => e.action)).toEqual(['identity.attach_wallet', 'api_key.revoke', 'api_key.create']);
      expect(expectOk(await admin.client.get(`/admin/audit?action=api_key.create&actor=${a.id}`)).entries).toEqual([]);
      expectError(await admin.client.get('/admin/audit?since=yesterday'), 400, 'VALIDATION_INVALID_TYPE', 'since');
    });
  });
}
