/** API keys: random secrets shown once, stored only as SHA-256 hashes; the id is derived from the hash. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { secretToken, sha256 } from '../ids.js';
import type { Op, Store } from '../store/port.js';
import { membershipOf } from '../org/memberships.js';
import { indexes, keys, type ApiKey, type Identity, type Permissions, type Principal } from '../identity/model.js';

const KEY_PREFIX = 'svc_';
const idFor = (hash: string) => 'key_' + hash.slice(0, 24);

export const emptyPermissions = (): Permissions => ({ signal_types: [], rings: [], task_types: [], memory_scopes: [] });

export function issueKey(owner: string, opts: Partial<Pick<ApiKey, 'permissions' | 'ring_scopes' | 'expires_at' | 'rate_limit'>> = {}) {
  const plain = secretToken(KEY_PREFIX);
  const hash = sha256(plain);
  const record: ApiKey = {
    id: idFor(hash),
    owner,
    permissions: opts.permissions ?? emptyPermissions(),
    ring_scopes: opts.ring_scopes ?? [],
    created_at: iso(),
    expires_at: opts.expires_at ?? null,
    revoked: false,
    rate_limit: opts.rate_limit ?? null,
    hash,
  };
  const ops: Op[] = [
    { op: 'put', key: keys.apiKey(record.id), value: record, expect: 0 },
    { op: 'index', index: indexes.apiKeys, member: record.id },
    { op: 'index', index: indexes.apiKeysOf(owner), member: record.id },
  ];
  return { plain, record, ops };
}

/** The key of an `Authorization: Bearer <key>` header, or undefined. */
export const bearerToken = (header: string | undefined): string | undefined => (header ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined);

export async function authenticate(store: Store, header: string | undefined, admin: boolean): Promise<Principal> {
  const key = bearerToken(header);
  if (!key) throw new AppError('AUTH_KEY_MISSING');
  return principalForKey(store, key, admin);
}

export async function principalForKey(store: Store, plain: string, admin: boolean): Promise<Principal> {
  const hash = sha256(plain);
  const rec = await store.get<ApiKey>(keys.apiKey(idFor(hash)));
  const key = rec?.value;
  if (!key || key.hash !== hash) throw new AppError('AUTH_KEY_INVALID');
  if (key.revoked) throw new AppError('AUTH_KEY_REVOKED');
  if (key.expires_at && Date.parse(key.expires_at) <= Date.now()) throw new AppError('AUTH_KEY_EXPIRED');
  const [identity, membership] = await store.getMany<unknown>([keys.identity(key.owner), keys.membership(key.owner)]);
  if (!identity) throw new AppError('AUTH_KEY_INVALID', 'The identity of this key no longer exists');
  const principal: Principal = { identity: identity.value as Identity, key, membership: membershipOf(membership?.value) };
  // every authenticated route, socket op and stream needs an active membership
  if (principal.membership?.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
  if (admin && !principal.identity.is_admin) throw new AppError('AUTH_ADMIN_REQUIRED');
  return principal;
}
