/**
 * Reservation and memory events as webhooks over real HTTP on both backends (the Redis runs with the
 * RediSearch module, as every memory test): a reservation granted, released by its holder and one expiring
 * by its timer, and a memory stored, updated and forgotten, each arrive once at a real receiver, signed and
 * verified by the independent `standardwebhooks` package. They come from the journal entries committed with
 * each change (the outbox). Webhooks are org-wide: a memory in an agent's own namespace is delivered too.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Service } from '../../src/app.js';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { REDISEARCH_MODULE } from '../helpers/redis.js';
import { BACKENDS, serversOn } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { expectOk, waitFor } from './support.js';

const FAST = { ALLOW_PRIVATE_NETWORK: 'true', WEBHOOK_BACKOFF_BASE_MS: '100', WEBHOOK_TIMEOUT_MS: '2000' };
const RESERVATION_EVENTS = ['reservation.granted', 'reservation.released', 'reservation.expired'];
const MEMORY_EVENTS = ['memory.stored', 'memory.updated', 'memory.forgotten'];

describe.each(BACKENDS)('reservation and memory webhooks on %s', (backend) => {
  const servers = serversOn(backend, { args: ['--loadmodule', REDISEARCH_MODULE] });
  let svc: Service;
  let root: Member;
  let alice: Member;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    svc = await servers.start(FAST);
    root = await bootstrap(svc.url);
    alice = await join(root.client, 'alice');
  });
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });

  /** A receiver with a webhook on `events`; resolves once `count` distinct events have arrived, signed. */
  async function hooked(events: string[]) {
    const rx = await startReceiver();
    receivers.push(rx);
    rx.secret = expectOk(await root.client.post('/admin/webhooks', { url: rx.url, events }), 201).secret;
    const received = async (count: number) => {
      await waitFor(`${count} webhook events`, () => rx.unique().size, (n) => n >= count, 20_000);
      expect(rx.requests.every((r) => r.verified), JSON.stringify(rx.requests.find((r) => !r.verified))).toBe(true);
      return [...rx.unique().values()].map((r) => r.body);
    };
    return received;
  }

  it('a reservation granted, released, and one expiring by its timer each arrive as a signed webhook', async () => {
    const received = await hooked(RESERVATION_EVENTS);
    const [held] = expectOk(await alice.client.post('/reservations', { paths: ['src/held/**'], reason: 'editing' })).granted;
    const [brief] = expectOk(await alice.client.post('/reservations', { paths: ['src/brief/**'], ttl_s: 1 })).granted;
    const released = expectOk(await alice.client.post(`/reservations/${held.id}/release`));

    const bodies = await received(4);
    const got = bodies.map((b) => [b.type, b.data.reservation.id]).sort();
    expect(got).toEqual([['reservation.expired', brief.id], ['reservation.granted', brief.id], ['reservation.granted', held.id], ['reservation.released', held.id]].sort());
    const of = (type: string, id: string) => bodies.find((b) => b.type === type && b.data.reservation.id === id);
    expect(of('reservation.granted', held.id)).toEqual({ type: 'reservation.granted', timestamp: held.created_at, data: { reservation: held } });
    expect(of('reservation.released', held.id)).toEqual({ type: 'reservation.released', timestamp: released.released_at, data: { reservation: released } });
    expect(of('reservation.expired', brief.id)).toMatchObject({ timestamp: brief.expires_at, data: { reservation: { id: brief.id, identity: alice.id, path: 'src/brief/**', state: 'expired' } } });
  });

  it('a memory stored, updated and forgotten each arrive as a signed webhook, whatever its namespace', async () => {
    const received = await hooked(MEMORY_EVENTS);
    const stored = expectOk(await alice.client.post('/memory/store', { namespace: `agent:${alice.id}`, content: 'the deploy key rotates on Fridays', entity: 'deploy' }), 201);
    const updated = expectOk(await alice.client.patch(`/memory/${stored.id}`, { content: 'the deploy key rotates on Mondays' }));
    const forgotten = expectOk(await alice.client.post('/memory/forget', { id: stored.id }));

    const bodies = await received(3);
    const of = (type: string) => bodies.find((b) => b.type === type);
    expect(bodies.map((b) => b.type).sort()).toEqual([...MEMORY_EVENTS].sort());
    expect(of('memory.stored')).toEqual({ type: 'memory.stored', timestamp: stored.updated_at, data: { memory: stored } });
    expect(of('memory.updated')).toEqual({ type: 'memory.updated', timestamp: updated.updated_at, data: { memory: updated } });
    expect(of('memory.forgotten')).toEqual({ type: 'memory.forgotten', timestamp: forgotten.deleted_at, data: { memory: forgotten } });
    for (const b of bodies) expect(b.data.memory).not.toHaveProperty('embedding');
  });
});
