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
import type { Org } from '../org/service.js';
import type { Graph } from '../memory/graph.js';
import type { Jobs } from '../memory/jobs.js';
import type { MemoryStats } from '../memory/stats.js';
import type { Memories } from '../memory/service.js';
import type { Shares } from '../memory/shares.js';
import type { Reservations } from '../reservations/service.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Stats } from '../stats/service.js';
import type { Workspace } from '../workspace/service.js';
import type { Workstreams } from '../workstreams/service.js';

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
  siwe: Siwe;
  wallets: Wallets;
  authRequests: AuthRequests;
  audit: Audit;
  memories: Memories;
  graph: Graph;
  shares: Shares;
  jobs: Jobs;
  memoryStats: MemoryStats;
  reservations: Reservations;
}
