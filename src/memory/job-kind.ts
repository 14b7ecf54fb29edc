/** The memory job actor kind: its machine and the index of jobs by state (the runner resumes `running` ones). */
import { memoryJobMachine, type JobContext } from '../../actors/memory-job.js';
import type { ActorKind, ActorRecord } from '../runtime/runtime.js';

export const MEMORY_JOB = 'memory-job';
export const jobIndexes = { byState: (state: string) => `mem:jobs:${state}` };
export const JOB_STATES = ['running', 'completed', 'failed'] as const;

export const memoryJobKind: ActorKind<JobContext> = {
  name: MEMORY_JOB,
  machine: memoryJobMachine,
  notFound: 'MEMORY_NOT_FOUND',
  invalid: 'MEMORY_VALIDATION_FAILED',
  indexes: (r) => [[jobIndexes.byState(r.value), r.context.id]],
  timers: () => [],
};

export function jobView(r: ActorRecord<JobContext>) {
  const c = r.context;
  return {
    id: c.id,
    kind: c.kind,
    state: r.value,
    namespace: c.params.namespace,
    progress: { processed: c.processed, total: c.total },
    counts: c.counts,
    errors: c.errors,
    result: c.result,
    created_by: c.created_by,
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}
