/** The memory job machine (actors/memory-job.ts), stepped purely as the runtime hosts it: lease, progress, end states. */
import { describe, expect, it } from 'vitest';
import { memoryJobMachine, type JobContext } from '../../actors/memory-job.js';
import { runMachine, T0 } from '../helpers/machine.js';

const ctx = (o: Partial<JobContext> = {}): JobContext => ({
  id: 'j1', kind: 'export', params: { namespace: 'org' }, cursor: null, step: 0, processed: 0, total: 10, counts: {}, errors: [], result: null,
  lease_until: 0, created_by: 'root', created_at: '', updated_at: '', ...o,
});

describe('memory job machine', () => {
  it('a CLAIM takes a job whose lease is over and is refused while another worker holds it', () => {
    const taken = runMachine(memoryJobMachine, 'running', ctx(), { type: 'CLAIM', now: T0, lease_until: T0 + 15_000 });
    expect(taken).toMatchObject({ value: 'running', refused: undefined });
    expect(taken.context.lease_until).toBe(T0 + 15_000);
    const held = runMachine(memoryJobMachine, 'running', taken.context, { type: 'CLAIM', now: T0 + 1000, lease_until: T0 + 16_000 });
    expect(held.refused).toBe('MEMORY_VALIDATION_FAILED');
    expect(held.context).toBe(held.input);
    expect(runMachine(memoryJobMachine, 'running', taken.context, { type: 'CLAIM', now: T0 + 15_000, lease_until: T0 + 30_000 }).refused).toBeUndefined();
  });

  it('PROGRESS moves the cursor, adds counts and errors, extends the lease and counts steps', () => {
    const p1 = runMachine(memoryJobMachine, 'running', ctx({ lease_until: T0 + 1 }), { type: 'PROGRESS', now: T0, fence: 0, lease_until: T0 + 15_000, cursor: 'a', processed: 4, counts: { exported: 4 }, errors: [] });
    const p2 = runMachine(memoryJobMachine, 'running', p1.context, { type: 'PROGRESS', now: T0 + 1, fence: 0, lease_until: T0 + 15_001, cursor: 'b', processed: 3, counts: { exported: 2, failed: 1 }, errors: [{ line: 7, error: 'bad' }] });
    expect(p2.context).toMatchObject({ cursor: 'b', step: 2, processed: 7, counts: { exported: 6, failed: 1 }, errors: [{ line: 7, error: 'bad' }], lease_until: T0 + 15_001 });
  });

  it('COMPLETE and FAIL end the job and its lease; an ended job takes no more events; RELEASE hands it back', () => {
    const done = runMachine(memoryJobMachine, 'running', ctx({ lease_until: T0 + 99 }), { type: 'COMPLETE', now: T0, fence: 0, result: { exported: 3 } });
    expect(done).toMatchObject({ value: 'completed', context: { result: { exported: 3 }, lease_until: 0 } });
    const failed = runMachine(memoryJobMachine, 'running', ctx(), { type: 'FAIL', now: T0, fence: 0, error: 'EMBEDDING_PROVIDER_ERROR: down' });
    expect(failed).toMatchObject({ value: 'failed', context: { result: { error: 'EMBEDDING_PROVIDER_ERROR: down' } } });
    for (const type of ['CLAIM', 'PROGRESS', 'COMPLETE', 'FAIL']) expect(runMachine(memoryJobMachine, 'completed', done.context, { type, now: T0, lease_until: 0 } as never).unchanged).toBe(true);
    expect(runMachine(memoryJobMachine, 'running', ctx({ lease_until: T0 + 99 }), { type: 'RELEASE', now: T0, fence: 0 }).context.lease_until).toBe(0);
  });

  it('each CLAIM raises the fencing token; PROGRESS, COMPLETE, FAIL and RELEASE of an older grant are refused and change nothing', () => {
    const a = runMachine(memoryJobMachine, 'running', ctx(), { type: 'CLAIM', now: T0, lease_until: T0 + 100 });
    expect(a.context.fence).toBe(1);
    const b = runMachine(memoryJobMachine, 'running', a.context, { type: 'CLAIM', now: T0 + 100, lease_until: T0 + 200 });
    expect(b.context.fence).toBe(2);
    const late = [
      { type: 'PROGRESS', now: T0 + 150, fence: 1, lease_until: T0 + 300, cursor: '100', processed: 100, counts: { imported: 100 }, errors: [] },
      { type: 'COMPLETE', now: T0 + 150, fence: 1, result: {} },
      { type: 'FAIL', now: T0 + 150, fence: 1, error: 'x' },
      { type: 'RELEASE', now: T0 + 150, fence: 1 },
    ] as const;
    for (const e of late) {
      const r = runMachine(memoryJobMachine, 'running', b.context, e as never);
      expect(r.refused).toBe('MEMORY_VALIDATION_FAILED');
      expect(r.context).toBe(r.input);
    }
    expect(runMachine(memoryJobMachine, 'running', b.context, { ...late[0], fence: 2 }).context).toMatchObject({ cursor: '100', processed: 100, fence: 2 });
  });
});
