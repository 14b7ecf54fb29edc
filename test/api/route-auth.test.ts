/**
 * Every route of the route table refuses what its auth mode refuses: no key, an unknown key, and (admin
 * routes) a member's key. The sweep reads the real table, so a route added later is covered too.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { routes, type Services } from '../../src/api/index.js';
import type { Route } from '../../src/http/server.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

const table: Route[] = routes({} as Services);
const METHOD = { get: 'GET', post: 'POST', put: 'PUT', patch: 'PATCH', del: 'DELETE' } as const;
const pathOf = (r: Route) => r.path.replace(/:[A-Za-z_]+/g, 'x');
const bodyOf = (r: Route) => (r.method === 'get' || r.method === 'del' ? undefined : {});
const call = (c: Client, r: Route) => c.req(METHOD[r.method], pathOf(r), bodyOf(r));

describe.each(BACKENDS)('route auth on %s', (backend) => {
  const servers = serversOn(backend);
  let url: string;
  let root: Member;
  let member: Member;

  beforeAll(async () => {
    url = (await servers.start()).url;
    root = await bootstrap(url);
    member = await join(root.client, 'member');
  });

  it('the table has routes of every auth mode', () => {
    expect(new Set(table.map((r) => r.auth))).toEqual(new Set(['public', 'optional', 'key', 'admin', 'proof']));
  });

  it.each(table.filter((r) => r.auth === 'proof').map((r) => [`${METHOD[r.method]} ${r.path}`, r] as const))('%s: an API key is no proof → FED_PEER_MISSING; a peer id alone → FED_PROOF_MISSING', async (_, r) => {
    expectError(await call(new Client(url), r), 401, 'FED_PEER_MISSING');
    expectError(await call(root.client, r), 401, 'FED_PEER_MISSING');
    expectError(await root.client.req(METHOD[r.method], pathOf(r), bodyOf(r), { 'X-Federation-Peer-Id': 'x' }), 401, 'FED_PROOF_MISSING');
  });

  it.each(table.filter((r) => r.auth === 'key' || r.auth === 'admin').map((r) => [`${METHOD[r.method]} ${r.path}`, r] as const))('%s: no key → AUTH_KEY_MISSING, unknown key → AUTH_KEY_INVALID', async (_, r) => {
    expectError(await call(new Client(url), r), 401, 'AUTH_KEY_MISSING');
    expectError(await call(new Client(url, 'svc_not-a-key'), r), 401, 'AUTH_KEY_INVALID');
  });

  it.each(table.filter((r) => r.auth === 'admin').map((r) => [`${METHOD[r.method]} ${r.path}`, r] as const))('%s: a member key → AUTH_ADMIN_REQUIRED', async (_, r) => {
    expectError(await call(member.client, r), 403, 'AUTH_ADMIN_REQUIRED');
  });

  it.each(table.filter((r) => r.auth === 'optional').map((r) => [`${METHOD[r.method]} ${r.path}`, r] as const))('%s: an unknown key is refused, not ignored', async (_, r) => {
    expectError(await call(new Client(url, 'svc_not-a-key'), r), 401, 'AUTH_KEY_INVALID');
  });

  it('GET /identities (admin) pages identities newest first, with last_seen moved by a request', async () => {
    const before = expectOk(await root.client.get('/identities?limit=1'));
    expect(before.identities).toHaveLength(1);
    expect(before.identities[0].id).toBe(member.id);
    expect(before.has_more).toBe(true);
    const rest = expectOk(await root.client.get(`/identities?limit=1&after=${before.cursor}`));
    expect(rest.identities.map((i: any) => i.id)).toEqual([root.id]);
    expect(rest).toMatchObject({ cursor: null, has_more: false });

    // the member has made no request yet: last_seen is when it joined. Its first request moves it to a time
    // read after the clock has passed the join time, so the move cannot hide in one millisecond.
    const seenAtJoin = Date.parse(before.identities[0].last_seen);
    const requestedAt = await waitFor('the clock to pass the join time', async () => Date.now(), (t) => t > seenAtJoin, 1000, 1);
    expectOk(await member.client.get('/roles'));
    // the touch is written beside the request, not before its answer: wait for it to land
    const seen = await waitFor(
      'last_seen to move past the request',
      async () => Date.parse(expectOk(await root.client.get('/identities')).identities.find((i: any) => i.id === member.id).last_seen),
      (t) => t >= requestedAt,
      10_000,
      50,
    );
    expect(seen).toBeGreaterThanOrEqual(requestedAt);
    expectError(await root.client.get('/identities?limit=0'), 400, 'VALIDATION_INVALID_TYPE', 'limit');
  });
});
