/**
 * Wallet sign-in (SIWE) and wallet binding with real viem wallets: both login paths, every failure code,
 * session key expiry, one identity per wallet (also under concurrent binds), and the audit entries.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn, startServer, type Started } from '../helpers/server.js';
import { newWallet, nonceOf, signed, siweText, walletProof } from '../helpers/wallet.js';
import { expectError, expectOk, waitFor } from './support.js';

const audit = async (admin: Client, q: string) => expectOk(await admin.get(`/admin/audit?${q}`)).entries as any[];

for (const backend of BACKENDS) {
  describe(`SIWE and wallets on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Started;
    let url: string;
    let anon: Client;
    let root: Member;

    beforeAll(async () => {
      svc = await servers.start({ SIWE_SESSION_TTL_MS: '1500' });
      url = svc.url;
      anon = new Client(url);
      root = await bootstrap(url);
    });

    it('GET /auth/nonce answers a fresh single-use nonce and when it expires', async () => {
      const a = expectOk(await anon.get('/auth/nonce'));
      const b = expectOk(await anon.get('/auth/nonce'));
      expect(a.nonce).toMatch(/^[A-Za-z0-9]{8,}$/);
      expect(a.nonce).not.toBe(b.nonce);
      const ttl = Date.parse(a.expires_at) - Date.now();
      expect(ttl).toBeGreaterThan(250_000);
      expect(ttl).toBeLessThanOrEqual(300_000);
    });

    it('GET /auth/nonce writes nothing: the nonce is signed, a changed one is unknown, and only a sign-in writes its single-use mark', async () => {
      const wallet = newWallet();
      const m = await join(root.client, 'stateless');
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const marks = await svc.store.count('siwe-nonces');
      const issued: string[] = [];
      for (let i = 0; i < 20; i++) issued.push(expectOk(await anon.get('/auth/nonce')).nonce);
      expect(await svc.store.count('siwe-nonces')).toBe(marks);
      for (const n of issued) expect(await svc.store.get(`siwe-nonce:${n}`)).toBeUndefined();
      const [n] = issued;
      // one character of the random part, or of the expiry (a longer life), changed: not a nonce issued here
      const flip = (i: number) => n.slice(0, i) + (n[i] === '0' ? '1' : '0') + n.slice(i + 1);
      for (const forged of [flip(20), flip(11)]) expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet, { nonce: forged })), 404, 'SIWE_NONCE_NOT_FOUND');
      expect(await svc.store.count('siwe-nonces')).toBe(marks);
      expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet, { nonce: n })));
      expect(await svc.store.get(`siwe-nonce:${n}`)).toBeDefined();
      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet, { nonce: n })), 401, 'SIWE_NONCE_USED');
    });

    // two instances share a store on Redis only
    if (backend === 'redis') it('a nonce issued by one instance signs in on another on the same store, once', async () => {
      const other = await startServer(svc.env);
      try {
        const wallet = newWallet();
        const m = await join(root.client, 'two-instances');
        expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
        const nonce = await nonceOf(anon);
        // each instance answers to its own port, so each message names the authority it is sent to
        const body = async (at: string) => {
          const message = siweText(at, wallet.address, { nonce });
          return { message, signature: await wallet.signMessage({ message }) };
        };
        expectOk(await new Client(other.url).post('/auth/siwe-login', await body(other.url)));
        expectError(await anon.post('/auth/siwe-login', await body(url)), 401, 'SIWE_NONCE_USED');
      } finally {
        await other.close();
      }
    });

    it('a wallet bound at redemption signs in on both paths with a session key that expires', async () => {
      const wallet = newWallet();
      const inv = expectOk(await root.client.post('/invite/create', { name: 'walleted', type: 'agent' }), 201);
      const red = expectOk(await anon.post('/invite', { code: inv.code, name: 'walleted', type: 'agent', ...(await walletProof(anon, wallet)) }), 201);
      expect(red.identity.wallet_address).toBe(wallet.address);

      for (const path of ['/auth/siwe-login', '/siwe/login']) {
        const login = expectOk(await anon.post(path, await signed(anon, wallet)));
        expect(login.identity.id).toBe(red.identity.id);
        expect(login.api_key).toMatch(/^svc_/);
        const expiresIn = Date.parse(login.expires_at) - Date.now();
        expect(expiresIn).toBeGreaterThan(0);
        expect(expiresIn).toBeLessThanOrEqual(1500);
        const session = anon.as(login.api_key);
        expectOk(await session.get('/roles'));
        if (path === '/siwe/login') {
          await waitFor('the session key to expire', () => session.get('/roles'), (r) => r.status !== 200, 5000, 100);
          expectError(await session.get('/roles'), 401, 'AUTH_KEY_EXPIRED');
        }
      }
      const entries = await audit(root.client, `action=auth.siwe_login&actor=${red.identity.id}`);
      expect(entries).toHaveLength(2);
      expect(entries[0]).toMatchObject({ actor: red.identity.id, action: 'auth.siwe_login', outcome: 'success', details: { wallet_address: wallet.address } });
      expect(entries[0].request_id).toMatch(/^req_/);
      expect(expectOk(await root.client.get(`/admin/audit?action=invite.redeem&actor=${red.identity.id}`)).entries).toHaveLength(1);
    });

    it('every SIWE failure has its code, and a refused sign-in writes no audit entry nor consumes the nonce', async () => {
      const wallet = newWallet();
      const m = await join(root.client, 'signer');
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const before = (await audit(root.client, 'action=auth.siwe_login&limit=100')).length;

      // tampered signature: one byte of s flipped
      const good = await signed(anon, wallet);
      const flipped = good.signature.slice(0, 40) + (good.signature[40] === 'a' ? 'b' : 'a') + good.signature.slice(41);
      const tampered = await anon.post('/auth/siwe-login', { message: good.message, signature: flipped });
      expectError(tampered, 401, 'SIWE_VERIFICATION_FAILED');
      expect(tampered.body.error.details.reason).toBe('signature');
      // a message signed by another wallet
      const other = await newWallet().signMessage({ message: good.message });
      expectError(await anon.post('/auth/siwe-login', { message: good.message, signature: other }), 401, 'SIWE_VERIFICATION_FAILED');
      // the refusals did not consume the nonce: the real signature still signs in, once
      expectOk(await anon.post('/auth/siwe-login', good));
      expectError(await anon.post('/auth/siwe-login', good), 401, 'SIWE_NONCE_USED');
      expectError(await anon.post('/siwe/login', good), 401, 'SIWE_NONCE_USED');

      expectError(await anon.post('/auth/siwe-login', await signed(anon, wallet, { nonce: 'neverIssued123' })), 404, 'SIWE_NONCE_NOT_FOUND');
      const wrongDomain = await anon.post('/auth/siwe-login', await signed(anon, wallet, { domain: 'evil.example' }));
      expectError(wrongDomain, 401, 'SIWE_DOMAIN_MISMATCH');
      expect(wrongDomain.body.error.details).toMatchObject({ got: 'evil.example' });
      const expired = await anon.post('/auth/siwe-login', await signed(anon, wallet, { expirationTime: new Date(Date.now() - 1000).toISOString() }));
      expectError(expired, 401, 'SIWE_VERIFICATION_FAILED');
      expect(expired.body.error.details.reason).toBe('expired');
      const early = await anon.post('/auth/siwe-login', await signed(anon, wallet, { notBefore: new Date(Date.now() + 60_000).toISOString() }));
      expectError(early, 401, 'SIWE_VERIFICATION_FAILED');
      expect(early.body.error.details.reason).toBe('not_yet_valid');
      expectError(await anon.post('/auth/siwe-login', { message: 'hello', signature: good.signature }), 400, 'SIWE_VALIDATION_FAILED', 'message');
      expectError(await anon.post('/auth/siwe-login', { message: good.message }), 400, 'SIWE_VALIDATION_FAILED', 'signature');
      expectError(await anon.post('/auth/siwe-login', { message: good.message, signature: 'zz' }), 401, 'SIWE_VERIFICATION_FAILED');
      // a real signature of a wallet no identity has
      expectError(await anon.post('/auth/siwe-login', await signed(anon, newWallet())), 404, 'IDENTITY_NOT_FOUND');

      expect(await audit(root.client, 'action=auth.siwe_login&limit=100')).toHaveLength(before + 1);
    });

    it('an expired nonce answers SIWE_NONCE_EXPIRED', async () => {
      // the in-process server's wall clock is moved past the nonce's expiry: a short TTL raced the proofs a loaded machine signs with it
      const other = await servers.start();
      const a = new Client(other.url);
      const admin = await bootstrap(other.url);
      const wallet = newWallet();
      expectOk(await admin.client.post('/auth/attach-wallet', await walletProof(a, wallet)));
      const n = expectOk(await a.get('/auth/nonce'));
      const message = await signed(a, wallet, { nonce: n.nonce });
      vi.useFakeTimers({ toFake: ['Date'], now: Date.parse(n.expires_at) + 1000, shouldAdvanceTime: true });
      try {
        expectError(await a.post('/auth/siwe-login', message), 401, 'SIWE_NONCE_EXPIRED');
      } finally {
        vi.useRealTimers();
      }
      expectOk(await a.post('/auth/siwe-login', await signed(a, wallet)));
    });

    it('attach-wallet binds, replaces and refuses; one identity per wallet whatever the case', async () => {
      const a = await join(root.client, 'attacher');
      const b = await join(root.client, 'other-attacher');
      const w1 = newWallet();
      const w2 = newWallet();
      const bound = expectOk(await a.client.post('/auth/attach-wallet', await walletProof(anon, w1)));
      expect(bound).toMatchObject({ id: a.id, wallet_address: w1.address });
      const entry = (await audit(root.client, `action=identity.attach_wallet&target=${a.id}`))[0];
      expect(entry).toMatchObject({ actor: a.id, target: a.id, details: { wallet_address: w1.address, previous: null } });

      // the same wallet for another identity, given in lower case: refused, nothing written
      const proof = await walletProof(anon, w1);
      expectError(await b.client.post('/auth/attach-wallet', { ...proof, wallet_address: w1.address.toLowerCase() }), 409, 'IDENTITY_WALLET_DUPLICATE');
      expect(await audit(root.client, `action=identity.attach_wallet&target=${b.id}`)).toHaveLength(0);

      // proof problems are IDENTITY_VALIDATION_FAILED naming the SIWE reason
      const mismatch = await b.client.post('/auth/attach-wallet', { ...(await walletProof(anon, w2)), wallet_address: newWallet().address });
      expectError(mismatch, 400, 'IDENTITY_VALIDATION_FAILED', 'wallet_address');
      const used = await walletProof(anon, w2);
      expectOk(await b.client.post('/auth/attach-wallet', used));
      const replay = await b.client.post('/auth/attach-wallet', used);
      expectError(replay, 400, 'IDENTITY_VALIDATION_FAILED');
      expect(replay.body.error.details.reason).toBe('SIWE_NONCE_USED');
      expectError(await b.client.post('/auth/attach-wallet', { wallet_address: w2.address, message: 'x' }), 400, 'IDENTITY_VALIDATION_FAILED', 'signature');

      // replacing a wallet needs the old wallet's proof, and frees the old one
      const w3 = newWallet();
      expectError(await a.client.post('/auth/attach-wallet', await walletProof(anon, w3)), 400, 'IDENTITY_VALIDATION_FAILED', 'previous_message');
      const previous = await signed(anon, w1);
      expectOk(await a.client.post('/auth/attach-wallet', { ...(await walletProof(anon, w3)), previous_message: previous.message, previous_signature: previous.signature }));
      expectError(await anon.post('/auth/siwe-login', await signed(anon, w1)), 404, 'IDENTITY_NOT_FOUND');
      expect(expectOk(await anon.post('/auth/siwe-login', await signed(anon, w3))).identity.id).toBe(a.id);
      const fromW2 = await signed(anon, w2);
      expectOk(await b.client.post('/auth/attach-wallet', { ...(await walletProof(anon, w1)), previous_message: fromW2.message, previous_signature: fromW2.signature }));
    });

    it('redeeming with a wallet bound elsewhere is refused, and a partial proof is invalid', async () => {
      const wallet = newWallet();
      const m = await join(root.client, 'holder');
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const inv = expectOk(await root.client.post('/invite/create', { name: 'latecomer', type: 'agent' }), 201);
      expectError(await anon.post('/invite', { code: inv.code, name: 'latecomer', type: 'agent', ...(await walletProof(anon, wallet)) }), 409, 'IDENTITY_WALLET_DUPLICATE');
      expectError(await anon.post('/invite', { code: inv.code, name: 'latecomer', type: 'agent', wallet_address: wallet.address }), 400, 'INVITE_VALIDATION_FAILED', 'message');
      const bad = await anon.post('/invite', { code: inv.code, name: 'latecomer', type: 'agent', ...(await walletProof(anon, newWallet(), { domain: 'evil.example' })) });
      expectError(bad, 400, 'INVITE_VALIDATION_FAILED');
      expect(bad.body.error.details.reason).toBe('SIWE_DOMAIN_MISMATCH');
      // the invite is still usable
      expectOk(await anon.post('/invite', { code: inv.code, name: 'latecomer', type: 'agent' }), 201);
    });

    it('concurrent binds of one wallet: exactly one wins (attach and redeem alike)', async () => {
      const wallet = newWallet();
      const members = await Promise.all([0, 1, 2, 3, 4].map((i) => join(root.client, `racer-${i}`)));
      const proofs = await Promise.all(members.map(() => walletProof(anon, wallet)));
      const invites = await Promise.all([0, 1, 2].map(async (i) => expectOk(await root.client.post('/invite/create', { name: `redeemer-${i}`, type: 'agent' }), 201)));
      const redeemProofs = await Promise.all(invites.map(() => walletProof(anon, wallet)));
      const results = await Promise.all([
        ...members.map((m, i) => m.client.post('/auth/attach-wallet', proofs[i])),
        ...invites.map((inv, i) => anon.post('/invite', { code: inv.code, name: `redeemer-${i}`, type: 'agent', ...redeemProofs[i] })),
      ]);
      const won = results.filter((r) => r.status === 200 || r.status === 201);
      expect(won).toHaveLength(1);
      for (const r of results.filter((x) => !won.includes(x))) expectError(r, 409, 'IDENTITY_WALLET_DUPLICATE');
      const winner = won[0].body.data.identity?.id ?? won[0].body.data.id;
      expect(expectOk(await anon.post('/auth/siwe-login', await signed(anon, wallet))).identity.id).toBe(winner);
    });

    it('a nonce is consumed once even when two sign-ins race with it', async () => {
      const wallet = newWallet();
      const m = await join(root.client, 'double');
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, wallet)));
      const nonce = await nonceOf(anon);
      const message = siweText(url, wallet.address, { nonce });
      const body = { message, signature: await wallet.signMessage({ message }) };
      const rs = await Promise.all([anon.post('/auth/siwe-login', body), anon.post('/siwe/login', body), anon.post('/auth/siwe-login', body)]);
      expect(rs.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of rs.filter((x) => x.status !== 200)) expectError(r, 401, 'SIWE_NONCE_USED');
    });
  });
}
