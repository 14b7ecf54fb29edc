/**
 * A key's `last_used_at` over real HTTP on both backends: null before the key is used, set after a request
 * with it (and by an open stream holding it), untouched by another key's use, written at most once per
 * PRESENCE_TOUCH_MS per key (a second request within it leaves the value; past a short one it moves), and
 * shown only to admins.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { expectError, expectOk, waitFor } from './support.js';

describe.each(BACKENDS)('key last use on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  let agent: Member;

  const keyOf = async (admin: Client, id: string) => (expectOk(await admin.get('/admin/api-keys')) as any[]).find((k) => k.id === id);
  const mint = async (admin: Client, owner: string) => expectOk(await admin.post('/admin/api-keys', { owner }), 201) as { id: string; api_key: string };
  const lastUsed = async (admin: Client, id: string): Promise<string | null> => (await keyOf(admin, id)).last_used_at;
  const use = async (url: string, key: string) => expectOk(await new Client(url, key).get('/signals/list'));

  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
    agent = await join(root.client, 'agent-1');
  });

  it('is null before use, set by a request with the key, not moved by another key, and written once per interval', async () => {
    const [a, b] = [await mint(root.client, agent.id), await mint(root.client, agent.id)];
    expect(await keyOf(root.client, a.id)).toMatchObject({ id: a.id, owner: agent.id, revoked: false, last_used_at: null });
    expect(await lastUsed(root.client, b.id)).toBeNull();

    const before = Date.now();
    await use(svc.url, a.api_key);
    const first = await waitFor('a last use', () => lastUsed(root.client, a.id), (v) => v !== null);
    expect(Date.parse(first!)).toBeGreaterThanOrEqual(before - 1000);
    expect(await lastUsed(root.client, b.id)).toBeNull();

    // a second use of a within the interval (30 s by default) writes nothing: b's use, written after it
    // would have been, shows up while a's value stays the first
    await use(svc.url, a.api_key);
    await use(svc.url, b.api_key);
    await waitFor('b last use', () => lastUsed(root.client, b.id), (v) => v !== null);
    expect(await lastUsed(root.client, a.id)).toBe(first);
  });

  it('moves once the interval has passed (a short PRESENCE_TOUCH_MS)', async () => {
    const quick = await servers.start({ PRESENCE_TOUCH_MS: '50' });
    const admin = await bootstrap(quick.url);
    const k = await mint(admin.client, admin.id);
    await use(quick.url, k.api_key);
    const first = await waitFor('first use', () => lastUsed(admin.client, k.id), (v) => v !== null);
    await waitFor(
      'a later use written',
      async () => {
        await use(quick.url, k.api_key);
        return lastUsed(admin.client, k.id);
      },
      (v) => v !== null && Date.parse(v) > Date.parse(first!),
    );
  });

  it('a key held only by an open stream is shown used', async () => {
    const k = await mint(root.client, agent.id);
    const ac = new AbortController();
    const res = await fetch(`${svc.url}/signals/stream?token=${k.api_key}`, { signal: ac.signal });
    try {
      expect(res.status).toBe(200);
      await waitFor('stream last use', () => lastUsed(root.client, k.id), (v) => v !== null);
    } finally {
      ac.abort();
    }
  });

  it('a non-admin key cannot read any key’s last use through the admin route', async () => {
    expectError(await agent.client.get('/admin/api-keys'), 403, 'AUTH_ADMIN_REQUIRED');
  });
});
