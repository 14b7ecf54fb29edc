/**
 * The org journal: identity and membership changes append here in the commit that makes them, so the
 * webhook outbox (src/webhooks) sees each exactly once. Entries: `{type, at, ...}`.
 */
export const ORG_LOG = 'org';

export type OrgLogEntry =
  | { type: 'identity.joined'; at: string; identity: Record<string, unknown> }
  | { type: 'membership.changed'; at: string; membership: Record<string, unknown>; from: string | null };
