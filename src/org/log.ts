/**
 * The org log: identities joining append here in the commit that makes them, so the
 * webhook outbox (src/webhooks) sees each exactly once. Entries: `{type, at, ...}`.
 */
export const ORG_LOG = 'org';

/** Membership changes go to the push journal instead (the push layer closes a suspended identity's connections). */
export type OrgLogEntry = { type: 'identity.joined'; at: string; identity: Record<string, unknown> };
