import type { Artifacts } from '../artifacts/service.js';
import type { Audit } from '../audit/audit.js';
import type { Siwe } from '../auth/siwe.js';
import type { Config } from '../config.js';
import type { AuthRequests } from '../identity/auth-requests.js';
import type { Wallets } from '../identity/wallets.js';
import type { Inbound } from '../federation/inbound.js';
import type { PeerLimiter } from '../federation/limits.js';
import type { Trust } from '../federation/trust.js';
import type { Health } from '../health/health.js';
import type { ApiKeys } from '../identity/api-keys.js';
import type { Identities } from '../identity/identities.js';
import type { Invites } from '../identity/invites.js';
import type { Actors } from '../inspection/actors.js';
import type { Metrics } from '../metrics/metrics.js';
import type { CompanyRecord } from '../org/company.js';
import type { Discovery } from '../org/discovery.js';
import type { Peers } from '../org/peers.js';
import type { Memberships } from '../org/memberships.js';
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
import type { Webhooks } from '../webhooks/service.js';
import type { FederationOut } from '../federation/outbound.js';
import type { Links } from '../http/links.js';
import type { ConnectionBoard } from '../presence/connections.js';

/** What the thin handlers call into. */
export interface Services {
  config: Readonly<Config>;
  /** the public URL, settled once the port is bound (the index at GET / names URLs under it) */
  links: Links;
  invites: Invites;
  apiKeys: ApiKeys;
  identities: Identities;
  org: Org;
  signals: Signals;
  inbox: Inbox;
  health: Health;
  stats: Stats;
  metrics: Metrics;
  workspace: Workspace;
  artifacts: Artifacts;
  workstreams: Workstreams;
  company: CompanyRecord;
  peers: Peers;
  memberships: Memberships;
  discovery: Discovery;
  webhooks: Webhooks;
  federationOut: FederationOut;
  siwe: Siwe;
  wallets: Wallets;
  authRequests: AuthRequests;
  audit: Audit;
  memories: Memories;
  graph: Graph;
  shares: Shares;
  jobs: Jobs;
  memoryStats: MemoryStats;
  actors: Actors;
  reservations: Reservations;
  trust: Trust;
  inbound: Inbound;
  /** a peer's request budget and storage quota */
  peerLimits: PeerLimiter;
  /** every instance's open connections, set once the realtime channels are wired (after the route table is built) */
  connections: { current?: ConnectionBoard };
}
