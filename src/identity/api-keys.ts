/** Admin management of API keys: create with scopes, list (hashes stripped), revoke, rotate. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { emptyPermissions, issueKey } from '../auth/keys.js';
import { standingOf } from '../auth/standing.js';
import type { Runtime } from '../runtime/runtime.js';
import { committedEffect, effectOps, refuseLostClaim } from '../store/idempotency.js';
import { loadAll } from '../store/scan.js';
import type { Op, Store } from '../store/port.js';
import { auditOps } from '../audit/audit.js';
import { indexes, keys, publicKey, type ApiKey, type Identity, type McpProfile, type Permissions, type Principal, type WalletBinding } from './model.js';

export interface KeyCreate {
  owner?: string;
  permissions?: Partial<Permissions>;
  ring_scopes?: string[];
  expires_at?: string;
  rate_limit?: number;
  mcp_profile?: McpProfile;
}

/** A rotation's changes: the successor keeps the old key's default MCP profile unless one is named (null: none). */
export interface KeyRotate {
  mcp_profile?: McpProfile | null;
}

/** When each key was last used (src/presence). */
export interface LastUsed {
  lastUsed(keyIds: string[]): Promise<(number | undefined)[]>;
}

export class ApiKeys {
  constructor(
    private rt: Runtime,
    private usage: LastUsed,
  ) {}

  async create(admin: Principal, body: KeyCreate) {
    const done = committedEffect<ReturnType<typeof publicKey> & { api_key: string }>(admin);
    if (done) return done;
    const owner = body.owner ?? admin.identity.id;
    if (!(await this.rt.store.get(keys.identity(owner)))) throw new AppError('IDENTITY_NOT_FOUND');
    const key = issueKey(owner, standingOf(admin.key), {
      permissions: { ...emptyPermissions(), ...body.permissions },
      ring_scopes: body.ring_scopes ?? [],
      expires_at: body.expires_at ?? null,
      rate_limit: body.rate_limit ?? null,
      mcp_profile: body.mcp_profile,
    });
    const audit = auditOps({ actor: admin.identity.id, action: 'api_key.create', target: key.record.id, requestId: admin.requestId, details: { owner } });
    const answer = { api_key: key.plain, ...publicKey(key.record) };
    const res = await this.rt.store.commit([...key.ops, ...audit, ...effectOps(admin, answer)]);
    refuseLostClaim(res);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'key id collision');
    return answer;
  }

  /** Every key, hash stripped, with `last_used_at` (null until its first use is written). */
  async list() {
    const all = await loadAll<ApiKey>(this.rt.store, indexes.apiKeys, keys.apiKey);
    const used = await this.usage.lastUsed(all.map((k) => k.id));
    return all.map((k, i) => ({ ...publicKey(k), last_used_at: used[i] === undefined ? null : new Date(used[i]!).toISOString() }));
  }

  async revoke(admin: Principal, id: string) {
    const next = await this.rt.retry(async () => {
      const cur = await this.rt.store.get<ApiKey>(keys.apiKey(id));
      if (!cur) throw new AppError('NOT_FOUND', `No API key ${id}`);
      const next = { ...cur.value, revoked: true };
      const ops: Op[] = [{ op: 'put', key: keys.apiKey(id), value: next, expect: cur.version }, ...auditOps({ actor: admin.identity.id, action: 'api_key.revoke', target: id, requestId: admin.requestId, details: { owner: next.owner } })];
      return { result: next, ops };
    });
    return publicKey(next);
  }

  /**
   * Revokes the key and issues a new one with the same owner and permissions, in one commit; a wallet the
   * old key bound stays bound, by the new one.
   */
  async rotate(admin: Principal, id: string, body: KeyRotate = {}) {
    const done = committedEffect<{ api_key: string; id: string }>(admin);
    if (done) return done;
    return this.rt.retry(async () => {
      const cur = await this.rt.store.get<ApiKey>(keys.apiKey(id));
      if (!cur) throw new AppError('NOT_FOUND', `No API key ${id}`);
      const k = cur.value;
      if (k.revoked) throw new AppError('POLICY_DENIED', 'A revoked key cannot be rotated; create a new key instead');
      const fresh = issueKey(k.owner, standingOf(admin.key), { permissions: k.permissions, ring_scopes: k.ring_scopes, expires_at: k.expires_at, rate_limit: k.rate_limit, wallet: k.wallet, parent: k.parent, mcp_profile: body.mcp_profile === undefined ? k.mcp_profile : (body.mcp_profile ?? undefined) });
      const moved = await rebindOps(this.rt.store, k, fresh.record.id);
      const result = { api_key: fresh.plain, id: fresh.record.id };
      return {
        result,
        ops: [
          { op: 'put' as const, key: keys.apiKey(id), value: { ...k, revoked: true, updated_at: iso() }, expect: cur.version },
          ...fresh.ops,
          ...moved,
          ...auditOps({ actor: admin.identity.id, action: 'api_key.rotate', target: id, requestId: admin.requestId, details: { owner: k.owner, new_key: fresh.record.id, ...(moved.length ? { wallet_binding_moved: true } : {}) } }),
          ...effectOps(admin, result),
        ],
      };
    });
  }
}

/** The owner's wallet binding moved from a rotated key to its successor (checked against a concurrent re-bind). */
async function rebindOps(store: Store, old: ApiKey, successor: string): Promise<Op[]> {
  const owner = await store.get<Identity>(keys.identity(old.owner));
  const address = owner?.value.wallet_address;
  const bound = address ? await store.get<WalletBinding>(keys.wallet(address)) : undefined;
  if (!bound || bound.value.key !== old.id) return [];
  return [{ op: 'put', key: keys.wallet(address!), value: { ...bound.value, key: successor }, expect: bound.version }];
}
