/**
 * Path reservations over real HTTP on both backends: the conflict matrix, partial grants, defaults and
 * bounds, idempotent replay and its 409, listing and conflict checks, renew, release, force-release rules
 * (audited), expiry by the durable timer, journal events, fencing tokens (a lapsed grant's renew and release refused
 * once the path was granted again), and concurrent exclusive requests for one path.
 */
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { PushSocket, waitFor } from '../helpers/push.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, setMembershipStatus } from './support.js';

let projects = 0;
const project = () => `p${++projects}`;

for (const backend of BACKENDS) {
  describe(`reservations on ${backend}`, () => {
    const servers = serversOn(backend);
    let svc: Service;
    let root: Member;
    let a: Member;
    let b: Member;
    const sockets: PushSocket[] = [];

    beforeAll(async () => {
      svc = await servers.start({ RESERVATION_MAX_TTL_S: '7200' });
      root = await bootstrap(svc.url);
      a = await join(root.client, 'res-a');
      b = await join(root.client, 'res-b');
    });
    afterAll(async () => {
      await Promise.all(sockets.map((s) => s.close()));
    });

    const reserve = async (m: Member, body: Record<string, unknown>) => expectOk(await m.client.post('/reservations', body));

    it('conflict matrix: exclusive/shared x same/different identity x overlapping/disjoint globs', async () => {
      const cases: { first: boolean; second: boolean; same: boolean; overlap: boolean; conflict: boolean }[] = [];
      for (const first of [true, false])
        for (const second of [true, false])
          for (const same of [true, false])
            for (const overlap of [true, false]) cases.push({ first, second, same, overlap, conflict: !same && overlap && (first || second) });
      const pairs: [string, string, string][] = [
        // [held, overlapping request, disjoint request]
        ['src/**', 'src/lib/*.ts', 'docs/**'],
        ['src/[ab].ts', 'src/a.ts', 'src/c.ts'],
        ['src/{api,ui}/**', 'src/ui/x.tsx', 'src/db/**'],
        ['**/*.md', 'docs/README.md', '**/*.ts'],
      ];
      for (const c of cases)
        for (const [held, over, apart] of pairs) {
          const p = project();
          const first = await reserve(a, { project: p, paths: [held], exclusive: c.first });
          expect(first.granted).toHaveLength(1);
          const second = await reserve(c.same ? a : b, { project: p, paths: [c.overlap ? over : apart], exclusive: c.second });
          const label = JSON.stringify({ ...c, held });
          if (c.conflict) {
            expect(second.granted, label).toEqual([]);
            expect(second.conflicts, label).toEqual([{ path: over, reservation: first.granted[0] }]);
          } else {
            expect(second.conflicts, label).toEqual([]);
            expect(second.granted, label).toHaveLength(1);
          }
        }
    });

    it('grants what does not conflict and reports the rest; defaults and bounds', async () => {
      const p = project();
      const held = await reserve(a, { project: p, paths: ['src/api/**'], reason: 'refactor' });
      expect(held.granted[0]).toMatchObject({ project: p, identity: a.id, path: 'src/api/**', exclusive: true, ttl_s: 3600, reason: 'refactor', state: 'active' });
      expect(Date.parse(held.granted[0].expires_at) - Date.parse(held.granted[0].created_at)).toBe(3_600_000);
      const mixed = await reserve(b, { project: p, paths: ['src/api/users.ts', 'src/ui/**', './docs/'], ttl_s: 60 });
      expect(mixed.granted.map((r: any) => r.path)).toEqual(['src/ui/**', 'docs']);
      expect(mixed.conflicts.map((c: any) => [c.path, c.reservation.id])).toEqual([['src/api/users.ts', held.granted[0].id]]);
      // the org's project by default: the same for every member
      const d1 = await reserve(a, { paths: ['default/one'] });
      const d2 = await reserve(b, { paths: ['default/two'] });
      expect(d1.granted[0].project).toBe(d2.granted[0].project);
      expect((await reserve(b, { paths: ['default/one'] })).conflicts).toHaveLength(1);

      expectError(await a.client.post('/reservations', { project: p }), 400, 'RESERVATION_VALIDATION_FAILED', 'paths');
      expectError(await a.client.post('/reservations', { project: p, paths: [] }), 400, 'RESERVATION_VALIDATION_FAILED', 'paths');
      expectError(await a.client.post('/reservations', { project: p, paths: ['/etc/passwd'] }), 400, 'RESERVATION_VALIDATION_FAILED', 'paths');
      expectError(await a.client.post('/reservations', { project: p, paths: ['../up'] }), 400, 'RESERVATION_VALIDATION_FAILED', 'paths');
      expectError(await a.client.post('/reservations', { project: p, paths: ['x'], ttl_s: 7201 }), 400, 'RESERVATION_VALIDATION_FAILED', 'ttl_s');
      expectError(await a.client.post('/reservations', { project: p, paths: ['x'], ttl_s: 0 }), 400, 'RESERVATION_VALIDATION_FAILED', 'ttl_s');
      expectError(await a.client.post('/reservations', { project: p, paths: ['x'], exclusive: 'yes' }), 400, 'RESERVATION_VALIDATION_FAILED', 'exclusive');
      // nothing half-written by the refusals
      expect(expectOk(await a.client.get(`/reservations?project=${p}&path=x`)).reservations).toEqual([]);
    });

    it('idempotency_key: the same request replays the first answer, a different one is 409', async () => {
      const p = project();
      const body = { project: p, paths: ['lib/**'], idempotency_key: 'k1' };
      const first = await reserve(a, body);
      expect(first.granted).toHaveLength(1);
      expect(await reserve(a, body)).toEqual(first);
      expectError(await a.client.post('/reservations', { ...body, paths: ['lib/other'] }), 409, 'RESERVATION_IDEMPOTENCY_MISMATCH');
      // keys are per identity: b's same key is its own request, and conflicts with a's grant
      const bs = await reserve(b, body);
      expect(bs.granted).toEqual([]);
      expect(bs.conflicts[0].reservation.id).toBe(first.granted[0].id);
      const list = expectOk(await a.client.get(`/reservations?project=${p}`)).reservations;
      expect(list.map((r: any) => r.id)).toEqual([first.granted[0].id]);
    });

    it('GET /reservations filters; GET /reservations/conflicts says what paths would hit', async () => {
      const p = project();
      const ra = (await reserve(a, { project: p, paths: ['src/**'] })).granted[0];
      const rb = (await reserve(b, { project: p, paths: ['docs/*.md'], exclusive: false })).granted[0];
      const gone = (await reserve(b, { project: p, paths: ['tmp/x'] })).granted[0];
      expectOk(await b.client.post(`/reservations/${gone.id}/release`, {}));
      const ids = (q: string) => a.client.get(`/reservations?project=${p}${q}`).then((r) => expectOk(r).reservations.map((x: any) => x.id).sort());
      expect(await ids('')).toEqual([ra.id, rb.id].sort());
      expect(await ids(`&identity=${b.id}`)).toEqual([rb.id]);
      expect(await ids('&path=src/index.ts')).toEqual([ra.id]);
      expect(await ids('&include_expired=true')).toEqual([ra.id, rb.id, gone.id].sort());
      expectError(await a.client.get(`/reservations?project=${p}&include_expired=maybe`), 400, 'VALIDATION_INVALID_TYPE', 'include_expired');

      const hits = (m: Member, q: string) => m.client.get(`/reservations/conflicts?project=${p}&${q}`).then((r) => expectOk(r).conflicts);
      const onB = await hits(b, 'paths=src/a.ts,docs/x.md,other.txt');
      expect(onB.map((c: any) => [c.path, c.reservation.id])).toEqual([['src/a.ts', ra.id]]);
      // a's own reservation never conflicts for a; b's shared one does when a wants it exclusively, not when shared
      expect((await hits(a, 'paths=src/a.ts,docs/x.md')).map((c: any) => c.reservation.id)).toEqual([rb.id]);
      expect(await hits(a, 'paths=docs/x.md&exclusive=false')).toEqual([]);
      expectError(await a.client.get(`/reservations/conflicts?project=${p}`), 400, 'VALIDATION_FIELD_REQUIRED', 'paths');
    });

    it('a glob whose regex would run for minutes conflicts conservatively on every surface (REST, /rpc, MCP), and each answers', async () => {
      const p = project();
      // picomatch's regex for this glob, against a long path, would hold the server's thread for minutes
      const hostile = (await reserve(a, { project: p, paths: ['*a'.repeat(9) + 'b'] })).granted[0];
      const long = 'a'.repeat(1000);
      const asked = await reserve(b, { project: p, paths: [long] });
      expect([asked.granted, asked.conflicts.map((c: any) => [c.path, c.reservation.id])]).toEqual([[], [[long, hostile.id]]]);
      expect((await b.client.get(`/reservations/conflicts?project=${p}&paths=${long}`).then((r) => expectOk(r).conflicts)).map((c: any) => c.reservation.id)).toEqual([hostile.id]);
      expect(await a.client.get(`/reservations?project=${p}&path=${long}`).then((r) => expectOk(r).reservations.map((x: any) => x.id))).toEqual([hostile.id]);
      // the method table's surfaces run the same rule: /rpc and MCP's tool
      const rpc = await b.client.post('/rpc', { jsonrpc: '2.0', id: 1, method: 'reservations.conflicts', params: { project: p, paths: [long] } });
      expect((rpc.body as any).result.conflicts.map((c: any) => c.reservation.id)).toEqual([hostile.id]);
      const mcp = new McpClient({ name: 'test', version: '1.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(svc.url + '/mcp'), { requestInit: { headers: { authorization: `Bearer ${b.key}` } } }));
      try {
        const tool = (await mcp.callTool({ name: 'svc_check_reservations', arguments: { project: p, paths: [long] } })) as { isError?: boolean; content: { text: string }[] };
        expect(tool.isError, JSON.stringify(tool)).toBeFalsy();
        expect(JSON.parse(tool.content[0].text).conflicts.map((c: any) => c.reservation.id)).toEqual([hostile.id]);
      } finally {
        await mcp.close();
      }
      // disjoint by its literal prefix, as before
      expect((await reserve(b, { project: p, paths: ['docs/*a*a*a*b'] })).granted).toHaveLength(1);
    });

    it('renew and release: holder only, active only', async () => {
      const r = (await reserve(a, { project: project(), paths: ['r/**'], ttl_s: 60 })).granted[0];
      expectError(await b.client.post(`/reservations/${r.id}/renew`, { ttl_s: 600 }), 403, 'RESERVATION_NOT_HOLDER');
      expectError(await b.client.post(`/reservations/${r.id}/release`, {}), 403, 'RESERVATION_NOT_HOLDER');
      const renewed = expectOk(await a.client.post(`/reservations/${r.id}/renew`, { ttl_s: 600 }));
      expect(renewed).toMatchObject({ id: r.id, ttl_s: 600, state: 'active' });
      expect(Date.parse(renewed.expires_at)).toBeGreaterThan(Date.parse(r.expires_at));
      expectError(await a.client.post(`/reservations/${r.id}/renew`, { ttl_s: 9999 }), 400, 'RESERVATION_VALIDATION_FAILED', 'ttl_s');
      const released = expectOk(await a.client.post(`/reservations/${r.id}/release`, {}));
      expect(released).toMatchObject({ state: 'released', released_by: a.id, forced: false });
      expectError(await a.client.post(`/reservations/${r.id}/release`, {}), 409, 'RESERVATION_NOT_ACTIVE');
      expectError(await a.client.post(`/reservations/${r.id}/renew`, {}), 409, 'RESERVATION_NOT_ACTIVE');
      expectError(await a.client.post('/reservations/01ARZ3NDEKTSV4RRFFQ69G5FAV/release', {}), 404, 'RESERVATION_NOT_FOUND');
      // released paths are free again
      expect((await reserve(b, { project: r.project, paths: ['r/x'] })).granted).toHaveLength(1);
    });

    it('force-release: refused while the holder is active, allowed to an admin, and to anyone once the holder was inactive longer than the ttl; audited', async () => {
      const p = project();
      const r1 = (await reserve(a, { project: p, paths: ['f/one'], ttl_s: 600 })).granted[0];
      expectError(await b.client.post(`/reservations/${r1.id}/force-release`, {}), 403, 'RESERVATION_FORCE_DENIED');
      const byAdmin = expectOk(await root.client.post(`/reservations/${r1.id}/force-release`, {}));
      expect(byAdmin).toMatchObject({ state: 'released', released_by: root.id, forced: true });

      const r2 = (await reserve(a, { project: p, paths: ['f/two'], ttl_s: 600 })).granted[0];
      // a was last seen longer ago than the ttl: the presence record says so on every instance
      await svc.store.commit([{ op: 'put', key: `seen:${a.id}`, value: { at: Date.now() - 601_000 } }]);
      const byPeer = expectOk(await b.client.post(`/reservations/${r2.id}/force-release`, {}));
      expect(byPeer).toMatchObject({ state: 'released', released_by: b.id, forced: true });

      const entries = expectOk(await root.client.get('/admin/audit?action=reservation.force_release')).entries.filter((e: any) => [r1.id, r2.id].includes(e.target));
      expect(entries.map((e: any) => [e.target, e.actor]).sort()).toEqual([[r1.id, root.id], [r2.id, b.id]].sort());
      expect(entries.find((e: any) => e.target === r2.id).details).toMatchObject({ holder: a.id, path: 'f/two', admin: false });
      // a refused force-release wrote no audit entry
      expect(entries).toHaveLength(2);
    });

    it('expiry by the durable timer; granted, released and expired events reach members on the journal', async () => {
      const sock = await PushSocket.open(svc.url, b.key, { label: 'b' });
      sockets.push(sock);
      const p = project();
      const short = (await reserve(a, { project: p, paths: ['e/short'], ttl_s: 1 })).granted[0];
      const other = (await reserve(a, { project: p, paths: ['e/other'] })).granted[0];
      expectOk(await a.client.post(`/reservations/${other.id}/release`, {}));
      await waitFor(async () => expectOk(await a.client.get(`/reservations/${short.id}`)).state === 'expired', 10_000, 'the reservation expires by its timer');
      const mine = (type: string) => sock.frames.filter((f: any) => f.type === type && f.reservation?.project === p).map((f: any) => f.reservation.id);
      await waitFor(() => mine('reservation.expired').length === 1, 5000, 'the expiry event');
      expect(mine('reservation.granted').sort()).toEqual([short.id, other.id].sort());
      expect(mine('reservation.released')).toEqual([other.id]);
      expect(mine('reservation.expired')).toEqual([short.id]);
      // expired paths are free
      expect((await reserve(b, { project: p, paths: ['e/short'] })).granted).toHaveLength(1);
    });

    it('fencing: each grant carries a higher token; a lapsed reservation, granted again since, can neither be renewed nor released', async () => {
      const p = project();
      const old = (await reserve(a, { project: p, paths: ['fence/**'], ttl_s: 1 })).granted[0];
      expect(old.fence).toBe(1);
      await waitFor(async () => expectOk(await a.client.get(`/reservations/${old.id}`)).state === 'expired', 10_000, 'the first lease lapses');
      // granted again: to the same identity (another of its workers), then alongside to another path
      const again = (await reserve(a, { project: p, paths: ['fence/**', 'other/**'], ttl_s: 600 })).granted;
      expect(again.map((r: any) => r.fence)).toEqual([2, 3]);
      expectError(await a.client.post(`/reservations/${old.id}/renew`, { ttl_s: 600 }), 409, 'RESERVATION_NOT_ACTIVE');
      expectError(await a.client.post(`/reservations/${old.id}/release`, {}), 409, 'RESERVATION_NOT_ACTIVE');
      expect(expectOk(await a.client.get(`/reservations/${again[0].id}`))).toMatchObject({ state: 'active', fence: 2, expires_at: again[0].expires_at });
      expect((await reserve(b, { project: p, paths: ['fence/x'] })).conflicts.map((c: any) => c.reservation.id)).toEqual([again[0].id]);
    });

    it('20 concurrent exclusive requests for one path from different identities: exactly one granted', async () => {
      const p = project();
      const members = await Promise.all(Array.from({ length: 20 }, (_, i) => join(root.client, `racer-${backend}-${i}`)));
      const answers = await Promise.all(members.map((m) => reserve(m, { project: p, paths: ['hot/file.ts'] })));
      const winners = answers.filter((x) => x.granted.length === 1);
      expect(winners).toHaveLength(1);
      for (const x of answers) if (x !== winners[0]) expect(x.conflicts.map((c: any) => c.reservation.id)).toEqual([winners[0].granted[0].id]);
    });

    it('refuses a missing key, and an identity without an active membership on every route', async () => {
      const r = await fetch(`${svc.url}/reservations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ paths: ['x'] }) });
      expect(r.status).toBe(401);
      const held = (await reserve(a, { project: 'm', paths: ['m/**'] })).granted[0];
      const s = await join(root.client, `suspended-${backend}`);
      await setMembershipStatus(root.client, s.id, 'suspended');
      expectError(await s.client.post('/reservations', { paths: ['x'] }), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.get('/reservations'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.get('/reservations/conflicts?paths=x'), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expectError(await s.client.get(`/reservations/${held.id}`), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      for (const action of ['renew', 'release', 'force-release']) expectError(await s.client.post(`/reservations/${held.id}/${action}`, {}), 403, 'POLICY_MEMBERSHIP_REQUIRED');
      expect(expectOk(await a.client.get(`/reservations/${held.id}`)).state).toBe('active');
    });
  });
}
