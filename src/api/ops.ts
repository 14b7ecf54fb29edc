/** Operator routes: Prometheus metrics, the OpenAPI document of the live route table, the dashboard's files. */
import { timingSafeEqual } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { AppError } from '../errors.js';
import type { Route } from '../http/server.js';
import { bearerToken } from '../auth/keys.js';
import { openApi } from '../openapi/openapi.js';
import type { Services } from './services.js';

const DASHBOARD_DIR = resolve(import.meta.dirname, '../../dashboard');
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml' };

/** The dashboard's static files, read once: a name outside the folder's listing is NOT_FOUND. */
function dashboardFiles(): (name: string) => { contentType: string; body: string } {
  const files = new Map<string, { contentType: string; body: string }>();
  for (const name of existsSync(DASHBOARD_DIR) ? readdirSync(DASHBOARD_DIR) : []) {
    const type = TYPES[extname(name).slice(1)];
    if (type) files.set(name, { contentType: type, body: readFileSync(join(DASHBOARD_DIR, name), 'utf8') });
  }
  return (name) => {
    const f = files.get(name);
    if (!f) throw new AppError('NOT_FOUND', `No dashboard file ${name}`);
    return f;
  };
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** `table` is the whole route table, these routes included: the document describes what is served. */
export const opsRoutes = (s: Services, table: Route[]): Route[] => {
  let doc: string | undefined;
  const dashboard = dashboardFiles();
  return [
    {
      // public unless METRICS_TOKEN is set: a scraper holds that token, not an API key
      method: 'get',
      path: '/metrics',
      auth: 'public',
      unlimited: true,
      handler: async (r) => {
        const want = s.config.metricsToken;
        if (want) {
          if (!r.headers.authorization) throw new AppError('AUTH_KEY_MISSING', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>');
          if (!same(bearerToken(r.headers.authorization) ?? '', want)) throw new AppError('AUTH_KEY_INVALID', 'Not the metrics token');
        }
        return { text: { contentType: s.metrics.contentType, body: await s.metrics.text() } };
      },
    },
    {
      method: 'get',
      path: '/openapi.json',
      auth: 'public',
      unlimited: true,
      handler: () => ({ text: { contentType: 'application/json', body: (doc ??= JSON.stringify(openApi(table))) } }),
    },
    { method: 'get', path: '/dashboard', auth: 'public', unlimited: true, handler: () => ({ text: dashboard('index.html') }) },
    { method: 'get', path: '/dashboard/:file', auth: 'public', unlimited: true, handler: (r) => ({ text: dashboard(r.params.file) }) },
  ];
};
