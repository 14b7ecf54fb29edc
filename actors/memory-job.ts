/**
 * A memory job (re-embed, export, import): created running, it moves forward in batches. Each PROGRESS
 * records where the work stands (`cursor`) and extends the worker's lease; a worker that dies leaves the
 * lease to run out, and the next CLAIM (only possible once it has) resumes from the cursor. Each CLAIM raises
 * the fencing token (`fence`); the holder's PROGRESS, COMPLETE, FAIL and RELEASE carry the token it was
 * granted, and one from an older grant is refused, so a worker whose lease lapsed mid-batch cannot record its
 * batch over the worker that took the job after it. Pure: time is `now` on every event.
 */
import { assign, setup } from 'xstate';
import { refuse, refuseAction } from './refuse.js';

export type JobState = 'running' | 'completed' | 'failed';
export type JobKind = 're-embed' | 'export' | 'import';

export interface JobContext {
  id: string;
  kind: JobKind;
  params: { namespace: string | null; ndjson?: string };
  cursor: string | null;
  /** batches done: names export chunks */
  step: number;
  processed: number;
  total: number;
  counts: Record<string, number>;
  errors: { line: number; error: string }[];
  result: Record<string, unknown> | null;
  lease_until: number;
  /** the fencing token: raised by each CLAIM (absent on jobs stored before it, read as 0) */
  fence?: number;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export type JobEvent =
  | { type: 'CLAIM'; now: number; lease_until: number }
  | { type: 'PROGRESS'; now: number; fence: number; lease_until: number; cursor: string | null; processed: number; counts: Record<string, number>; errors: { line: number; error: string }[] }
  | { type: 'COMPLETE'; now: number; fence: number; result: Record<string, unknown> }
  | { type: 'FAIL'; now: number; fence: number; error: string }
  /** a worker stopping cleanly hands the job back at once */
  | { type: 'RELEASE'; now: number; fence: number };

const iso = (ms: number) => new Date(ms).toISOString();
const MAX_ERRORS = 1000;
/** a write from a worker holding an older grant than the job's latest */
const stale = { guard: 'staleFence' as const, actions: refuse('MEMORY_VALIDATION_FAILED') };

export const memoryJobMachine = setup({
  types: { context: {} as JobContext, events: {} as JobEvent },
  guards: {
    leaseOver: ({ context, event }) => context.lease_until <= event.now,
    staleFence: ({ context, event }) => 'fence' in event && event.fence !== (context.fence ?? 0),
  },
  actions: {
    refuse: refuseAction,
    claim: assign(({ context, event }) => ({ lease_until: (event as Extract<JobEvent, { type: 'CLAIM' }>).lease_until, fence: (context.fence ?? 0) + 1, updated_at: iso(event.now) })),
    progress: assign(({ context, event }) => {
      const e = event as Extract<JobEvent, { type: 'PROGRESS' }>;
      const counts = { ...context.counts };
      for (const [k, v] of Object.entries(e.counts)) counts[k] = (counts[k] ?? 0) + v;
      return { cursor: e.cursor, step: context.step + 1, processed: context.processed + e.processed, counts, errors: [...context.errors, ...e.errors].slice(0, MAX_ERRORS), lease_until: e.lease_until, updated_at: iso(e.now) };
    }),
    release: assign(({ event }) => ({ lease_until: 0, updated_at: iso(event.now) })),
    complete: assign(({ event }) => ({ result: (event as Extract<JobEvent, { type: 'COMPLETE' }>).result, lease_until: 0, updated_at: iso(event.now) })),
    fail: assign(({ event }) => ({ result: { error: (event as Extract<JobEvent, { type: 'FAIL' }>).error }, lease_until: 0, updated_at: iso(event.now) })),
  },
}).createMachine({
  id: 'memory-job',
  initial: 'running',
  context: {} as JobContext,
  states: {
    running: {
      on: {
        CLAIM: [{ guard: 'leaseOver', actions: 'claim' }, { actions: refuse('MEMORY_VALIDATION_FAILED') }],
        PROGRESS: [stale, { actions: 'progress' }],
        COMPLETE: [stale, { target: 'completed', actions: 'complete' }],
        FAIL: [stale, { target: 'failed', actions: 'fail' }],
        RELEASE: [stale, { actions: 'release' }],
      },
    },
    completed: {},
    failed: {},
  },
});
