/**
 * No credential obtains a credential with more rights than itself: a scoped key may not bind a wallet, a
 * binding records its standing and the key that bound it, a SIWE session key carries that standing and ends
 * with that key, replacing a wallet needs the old wallet's proof (or an admin), an admin re-binds; keys an
 * admin key mints, rotates or invites stay inside its scopes. Real wallets, real keys, both backends.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, type Started } from '../helpers/server.js';
import { newWallet, signed, walletProof } from '../helpers/wallet.js';
import { expectError, expectOk, waitFor } from './support.js';

const SCOPED = { signal_types: ['pulse'], rings: [], task_types: [], memory_scopes: ['org'] };
const audit = async (admin: Client, q: string) => expectOk(await admin.get(`/admin/audit?${q}`)).entries as any[];
const whoami = async (c: Client) => {
  const r = await c.post('/rpc', { jsonrpc: '2.0', id: 1, method: 'identity.whoami', params: {} });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.result as { identity: { id: string }; key: { id: string; permissions: typeof SCOPED; ring_scopes: string[]; parent?: string } };
};

for (const backend of BACKENDS) {
  describe(`keys minted on ${backend}`, () => {
    const servers = serversOn(backend);
    let anon: Client;
    let root: Member;
    let svc: Started;

    beforeAll(async () => {
      svc = await servers.start({ AUTH_REQUEST_ENABLED: 'true' });
      const url = svc.url;
      anon = new Client(url);
      root = await bootstrap(url);
    });

    const keyFor = async (owner: string, body: Record<string, unknown> = {}) => expectOk(await root.client.post('/admin/api-keys', { owner, ...body }), 201) as { id: string; api_key: string };

    it('a scoped key may not attach a wallet (AUTH_SCOPE_DENIED): nothing is bound, nothing audited, the wallet signs nobody in', async () => {
      const m = await join(root.client, 'scoped-attacher');
      const scoped = await keyFor(m.id, { permissions: SCOPED });
      const wallet = newWallet();
      const res = await anon.as(scoped.api_key).post('/auth/attach-wallet', await walletProof(anon, wallet));
      expectError(res, 403, 'AUTH_SCOPE_DENIED');
      expect(res.body.error.details.scope).toBe('signal_types');
      const ringScoped = await keyFor(m.id, { ring_scopes: ['alpha'] });
      expectError(await anon.as(ringScoped.api_key).post('/auth/attach-wallet', await walletProof(anon, wallet)), 403, 'AUTH_SCOPE_DENIED');
      expect(expectOk(await root.client.get(`/identities/${m.id}`)).wallet_address).toBeNull();
      expect(await audit(root.client, `action=identity.attach_wallet&target=${m.id}`)).toHaveLength(0);
      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet)), 404, 'IDENTITY_NOT_FOUND');
    });

    it('revoking the key that bound a wallet ends its sign-in and its sessions until an admin re-binds it', async () => {
      const m = await join(root.client, 'binder');
      const binder = await keyFor(m.id);
      const wallet = newWallet();
      expectOk(await anon.as(binder.api_key).post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const session = anon.as(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).api_key);
      expect((await whoami(session)).key.parent).toBe(binder.id);
      expectOk(await session.post('/emit', { signal_type: 'task', content: 'while bound' }), 201);

      expectOk(await root.client.post(`/admin/api-keys/${binder.id}/revoke`));
      const gone = await session.post('/emit', { signal_type: 'task', content: 'after revoke' });
      expectError(gone, 401, 'AUTH_KEY_REVOKED');
      expect(gone.body.error.details).toMatchObject({ reason: 'parent_revoked', parent: binder.id });
      const ended = await anon.post('/siwe/login', await signed(anon, wallet));
      expectError(ended, 403, 'AUTH_WALLET_BINDING_ENDED');
      expect(ended.body.error.details).toMatchObject({ wallet_address: wallet.address, reason: 'key_revoked', key: binder.id });
      // the refused sign-in wrote no audit entry
      expect(await audit(root.client, `action=auth.siwe_login&actor=${m.id}`)).toHaveLength(1);

      // the re-bind is an admin's: a member is refused, an admin re-binds and the wallet signs in again
      expectError(await m.client.post(`/admin/identity/${m.id}/rebind-wallet`), 403, 'AUTH_ADMIN_REQUIRED');
      const rebound = expectOk(await root.client.post(`/admin/identity/${m.id}/rebind-wallet`));
      expect(rebound.binding).toMatchObject({ id: m.id, key: null, bound_by: root.id });
      const again = anon.as(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).api_key);
      expectOk(await again.post('/emit', { signal_type: 'task', content: 're-bound' }), 201);
      const [entry] = await audit(root.client, `action=identity.rebind_wallet&target=${m.id}`);
      expect(entry).toMatchObject({ actor: root.id, details: { wallet_address: wallet.address, previous_key: binder.id } });
    });

    it('a session key ends no later than the key that bound its wallet; once that key expires the wallet cannot sign in', async () => {
      const m = await join(root.client, 'short-lived');
      const until = new Date(Date.now() + 3_000).toISOString();
      const binder = await keyFor(m.id, { expires_at: until });
      const wallet = newWallet();
      expectOk(await anon.as(binder.api_key).post('/auth/attach-wallet', await walletProof(anon, wallet)));
      expect(Date.parse(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).expires_at)).toBe(Date.parse(until));
      const after = await waitFor('the binding key to expire', async () => anon.post('/auth/siwe-login', await signed(anon, wallet)), (r) => r.status !== 200, 10_000, 250);
      expectError(after, 403, 'AUTH_WALLET_BINDING_ENDED');
      expect(after.body.error.details).toMatchObject({ reason: 'key_expired', key: binder.id });
    });

    it('a binding written before bindings recorded their standing signs in only after an admin re-binds it', async () => {
      const m = await join(root.client, 'legacy');
      const wallet = newWallet();
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
      // the record as it was written before this change: the identity id alone
      const key = `wallet:${wallet.address.toLowerCase()}`;
      const cur = await svc.store.get(key);
      expect((await svc.store.commit([{ op: 'put', key, value: { id: m.id }, expect: cur!.version }])).ok).toBe(true);
      const res = await anon.post('/auth/siwe-login', await signed(anon, wallet));
      expectError(res, 403, 'AUTH_WALLET_BINDING_ENDED');
      expect(res.body.error.details).toMatchObject({ reason: 'unrecorded', key: null });
      expectOk(await root.client.post(`/admin/identity/${m.id}/rebind-wallet`, { permissions: { signal_types: ['pulse'] } }));
      const session = anon.as(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).api_key);
      expect((await whoami(session)).key.permissions.signal_types).toEqual(['pulse']);
    });

    it('rotating the binding key keeps the wallet bound, by the new key; sessions of the old key end', async () => {
      const m = await join(root.client, 'rotator');
      const binder = await keyFor(m.id);
      const wallet = newWallet();
      expectOk(await anon.as(binder.api_key).post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const old = anon.as(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).api_key);
      const rotated = expectOk(await root.client.post(`/admin/api-keys/${binder.id}/rotate`));
      expectError(await old.get('/roles'), 401, 'AUTH_KEY_REVOKED');
      const fresh = anon.as(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).api_key);
      expect((await whoami(fresh)).key.parent).toBe(rotated.id);
      expect((await audit(root.client, `action=api_key.rotate&target=${binder.id}`))[0].details).toMatchObject({ new_key: rotated.id, wallet_binding_moved: true });
      // and the successor's revocation ends it as the original's would have
      expectOk(await root.client.post(`/admin/api-keys/${rotated.id}/revoke`));
      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet)), 403, 'AUTH_WALLET_BINDING_ENDED');
    });

    it('replacing a bound wallet needs a proof from the old wallet or an admin; every bind and replace is audited', async () => {
      const m = await join(root.client, 'replacer');
      const [w1, w2, w3] = [newWallet(), newWallet(), newWallet()];
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, w1)));
      expectError(await m.client.post('/auth/attach-wallet', await walletProof(anon, w2)), 400, 'IDENTITY_VALIDATION_FAILED', 'previous_message');
      // a proof from another wallet than the bound one
      const stranger = await signed(anon, newWallet());
      const wrong = await m.client.post('/auth/attach-wallet', { ...(await walletProof(anon, w2)), previous_message: stranger.message, previous_signature: stranger.signature });
      expectError(wrong, 400, 'IDENTITY_VALIDATION_FAILED');
      expect(wrong.body.error.details.reason).toBe('address_mismatch');
      // one nonce for both proofs
      const proof = await walletProof(anon, w2);
      const sameNonce = await signed(anon, w1, { nonce: /Nonce: (\S+)/.exec(proof.message)![1] });
      expectError(await m.client.post('/auth/attach-wallet', { ...proof, previous_message: sameNonce.message, previous_signature: sameNonce.signature }), 400, 'IDENTITY_VALIDATION_FAILED', 'previous_message');
      expect(expectOk(await root.client.get(`/identities/${m.id}`)).wallet_address).toBe(w1.address);

      const consent = await signed(anon, w1);
      expectOk(await m.client.post('/auth/attach-wallet', { ...(await walletProof(anon, w2)), previous_message: consent.message, previous_signature: consent.signature }));
      expectError(await anon.post('/auth/siwe-login', await signed(anon, w1)), 404, 'IDENTITY_NOT_FOUND');
      expect(expectOk(await anon.post('/auth/siwe-login', await signed(anon, w2))).identity.id).toBe(m.id);

      // an admin replaces its own wallet without the old one's proof
      expectOk(await root.client.post('/auth/attach-wallet', await walletProof(anon, w3)));
      expectOk(await root.client.post('/auth/attach-wallet', await walletProof(anon, newWallet())));
      const mine = await audit(root.client, `action=identity.attach_wallet&target=${m.id}`);
      expect(mine.map((e) => e.details)).toEqual([
        expect.objectContaining({ wallet_address: w2.address, previous: w1.address, replaced_by: 'previous_wallet', binding_key: expect.stringMatching(/^key_/) }),
        expect.objectContaining({ wallet_address: w1.address, previous: null, replaced_by: null }),
      ]);
      expect((await audit(root.client, `action=identity.attach_wallet&target=${root.id}`))[0].details).toMatchObject({ previous: w3.address, replaced_by: 'admin' });
    });

    it('every way a wallet gets bound is audited with the wallet, the key the binding hangs on and its standing', async () => {
      const admin = await join(root.client, 'binding-admin');
      expectOk(await root.client.put(`/identities/${admin.id}`, { is_admin: true }));
      const narrow = await keyFor(admin.id, { permissions: SCOPED });
      const narrowAdmin = anon.as(narrow.api_key);
      const standing = { permissions: SCOPED, ring_scopes: [] };
      const [byInvite, byRequest, byAttach] = [newWallet(), newWallet(), newWallet()];

      const inv = expectOk(await narrowAdmin.post('/invite/create', { name: 'bound-by-invite', type: 'agent' }), 201);
      const red = expectOk(await anon.post('/invite', { code: inv.code, name: 'bound-by-invite', type: 'agent', ...(await walletProof(anon, byInvite)) }), 201);
      const [redeemed] = await audit(root.client, `action=invite.redeem&target=${inv.id}`);
      expect(redeemed.details).toEqual({ identity_id: red.identity.id, wallet_address: byInvite.address, binding_key: expect.stringMatching(/^key_/), standing });

      const req = expectOk(await anon.post('/auth-request', { name: 'bound-by-request', type: 'agent', ...(await walletProof(anon, byRequest)) }), 201);
      expectOk(await narrowAdmin.post(`/auth-request/${req.id}/approve`));
      const [approved] = await audit(root.client, `action=auth_request.approve&target=${req.id}`);
      expect(approved).toMatchObject({ actor: admin.id, details: { wallet_address: byRequest.address, binding_key: null, standing } });

      const m = await join(root.client, 'bound-by-attach');
      const binder = await keyFor(m.id);
      expectOk(await anon.as(binder.api_key).post('/auth/attach-wallet', await walletProof(anon, byAttach)));
      const [attached] = await audit(root.client, `action=identity.attach_wallet&target=${m.id}`);
      expect(attached.details).toMatchObject({ wallet_address: byAttach.address, binding_key: binder.id, standing: { ring_scopes: [] } });

      expectOk(await narrowAdmin.post(`/admin/identity/${m.id}/rebind-wallet`));
      const [rebound] = await audit(root.client, `action=identity.rebind_wallet&target=${m.id}`);
      expect(rebound).toMatchObject({ actor: admin.id, details: { wallet_address: byAttach.address, binding_key: null, standing, previous_key: binder.id } });

      // a redemption without a wallet binds nothing and says so
      const plain = expectOk(await root.client.post('/invite/create', { name: 'no-wallet', type: 'agent' }), 201);
      expectOk(await anon.post('/invite', { code: plain.code, name: 'no-wallet', type: 'agent' }), 201);
      expect((await audit(root.client, `action=invite.redeem&target=${plain.id}`))[0].details).toMatchObject({ wallet_address: null });
    });

    it('an Idempotency-Key replays a minted key or an invite only to the key that asked, not to a narrower key of the same admin', async () => {
      const admin = await join(root.client, 'replaying-admin');
      expectOk(await root.client.put(`/identities/${admin.id}`, { is_admin: true }));
      const narrow = anon.as((await keyFor(admin.id, { permissions: SCOPED })).api_key);
      const m = await join(root.client, 'replay-target');
      const wideKey = await keyFor(m.id);
      const once = { 'idempotency-key': `mint-${admin.id}` };
      const made = await admin.client.req('POST', '/admin/api-keys', { owner: m.id }, once);
      expectOk(made, 201);
      const again = await admin.client.req('POST', '/admin/api-keys', { owner: m.id }, once);
      expect(expectOk(again, 201).api_key).toBe(made.body.data.api_key);
      expectError(await narrow.req('POST', '/admin/api-keys', { owner: m.id }, once), 409, 'IDEMPOTENCY_KEY_REUSED');
      const rotateOnce = { 'idempotency-key': `rotate-${admin.id}` };
      expectOk(await admin.client.req('POST', `/admin/api-keys/${wideKey.id}/rotate`, undefined, rotateOnce));
      expectError(await narrow.req('POST', `/admin/api-keys/${wideKey.id}/rotate`, undefined, rotateOnce), 409, 'IDEMPOTENCY_KEY_REUSED');
      // an invite code is a credential too: the wide key's invite is not replayed to the narrow key
      const inviteOnce = { 'idempotency-key': `invite-${admin.id}` };
      expectOk(await admin.client.req('POST', '/invite/create', { name: 'replayed-invitee', type: 'agent' }, inviteOnce), 201);
      expectError(await narrow.req('POST', '/invite/create', { name: 'replayed-invitee', type: 'agent' }, inviteOnce), 409, 'IDEMPOTENCY_KEY_REUSED');
    });

    it('a scoped admin key mints, rotates, invites and approves nothing wider than itself', async () => {
      const admin = await join(root.client, 'scoped-admin');
      expectOk(await root.client.put(`/identities/${admin.id}`, { is_admin: true }));
      const narrow = anon.as((await keyFor(admin.id, { permissions: SCOPED })).api_key);
      const m = await join(root.client, 'target');

      // create: an unscoped key, another memory scope, a wider type list are refused; its own or narrower is made
      for (const permissions of [undefined, { ...SCOPED, memory_scopes: [] }, { ...SCOPED, signal_types: ['pulse', 'task'] }, { ...SCOPED, memory_scopes: [`agent:${m.id}`] }]) {
        const res = await narrow.post('/admin/api-keys', { owner: m.id, ...(permissions ? { permissions } : {}) });
        expectError(res, 403, 'AUTH_SCOPE_DENIED');
      }
      const made = expectOk(await narrow.post('/admin/api-keys', { owner: m.id, permissions: SCOPED, ring_scopes: ['alpha'] }), 201);
      expect(made.permissions).toEqual(SCOPED);
      expect(await audit(root.client, `action=api_key.create&actor=${admin.id}`)).toHaveLength(1);

      // rotate: another identity's unscoped key cannot be re-issued through a scoped key
      const wide = await keyFor(m.id);
      expectError(await narrow.post(`/admin/api-keys/${wide.id}/rotate`), 403, 'AUTH_SCOPE_DENIED');
      expectOk(await anon.as(wide.api_key).get('/roles'));
      expectOk(await narrow.post(`/admin/api-keys/${made.id}/rotate`));

      // invite: even an admin invite redeems to a key no wider than the key that made it
      const inv = expectOk(await narrow.post('/invite/create', { name: 'invited-by-narrow', type: 'agent', is_admin: true }), 201);
      const wallet = newWallet();
      const red = expectOk(await anon.post('/invite', { code: inv.code, name: 'invited-by-narrow', type: 'agent', ...(await walletProof(anon, wallet)) }), 201);
      expect((await whoami(anon.as(red.api_key))).key).toMatchObject({ permissions: SCOPED, ring_scopes: [] });
      expectError(await anon.as(red.api_key).post('/emit', { signal_type: 'task', content: 'not a pulse' }), 403, 'AUTH_SCOPE_DENIED');
      // and its wallet's session keys carry the same
      const session = expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet)));
      expect((await whoami(anon.as(session.api_key))).key).toMatchObject({ permissions: SCOPED, parent: expect.stringMatching(/^key_/) });

      // approve: the approved wallet signs in with the approving key's standing
      const requester = newWallet();
      const req = expectOk(await anon.post('/auth-request', { name: 'approved-by-narrow', type: 'agent', ...(await walletProof(anon, requester)) }), 201);
      expectOk(await narrow.post(`/auth-request/${req.id}/approve`));
      const approved = anon.as(expectOk(await anon.post('/siwe/login', await signed(anon, requester))).api_key);
      expect((await whoami(approved)).key.permissions).toEqual(SCOPED);
      expectError(await approved.post('/memory/store', { namespace: `agent:${(await whoami(approved)).identity.id}`, content: 'outside org' }), 403, 'MEMORY_NAMESPACE_DENIED');

      // making an admin would lend admin rights to the new admin's own keys, whatever they reach: refused
      const promoted = await narrow.put(`/identities/${m.id}`, { is_admin: true });
      expectError(promoted, 403, 'AUTH_SCOPE_DENIED');
      expect(expectOk(await root.client.get(`/identities/${m.id}`)).is_admin).toBe(false);
      expectOk(await narrow.put(`/identities/${m.id}`, { tags: ['renamed-by-narrow'] }));

      // re-bind: no wider than the admin's key either
      expectError(await narrow.post(`/admin/identity/${red.identity.id}/rebind-wallet`, { permissions: { signal_types: [] } }), 403, 'AUTH_SCOPE_DENIED');
      expect(expectOk(await narrow.post(`/admin/identity/${red.identity.id}/rebind-wallet`)).binding.standing.permissions).toEqual(SCOPED);
    });

    it('a scoped admin key grants nothing no key scope bounds: no peer trust, no webhook; an unscoped admin key does', async () => {
      const admin = await join(root.client, 'scoped-grantor');
      expectOk(await root.client.put(`/identities/${admin.id}`, { is_admin: true }));
      const narrow = anon.as((await keyFor(admin.id, { permissions: SCOPED })).api_key);
      const peer = expectOk(await root.client.post('/org/company/peers', { name: 'granted-peer', endpoint: 'https://granted.example' }), 201);
      const hook = expectOk(await root.client.post('/admin/webhooks', { url: 'https://hooks.example/in', events: ['signal.emitted'] }), 201);
      const refusedOn: [string, string, unknown][] = [
        ['POST', '/federation/trust', { name: 'by-narrow', endpoint: 'https://narrow.example', allowed_scopes: ['task'] }],
        ['POST', '/org/company/peers', { name: 'by-narrow-2', endpoint: 'https://narrow2.example' }],
        ['POST', `/org/company/peers/${peer.id}/establish`, {}],
        ['PATCH', `/org/company/peers/${peer.id}/status`, { status: 'suspended' }],
        ['PATCH', `/org/company/peers/${peer.id}`, { rate_limit: 0 }],
        ['POST', '/admin/webhooks', { url: 'https://hooks.example/narrow', events: ['memory.stored'] }],
        ['PATCH', `/admin/webhooks/${hook.id}`, { events: ['memory.stored'] }],
      ];
      for (const [method, path, body] of refusedOn) expectError(await narrow.req(method, path, body), 403, 'AUTH_SCOPE_DENIED');
      expect((expectOk(await root.client.get('/admin/webhooks')) as any[]).map((w) => w.url)).not.toContain('https://hooks.example/narrow');
      expect(expectOk(await root.client.get(`/admin/webhooks/${hook.id}`)).events).toEqual(['signal.emitted']);
      // the same admin with an unscoped key may
      const whole = anon.as((await keyFor(admin.id)).api_key);
      expectOk(await whole.post('/federation/trust', { name: 'by-whole', endpoint: 'https://whole.example' }), 201);
      expectOk(await whole.req('PATCH', `/admin/webhooks/${hook.id}`, { events: ['memory.stored'] }));
    });
  });
}
