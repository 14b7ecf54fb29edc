/** What every path that makes an identity shares (invite redemption, join approval), and the admin set. */
import { AppError } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import type { Op, Store } from '../store/port.js';
import { issueKey } from '../auth/keys.js';
import { ORG_LOG, type OrgLogEntry } from '../org/log.js';
import { membershipCreateOps } from '../org/memberships.js';
import type { Standing } from '../auth/standing.js';
import { presenceIndexes } from '../presence/presence.js';
import { indexes, keys, type Company, type Identity, type McpProfile, type WalletBinding } from './model.js';

export interface NewIdentity {
  id?: string;
  name: string;
  type: string;
  is_admin: boolean;
  wallet_address?: string | null;
  agent_8004_id?: string | null;
  capabilities?: string[];
  tags?: string[];
}

/**
 * What the new identity may do: `standing` bounds its key (when it gets one) and is recorded with its wallet
 * binding; `by` is who binds the wallet (an approving admin), else the identity itself with its new key.
 */
export interface Grant {
  standing: Standing;
  key: boolean;
  by?: string;
  /** the new key's default MCP tool profile */
  mcp_profile?: McpProfile;
}

/**
 * Reads what creating an identity depends on and answers its ops: the identity, its unique name (and
 * wallet), its membership, the company on first use, the admin set for an admin. Throws when the name or
 * wallet is taken; a concurrent taker makes the commit fail and the caller's retry sees it.
 */
export async function identityPlan(store: Store, n: NewIdentity, nameTaken: AppError, grant: Grant) {
  const [company, name, wallet] = await store.getMany<unknown>([keys.company, keys.identityName(n.name), ...(n.wallet_address ? [keys.wallet(n.wallet_address)] : [])]);
  if (name) throw nameTaken;
  if (n.wallet_address && wallet) throw new AppError('IDENTITY_WALLET_DUPLICATE', `Wallet ${n.wallet_address} belongs to another identity`);
  const now = iso();
  const identity: Identity = {
    id: n.id ?? newId(),
    name: n.name,
    type: n.type,
    wallet_address: n.wallet_address ?? null,
    agent_8004_id: n.agent_8004_id ?? null,
    capabilities: n.capabilities ?? [],
    tags: n.tags ?? [],
    is_admin: n.is_admin,
    reputation: { score: 0, feedback_count: 0, fetched_at: null },
    created_at: now,
    updated_at: now,
    last_seen: now,
  };
  const companyRec = company?.value as Company | undefined;
  const org: Company = companyRec ?? { id: newId(), name: 'default', created_at: now };
  const key = grant.key ? issueKey(identity.id, grant.standing, { ...grant.standing, mcp_profile: grant.mcp_profile }) : undefined;
  const ops: Op[] = [
    { op: 'put', key: keys.identity(identity.id), value: identity, expect: 0 },
    { op: 'put', key: keys.identityName(identity.name), value: { id: identity.id }, expect: 0 },
    { op: 'index', index: indexes.identities, member: identity.id },
    ...(identity.type === 'agent' ? [{ op: 'index' as const, index: presenceIndexes.agents, member: identity.id }] : []),
    ...membershipCreateOps(identity.id, org, now),
    ...(key?.ops ?? []),
    // the outbox: webhooks hear of the join from the commit that made it
    { op: 'append', log: ORG_LOG, entry: { type: 'identity.joined', at: now, identity: { id: identity.id, name: identity.name, type: identity.type, is_admin: identity.is_admin, created_at: now } } satisfies OrgLogEntry },
  ];
  const binding: WalletBinding | undefined = identity.wallet_address ? { id: identity.id, standing: grant.standing, key: key?.record.id ?? null, bound_by: grant.by ?? identity.id, bound_at: now } : undefined;
  if (binding) ops.push({ op: 'put', key: keys.wallet(identity.wallet_address!), value: binding, expect: 0 });
  if (!companyRec) ops.push({ op: 'put', key: keys.company, value: org, expect: 0 });
  if (identity.is_admin) ops.push(...(await adminSetOps(store, (ids) => [...ids, identity.id])));
  return { identity, ops, api_key: key?.plain, bound: bindingAudit(identity.wallet_address, binding) };
}

/** What the audit entry of every write that binds a wallet names: the wallet, the key it hangs on, its standing. */
export function bindingAudit(wallet: string | null, binding: WalletBinding | undefined) {
  return wallet && binding ? { wallet_address: wallet, binding_key: binding.key, standing: binding.standing } : { wallet_address: null };
}

/** The admin ids, versioned; before the record existed it is derived from the identities. */
export async function adminSet(store: Store): Promise<{ ids: string[]; version: number }> {
  const rec = await store.get<{ ids: string[] }>(keys.admins);
  if (rec) return { ids: rec.value.ids, version: rec.version };
  const ids = await store.range(indexes.identities, { limit: 100_000 });
  const all = await store.getMany<Identity>(ids.map(keys.identity));
  return { ids: all.filter((r) => r?.value.is_admin).map((r) => r!.value.id), version: 0 };
}

/** Ops that change the admin set with a version check; refuses a change that leaves no admin. */
export async function adminSetOps(store: Store, change: (ids: string[]) => string[]): Promise<Op[]> {
  const cur = await adminSet(store);
  const ids = [...new Set(change(cur.ids))];
  if (ids.length === 0 && cur.ids.length > 0) throw new AppError('POLICY_DENIED', 'The last admin can be neither deleted nor demoted', { reason: 'last_admin' });
  return [{ op: 'put', key: keys.admins, value: { ids }, expect: cur.version }];
}
