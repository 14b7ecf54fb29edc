import { decodeTime } from 'ulid';
import { describe, expect, it } from 'vitest';
import { auditOps } from '../../src/audit/audit.js';

describe('audit entry time', () => {
  // GET /admin/audit bounds its scan by the id's time and filters by `at`; the two must be one instant
  it('stamps `at` with the time its id carries, across millisecond ticks', () => {
    const ticks = new Set<number>();
    const start = Date.now();
    while (ticks.size < 50 && Date.now() - start < 5000) {
      const entry = (auditOps({ actor: null, action: 'probe', target: null, requestId: undefined })[0] as { value: { id: string; at: string } }).value;
      expect(Date.parse(entry.at)).toBe(decodeTime(entry.id));
      ticks.add(Date.parse(entry.at));
    }
    expect(ticks.size).toBe(50);
  });
});
