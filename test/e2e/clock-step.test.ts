/**
 * The wall clock steps an hour forward and then back while leases, snoozes, reservations and trust expiries
 * are pending (issue 25.6, docs/reliability.md "Time"). The server runs as its own process under libfaketime
 * (Debian's `faketime`), whose offset file the test rewrites: the process's wall clock (CLOCK_REALTIME) steps
 * exactly as an NTP step or an operator's `date -s` would move it, while its monotonic clock, which event-loop
 * timers run on, keeps going, as the kernel's does.
 *
 * Every pending end is a wall-clock due time (absolute, stamped by the process that set it), so:
 * - a step forward ends what falls due inside the step (early, in elapsed time, by at most the step) and
 *   nothing due later;
 * - a step back delays what is pending by at most the step (it ends when the wall clock reaches its due time
 *   again), never forever; and an end that already happened is not undone by the step back.
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join as joinPath } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bootstrap, join, type Member } from '../helpers/client.js';
import { OwnRedis, tempDir } from '../helpers/redis.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { emitOk, expectError, expectOk, findSignal, waitFor } from '../api/support.js';

const FAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const HOUR = 3_600_000;
const MIN = 60_000;

/** The server's clock: an offset from the real one, read by libfaketime from a file on every clock call. */
class SteppedClock {
  private constructor(
    readonly file: string,
    public offsetMs = 0,
  ) {}

  static async make(): Promise<SteppedClock> {
    if (!existsSync(FAKETIME)) throw new Error(`${FAKETIME} not found: apt-get install faketime (.ci/run installs it); this test is never skipped`);
    const c = new SteppedClock(joinPath(await tempDir('svc-clock-'), 'offset'));
    await c.set(0);
    return c;
  }

  /** libfaketime's relative form: "+N" seconds (FAKETIME_NO_CACHE makes the process read it on every call). */
  async set(offsetMs: number): Promise<void> {
    this.offsetMs = offsetMs;
    await writeFile(this.file, `${offsetMs >= 0 ? '+' : ''}${Math.round(offsetMs / 1000)}\n`);
  }

