/**
 * The authorization matrix's keys-minted column: every route of the LIVE table that answers a key (`mints`)
 * and every /rpc and MCP method that does (none today), held to the cases below exactly, so a new one fails
 * until it has a case. The property (fast-check): for a caller key of any generated standing and any asked
 * standing, a key minted through the route (and, for SIWE, through every way a wallet gets its binding:
 * invite, join approval, admin re-bind, attach) has permissions and ring_scopes inside the caller's; a
 * refusal is AUTH_SCOPE_DENIED, and only when the ask reaches beyond the caller.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../../src/http/server.js';
import { exceeds, restriction, type Standing } from '../../src/auth/standing.js';
import { methodTable } from '../../src/surface/methods.js';
import { bootstrap, Client, join, type Member, type Res } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { newWallet, signed, walletProof } from '../helpers/wallet.js';
import { expectOk } from './support.js';

const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const label = (r: Route) => `${METHOD[r.method]} ${r.path}`;

const U = { signal_types: ['pulse', 'task', 'alert'], rings: ['alpha', 'Beta'], task_types: ['build', 'deploy'], memory_scopes: ['org', 'agent:*', 'role:ops'], ring_scopes: ['alpha', 'beta'] };
type Lists = Record<keyof typeof U, string[]>;
const toStanding = (l: Lists): Standing => ({ permissions: { signal_types: l.signal_types, rings: l.rings, task_types: l.task_types, memory_scopes: l.memory_scopes }, ring_scopes: l.ring_scopes });
const dims = Object.keys(U) as (keyof typeof U)[];
const anyStanding = fc.record(Object.fromEntries(dims.map((d) => [d, fc.subarray(U[d])])) as { [K in keyof typeof U]: fc.Arbitrary<string[]> }).map(toStanding);
/** an ask inside the caller's standing: a non-empty part of each restricted list */
const within = (c: Standing) => {
  const mine: Lists = { ...c.permissions, ring_scopes: c.ring_scopes };
  return fc.record(Object.fromEntries(dims.map((d) => [d, mine[d].length ? fc.subarray(mine[d], { minLength: 1 }) : fc.subarray(U[d])])) as { [K in keyof typeof U]: fc.Arbitrary<string[]> }).map(toStanding);
};
const callerAndAsk = anyStanding.chain((caller) => fc.tuple(fc.constant(caller), fc.oneof(anyStanding, within(caller))));
const BINDINGS = ['invite', 'approve', 'rebind', 'attach'] as const;
type Binding = (typeof BINDINGS)[number];

interface Ctx {
  anon: Client;
  root: Member;
  /** the caller: the minter admin's key of the generated standing */
  caller: Client;
  asked: Standing;
  target: Member;
  /** target's wallet, for re-binds */
  rebindable: { id: string; wallet: ReturnType<typeof newWallet> };
  n: number;
  binding: Binding;
}
/** A minted key, or the refusal that stands for it. */
type Minted = { key: string } | { refused: Res };
const minted = (res: Res, status = 200): Minted => (res.status === status ? { key: res.body.data.api_key } : { refused: res });
const ask = (s: Standing) => ({ permissions: s.permissions, ring_scopes: s.ring_scopes });

/** How a wallet gets the binding a SIWE key is minted from, granted by the caller; answers the wallet or a refusal. */
async function bindWallet(c: Ctx): Promise<{ wallet: ReturnType<typeof newWallet> } | { refused: Res }> {
  const wallet = newWallet();
  if (c.binding === 'invite') {
    const inv = expectOk(await c.caller.post('/invite/create', { name: `minted-${c.n}`, type: 'agent' }), 201);
    expectOk(await c.anon.post('/invite', { code: inv.code, name: `minted-${c.n}`, type: 'agent', ...(await walletProof(c.anon, wallet)) }), 201);
    return { wallet };
  }
  if (c.binding === 'approve') {
    const req = expectOk(await c.anon.post('/auth-request', { name: `requester-${c.n}`, type: 'agent', ...(await walletProof(c.anon, wallet)) }), 201);
    expectOk(await c.caller.post(`/auth-request/${req.id}/approve`));
    return { wallet };
  }
  if (c.binding === 'rebind') {
    const res = await c.caller.post(`/admin/identity/${c.rebindable.id}/rebind-wallet`, ask(c.asked));
    return res.status === 200 ? { wallet: c.rebindable.wallet } : { refused: res };
  }
  const res = await c.caller.post('/auth/attach-wallet', await walletProof(c.anon, wallet));
  return res.status === 200 ? { wallet } : { refused: res };
}

const siwe = (path: string) => async (c: Ctx): Promise<Minted> => {
  const bound = await bindWallet(c);
  if ('refused' in bound) return bound;
  return minted(await c.anon.post(path, await signed(c.anon, bound.wallet)));
};

