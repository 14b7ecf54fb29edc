/**
 * Open sockets and streams follow their key's current rights, with real WebSocket and SSE clients on both
 * backends and across two instances on one Redis: a revoked or expired key ends them (close 4401, the SSE
 * `closed` event) without any op; a demotion and a narrowed scope narrow them from the very next entry; memory
 * events obey the namespace ACL and memory_scopes for admins too (the reproduced leak: a demoted admin's
 * stream got `memory.stored` of another agent's namespace with its content).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, Client, join, type Member } from '../helpers/client.js';
import { expectHeldEnded as expectEnded, hold, PushSocket, SseStream, type Held } from '../helpers/push.js';
import { BACKENDS, serversOn, startServer } from '../helpers/server.js';
import { emitOk, expectOk, waitFor } from './support.js';

const sseSignals = (h: Held) => h.sse.signalIds();
const stored = (s: SseStream | PushSocket) =>
  s instanceof SseStream ? s.events.filter((e) => e.type === 'memory.stored').map((e) => e.signal.id) : (s.frames as any[]).filter((f) => f.type === 'memory.stored').map((f) => f.memory.id);

function credentialSuite(url: () => string, other: () => string, admin: () => Member, store: () => Service['store']) {
  const held: Held[] = [];
  afterAll(async () => {
    for (const h of held) h.sse.close();
    await Promise.all(held.map((h) => h.ws.close()));
  });
  const open = async (key: string, label: string) => {
    const h = await hold(other(), key, label);
    held.push(h);
    return h;
  };
  const root = () => admin().client;
  const mint = async (owner: string, body: Record<string, unknown> = {}) => expectOk(await root().post('/admin/api-keys', { owner, ...body }), 201) as { api_key: string; id: string };
  const setAdmin = async (id: string, is_admin: boolean) => expectOk(await root().put(`/identities/${id}`, { is_admin }));

  it('a revoked key ends its socket (4401) and its stream at once, without any op; the identity\'s other key stays connected', async () => {
    const bob = await join(root(), `rev-${Date.now()}`);
    const k = await mint(bob.id);
    const h = await open(k.api_key, 'revoked');
    const other = await open(bob.key, 'other key');
    expectOk(await root().post(`/admin/api-keys/${k.id}/revoke`));
    await expectEnded(h, 4401, 'AUTH_KEY_REVOKED');
    const s = await emitOk(admin(), { signal_type: 'pulse', content: 'still here', to_identity: bob.id });
    await other.ws.waitSignals([s.id]);
    await other.sse.waitSignals([s.id]);
    expect(other.ws.closeInfo).toBeUndefined();
  });

  it('a key that expires ends its socket and stream when it runs out, not before', async () => {
    const bob = await join(root(), `exp-${Date.now()}`);
    const expires = Date.now() + 4000;
    const k = await mint(bob.id, { expires_at: new Date(expires).toISOString() });
    const h = await open(k.api_key, 'expiring');
    await expectEnded(h, 4401, 'AUTH_KEY_EXPIRED', 20_000);
    expect(Date.now()).toBeGreaterThanOrEqual(expires);
  });

  it('a demoted admin stream stops seeing what only admins see from the next entry, and sees it again once promoted; its socket stays open', async () => {
    const [alice, bob, dana] = await Promise.all(['a', 'b', 'd'].map((n) => join(root(), `dem-${n}-${Date.now()}`)));
    await setAdmin(dana.id, true);
    const h = await open(dana.key, 'dana');
    const before = await emitOk(alice, { signal_type: 'pulse', content: 'for bob', to_identity: bob.id });
    await h.sse.waitSignals([before.id]);

    await setAdmin(dana.id, false);
    const hidden = await emitOk(alice, { signal_type: 'pulse', content: 'for bob, after', to_identity: bob.id });
    const mine = await emitOk(alice, { signal_type: 'pulse', content: 'for dana', to_identity: dana.id });
    await h.sse.waitSignals([mine.id]);
    await h.ws.waitSignals([mine.id]);
    expect(sseSignals(h)).toEqual([before.id, mine.id]);
    expect(h.ws.signalIds()).toEqual([mine.id]);
    expect(hidden.id).toBeTruthy();
    expect(h.ws.closeInfo).toBeUndefined();

    // promoted again, this stream and one opened while not an admin are offered other identities' entries
    const late = await open(dana.key, 'dana, opened as a member');
    await setAdmin(dana.id, true);
    const shown = await emitOk(alice, { signal_type: 'pulse', content: 'for bob, promoted', to_identity: bob.id });
    await h.sse.waitSignals([shown.id]);
    await late.sse.waitSignals([shown.id]);
    expect(sseSignals(h)).toEqual([before.id, mine.id, shown.id]);
    expect(sseSignals(late)).toEqual([shown.id]);
  });

  it('a narrowed key scope narrows its socket and stream from the next entry', async () => {
    const [alice, bob] = await Promise.all(['a', 'b'].map((n) => join(root(), `scope-${n}-${Date.now()}`)));
    const k = await mint(bob.id, { permissions: { signal_types: ['keep', 'drop'] } });
    const h = await open(k.api_key, 'scoped');
    const first = await emitOk(alice, { signal_type: 'drop', content: 'in scope', to_identity: bob.id });
    await h.ws.waitSignals([first.id]);
    await h.sse.waitSignals([first.id]);

    // no route changes a key's permissions yet: any writer of the key record is heard (the store appends the change)
    const rec = (await store().get<any>(`apikey:${k.id}`))!;
    expect((await store().commit([{ op: 'put', key: `apikey:${k.id}`, value: { ...rec.value, permissions: { ...rec.value.permissions, signal_types: ['keep'] } }, expect: rec.version }])).ok).toBe(true);
    const dropped = await emitOk(alice, { signal_type: 'drop', content: 'out of scope now', to_identity: bob.id });
    const kept = await emitOk(alice, { signal_type: 'keep', content: 'in scope', to_identity: bob.id });
    await h.ws.waitSignals([kept.id]);
    await h.sse.waitSignals([kept.id]);
    expect(h.ws.signalIds()).toEqual([first.id, kept.id]);
    expect(sseSignals(h)).toEqual([first.id, kept.id]);
    expect(dropped.id).not.toBe(kept.id);
    expect(h.ws.closeInfo).toBeUndefined();
  });

  it("memory events follow the namespace ACL for admins too: an admin's stream, demoted or not, never gets another agent's namespace", async () => {
    const [alice, dana] = await Promise.all(['a', 'd'].map((n) => join(root(), `mem-${n}-${Date.now()}`)));
    await setAdmin(dana.id, true);
    const adminHeld = await open(admin().key, 'admin');
    const demoted = await open(dana.key, 'demoted');
    await setAdmin(dana.id, false);
    const store = async (namespace: string, content: string) => expectOk(await alice.client.post('/memory/store', { namespace, content }), 201);
    const secret = await store(`agent:${alice.id}`, 'alice private notes');
    const everyone = await store('org', 'for every member');
    for (const s of [adminHeld.ws, adminHeld.sse, demoted.ws, demoted.sse]) {
      await waitFor(`${s.label}: the org memory`, () => stored(s), (ids) => ids.includes(everyone.id));
      expect(stored(s), s.label).toEqual([everyone.id]);
    }
    expect(secret.id).not.toBe(everyone.id);
  });
}

describe.each(BACKENDS)('open streams follow their credential on %s', (backend) => {
  const servers = serversOn(backend);
  let svc: Service;
  let root: Member;
  beforeAll(async () => {
    svc = await servers.start();
    root = await bootstrap(svc.url);
  });
  credentialSuite(
    () => svc.url,
    () => svc.url,
    () => root,
    () => svc.store,
  );
});

describe('open streams follow their credential across two instances on one Redis (changes on one, streams on the other)', () => {
  const servers = serversOn('redis');
  let a: Service;
  let b: Service;
  let root: Member;
  beforeAll(async () => {
    const env = await servers.env();
    [a, b] = await Promise.all([startServer(env), startServer(env)]);
    root = await bootstrap(a.url);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });
  credentialSuite(
    () => a.url,
    () => b.url,
    () => ({ ...root, client: new Client(a.url, root.key) }),
    () => a.store,
  );
});
