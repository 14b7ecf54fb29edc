/**
 * The routes the console's browser views added, over real HTTP on both backends: jsdiff's ES module files
 * under /dashboard/vendor/diff/ (only .js files of its libesm folder), the audit log's until= beside since=
 * (both inclusive), and a peer's calls page by page, newest first, without their signed bodies.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk } from './support.js';

describe.each(BACKENDS)('console routes on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;

  beforeAll(async () => {
    svc = await servers.start({ ALLOW_PRIVATE_NETWORK: 'true', FEDERATION_BACKOFF_BASE_MS: '100', FEDERATION_RETRY_WINDOW_MS: '1000' });
    root = await bootstrap(svc.url);
  });

  it('serves jsdiff’s ES modules, nested ones too, and nothing else of the package', async () => {
    for (const path of ['index.js', 'diff/line.js']) {
      const r = await fetch(`${svc.url}/dashboard/vendor/diff/${path}`);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect(await r.text()).toContain('export');
    }
    for (const path of ['index.d.ts', 'package.json', '..%2Fpackage.json', 'diff/..%2F..%2Fpackage.json', 'nope.js']) {
      expect((await fetch(`${svc.url}/dashboard/vendor/diff/${path}`)).status).toBe(404);
    }
  });

  it('GET /admin/audit?since=&until= keeps the entries inside the window, both ends included', async () => {
    await join(root.client, 'audit-a');
    await join(root.client, 'audit-b');
    // the bootstrap's invite and the two above; expectations are read off their times, which may share a millisecond
    const all = expectOk(await root.client.get('/admin/audit?action=invite.create')).entries;
    expect(all).toHaveLength(3);
    const only = async (q: string) => expectOk(await root.client.get(`/admin/audit?action=invite.create&${q}`)).entries.map((e: any) => e.id);
    const within = (from: string, to: string) => all.filter((e: any) => e.at >= from && e.at <= to).map((e: any) => e.id);
    for (const e of all) {
      expect(await only(`until=${e.at}`)).toEqual(within('', e.at));
      expect(await only(`since=${e.at}&until=${e.at}`)).toEqual(within(e.at, e.at));
      expect(await only(`since=${e.at}&until=${e.at}`)).toContain(e.id);
    }
    expect(await only('until=2020-01-01T00:00:00.000Z')).toEqual([]);
    const first = expectOk(await root.client.get(`/admin/audit?until=${all[0].at}&limit=1`));
    const second = expectOk(await root.client.get(`/admin/audit?until=${all[0].at}&limit=1&after=${first.cursor}`));
    expect(second.entries[0].id < first.entries[0].id).toBe(true);
    expectError(await root.client.get('/admin/audit?until=yesterday'), 400, 'VALIDATION_INVALID_TYPE', 'until');
  });

  it('GET /admin/peers/:id/calls pages a peer’s calls newest first, without their bodies', async () => {
    const peer = expectOk(await root.client.post('/federation/trust', { name: 'nowhere', endpoint: 'http://127.0.0.1:9', allowed_scopes: ['alert'], expires_in: 3600 }), 201);
    const sent = [];
    for (const content of ['first', 'second']) sent.push(expectOk(await root.client.post('/emit', { signal_type: 'alert', content, to_peer: peer.peer_id, to_role: 'oncall' }), 201).id);
    const first = expectOk(await root.client.get(`/admin/peers/${peer.peer_id}/calls?limit=1`));
    expect(first.has_more).toBe(true);
    const second = expectOk(await root.client.get(`/admin/peers/${peer.peer_id}/calls?limit=1&after=${first.cursor}`));
    expect([...first.calls, ...second.calls].map((c: any) => c.signal_id)).toEqual([...sent].reverse());
    for (const c of [...first.calls, ...second.calls]) {
      expect(c).toMatchObject({ call: 'deliver' });
      expect(Object.keys(c).sort()).toEqual(['attempt_count', 'attempts', 'call', 'id', 'signal_id', 'status']);
    }
    expectError(await root.client.get('/admin/peers/01JNOSUCHPEER000000000000/calls'), 404, 'DISC_PEER_NOT_FOUND');
  });
});
