/**
 * GET / on both backends: a browser (Accept prefers text/html) is sent to the dashboard with a 302; an API
 * client (JSON, anything, or no Accept) gets the service's index in the envelope: version, docs, OpenAPI,
 * dashboard, health, the A2A card and each surface's endpoint, under BASE_URL. Every URL it names answers
 * as that surface does (public ones 200, keyed ones 401 AUTH_KEY_MISSING without a key).
 */
import { describe, expect, it } from 'vitest';
import { VERSION } from '../../src/health/health.js';
import { wantsPage } from '../../src/api/ops.js';
import { refusedUpgrade } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';

const CHROME = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
const FIREFOX = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

describe('which Accept headers are a browser asking for a page', () => {
  it('a page when text/html is preferred to JSON; JSON on a tie, for */* and without the header', () => {
    expect([CHROME, FIREFOX, 'text/html', 'application/json;q=0.5, text/html'].map(wantsPage)).toEqual([true, true, true, true]);
    expect(['application/json', '*/*', '', undefined, 'text/html, application/json', 'text/html;q=0', 'application/json, text/html;q=0.9', 'TEXT/HTML;q=0.1, application/json;q=0.2'].map(wantsPage)).toEqual([false, false, false, false, false, false, false, false]);
  });
});

describe.each(BACKENDS)('GET / on %s', (backend) => {
  const servers = serversOn(backend);

  it('sends a browser to /dashboard with a 302 (Vary: Accept), which serves the page', async () => {
    const svc = await servers.start();
    for (const accept of [CHROME, FIREFOX]) {
      const r = await fetch(`${svc.url}/`, { headers: { accept }, redirect: 'manual' });
      expect(r.status, accept).toBe(302);
      expect(r.headers.get('location')).toBe('/dashboard');
      expect(r.headers.get('vary')).toBe('Accept');
    }
    const page = await fetch(`${svc.url}/`, { headers: { accept: CHROME } });
    expect(page.url).toBe(`${svc.url}/dashboard`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('id="signin"');
  });

  it('gives an API client a JSON index of the service under BASE_URL, whatever it accepts', async () => {
    const base = 'https://hub.example.test';
    const svc = await servers.start({ BASE_URL: base });
    const bodies = [];
    for (const headers of [{ accept: 'application/json' }, { accept: '*/*' }, {} as Record<string, string>]) {
      const r = await fetch(`${svc.url}/`, { headers, redirect: 'manual' });
      expect(r.status, JSON.stringify(headers)).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(r.headers.get('vary')).toBe('Accept');
      bodies.push(await r.json());
    }
    expect(bodies[1]).toEqual({ ...bodies[0], meta: bodies[1].meta });
    expect(bodies[2]).toEqual({ ...bodies[0], meta: bodies[2].meta });
    expect(bodies[0]).toEqual({
      data: {
        name: 'agent-coordination-service',
        version: VERSION,
        docs_url: `${base}/docs/errors/{code}`,
        openapi_url: `${base}/openapi.json`,
        dashboard_url: `${base}/dashboard`,
        health_url: `${base}/health`,
        agent_card_url: `${base}/.well-known/agent-card.json`,
        endpoints: { rest: base, websocket: 'wss://hub.example.test/ws', sse: `${base}/signals/stream`, rpc: `${base}/rpc`, mcp: `${base}/mcp`, a2a: `${base}/a2a` },
      },
      meta: { request_id: expect.any(String) },
    });
  });

  it('names only URLs that answer as their surface does', async () => {
    const svc = await servers.start();
    const index = (await (await fetch(`${svc.url}/`)).json()).data;
    const local = (u: string) => u.replace(/^https?:\/\/localhost:\d+/, svc.url);
    expect(local(index.endpoints.rest)).toBe(svc.url);

    const docs = await fetch(local(index.docs_url.replace('{code}', 'NOT_FOUND')));
    expect(await docs.json()).toMatchObject({ data: { code: 'NOT_FOUND', status: 404 } });
    const openapi = await (await fetch(local(index.openapi_url))).json();
    expect(openapi.paths['/'].get.responses['302'].headers.Location).toBeDefined();
    expect(openapi.paths['/'].get.responses['2XX'].content['application/json']).toBeDefined();
    expect((await fetch(local(index.dashboard_url))).headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect((await fetch(local(index.health_url))).status).toBe(200);
    const card = await (await fetch(local(index.agent_card_url))).json();
    expect(card.version).toBe(VERSION);
    expect(card.url).toContain('/a2a');

    for (const url of [index.endpoints.rpc, index.endpoints.mcp, index.endpoints.a2a]) {
      const r = await fetch(local(url), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
      expect(r.status, url).toBe(401);
      expect((await r.json()).error.code, url).toBe('AUTH_KEY_MISSING');
    }
    const sse = await fetch(local(index.endpoints.sse));
    expect(sse.status).toBe(401);
    expect((await sse.json()).error.code).toBe('AUTH_KEY_MISSING');
    const ws = await refusedUpgrade(local(index.endpoints.websocket).replace(/^ws/, 'http').replace(/\/ws$/, ''), undefined);
    expect(ws).toMatchObject({ status: 401, body: { error: { code: 'AUTH_KEY_MISSING' } } });
  });
});
