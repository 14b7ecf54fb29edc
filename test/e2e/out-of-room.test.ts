/**
 * Out of room (issue 25.3, docs/reliability.md "Out of room"): the store's disk fills (embedded: DATA_DIR on a
 * 24 MB tmpfs this test mounts) or Redis reaches `maxmemory` under `noeviction`, under a load of emits and
 * uploads. Every write answers 201 or 507 STORE_FULL (never 500, no unhandled rejection logged), reads keep
 * answering 200 (on Redis with the rate limiter on, whose own write Redis refuses too), nothing refused is
 * half-written (the listed signals are exactly the emits answered 201), and writes succeed again without a
 * restart once room returns; a restart afterwards finds every answered write.
 *
 * Also the process's own memory: a server with a small V8 heap under a burst of 1 MB bodies may die of it,
 * but never corrupts the store: a restart serves again and every emit answered 201 is there.
 *
 * A key first used while the store is full is served as ever (its last-use write is refused and dropped,
 * nothing logged as an error); once room returns its next use is written.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join as joinPath } from 'node:path';
import { createClient } from 'redis';
import { afterAll, describe, expect, it } from 'vitest';
import { bootstrap, Client, type Member, type Res } from '../helpers/client.js';
import { upload } from '../helpers/blobs.js';
import { startRedis, tempDir, type RedisServer } from '../helpers/redis.js';
import { BACKENDS, serversOn, spawnServer, type ChildServer } from '../helpers/server.js';
import { expectError, expectOk, listAll, waitFor } from '../api/support.js';

const CONTENT = 'x'.repeat(20_000);
const MAX_ROUNDS = 400;

/** stdout and stderr of a spawned server, kept for the unhandled-rejection check */
function captured(s: ChildServer): () => string {
  let out = '';
  s.proc.stdout!.on('data', (d) => (out += d));
  s.proc.stderr!.on('data', (d) => (out += d));
  return () => out;
}

interface Tally {
  ok: string[];
  full: number;
  /** the last STORE_FULL answer to an emit, and the backends the refusals named */
  refused?: Res;
  named: Set<string>;
  other: Res[];
}

/** Emits (and every fourth round an upload) four at a time until `enough` says so: answers sorted by outcome. */
async function load(me: Member, enough: (t: Tally) => boolean): Promise<Tally> {
  const t: Tally = { ok: [], full: 0, other: [], named: new Set() };
  for (let round = 0; round < MAX_ROUNDS && !enough(t); round++) {
    const emits = Array.from({ length: 4 }, (_, i) => me.client.post('/emit', { signal_type: 'pulse', content: `${round}.${i} ${CONTENT}`, to_identity: me.id }));
    const up = round % 4 === 0 ? [upload(me.client.url, me.key, '/artifacts/upload', Buffer.alloc(200_000, round % 251), { fields: { name: `a${round}` } })] : [];
    const [answers, uploads] = await Promise.all([Promise.all(emits), Promise.all(up)]);
    for (const [i, r] of ([...answers, ...uploads] as Res[]).entries()) {
      if (r.status === 201) {
        if (i < answers.length) t.ok.push(r.body.data.id);
      } else if (r.status === 507 && r.body?.error?.code === 'STORE_FULL') {
        t.full++;
        t.named.add(r.body.error.details?.backend);
        if (i < answers.length) t.refused = r;
      }
      else t.other.push(r);
    }
  }
  return t;
}

/** A key of `me` not used yet: its first use while the store is full makes a last-use write the store refuses. */
async function spareKey(me: Member): Promise<{ id: string; client: Client }> {
  const k = expectOk(await me.client.post('/admin/api-keys', {}), 201);
  return { id: k.id, client: new Client(me.client.url, k.api_key) };
}

const lastUsed = async (me: Member, id: string) => (expectOk(await me.client.get('/admin/api-keys')) as any[]).find((k) => k.id === id).last_used_at;

/** A refused last-use write is forgotten: once there is room, the key's next use is written. */
async function usedAgain(me: Member, spare: { id: string; client: Client }): Promise<void> {
  await waitFor('the spare key’s last use written once room returned', async () => {
    expectOk(await spare.client.get(`/inbox/identity/${me.id}?limit=1`));
    return lastUsed(me, spare.id);
  }, (v) => v !== null, 20_000);
}

const sentBy = async (me: Member) => (await listAll(me.client)).filter((s) => s.content.endsWith(CONTENT)).map((s) => s.id as string);

