/**
 * Public join requests: refused unless AUTH_REQUEST_ENABLED, all five fields and a verified signature,
 * admin review once (approve creates the identity and membership; the requester then signs in with SIWE).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { newWallet, signed, walletProof } from '../helpers/wallet.js';
import { expectError, expectOk } from './support.js';

for (const backend of BACKENDS) {
  describe(`join requests on ${backend}`, () => {
    const servers = serversOn(backend);
    let anon: Client;
    let root: Member;

    beforeAll(async () => {
      const url = (await servers.start({ AUTH_REQUEST_ENABLED: 'true' })).url;
      anon = new Client(url);
      root = await bootstrap(url);
    });

    const request = async (name: string, wallet = newWallet()) => ({ wallet, res: await anon.post('/auth-request', { name, type: 'agent', ...(await walletProof(anon, wallet)) }) });

    it('disabled by default: 403 AUTH_REQUEST_DISABLED whatever the body', async () => {
      const off = await servers.start();
      const a = new Client(off.url);
      await bootstrap(off.url);
      expectError(await a.post('/auth-request', { name: 'x', type: 'agent', ...(await walletProof(a, newWallet())) }), 403, 'AUTH_REQUEST_DISABLED');
      expectError(await a.post('/auth-request', {}), 403, 'AUTH_REQUEST_DISABLED');
    });

    it('needs all five fields and a verified signature', async () => {
      const wallet = newWallet();
      const proof = await walletProof(anon, wallet);
      for (const field of ['name', 'type', 'wallet_address', 'message', 'signature']) {
        const body: Record<string, unknown> = { name: 'incomplete', type: 'agent', ...proof };
        delete body[field];
        expectError(await anon.post('/auth-request', body), 400, 'AUTH_REQUEST_VALIDATION_FAILED', field);
      }
      const other = await anon.post('/auth-request', { name: 'forged', type: 'agent', ...proof, wallet_address: newWallet().address });
      expectError(other, 400, 'AUTH_REQUEST_VALIDATION_FAILED', 'wallet_address');
      const forged = await anon.post('/auth-request', { name: 'forged', type: 'agent', ...proof, signature: await newWallet().signMessage({ message: proof.message }) });
      expectError(forged, 400, 'AUTH_REQUEST_VALIDATION_FAILED', 'signature');
      expect(forged.body.error.details.reason).toBe('SIWE_VERIFICATION_FAILED');
      expectError(await anon.post('/auth-request', { name: 'root', type: 'agent', ...(await walletProof(anon, newWallet())) }), 400, 'AUTH_REQUEST_VALIDATION_FAILED', 'name');
      expect(expectOk(await root.client.get('/auth-requests?limit=100')).auth_requests).toEqual([]);
    });

    it('approve creates the identity and its membership; the requester signs in; re-review is refused', async () => {
      const { wallet, res } = await request('newcomer');
      const req = expectOk(res, 201);
      expect(req).toMatchObject({ name: 'newcomer', type: 'agent', wallet_address: wallet.address, status: 'pending', reviewed_by: null, identity_id: null });
      // before approval the wallet signs nobody in
      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet)), 404, 'IDENTITY_NOT_FOUND');

      const approved = expectOk(await root.client.post(`/auth-request/${req.id}/approve`));
      expect(approved).toMatchObject({ id: req.id, status: 'approved', reviewed_by: root.id });
      expect(approved.identity).toMatchObject({ id: approved.identity_id, name: 'newcomer', wallet_address: wallet.address, is_admin: false });
      expectError(await root.client.post(`/auth-request/${req.id}/approve`), 409, 'AUTH_REQUEST_ALREADY_REVIEWED');
      expectError(await root.client.post(`/auth-request/${req.id}/reject`), 409, 'AUTH_REQUEST_ALREADY_REVIEWED');

      const login = expectOk(await anon.post('/siwe/login', await signed(anon, wallet)));
      expect(login.identity.id).toBe(approved.identity_id);
      // an active membership: the new identity can emit
      expectOk(await anon.as(login.api_key).post('/emit', { signal_type: 'note', content: 'hello' }), 201);
      expect(expectOk(await root.client.get(`/identities/${approved.identity_id}`)).name).toBe('newcomer');

      const audit = expectOk(await root.client.get(`/admin/audit?target=${req.id}`)).entries;
      expect(audit.map((e: any) => [e.action, e.actor])).toEqual([
        ['auth_request.approve', root.id],
        ['auth_request.create', null],
      ]);
      expect(audit[0].details).toEqual({ identity_id: approved.identity_id, wallet_address: wallet.address, binding_key: null, standing: { permissions: expect.any(Object), ring_scopes: [] } });
    });

    it('reject, then re-review refused; a refused review writes no audit entry', async () => {
      const { wallet, res } = await request('unwanted');
      const req = expectOk(res, 201);
      expect(expectOk(await root.client.post(`/auth-request/${req.id}/reject`))).toMatchObject({ status: 'rejected', reviewed_by: root.id, identity_id: null });
      expectError(await root.client.post(`/auth-request/${req.id}/approve`), 409, 'AUTH_REQUEST_ALREADY_REVIEWED');
      expectError(await root.client.post('/auth-request/nope/approve'), 404, 'AUTH_REQUEST_NOT_FOUND');
      expectError(await root.client.post('/auth-request/nope/reject'), 404, 'AUTH_REQUEST_NOT_FOUND');
      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet)), 404, 'IDENTITY_NOT_FOUND');
      expect(expectOk(await root.client.get(`/admin/audit?target=${req.id}`)).entries.map((e: any) => e.action)).toEqual(['auth_request.reject', 'auth_request.create']);
    });

    it('concurrent reviews of one request: exactly one wins', async () => {
      const req = expectOk((await request('contested')).res, 201);
      const rs = await Promise.all([root.client.post(`/auth-request/${req.id}/approve`), root.client.post(`/auth-request/${req.id}/reject`), root.client.post(`/auth-request/${req.id}/approve`)]);
      expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of rs.filter((x) => x.status !== 200)) expectError(r, 409, 'AUTH_REQUEST_ALREADY_REVIEWED');
    });

    it('GET /auth-requests pages newest first and filters by status; members are refused', async () => {
      const s2 = await servers.start({ AUTH_REQUEST_ENABLED: 'true' });
      const a = new Client(s2.url);
      const admin = await bootstrap(s2.url);
      const ids: string[] = [];
      const wallets = [newWallet(), newWallet(), newWallet()];
      for (const [i, n] of ['r1', 'r2', 'r3'].entries()) ids.push(expectOk(await a.post('/auth-request', { name: n, type: 'agent', ...(await walletProof(a, wallets[i])) }), 201).id);
      expectOk(await admin.client.post(`/auth-request/${ids[1]}/approve`));
      const p1 = expectOk(await admin.client.get('/auth-requests?limit=2'));
      expect(p1.auth_requests.map((r: any) => r.id)).toEqual([ids[2], ids[1]]);
      expect(p1.has_more).toBe(true);
      const p2 = expectOk(await admin.client.get(`/auth-requests?limit=2&after=${p1.cursor}`));
      expect(p2.auth_requests.map((r: any) => r.id)).toEqual([ids[0]]);
      expect(p2.has_more).toBe(false);
      expect(expectOk(await admin.client.get('/auth-requests?status=pending')).auth_requests.map((r: any) => r.id)).toEqual([ids[2], ids[0]]);
      expect(expectOk(await admin.client.get('/auth-requests?status=approved')).auth_requests.map((r: any) => r.id)).toEqual([ids[1]]);
      expectError(await admin.client.get('/auth-requests?status=maybe'), 400, 'VALIDATION_INVALID_TYPE', 'status');
      // a wallet that has an identity cannot ask again
      expectError(await a.post('/auth-request', { name: 'r2-again', type: 'agent', ...(await walletProof(a, wallets[1])) }), 409, 'IDENTITY_WALLET_DUPLICATE');
      const member = a.as(expectOk(await a.post('/auth/siwe-login', await signed(a, wallets[1]))).api_key);
      expectError(await member.get('/auth-requests'), 403, 'AUTH_ADMIN_REQUIRED');
      expectError(await member.post(`/auth-request/${ids[0]}/approve`), 403, 'AUTH_ADMIN_REQUIRED');
      expect(expectOk(await admin.client.get('/auth-requests?status=pending')).auth_requests).toHaveLength(2);
    });
  });
}
