import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import type { Services } from './services.js';

export const statsRoutes = ({ stats }: Services): Route<Principal>[] => [
  { method: 'get', path: '/stats/overview', auth: 'key', handler: async () => ({ data: await stats.overview() }) },
  { method: 'get', path: '/admin/health-metrics', auth: 'admin', handler: async () => ({ data: await stats.healthMetrics() }) },
];
