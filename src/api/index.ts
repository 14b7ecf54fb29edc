import type { Route } from '../http/server.js';
import { adminRoutes } from './admin.js';
import { artifactRoutes } from './artifacts.js';
import { healthRoutes } from './health.js';
import { inviteRoutes } from './invites.js';
import { orgRoutes } from './org.js';
import { orgCompanyRoutes } from './org-company.js';
import { policyRoutes } from './policy.js';
import { webhookRoutes } from './webhooks.js';
import type { Services } from './services.js';
import { signalRoutes } from './signals.js';
import { statsRoutes } from './stats.js';
import { workspaceRoutes } from './workspace.js';
import { workstreamRoutes } from './workstreams.js';

export const routes = (s: Services): Route[] => [...healthRoutes(s), ...inviteRoutes(s), ...signalRoutes(s), ...orgRoutes(s), ...adminRoutes(s), ...statsRoutes(s), ...workspaceRoutes(s), ...artifactRoutes(s), ...workstreamRoutes(s), ...orgCompanyRoutes(s), ...policyRoutes(s), ...webhookRoutes(s)];
export type { Services };
