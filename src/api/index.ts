import type { Route } from '../http/server.js';
import { adminRoutes } from './admin.js';
import { healthRoutes } from './health.js';
import { inviteRoutes } from './invites.js';
import { memoryRoutes } from './memory.js';
import { orgRoutes } from './org.js';
import type { Services } from './services.js';
import { signalRoutes } from './signals.js';
import { statsRoutes } from './stats.js';

export const routes = (s: Services): Route[] => [...healthRoutes(s), ...inviteRoutes(s), ...signalRoutes(s), ...orgRoutes(s), ...adminRoutes(s), ...statsRoutes(s), ...memoryRoutes(s)];
export type { Services };
