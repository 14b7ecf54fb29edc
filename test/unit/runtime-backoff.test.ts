/** The retry backoff of the runtime: the first attempt never waits; later waits are jittered and capped. */
import { describe, expect, it } from 'vitest';
import { backoffMs } from '../../src/runtime/runtime.js';

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
