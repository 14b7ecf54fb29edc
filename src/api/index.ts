import type { Route } from '../http/server.js';
import { adminRoutes } from './admin.js';
import { healthRoutes } from './health.js';
import { inviteRoutes } from './invites.js';
import { opsRoutes } from './ops.js';
import { orgRoutes } from './org.js';
import type { Services } from './services.js';
import { signalRoutes } from './signals.js';
import { statsRoutes } from './stats.js';

export const routes = (s: Services): Route[] => {
  const table: Route[] = [...healthRoutes(s), ...inviteRoutes(s), ...signalRoutes(s), ...orgRoutes(s), ...adminRoutes(s), ...statsRoutes(s)];
  // the OpenAPI route reads the whole table, its own routes included
  table.push(...opsRoutes(s, table));
  return table;
};
export type { Services };
