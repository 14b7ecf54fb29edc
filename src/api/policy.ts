import type { Route } from '../http/server.js';
import type { Principal } from '../identity/model.js';
import { configReport } from '../config.js';
import { effectivePolicy } from '../org/policy.js';
import type { Services } from './services.js';

export const policyRoutes = ({ config }: Services): Route<Principal>[] => [
  { method: 'get', path: '/admin/policy', auth: 'admin', handler: () => ({ data: effectivePolicy(config) }) },
  { method: 'get', path: '/admin/config', auth: 'admin', handler: () => ({ data: { settings: configReport(config) } }) },
];
