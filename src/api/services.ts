import type { Config } from '../config.js';
import type { Health } from '../health/health.js';
import type { ApiKeys } from '../identity/api-keys.js';
import type { Invites } from '../identity/invites.js';
import type { Org } from '../org/service.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Inbox } from '../signals/inbox.js';
import type { Signals } from '../signals/service.js';
import type { Stats } from '../stats/service.js';

/** What the thin handlers call into. */
export interface Services {
  config: Readonly<Config>;
  runtime: Runtime;
  invites: Invites;
  apiKeys: ApiKeys;
  org: Org;
  signals: Signals;
  inbox: Inbox;
  health: Health;
  stats: Stats;
}
