import type { Claim } from '../store/idempotency.js';

export interface Reputation {
  score: number;
  feedback_count: number;
  fetched_at: string | null;
}

export interface Identity {
  id: string;
  name: string;
  type: string;
  wallet_address: string | null;
  agent_8004_id: string | null;
  capabilities: string[];
  tags: string[];
  is_admin: boolean;
  reputation: Reputation;
  created_at: string;
  updated_at: string;
  last_seen: string | null;
}

export interface Permissions {
  signal_types: string[];
  rings: string[];
  task_types: string[];
  memory_scopes: string[];
}

/** The MCP tool profiles (`/mcp?tools=`, docs/surfaces.md); a key may name one as its default. */
export const MCP_PROFILES = ['core', 'tasks', 'memory', 'reservations', 'all'] as const;
export type McpProfile = (typeof MCP_PROFILES)[number];

export interface ApiKey {
  id: string;
  owner: string;
  permissions: Permissions;
  ring_scopes: string[];
  created_at: string;
  expires_at: string | null;
  revoked: boolean;
  rate_limit: number | null;
  /** sha-256 of the key; stripped from every answer */
  hash: string;
  /** a SIWE session key: the wallet that signed in */
  wallet?: string;
  /** a SIWE session key: the key that bound its wallet; revoking that one ends this one too */
  parent?: string;
  /** the tool profile `/mcp` uses when the initialize request names none (not a right: it only picks tools) */
  mcp_profile?: McpProfile;
}

/**
 * The record under `wallet:<address>`: one identity per wallet, and the standing a SIWE session key of it
 * carries. `key` is the key that bound it (null: bound by an admin); while that key is revoked, expired or
 * gone the wallet cannot sign in. A record without `standing` predates the rule and needs an admin re-bind.
 */
export interface WalletBinding {
  id: string;
  standing?: { permissions: Permissions; ring_scopes: string[] };
  key?: string | null;
  bound_by?: string;
  bound_at?: string;
}

export interface Invite {
  id: string;
  code: string;
  name: string;
  type: string;
  is_admin: boolean;
  created_by: string | null;
  created_at: string;
  redeemed_by: string | null;
  redeemed_at: string | null;
  expires_at: string | null;
  /** the creating key's standing: the redeemed key carries no more (absent on invites made before the rule: unrestricted) */
  standing?: { permissions: Permissions; ring_scopes: string[] };
  /** the redeemed key's default MCP tool profile */
  mcp_profile?: McpProfile;
}

export interface Company {
  id: string;
  name: string;
  created_at: string;
}

export interface Membership {
  id: string;
  identity_id: string;
  company_id: string;
  status: 'active' | 'suspended' | 'removed';
  claw_type: string | null;
  created_at: string;
  updated_at: string;
}

export interface Principal {
  identity: Identity;
  key: ApiKey;
  membership: Membership | undefined;
  /** set when the principal is a federation peer org reading memories by a signed call (src/memory/acl.ts peerPrincipal) */
  peer?: string;
  /** the request this principal acts in (set by the front end), recorded in audit entries and actor transitions */
  requestId?: string;
  /** the request's `Idempotency-Key` claim, while its handler runs (`committedEffect`, `effectOps`) */
  claim?: Claim;
  /** the key's rate-limit budget after this request, for the RateLimit-* headers */
  rate?: { limit: number; remaining: number; resetMs: number };
  /** spends units of the key's budget for the calls of this request, its first unit prepaid (RateLimits.meter) */
  spend?: (units: number) => Promise<void>;
}

export const keys = {
  identity: (id: string) => `identity:${id}`,
  identityName: (name: string) => `identity-name:${name.toLowerCase()}`,
  apiKey: (id: string) => `apikey:${id}`,
  invite: (code: string) => `invite:${code}`,
  company: 'org:company',
  /** the membership actor's record (actor id = identity id; src/org/memberships.ts) */
  membership: (identityId: string) => `actor:membership:${identityId}`,
  bootstrap: 'bootstrap',
  /** one identity per wallet: `{id}` under the lowercased address, written with expect 0 */
  wallet: (address: string) => `wallet:${address.toLowerCase()}`,
  /** the admin identity ids, versioned so "not the last admin" holds under concurrent demotions */
  admins: 'admins',
};

export const indexes = {
  identities: 'identities',
  apiKeys: 'apikeys',
  /** members: key ids of one owner */
  apiKeysOf: (owner: string) => `apikeys:owner:${owner}`,
  invites: 'invites',
};

export const publicKey = ({ hash: _hash, ...rest }: ApiKey) => rest;
