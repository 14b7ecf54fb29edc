import type { Artifacts } from '../artifacts/service.js';
import type { Audit } from '../audit/audit.js';
import type { Siwe } from '../auth/siwe.js';
import type { Config } from '../config.js';
import type { AuthRequests } from '../identity/auth-requests.js';
import type { Wallets } from '../identity/wallets.js';
import type { Health } from '../health/health.js';
import type { ApiKeys } from '../identity/api-keys.js';
import type { Identities } from '../identity/identities.js';
import type { Invites } from '../identity/invites.js';
import type { CompanyRecord } from '../org/company.js';
import type { Discovery } from '../org/discovery.js';
import type { Peers } from '../org/peers.js';
import type { Memberships } from '../org/memberships.js';
import type { Org } from '../org/service.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Stats } from '../stats/service.js';
import type { Workspace } from '../workspace/service.js';
import type { Workstreams } from '../workstreams/service.js';
import type { Webhooks } from '../webhooks/service.js';

/** What the thin handlers call into. */
export interface Services {
  config: Readonly<Config>;
  invites: Invites;
  apiKeys: ApiKeys;
  identities: Identities;
  org: Org;
  signals: Signals;
  inbox: Inbox;
  health: Health;
  stats: Stats;
  workspace: Workspace;
  artifacts: Artifacts;
  workstreams: Workstreams;
  company: CompanyRecord;
  peers: Peers;
  memberships: Memberships;
  discovery: Discovery;
  webhooks: Webhooks;
  siwe: Siwe;
  wallets: Wallets;
  authRequests: AuthRequests;
  audit: Audit;
}
