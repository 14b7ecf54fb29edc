/** Admin management of API keys: create with scopes, list (hashes stripped), revoke, rotate. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { emptyPermissions, issueKey } from '../auth/keys.js';
import type { Runtime } from '../runtime/runtime.js';
import { loadAll } from '../store/scan.js';
import { indexes, keys, publicKey, type ApiKey, type Permissions } from './model.js';

export interface KeyCreate {
  owner?: string;
  permissions?: Partial<Permissions>;
  ring_scopes?: string[];
  expires_at?: string;
  rate_limit?: number;
}

export class ApiKeys {
  constructor(private rt: Runtime) {}

  async create(adminId: string, body: KeyCreate) {
    const owner = body.owner ?? adminId;
    if (!(await this.rt.store.get(keys.identity(owner)))) throw new AppError('IDENTITY_NOT_FOUND');
    const key = issueKey(owner, {
      permissions: { ...emptyPermissions(), ...body.permissions },
      ring_scopes: body.ring_scopes ?? [],
      expires_at: body.expires_at ?? null,
      rate_limit: body.rate_limit ?? null,
    });
    const res = await this.rt.store.commit(key.ops);
    if (!res.ok) throw new AppError('INTERNAL_SERVER_ERROR', 'key id collision');
    return { api_key: key.plain, ...publicKey(key.record) };
  }

  async list() {
    return (await loadAll<ApiKey>(this.rt.store, indexes.apiKeys, keys.apiKey)).map(publicKey);
  }

  private async update(id: string, change: (k: ApiKey) => ApiKey) {
    return this.rt.retry(async () => {
      const cur = await this.rt.store.get<ApiKey>(keys.apiKey(id));
      if (!cur) throw new AppError('NOT_FOUND', `No API key ${id}`);
      const next = change(cur.value);
      return { result: next, ops: [{ op: 'put', key: keys.apiKey(id), value: next, expect: cur.version }] };
    });
  }

  async revoke(id: string) {
    return publicKey(await this.update(id, (k) => ({ ...k, revoked: true })));
  }

  /** Revokes the key and issues a new one with the same owner and permissions, in one commit. */
  async rotate(id: string) {
    return this.rt.retry(async () => {
      const cur = await this.rt.store.get<ApiKey>(keys.apiKey(id));
      if (!cur) throw new AppError('NOT_FOUND', `No API key ${id}`);
      const k = cur.value;
      if (k.revoked) throw new AppError('POLICY_DENIED', 'A revoked key cannot be rotated; create a new key instead');
      const fresh = issueKey(k.owner, { permissions: k.permissions, ring_scopes: k.ring_scopes, expires_at: k.expires_at, rate_limit: k.rate_limit });
      return {
        result: { api_key: fresh.plain, id: fresh.record.id },
        ops: [{ op: 'put' as const, key: keys.apiKey(id), value: { ...k, revoked: true, updated_at: iso() }, expect: cur.version }, ...fresh.ops],
      };
    });
  }
}