describe('embedded: DATA_DIR on a filesystem that fills', () => {
  let mount: string | undefined;
  let server: ChildServer | undefined;
  afterAll(async () => {
    await server?.stop();
    if (mount) execFileSync('umount', ['-l', mount]);
  });

  it('writes answer 507 STORE_FULL while the disk is full, reads go on, nothing refused is kept, writes come back by themselves', { timeout: 240_000 }, async () => {
    mount = await tempDir('svc-tmpfs-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mount]);
    const dataDir = joinPath(mount, 'data');
    mkdirSync(dataDir);
    server = await spawnServer({ DATA_DIR: dataDir });
    const logs = captured(server);
    const me = await bootstrap(server.url);
    const spare = await spareKey(me);

    // a filler leaves about 3 MB: the store and the blobs run out within a few rounds
    const filler = joinPath(mount, 'filler');
    const fd = openSync(filler, 'w');
    const chunk = Buffer.alloc(1 << 20);
    while (statfsSync(mount).bavail * statfsSync(mount).bsize > 3 << 20) writeSync(fd, chunk);
    closeSync(fd);

    const full = await load(me, (t) => t.full >= 20);
    expect(full.other.map((r) => [r.status, r.body?.error?.code]), 'every answer is 201 or 507 STORE_FULL').toEqual([]);
    expect(full.full).toBeGreaterThanOrEqual(20);
    expectError(full.refused!, 507, 'STORE_FULL');
    expect(full.refused!.body.error.details).toEqual({ backend: 'embedded' });
    expect([...full.named].sort(), 'the store and the blobs each refuse when the disk is full').toEqual(['blobs', 'embedded']);

    // reads go on, and hold exactly the emits answered 201
    expect((await sentBy(me)).sort()).toEqual([...full.ok].sort());
    expectOk(await me.client.get(`/inbox/identity/${me.id}?limit=5`));
    // a key's first use while full answers as ever: its last-use write is the store's to refuse, never the request's
    expectOk(await spare.client.get(`/inbox/identity/${me.id}?limit=5`));

    // room returns: writes succeed again without a restart
    rmSync(filler);
    const back = await waitFor('an emit answered 201 after room returned', () => me.client.post('/emit', { signal_type: 'pulse', content: `back ${CONTENT}`, to_identity: me.id }), (r) => r.status === 201, 20_000);
    const after = await load(me, (t) => t.ok.length >= 8);
    expect(after.full + after.other.length).toBe(0);
    await usedAgain(me, spare);
    expect(logs()).not.toMatch(/unhandled rejection|INTERNAL_SERVER_ERROR|"level":50/);

    // a restart on the same data finds every answered write
    await server.stop();
    server = await spawnServer({ DATA_DIR: dataDir });
    const again = { ...me, client: new Client(server.url, me.key) };
    expect((await sentBy(again)).sort()).toEqual([...full.ok, back.body.data.id, ...after.ok].sort());
  });
});

describe('Redis: maxmemory reached under noeviction', () => {
  let redis: RedisServer | undefined;
  let server: ChildServer | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  it('writes answer 507 STORE_FULL, reads (through the rate limiter) go on, nothing refused is kept, writes come back without a restart', { timeout: 240_000 }, async () => {
    redis = await startRedis({ args: ['--maxmemory-policy', 'noeviction'] });
    const admin = createClient({ url: redis.url });
    await admin.connect();
    try {
      const env = { REDIS_URL: redis.url, REDIS_PREFIX: 'full', RATE_LIMIT_DEFAULT: '1000000' };
      server = await spawnServer(env);
      const logs = captured(server);
      const me = await bootstrap(server.url);
      const spare = await spareKey(me);
      const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
      await admin.configSet('maxmemory', String(used + (3 << 20)));

      const full = await load(me, (t) => t.full >= 20);
      expect(full.other.map((r) => [r.status, r.body?.error?.code]), 'every answer is 201 or 507 STORE_FULL').toEqual([]);
      expectError(full.refused!, 507, 'STORE_FULL');
      expect(full.refused!.body.error.details).toEqual({ backend: 'redis' });
      expect((await sentBy(me)).sort()).toEqual([...full.ok].sort());
      expectOk(await me.client.get(`/inbox/identity/${me.id}?limit=5`));
      // a limit no write fits under: the spare key's first use answers 200, its last-use write is refused
      await admin.configSet('maxmemory', '1');
      expectOk(await spare.client.get(`/inbox/identity/${me.id}?limit=5`));

      await admin.configSet('maxmemory', '0');
      expect(await lastUsed(me, spare.id), 'the last-use write Redis refused is not there').toBeNull();
      const back = await waitFor('an emit answered 201 after room returned', () => me.client.post('/emit', { signal_type: 'pulse', content: `back ${CONTENT}`, to_identity: me.id }), (r) => r.status === 201, 20_000);
      const after = await load(me, (t) => t.ok.length >= 8);
      expect(after.full + after.other.length).toBe(0);
      await usedAgain(me, spare);
      expect(logs()).not.toMatch(/unhandled rejection|INTERNAL_SERVER_ERROR|"level":50/);
      expect((await sentBy(me)).sort()).toEqual([...full.ok, back.body.data.id, ...after.ok].sort());
    } finally {
      await admin.quit();
    }
  });
});

describe.each(BACKENDS)('a heap limit reached under a burst of large bodies (%s)', (backend) => {
  const servers = serversOn(backend);
  let server: ChildServer | undefined;
  afterAll(async () => {
    await server?.stop('SIGKILL');
  });

  it('never corrupts the store: a restart serves again with every emit answered 201', { timeout: 240_000 }, async () => {
    const env = await servers.env({});
    server = await spawnServer({ ...env, NODE_OPTIONS: '--max-old-space-size=96' });
    const me = await bootstrap(server.url);
    const big = 'y'.repeat(900_000);
    const answered: string[] = [];
    const exited = new Promise<void>((resolve) => server!.proc.once('exit', () => resolve()));
    let died = false;
    void exited.then(() => (died = true));
    // bursts until the process dies (the event this test is about): how many it takes depends on how fast a loaded machine drains them
    for (let round = 0; !died; round++) {
      const rs = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          me.client.post('/emit', { signal_type: 'pulse', content: `${round}.${i} ${big}`, to_identity: me.id }).catch(() => undefined),
        ),
      );
      for (const r of rs) if (r?.status === 201) answered.push(r.body.data.id);
    }
    expect(died, 'the burst reached the heap limit (V8 aborts the process)').toBe(true);
    expect(answered.length, 'some emits were answered before it').toBeGreaterThan(0);
    await server.stop('SIGKILL');
    server = await spawnServer(env);
    const again = { ...me, client: new Client(server.url, me.key) };
    const listed = new Set((await listAll(again.client)).map((s) => s.id));
    expect(answered.filter((id) => !listed.has(id)), 'every emit answered 201 survives').toEqual([]);
    expectOk(await again.client.post('/emit', { signal_type: 'pulse', content: 'after', to_identity: me.id }), 201);
  });
});
