/**
 * Wallet sign-in (SIWE) and wallet bindings: one identity per wallet, held by the store. A binding records
 * its standing (what a session key of it may carry) and the key that bound it; a session key carries that
 * standing and no more, and while the binding key is revoked or expired the wallet cannot sign in.
 */
import { AppError, isAppError } from '../errors.js';
import { iso, now } from '../clock.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Op } from '../store/port.js';
import { auditOps } from '../audit/audit.js';
import { isLive, issueKey } from '../auth/keys.js';
import type { Siwe, Verified } from '../auth/siwe.js';
import { assertWithin, restriction, standingOf, unrestricted, type Standing } from '../auth/standing.js';
import { bindingAudit } from './create.js';
import { keys, type ApiKey, type Identity, type Permissions, type Principal, type WalletBinding } from './model.js';
import type { Registry } from './registry.js';

export interface AttachWallet {
  wallet_address: string;
  message: string;
  signature: string;
  agent_8004_id?: string;
  /** replacing a bound wallet: a SIWE message signed by that wallet */
  previous_message?: string;
  previous_signature?: string;
}

export interface Rebind {
  permissions?: Partial<Permissions>;
  ring_scopes?: string[];
}

const INVALID = 'IDENTITY_VALIDATION_FAILED' as const;

/** The key a new binding hangs on: a session key's own binding key, since the session itself ends within the day. */
const lineageOf = (k: ApiKey): string | null => (k.wallet ? (k.parent ?? null) : k.id);

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

  /** A verified SIWE message signs in the identity bound to its address with a session key of the binding's standing. */
  async login(message: string, signature: string, requestId: string): Promise<{ identity: Identity; api_key: string; expires_at: string }> {
    return this.rt.retry(async () => {
      const v = await this.siwe.verify(message, signature);
      const bound = await this.store.get<WalletBinding>(keys.wallet(v.address));
      const identity = bound && (await this.store.get<Identity>(keys.identity(bound.value.id)));
      if (!bound || !identity) throw new AppError('IDENTITY_NOT_FOUND', `No identity has wallet ${v.address}`, { wallet_address: v.address });
      const b = bound.value;
      const binder = b.key ? await this.store.get<ApiKey>(keys.apiKey(b.key)) : undefined;
      if (!b.standing) throw ended(v.address, 'unrecorded', null);
      if (b.key && !isLive(binder?.value)) throw ended(v.address, binder && !binder.value.revoked ? 'key_expired' : 'key_revoked', b.key);
      const until = Math.min(now() + this.sessionTtlMs, binder?.value.expires_at ? Date.parse(binder.value.expires_at) : Infinity);
      const key = issueKey(identity.value.id, b.standing, { ...b.standing, expires_at: iso(until), wallet: v.address, ...(b.key ? { parent: b.key } : {}) });
      const ops: Op[] = [
        ...v.ops,
        // the identity must still exist (and keep this wallet, and its binding key) when the session key is written
        { op: 'check', key: keys.wallet(v.address), expect: bound.version },
        { op: 'check', key: keys.identity(identity.value.id), expect: identity.version },
        ...(binder ? [{ op: 'check' as const, key: keys.apiKey(b.key!), expect: binder.version }] : []),
        ...key.ops,
        ...auditOps({ actor: identity.value.id, action: 'auth.siwe_login', target: key.record.id, requestId, details: { wallet_address: v.address, binding_key: b.key ?? null } }),
      ];
      return { ops, result: { identity: identity.value, api_key: key.plain, expires_at: key.record.expires_at! } };
    });
  }

  /**
   * Binds (or replaces) the caller's wallet, proven by a signed SIWE message. Only an unscoped key may; a
   * replacement also needs a proof from the wallet it replaces, unless the caller is an admin.
   */
  async attach(p: Principal, body: AttachWallet): Promise<Identity> {
    const scope = restriction(standingOf(p.key));
    if (scope) throw new AppError('AUTH_SCOPE_DENIED', 'A scoped key may not attach or replace a wallet: its session keys would outgrow it', { scope });
    if (body.agent_8004_id !== undefined) await this.registry.assertOwner(body.agent_8004_id, body.wallet_address, INVALID);
    return this.rt.retry(async () => {
      const v = await this.siwe.proof(body.wallet_address, body.message, body.signature, INVALID);
      const [cur, bound] = await this.store.getMany<unknown>([keys.identity(p.identity.id), keys.wallet(v.address)]);
      if (!cur) throw new AppError('IDENTITY_NOT_FOUND');
      const old = cur.value as Identity;
      if (bound && (bound.value as WalletBinding).id !== old.id) throw new AppError('IDENTITY_WALLET_DUPLICATE', `Wallet ${v.address} belongs to another identity`);
      const replaces = old.wallet_address && old.wallet_address.toLowerCase() !== v.address.toLowerCase() ? old.wallet_address : null;
      const previous = replaces && !p.identity.is_admin ? await this.previousProof(replaces, body, v) : undefined;
      const t = iso();
      const binding: WalletBinding = { id: old.id, standing: standingOf(p.key), key: lineageOf(p.key), bound_by: p.identity.id, bound_at: t };
      const next: Identity = { ...old, wallet_address: v.address, agent_8004_id: body.agent_8004_id ?? old.agent_8004_id, updated_at: t };
      const ops: Op[] = [
        ...v.ops,
        ...(previous?.ops ?? []),
        { op: 'put', key: keys.identity(old.id), value: next, expect: cur.version },
        { op: 'put', key: keys.wallet(v.address), value: binding, expect: bound?.version ?? 0 },
      ];
      if (replaces) ops.push({ op: 'del', key: keys.wallet(replaces) });
      const proof = replaces ? (previous ? 'previous_wallet' : 'admin') : null;
      ops.push(...auditOps({ actor: old.id, action: 'identity.attach_wallet', target: old.id, requestId: p.requestId, details: { ...bindingAudit(v.address, binding), previous: old.wallet_address, replaced_by: proof } }));
      return { ops, result: next };
    });
  }

  /** The old wallet's consent to its replacement: a second SIWE message, with a nonce of its own. */
  private async previousProof(wallet: string, body: AttachWallet, fresh: Verified): Promise<Verified> {
    const missing = body.previous_message === undefined ? 'previous_message' : body.previous_signature === undefined ? 'previous_signature' : undefined;
    if (missing) throw new AppError(INVALID, `Replacing wallet ${wallet} needs a proof signed by it (previous_message, previous_signature), or an admin`, { field: missing, reason: 'previous_wallet_proof' });
    let v: Verified;
    try {
      v = await this.siwe.proof(wallet, body.previous_message!, body.previous_signature!, INVALID);
    } catch (e) {
      if (!isAppError(e) || e.code !== INVALID) throw e;
      throw new AppError(INVALID, e.message, { ...e.details, field: e.details?.field === 'message' ? 'previous_message' : 'previous_signature' });
    }
    if (v.message.nonce === fresh.message.nonce) throw new AppError(INVALID, 'The two proofs need a nonce each', { field: 'previous_message', reason: 'SIWE_NONCE_USED' });
    return v;
  }

  /**
   * An admin re-binds an identity's wallet: the binding's standing becomes the one asked for (by default the
   * admin key's, never more) and hangs on no key, so the wallet signs in again after its binding key ended.
   */
  async rebind(admin: Principal, id: string, body: Rebind): Promise<{ identity: Identity; binding: WalletBinding }> {
    const mine = standingOf(admin.key);
    const standing: Standing = body.permissions || body.ring_scopes ? { permissions: { ...unrestricted().permissions, ...body.permissions }, ring_scopes: body.ring_scopes ?? [] } : mine;
    assertWithin(mine, standing);
    return this.rt.retry(async () => {
      const cur = await this.store.get<Identity>(keys.identity(id));
      if (!cur) throw new AppError('IDENTITY_NOT_FOUND');
      const address = cur.value.wallet_address;
      if (!address) throw new AppError(INVALID, 'The identity has no wallet to re-bind', { field: 'wallet_address', reason: 'no_wallet' });
      const bound = await this.store.get<WalletBinding>(keys.wallet(address));
      const binding: WalletBinding = { id, standing, key: null, bound_by: admin.identity.id, bound_at: iso() };
      const ops: Op[] = [
        { op: 'check', key: keys.identity(id), expect: cur.version },
        { op: 'put', key: keys.wallet(address), value: binding, expect: bound?.version ?? 0 },
        ...auditOps({ actor: admin.identity.id, action: 'identity.rebind_wallet', target: id, requestId: admin.requestId, details: { ...bindingAudit(address, binding), previous_key: bound?.value.key ?? null } }),
      ];
      return { ops, result: { identity: cur.value, binding } };
    });
  }
}

const ended = (wallet: string, reason: 'unrecorded' | 'key_revoked' | 'key_expired', key: string | null) =>
  new AppError('AUTH_WALLET_BINDING_ENDED', reason === 'unrecorded' ? `Wallet ${wallet} was bound before bindings recorded their standing: an admin must re-bind it` : `The key that bound wallet ${wallet} is revoked or expired: an admin must re-bind it`, { wallet_address: wallet, reason, key });
