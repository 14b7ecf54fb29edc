import type { Route } from '../http/server.js';
import { AppError, catalogue, type ErrorCode } from '../errors.js';
import type { Services } from './services.js';

export const healthRoutes = (s: Services): Route[] => [
  { method: 'get', path: '/health', auth: 'public', unlimited: true, handler: async () => ({ data: await s.health.summary() }) },
  { method: 'get', path: '/health/detailed', auth: 'public', unlimited: true, handler: async () => ({ data: await s.health.detailed() }) },
  {
    // docs_url of every error points here
    method: 'get',
    path: '/docs/errors/:code',
    auth: 'public',
    unlimited: true,
    handler: (r) => {
      const entry = catalogue[r.params.code as ErrorCode];
      if (!entry) throw new AppError('NOT_FOUND', `No error code ${r.params.code}`);
      return { data: { code: r.params.code, status: entry[0], message: entry[1] } };
    },
  },
];
