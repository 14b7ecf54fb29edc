import type { Config } from '../config.js';
import type { Health } from '../health/health.js';
import type { Invites } from '../identity/invites.js';
import type { Runtime } from '../runtime/runtime.js';
import type { Signals } from '../signals/service.js';

/** What the thin handlers call into. */
export interface Services {
  config: Readonly<Config>;
  runtime: Runtime;
  invites: Invites;
  signals: Signals;
  health: Health;
}
