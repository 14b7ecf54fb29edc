import type { Config } from '../config.js';
import type { Health } from '../health/health.js';
import type { ApiKeys } from '../identity/api-keys.js';
import type { Identities } from '../identity/identities.js';
import type { Invites } from '../identity/invites.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Org } from '../org/service.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Stats } from '../stats/service.js';

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
  metrics: Metrics;
}
