/**
 * ERC-8004 agent ids checked against a registry contract on a local chain (ganache, started here): the
 * owner is accepted, another wallet and an unknown id are refused, a chain that is down is
 * REGISTRY_UNAVAILABLE, an address with no registry REGISTRY_RESOLUTION_FAILED.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChain, type Chain } from '../helpers/chain.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { freePort } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { newWallet, walletProof } from '../helpers/wallet.js';
import { expectError, expectOk } from './support.js';

let chain: Chain;
beforeAll(async () => {
  chain = await startChain();
}, 60_000);
afterAll(async () => {
  await chain?.stop();
});

for (const backend of BACKENDS) {
  describe(`agent registry on ${backend}`, () => {
    const servers = serversOn(backend);
    let anon: Client;
    let root: Member;
    const owner = newWallet();
    const stranger = newWallet();

    beforeAll(async () => {
      await chain.mint(81n, owner.address);
      await chain.mint(82n, owner.address);
      await chain.mint(83n, stranger.address);
      const url = (await servers.start({ REGISTRY_RPC_URL: chain.url, REGISTRY_ADDRESS: chain.registry, AUTH_REQUEST_ENABLED: 'true' })).url;
      anon = new Client(url);
      root = await bootstrap(url);
    });

    it('attach-wallet: the owner is accepted; another wallet and an unknown id are refused', async () => {
      const m = await join(root.client, 'agent-81');
      expectError(await m.client.post('/auth/attach-wallet', { ...(await walletProof(anon, stranger)), agent_8004_id: '81' }), 403, 'REGISTRY_OWNER_MISMATCH');
      expectError(await m.client.post('/auth/attach-wallet', { ...(await walletProof(anon, owner)), agent_8004_id: '9999' }), 404, 'REGISTRY_AGENT_NOT_FOUND');
      expect(expectOk(await root.client.get(`/identities/${m.id}`))).toMatchObject({ wallet_address: null, agent_8004_id: null });
      const ok = expectOk(await m.client.post('/auth/attach-wallet', { ...(await walletProof(anon, owner)), agent_8004_id: '81' }));
      expect(ok).toMatchObject({ wallet_address: owner.address, agent_8004_id: '81' });
    });

    it('PUT /identities/:id checks the claim against the identity’s wallet', async () => {
      const m = await join(root.client, 'agent-83');
      expectError(await root.client.put(`/identities/${m.id}`, { agent_8004_id: '83' }), 400, 'IDENTITY_VALIDATION_FAILED', 'agent_8004_id');
      expectOk(await m.client.post('/auth/attach-wallet', await walletProof(anon, stranger)));
      expectError(await root.client.put(`/identities/${m.id}`, { agent_8004_id: '82' }), 403, 'REGISTRY_OWNER_MISMATCH');
      expect(expectOk(await root.client.put(`/identities/${m.id}`, { agent_8004_id: '83' })).agent_8004_id).toBe('83');
      expectError(await root.client.put(`/identities/${m.id}`, { agent_8004_id: 'eighty' }), 400, 'IDENTITY_VALIDATION_FAILED', 'agent_8004_id');
    });

    it('invite redemption and join requests check the claim too', async () => {
      const w = newWallet();
      await chain.mint(84n, w.address);
      const inv = expectOk(await root.client.post('/invite/create', { name: 'redeemer-84', type: 'agent' }), 201);
      expectError(await anon.post('/invite', { code: inv.code, name: 'redeemer-84', type: 'agent', agent_8004_id: '84' }), 400, 'INVITE_VALIDATION_FAILED', 'agent_8004_id');
      expectError(await anon.post('/invite', { code: inv.code, name: 'redeemer-84', type: 'agent', agent_8004_id: '83', ...(await walletProof(anon, w)) }), 403, 'REGISTRY_OWNER_MISMATCH');
      const red = expectOk(await anon.post('/invite', { code: inv.code, name: 'redeemer-84', type: 'agent', agent_8004_id: '84', ...(await walletProof(anon, w)) }), 201);
      expect(red.identity).toMatchObject({ agent_8004_id: '84', wallet_address: w.address });

      const v = newWallet();
      expectError(await anon.post('/auth-request', { name: 'req-84', type: 'agent', agent_8004_id: '84', ...(await walletProof(anon, v)) }), 403, 'REGISTRY_OWNER_MISMATCH');
      await chain.mint(85n, v.address);
      expect(expectOk(await anon.post('/auth-request', { name: 'req-85', type: 'agent', agent_8004_id: '85', ...(await walletProof(anon, v)) }), 201).agent_8004_id).toBe('85');
    });

    it('a chain that is down is REGISTRY_UNAVAILABLE; an address with no registry REGISTRY_RESOLUTION_FAILED', async () => {
      const down = await servers.start({ REGISTRY_RPC_URL: `http://127.0.0.1:${await freePort()}`, REGISTRY_ADDRESS: chain.registry });
      const admin = await bootstrap(down.url);
      expectError(await admin.client.post('/auth/attach-wallet', { ...(await walletProof(new Client(down.url), owner)), agent_8004_id: '81' }), 503, 'REGISTRY_UNAVAILABLE');
      const wrong = await servers.start({ REGISTRY_RPC_URL: chain.url, REGISTRY_ADDRESS: '0x000000000000000000000000000000000000dEaD' });
      const admin2 = await bootstrap(wrong.url);
      expectError(await admin2.client.post('/auth/attach-wallet', { ...(await walletProof(new Client(wrong.url), owner)), agent_8004_id: '81' }), 502, 'REGISTRY_RESOLUTION_FAILED');
    });

    it('without a registry configured, a well-formed claim is recorded unchecked', async () => {
      const plain = await servers.start();
      const admin = await bootstrap(plain.url);
      expect(expectOk(await admin.client.put(`/identities/${admin.id}`, { agent_8004_id: '123456' })).agent_8004_id).toBe('123456');
    });
  });
}
