/**
 * Presence over a real embedded store with its clock injected: liveness moves from active to idle to
 * disconnected as last_seen ages, agents are counted across many pages of identities, and the per-process
 * memory of write times stays within its bound (least recently touched forgotten first).
 */
import { rm } from 'node:fs/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keys, indexes } from '../../src/identity/model.js';
import { ACTIVE_MS, IDLE_MS, Presence, presenceIndexes } from '../../src/presence/presence.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import type { Store } from '../../src/store/port.js';
import { scanLimits } from '../../src/store/scan.js';
import { tempDir } from '../helpers/redis.js';

describe('presence', () => {
  let dir: string;
  let store: Store;
  const made: Presence[] = [];
  let t = 1_000_000;
  let e = 0;
  const presence = (maxTracked?: number) => {
    const p = new Presence(store, { now: () => t, elapsed: () => e, maxTracked });
    made.push(p);
    return p;
  };
  const seenVersion = async (id: string) => (await store.get(`seen:${id}`))?.version ?? 0;

  beforeAll(async () => {
    dir = await tempDir('presence-');
    store = await openEmbeddedStore(dir);
  });
  afterEach(async () => {
    await Promise.all(made.splice(0).map((p) => p.stop()));
    scanLimits.pageSize = 1000;
  });
  afterAll(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('an agent last seen between ACTIVE_MS and IDLE_MS ago is idle, later disconnected; agents are counted across pages', async () => {
    const agents = ['A1', 'A2', 'A3', 'A4', 'A5'];
    await store.commit([
      ...agents.flatMap((id) => [
        { op: 'put' as const, key: keys.identity(id), value: { id, type: 'agent' } },
        { op: 'index' as const, index: indexes.identities, member: id },
        { op: 'index' as const, index: presenceIndexes.agents, member: id },
      ]),
      { op: 'put', key: keys.identity('H1'), value: { id: 'H1', type: 'human' } },
      { op: 'index', index: indexes.identities, member: 'H1' },
    ]);
    scanLimits.pageSize = 2;
    const p = presence();
    const t0 = t;
    await p.touch('A1');
    await p.touch('A2');
    expect(await p.agents()).toEqual({ total: 5, active: 2, idle: 0, disconnected: 3 });

    t = t0 + ACTIVE_MS + 1;
    await p.touch('A3');
    expect(await p.agents()).toEqual({ total: 5, active: 1, idle: 2, disconnected: 2 });

    // A3 was seen IDLE_MS - ACTIVE_MS - 1 before this: idle; A1 and A2 exactly IDLE_MS ago: still idle
    t = t0 + IDLE_MS;
    expect(await p.agents()).toEqual({ total: 5, active: 0, idle: 3, disconnected: 2 });
    t = t0 + IDLE_MS + 1;
    expect(await p.agents()).toEqual({ total: 5, active: 0, idle: 1, disconnected: 4 });
  });

  it('remembers at most maxTracked identities, forgetting the least recently touched first', async () => {
    const p = presence(50);
    const ids = Array.from({ length: 120 }, (_, i) => `B${String(i).padStart(3, '0')}`);
    for (const id of ids) await p.touch(id);
    expect(p.tracked).toBe(50);

    // a remembered identity touched again within the beat is not rewritten; a forgotten one is
    const kept = ids[119];
    const forgotten = ids[0];
    const [keptBefore, forgottenBefore] = [await seenVersion(kept), await seenVersion(forgotten)];
    await p.touch(kept);
    await p.touch(forgotten);
    expect(await seenVersion(kept)).toBe(keptBefore);
    expect(await seenVersion(forgotten)).toBe(forgottenBefore + 1);
    expect(p.tracked).toBe(50);
  });

  it('writes are throttled on the monotonic clock: after the wall clock steps back an hour, the next beat writes the stepped-back time', async () => {
    const p = presence();
    const before = t;
    t = before + 3_600_000;
    await p.touch('C1');
    expect((await p.lastSeen(['C1']))[0]).toBe(before + 3_600_000);
    t = before;
    e += 31_000;
    await p.touch('C1');
    expect((await p.lastSeen(['C1']))[0], 'written again once the throttle passed, though the wall clock went back').toBe(before);
    e += 1_000;
    t = before + 5_000_000;
    const v = await seenVersion('C1');
    await p.touch('C1');
    expect(await seenVersion('C1'), 'a wall clock step forward does not defeat the throttle either').toBe(v);
  });

  it('remembers at most maxTracked keys apart from identities; a key used again within the beat is not rewritten, a forgotten one is', async () => {
    const p = presence(50);
    const usedVersion = async (id: string) => (await store.get(`key-used:${id}`))?.version ?? 0;
    const ids = Array.from({ length: 120 }, (_, i) => `key_${String(i).padStart(3, '0')}`);
    for (const id of ids) await p.keyUsed(id);
    expect(p.trackedKeys).toBe(50);
    expect(p.tracked).toBe(0);
    const [kept, forgotten] = [ids[119], ids[0]];
    const [keptBefore, forgottenBefore] = [await usedVersion(kept), await usedVersion(forgotten)];
    await p.keyUsed(kept);
    await p.keyUsed(forgotten);
    expect(await usedVersion(kept)).toBe(keptBefore);
    expect(await usedVersion(forgotten)).toBe(forgottenBefore + 1);
    expect(await p.lastUsed([kept, 'key_never'])).toEqual([t, undefined]);
    expect(p.trackedKeys).toBe(50);
  });
});