  env(): Record<string, string> {
    return { LD_PRELOAD: FAKETIME, FAKETIME_TIMESTAMP_FILE: this.file, FAKETIME_NO_CACHE: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
  }

  /** What the server's wall clock reads now. */
  now(): number {
    return Date.now() + this.offsetMs;
  }
}

const stateOf = async (m: Member, id: string) => (await findSignal(m.client, id))?.delivery_state;
const receiptOf = async (m: Member, id: string) => {
  const items = expectOk(await m.client.get(`/inbox/identity/${m.id}?include_snoozed=true&limit=100`)).signals as any[];
  return items.find((s) => s.id === id)?.receipt_state;
};
const reservationOf = async (m: Member, id: string) => expectOk(await m.client.get(`/reservations/${id}`)).state;
const trustOf = async (root: Member, id: string) => expectOk(await root.client.get(`/org/company/peers/${id}`));

describe.each(BACKENDS)('the wall clock steps forward and back (%s)', (backend) => {
  const servers = serversOn(backend);
  let server: ChildServer | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('a step forward ends only what falls due inside it; a step back delays what is pending by at most the step and revives nothing', async () => {
    const clock = await SteppedClock.make();
    server = await spawnServer(await servers.env({ ...clock.env(), ALLOW_PRIVATE_NETWORK: 'true' }));
    const root = await bootstrap(server.url);
    const boss = await join(root.client, 'boss');
    const worker = await join(root.client, 'worker');
    const project = 'clock-' + backend;

    const task = async (content: string, leaseMs: number) => {
      const s = await emitOk(boss, { signal_type: 'task', content, to_identity: worker.id });
      const claimed = expectOk(await worker.client.post('/claim', { signal_id: s.id, lease_ms: leaseMs }));
      expect(Date.parse(claimed.claim_expires_at) - clock.now(), 'the lease is stamped on the server clock').toBeGreaterThan(leaseMs - MIN);
      return s.id as string;
    };
    const snoozed = async (content: string, forMs: number) => {
      const s = await emitOk(boss, { signal_type: 'query', content, to_identity: worker.id });
      expectOk(await worker.client.post('/inbox/snooze', { signal_id: s.id, until: new Date(clock.now() + forMs).toISOString() }));
      return s.id as string;
    };
    const reserved = async (path: string, ttlS: number) => expectOk(await worker.client.post('/reservations', { project, paths: [path], ttl_s: ttlS })).granted[0].id as string;
    const trusted = async (name: string, expiresS: number) => expectOk(await root.client.post('/federation/trust', { name, endpoint: `http://127.0.0.1:9/${name}`, expires_in: expiresS }), 201).peer_id as string;

    // pending before the step: one of each due inside the coming hour, one due after it
    const lease30 = await task('due in 30 min', 30 * MIN);
    const lease2h = await task('due in 2 h', 2 * HOUR);
    const snooze30 = await snoozed('snoozed 30 min', 30 * MIN);
    const snooze2h = await snoozed('snoozed 2 h', 2 * HOUR);
    const rsv30 = await reserved('a/**', 1800);
    const rsv2h = await reserved('b/**', 7200);
    const trust30 = await trusted('peer-30m', 1800);
    const trust2h = await trusted('peer-2h', 7200);

    // +1 h: what fell due inside the step ends, once the next timer poll runs
    await clock.set(HOUR);
    await waitFor('the 30 min lease ends', () => stateOf(boss, lease30), (s) => s !== 'leased', 20_000);
    await waitFor('the 30 min snooze ends', () => receiptOf(worker, snooze30), (s) => s === 'unread', 20_000);
    await waitFor('the 30 min reservation expires', () => reservationOf(worker, rsv30), (s) => s === 'expired', 20_000);
    await waitFor('the 30 min trust expires', () => trustOf(root, trust30), (p) => p?.trust_expired === true, 20_000);
    // a lease of 1 s taken now ends by a later poll: every poll before it saw the 2 h items and left them
    const probe = await task('probe after the step', 1000);
    await waitFor('a poll after the step', () => stateOf(boss, probe), (s) => s !== 'leased', 20_000);
    expect(await stateOf(boss, lease2h), 'due 1 h after the step: not ended early by more than the step').toBe('leased');
    expect(await receiptOf(worker, snooze2h)).toBe('snoozed');
    expect(await reservationOf(worker, rsv2h)).toBe('active');
    expect((await trustOf(root, trust2h)).trust_expired).toBe(false);
    // something begun during the step: stamped on the stepped clock
    const leaseDuring = await task('claimed at +1 h for 10 min', 10 * MIN);

    // back to the real time: what ended stays ended, what is pending waits for its wall-clock due time
    await clock.set(0);
    const probe2 = await task('probe after the step back', 1000);
    await waitFor('a poll after the step back', () => stateOf(boss, probe2), (s) => s !== 'leased', 20_000);
    expect(await stateOf(boss, lease30), 'an ended lease is not revived').not.toBe('leased');
    expect((await trustOf(root, trust30)).trust_expired, 'an expired trust is not revived').toBe(true);
    expect(await reservationOf(worker, rsv30)).toBe('expired');
    expect(await stateOf(boss, leaseDuring), 'the step back delays it').toBe('leased');
    expect(await stateOf(boss, lease2h)).toBe('leased');
    expect(await receiptOf(worker, snooze2h)).toBe('snoozed');
    expect(await reservationOf(worker, rsv2h)).toBe('active');

    // ... by at most the step: the lease begun at +1 h ends when the wall clock reaches +1 h 10 min again
    await clock.set(HOUR + 11 * MIN);
    await waitFor('the lease begun during the step ends at its wall-clock due time', () => stateOf(boss, leaseDuring), (s) => s !== 'leased', 20_000);
    expect(await stateOf(boss, lease2h)).toBe('leased');
    await clock.set(2 * HOUR + MIN);
    await waitFor('the 2 h lease ends', () => stateOf(boss, lease2h), (s) => s !== 'leased', 20_000);
    await waitFor('the 2 h snooze ends', () => receiptOf(worker, snooze2h), (s) => s === 'unread', 20_000);
    await waitFor('the 2 h reservation expires', () => reservationOf(worker, rsv2h), (s) => s === 'expired', 20_000);
    await waitFor('the 2 h trust expires', () => trustOf(root, trust2h), (p) => p?.trust_expired === true, 20_000);
  });
});

describe('a Redis outage while the wall clock steps back', () => {
  let redis: OwnRedis | undefined;
  let server: ChildServer | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await redis?.kill();
  });

  it('requests still answer 503 within the connect timeout: how long a request has waited is measured on the monotonic clock', async () => {
    const clock = await SteppedClock.make();
    redis = await OwnRedis.start();
    server = await spawnServer({ ...clock.env(), REDIS_URL: redis.url, REDIS_PREFIX: 'clk', DB_CONNECT_TIMEOUT_MS: '1000' });
    const root = await bootstrap(server.url);
    await redis.kill();
    // the loss is noticed on the real time; then the wall clock steps back an hour
    expectError(await root.client.get('/signals/list?limit=1'), 503, 'DB_CONNECT_FAILED');
    await clock.set(-HOUR);
    const t = performance.now();
    const res = await root.client.get('/signals/list?limit=1');
    expectError(res, 503, 'DB_CONNECT_FAILED');
    // a request that waited on the wall clock would hang for the hour; the bound is the connect timeout plus load slack
    expect(performance.now() - t).toBeLessThan(15_000);
    await redis.up();
    await waitFor('answers again once Redis is back', async () => (await root.client.get('/signals/list?limit=1')).status, (s) => s === 200, 20_000);
  });
});