/** Every key-answering route, with how to mint through it as the caller. */
const KEYS_MINTED: Record<string, (c: Ctx) => Promise<Minted>> = {
  'POST /admin/api-keys': async (c) => minted(await c.caller.post('/admin/api-keys', { owner: c.target.id, ...ask(c.asked) }), 201),
  'POST /admin/api-keys/:id/rotate': async (c) => {
    const made = expectOk(await c.root.client.post('/admin/api-keys', { owner: c.target.id, ...ask(c.asked) }), 201);
    return minted(await c.caller.post(`/admin/api-keys/${made.id}/rotate`));
  },
  'POST /invite': async (c) => {
    const inv = expectOk(await c.caller.post('/invite/create', { name: `redeemer-${c.n}`, type: 'agent', is_admin: true }), 201);
    return minted(await c.anon.post('/invite', { code: inv.code, name: `redeemer-${c.n}`, type: 'agent' }), 201);
  },
  'POST /auth/siwe-login': siwe('/auth/siwe-login'),
  'POST /siwe/login': siwe('/siwe/login'),
};
/** /rpc and MCP methods that answer a key: none */
const METHODS_MINTING: string[] = [];

/** Whether the case may be refused at all: only an ask beyond the caller (or any scoped caller, for attach). */
function mayRefuse(route: string, c: Ctx, caller: Standing): boolean {
  if (route.startsWith('POST /admin/api-keys')) return exceeds(caller, c.asked) !== undefined;
  if (route === 'POST /invite') return false;
  if (c.binding === 'rebind') return exceeds(caller, c.asked) !== undefined;
  return c.binding === 'attach' && restriction(caller) !== undefined;
}

for (const backend of BACKENDS) {
  describe(`keys minted (authorization matrix) on ${backend}`, () => {
    const servers = serversOn(backend);
    let table: readonly Route[];
    let anon: Client;
    let root: Member;
    let minter: Member;
    let target: Member;
    const rebindable = { id: '', wallet: newWallet() };

    beforeAll(async () => {
      const svc = await servers.start({ AUTH_REQUEST_ENABLED: 'true' });
      table = svc.routes;
      anon = new Client(svc.url);
      root = await bootstrap(svc.url);
      minter = await join(root.client, 'minter');
      expectOk(await root.client.put(`/identities/${minter.id}`, { is_admin: true }));
      target = await join(root.client, 'target');
      const inv = expectOk(await root.client.post('/invite/create', { name: 'rebindable', type: 'agent' }), 201);
      rebindable.id = expectOk(await anon.post('/invite', { code: inv.code, name: 'rebindable', type: 'agent', ...(await walletProof(anon, rebindable.wallet)) }), 201).identity.id;
    });

    it('every route of the live table and every method that answers a key has a case, and no other', () => {
      expect(Object.keys(KEYS_MINTED).sort()).toEqual(table.filter((r) => r.mints).map(label).sort());
      const methods = methodTable({} as Parameters<typeof methodTable>[0]);
      expect(Object.entries(methods).filter(([, m]) => m.mints).map(([name]) => name)).toEqual(METHODS_MINTING);
    });

    it('property: a minted key is never wider than the credential that minted it', async () => {
      let n = 0;
      const seen = { minted: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(callerAndAsk, fc.constantFrom(...BINDINGS), async ([caller, asked], binding) => {
          const callerKey = expectOk(await root.client.post('/admin/api-keys', { owner: minter.id, ...ask(caller) }), 201).api_key;
          for (const [route, mint] of Object.entries(KEYS_MINTED)) {
            const c: Ctx = { anon, root, caller: anon.as(callerKey), asked, target, rebindable, n: n++, binding };
            const out = await mint(c);
            if ('refused' in out) {
              expect(out.refused.body?.error?.code, `${route} (${binding}): ${JSON.stringify(out.refused.body)}`).toBe('AUTH_SCOPE_DENIED');
              expect(mayRefuse(route, c, caller), `${route} (${binding}) refused an ask inside the caller`).toBe(true);
              seen.refused++;
              continue;
            }
            const who = await anon.as(out.key).post('/rpc', { jsonrpc: '2.0', id: 1, method: 'identity.whoami', params: {} });
            expect(who.status).toBe(200);
            const key = who.body.result.key as Standing;
            expect(exceeds(caller, { permissions: key.permissions, ring_scopes: key.ring_scopes }), `${route} (${binding}) minted ${JSON.stringify(key)} for ${JSON.stringify(caller)}`).toBeUndefined();
            seen.minted++;
          }
        }),
        { numRuns: 12 },
      );
      // the property was tried both ways
      expect(seen.minted).toBeGreaterThan(0);
      expect(seen.refused).toBeGreaterThan(0);
    }, 180_000);
  });
}
