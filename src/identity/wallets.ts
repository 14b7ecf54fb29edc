/** Wallet sign-in (SIWE) and attaching a wallet to an identity: one identity per wallet, held by the store. */
import { AppError } from '../errors.js';
import { iso, now } from '../clock.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { auditOps } from '../audit/audit.js';
import { issueKey } from '../auth/keys.js';
import type { Siwe } from '../auth/siwe.js';
import { keys, type Identity, type Principal } from './model.js';
import type { Registry } from './registry.js';

export interface AttachWallet {
  wallet_address: string;
  message: string;
  signature: string;
  agent_8004_id?: string;
}

export class Wallets {
  constructor(
    private rt: Runtime,
    private siwe: Siwe,
    private registry: Registry,
    private sessionTtlMs: number,
  ) {}

  private get store() {
    return this.rt.store;
  }

  /** A verified SIWE message signs in the identity bound to its address with a session key. */
  async login(message: string, signature: string, requestId: string): Promise<{ identity: Identity; api_key: string; expires_at: string }> {
    return this.rt.retry(async () => {
      const v = await this.siwe.verify(message, signature);
      const bound = await this.store.get<{ id: string }>(keys.wallet(v.address));
      const identity = bound && (await this.store.get<Identity>(keys.identity(bound.value.id)));
      if (!bound || !identity) throw new AppError('IDENTITY_NOT_FOUND', `No identity has wallet ${v.address}`, { wallet_address: v.address });
      const key = issueKey(identity.value.id, { expires_at: iso(now() + this.sessionTtlMs) });
      const ops: Op[] = [
        ...v.ops,
        // the identity must still exist (and keep this wallet) when the session key is written
        { op: 'check', key: keys.wallet(v.address), expect: bound.version },
        { op: 'check', key: keys.identity(identity.value.id), expect: identity.version },
        ...key.ops,
        ...auditOps({ actor: identity.value.id, action: 'auth.siwe_login', target: key.record.id, requestId, details: { wallet_address: v.address } }),
      ];
      return { ops, result: { identity: identity.value, api_key: key.plain, expires_at: key.record.expires_at! } };
    });
  }

  /** Binds (or replaces) the caller's wallet, proven by a signed SIWE message. */
  async attach(p: Principal, body: AttachWallet): Promise<Identity> {
    if (body.agent_8004_id !== undefined) await this.registry.assertOwner(body.agent_8004_id, body.wallet_address, 'IDENTITY_VALIDATION_FAILED');
    return this.rt.retry(async () => {
      const v = await this.siwe.proof(body.wallet_address, body.message, body.signature, 'IDENTITY_VALIDATION_FAILED');
      const [cur, bound] = await this.store.getMany<unknown>([keys.identity(p.identity.id), keys.wallet(v.address)]);
      if (!cur) throw new AppError('IDENTITY_NOT_FOUND');
      const old = cur.value as Identity;
      if (bound && (bound.value as { id: string }).id !== old.id) throw new AppError('IDENTITY_WALLET_DUPLICATE', `Wallet ${v.address} belongs to another identity`);
      const next: Identity = { ...old, wallet_address: v.address, agent_8004_id: body.agent_8004_id ?? old.agent_8004_id, updated_at: iso() };
      const ops: Op[] = [...v.ops, { op: 'put', key: keys.identity(old.id), value: next, expect: cur.version }];
      if (!bound) ops.push({ op: 'put', key: keys.wallet(v.address), value: { id: old.id }, expect: 0 });
      if (old.wallet_address && old.wallet_address.toLowerCase() !== v.address.toLowerCase()) ops.push({ op: 'del', key: keys.wallet(old.wallet_address) });
      ops.push(...auditOps({ actor: old.id, action: 'identity.attach_wallet', target: old.id, requestId: p.requestId, details: { wallet_address: v.address, previous: old.wallet_address } }));
      return { ops, result: next };
    });
  }
}
