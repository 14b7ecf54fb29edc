/**
 * Identity across two service processes on one Redis: a rate limit is one budget over both instances (with
 * its headers), a revoked, rotated or deleted identity's key stops working on the other instance at once,
 * a suspension on one instance refuses a key the other has already seen, and a SIWE nonce fetched from one instance signs in on the other exactly once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { limited } from '../helpers/limits.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { newWallet, siweText, walletProof, nonceOf } from '../helpers/wallet.js';
import { expectError, expectOk } from '../api/support.js';

const DOMAIN = 'hub.example';

describe('identity on two instances sharing one Redis', () => {
  const servers = serversOn('redis');
  let a: ChildServer | undefined;
  let b: ChildServer | undefined;
  let root: Member;
  let rootOnB: Client;

  beforeAll(async () => {
    // one public URL in front of both instances: SIWE messages name its authority
    const env = await servers.env({ RATE_LIMIT_DEFAULT: '1000', BASE_URL: `https://${DOMAIN}` });
    [a, b] = await Promise.all([spawnServer(env), spawnServer(env)]);
    root = await bootstrap(a!.url);
    rootOnB = new Client(b!.url, root.key);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('a key’s rate limit is one budget across both instances, with headers on each', async () => {
    const m = await join(root.client, 'busy');
    const key = expectOk(await root.client.post('/admin/api-keys', { owner: m.id, rate_limit: 6 }), 201).api_key;
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await limited(i % 2 ? b!.url : a!.url, key);
      expect(r.status).toBe(200);
      expect(r.limit).toBe('6');
      seen.push(r.remaining!);
    }
    expect(seen).toEqual(['5', '4', '3', '2', '1', '0']);
    for (const url of [a!.url, b!.url]) {
      const over = await limited(url, key);
      expectError({ status: over.status, body: over.body }, 429, 'RATE_LIMIT_EXCEEDED');
      expect(over).toMatchObject({ limit: '6', remaining: '0' });
      expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(over.retryAfter)).toBeLessThanOrEqual(60);
    }
  });

  it('revocation, rotation and deletion on one instance take effect on the other at once', async () => {
    const m = await join(root.client, 'revoked-elsewhere');
    const k1 = expectOk(await root.client.post('/admin/api-keys', { owner: m.id }), 201);
    const onB = new Client(b!.url, k1.api_key);
    expectOk(await onB.get('/roles'));
    expectOk(await root.client.post(`/admin/api-keys/${k1.id}/revoke`));
    expectError(await onB.get('/roles'), 401, 'AUTH_KEY_REVOKED');

    const k2 = expectOk(await rootOnB.post('/admin/api-keys', { owner: m.id }), 201);
    const rotated = expectOk(await rootOnB.post(`/admin/api-keys/${k2.id}/rotate`));
    expectError(await new Client(a!.url, k2.api_key).get('/roles'), 401, 'AUTH_KEY_REVOKED');
    expectOk(await new Client(a!.url, rotated.api_key).get('/roles'));

    expectOk(await rootOnB.del(`/admin/identity/${m.id}`));
    expectError(await new Client(a!.url, rotated.api_key).get('/roles'), 401, 'AUTH_KEY_REVOKED');
    expectError(await new Client(a!.url, m.key).get('/roles'), 401, 'AUTH_KEY_REVOKED');
    expect(expectOk(await root.client.get(`/admin/audit?target=${m.id}`)).entries.map((e: any) => e.action)).toEqual(['identity.delete']);
  });

  it('a key already used on one instance is refused there at once after a suspension on the other, and works again once reactivated', async () => {
    const m = await join(root.client, 'suspended-elsewhere');
    const onB = new Client(b!.url, m.key);
    expectOk(await onB.get('/roles'));
    expectOk(await onB.get('/roles'));
    const membership = expectOk(await root.client.get('/org/company/memberships?limit=100')).memberships.find((x: any) => x.identity_id === m.id);
    expectOk(await root.client.patch(`/org/company/memberships/${membership.id}/status`, { status: 'suspended' }));
    expectError(await onB.get('/roles'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
    expectOk(await rootOnB.patch(`/org/company/memberships/${membership.id}/status`, { status: 'active' }));
    expectOk(await new Client(a!.url, m.key).get('/roles'));
    expectOk(await onB.get('/roles'));
  });

  it('a nonce from one instance signs in on the other, once', async () => {
    const wallet = newWallet();
    const m = await join(root.client, 'wanderer');
    const anonA = new Client(a!.url);
    const anonB = new Client(b!.url);
    expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anonA, wallet, { domain: DOMAIN })));
    const message = siweText(a!.url, wallet.address, { nonce: await nonceOf(anonA), domain: DOMAIN });
    const body = { message, signature: await wallet.signMessage({ message }) };
    expect(expectOk(await anonB.post('/auth/siwe-login', body)).identity.id).toBe(m.id);
    expectError(await anonA.post('/siwe/login', body), 401, 'SIWE_NONCE_USED');
    const local = siweText(a!.url, wallet.address, { nonce: await nonceOf(anonA) });
    expectError(await anonA.post('/auth/siwe-login', { message: local, signature: await wallet.signMessage({ message: local }) }), 401, 'SIWE_DOMAIN_MISMATCH');
  });
});
