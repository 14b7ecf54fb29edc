import type { Route } from '../http/server.js';
import { actorRoutes } from './actors.js';
import { adminRoutes } from './admin.js';
import { artifactRoutes } from './artifacts.js';
import { auditRoutes } from './audit.js';
import { authRoutes } from './auth.js';
import { identityRoutes } from './identities.js';
import { federationRoutes } from './federation.js';
import { healthRoutes } from './health.js';
import { inviteRoutes } from './invites.js';
import { memoryRoutes } from './memory.js';
import { opsRoutes } from './ops.js';
import { orgRoutes } from './org.js';
import { orgCompanyRoutes } from './org-company.js';
import { policyRoutes } from './policy.js';
import { webhookRoutes } from './webhooks.js';
import { reservationRoutes } from './reservations.js';
import type { Services } from './services.js';
import { signalRoutes } from './signals.js';
import { statsRoutes } from './stats.js';
import { workspaceRoutes } from './workspace.js';
import { vendorRoutes } from './vendor.js';
import { workstreamRoutes } from './workstreams.js';
import { consoleRoutes } from './console.js';

export const routes = (s: Services): Route[] => {
  const table: Route[] = [...healthRoutes(s), ...inviteRoutes(s), ...signalRoutes(s), ...orgRoutes(s), ...adminRoutes(s), ...statsRoutes(s), ...workspaceRoutes(s), ...artifactRoutes(s), ...workstreamRoutes(s), ...authRoutes(s), ...identityRoutes(s), ...auditRoutes(s), ...memoryRoutes(s), ...actorRoutes(s), ...orgCompanyRoutes(s), ...policyRoutes(s), ...webhookRoutes(s), ...reservationRoutes(s), ...federationRoutes(s), ...consoleRoutes(s)];
  // the OpenAPI route reads the whole table, its own routes included
  table.push(...opsRoutes(s, table));
  table.push(...vendorRoutes());
  return table;
};
export type { Services };
