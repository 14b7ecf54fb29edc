/** API keys: random secrets shown once, stored only as SHA-256 hashes; the id is derived from the hash. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { secretToken, sha256 } from '../ids.js';
import type { Op, Store } from '../store/port.js';
import { membershipOf } from '../org/memberships.js';
import { Lru } from '../lru.js';
import { authGeneration } from './generation.js';
import { assertWithin, type Standing } from './standing.js';
import { indexes, keys, type ApiKey, type Identity, type Permissions, type Principal } from '../identity/model.js';

const KEY_PREFIX = 'svc_';
const idFor = (hash: string) => 'key_' + hash.slice(0, 24);

export const emptyPermissions = (): Permissions => ({ signal_types: [], rings: [], task_types: [], memory_scopes: [] });

/**
 * Mints a key. Every path that answers or stores a new key comes here with the standing of whoever grants
 * it (the caller's key, an invite's creator, a wallet binding): a key reaching beyond it is refused
 * (AUTH_SCOPE_DENIED), so no credential obtains a credential with more rights than itself.
 */
export function issueKey(owner: string, grantor: Standing, opts: Partial<Pick<ApiKey, 'permissions' | 'ring_scopes' | 'expires_at' | 'rate_limit' | 'wallet' | 'parent' | 'mcp_profile'>> = {}) {
  const permissions = opts.permissions ?? emptyPermissions();
  const ring_scopes = opts.ring_scopes ?? [];
  assertWithin(grantor, { permissions, ring_scopes });
  const plain = secretToken(KEY_PREFIX);
  const hash = sha256(plain);
  const record: ApiKey = {
    id: idFor(hash),
    owner,
    permissions,
    ring_scopes,
    created_at: iso(),
    expires_at: opts.expires_at ?? null,
    revoked: false,
    rate_limit: opts.rate_limit ?? null,
    hash,
    ...(opts.wallet ? { wallet: opts.wallet } : {}),
    ...(opts.parent ? { parent: opts.parent } : {}),
    ...(opts.mcp_profile ? { mcp_profile: opts.mcp_profile } : {}),
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

interface Loaded {
  gen: number;
  key: ApiKey | undefined;
  identity: Identity | undefined;
  membership: unknown;
  /** a session key's parent (the key that bound its wallet) */
  parent?: ApiKey;
}

/** What each store's keys resolved to, by key hash, valid while the auth generation is unchanged */
const loadedByStore = new WeakMap<Store, Lru<string, Loaded>>();
const CACHED_KEYS = 10_000;

async function load(store: Store, hash: string): Promise<Loaded> {
  let cache = loadedByStore.get(store);
  if (!cache) loadedByStore.set(store, (cache = new Lru(CACHED_KEYS)));
  // the generation is read before the records: a change committed in between moves it past what is cached
  const gen = await authGeneration(store);
  const hit = cache.get(hash);
  if (hit && hit.gen === gen) return hit;
  const key = (await store.get<ApiKey>(keys.apiKey(idFor(hash))))?.value;
  const mine = key && key.hash === hash;
  const [identity, membership, parent] = mine ? await store.getMany<unknown>([keys.identity(key.owner), keys.membership(key.owner), ...(key.parent ? [keys.apiKey(key.parent)] : [])]) : [];
  const loaded: Loaded = { gen, key, identity: identity?.value as Identity | undefined, membership: membership?.value, parent: parent?.value as ApiKey | undefined };
  cache.set(hash, loaded);
  return loaded;
}

/** Neither revoked nor expired (nor gone). */
export const isLive = (k: ApiKey | undefined): boolean => !!k && !k.revoked && !(k.expires_at && Date.parse(k.expires_at) <= Date.now());

export async function principalForKey(store: Store, plain: string, admin: boolean): Promise<Principal> {
  const hash = sha256(plain);
  const { key, identity, membership, parent } = await load(store, hash);
  if (!key || key.hash !== hash) throw new AppError('AUTH_KEY_INVALID');
  if (key.revoked) throw new AppError('AUTH_KEY_REVOKED');
  if (key.expires_at && Date.parse(key.expires_at) <= Date.now()) throw new AppError('AUTH_KEY_EXPIRED');
  // a session key lives no longer than the key that bound its wallet
  if (key.parent && !isLive(parent)) throw new AppError('AUTH_KEY_REVOKED', 'The key that bound this session’s wallet is revoked or expired', { reason: 'parent_revoked', parent: key.parent });
  if (!identity) throw new AppError('AUTH_KEY_INVALID', 'The identity of this key no longer exists');
  const principal: Principal = { identity, key, membership: membershipOf(membership) };
  // every authenticated route, socket op and stream needs an active membership
  if (principal.membership?.status !== 'active') throw new AppError('POLICY_MEMBERSHIP_REQUIRED');
  if (admin && !principal.identity.is_admin) throw new AppError('AUTH_ADMIN_REQUIRED');
  return principal;
}
