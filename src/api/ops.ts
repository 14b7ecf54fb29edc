/** Operator routes: the service's index at /, Prometheus metrics, the OpenAPI document of the live route table, the dashboard's files. */
import { timingSafeEqual } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join, resolve, sep } from 'node:path';
import { AppError } from '../errors.js';
import type { Reply, Route } from '../http/server.js';
import { bearerToken } from '../auth/keys.js';
import { VERSION } from '../health/health.js';
import { openApi } from '../openapi/openapi.js';
import type { Services } from './services.js';

const DASHBOARD_DIR = resolve(import.meta.dirname, '../../dashboard');
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml' };

/** The dashboard's static files, nested folders included, read once: a path outside the folder's listing is NOT_FOUND. */
function dashboardFiles(): (path: string) => { contentType: string; body: string } {
  const files = new Map<string, { contentType: string; body: string }>();
  const names = existsSync(DASHBOARD_DIR) ? readdirSync(DASHBOARD_DIR, { recursive: true, encoding: 'utf8' }) : [];
  for (const name of names) {
    const type = TYPES[extname(name).slice(1)];
    if (type) files.set(name.split(sep).join('/'), { contentType: type, body: readFileSync(join(DASHBOARD_DIR, name), 'utf8') });
  }
  return (path) => {
    const f = files.get(path);
    if (!f) throw new AppError('NOT_FOUND', `No dashboard file ${path}`);
    return f;
  };
}

/** The q of the first Accept entry naming `type` exactly (0 when none does): `*\/*` speaks for neither page nor JSON. */
function quality(accept: string, type: string): number {
  for (const part of accept.split(',')) {
    const [name, ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    if (name !== type) continue;
    const q = params.find((p) => p.startsWith('q='));
    return q ? Number(q.slice(2)) || 0 : 1;
  }
  return 0;
}

/** A browser asks for a page before JSON; an API client asks for JSON, anything, or says nothing. */
export const wantsPage = (accept: string | undefined) => quality(accept ?? '', 'text/html') > quality(accept ?? '', 'application/json');

/** What GET / tells an API client: where everything is, in the words discovery uses for the same URLs. */
function serviceIndex(base: string) {
  return {
    name: 'agent-coordination-service',
    version: VERSION,
    docs_url: `${base}/docs/errors/{code}`,
    openapi_url: `${base}/openapi.json`,
    dashboard_url: `${base}/dashboard`,
    health_url: `${base}/health`,
    agent_card_url: `${base}/.well-known/agent-card.json`,
    endpoints: { rest: base, websocket: base.replace(/^http/, 'ws') + '/ws', sse: `${base}/signals/stream`, rpc: `${base}/rpc`, mcp: `${base}/mcp`, a2a: `${base}/a2a` },
  };
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** `table` is the whole route table, these routes included: the document describes what is served. */
export const opsRoutes = (s: Services, table: Route[]): Route[] => {
  let doc: string | undefined;
  const dashboard = dashboardFiles();
  return [
    {
      method: 'get',
      path: '/',
      auth: 'public',
      handler: (r): Reply =>
        wantsPage(r.headers.accept)
          ? { status: 302, headers: { location: '/dashboard', vary: 'Accept' }, text: { contentType: 'text/plain; charset=utf-8', body: 'See /dashboard' } }
          : { headers: { vary: 'Accept' }, data: serviceIndex(s.links.baseUrl) },
    },
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
    // views/ and vendor/: one folder deep, the lookup is by the listing so `..` names nothing
    { method: 'get', path: '/dashboard/:dir/:file', auth: 'public', unlimited: true, handler: (r) => ({ text: dashboard(`${r.params.dir}/${r.params.file}`) }) },
  ];
};
