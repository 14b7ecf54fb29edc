/** The retry backoff of the runtime: the first attempt never waits; later waits are jittered and capped. */
import { describe, expect, it } from 'vitest';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { backoffMs, Runtime } from '../../src/runtime/runtime.js';
import { openEmbeddedStore } from '../../src/store/embedded.js';
import type { Store } from '../../src/store/port.js';
import { tempDir } from '../helpers/redis.js';

describe('runtime retry backoff', () => {
  it('does not wait before the first attempt', () => {
    expect(backoffMs(0, () => 1)).toBe(0);
  });

  it('waits a random share of a ceiling that doubles per attempt up to a cap', () => {
    const ceilings = Array.from({ length: 12 }, (_, i) => backoffMs(i + 1, () => 1));
    expect(ceilings.slice(0, 6)).toEqual([1, 2, 4, 8, 16, 32]);
    expect(new Set(ceilings.slice(6))).toEqual(new Set([50]));
    expect(backoffMs(5, () => 0.25)).toBe(4);
    expect(backoffMs(5, () => 0)).toBe(0);
  });

  it('spreads contenders: waits drawn with the real random source differ', () => {
    const waits = new Set(Array.from({ length: 20 }, () => backoffMs(8)));
    expect(waits.size).toBeGreaterThan(15);
    for (const w of waits) expect(w).toBeLessThanOrEqual(50);
  });
});

describe('timer polls while the store fails', () => {
  it('back off instead of polling a failing store at the poll rate, and return to the rate once it answers', async () => {
    const dir = await tempDir('svc-timers-');
    const store = await openEmbeddedStore(dir);
    const failures: number[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => JSON.parse(line).msg === 'timer poll failed' && failures.push(Date.now()) });
    const down = async () => Promise.reject(new Error('backend down'));
    // a poll reads the next due time before it claims: a backend that is down fails both
    const failing: Store = { ...store, nextTimerAt: down, claimTimers: down };
    const rt = new Runtime(failing, log, 20);
    try {
      rt.startTimers();
      await new Promise((r) => setTimeout(r, 1300));
      // at the 20 ms poll rate that would be about 65 failures; doubling waits from 40 ms make it at most 6
      expect(failures.length).toBeGreaterThanOrEqual(3);
      expect(failures.length).toBeLessThanOrEqual(7);
      const gaps = failures.slice(1).map((t, i) => t - failures[i]);
      for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThan(gaps[i - 1]);
    } finally {
      await rt.stop();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
