/**
 * The whole run's deadline (TEST_RUN_LIMIT_S): a run that has not ended by then names the files still running
 * and the processes under vitest, kills those and exits 1. The per-file watchdog (test/watchdog.ts) stops a
 * worker whose own loop is held; this catches what it cannot see, such as a worker vitest waits on after its file.
 */
import { createRequire } from 'node:module';
import type { Reporter, TestModule } from 'vitest/node';

/** three times a full suite on a loaded 2-core machine, well inside CI's 90 minutes */
const LIMIT_S = Number(process.env.TEST_RUN_LIMIT_S ?? 2400);
const { processTree, killUnder } = createRequire(import.meta.url)('./process-tree.cjs') as {
  processTree: (root: number, done: (text: string, pids: number[]) => void) => void;
  killUnder: (root: number, pids: number[]) => void;
};

export default class DeadlineReporter implements Reporter {
  private running = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  onTestRunStart(): void {
    this.timer = setTimeout(() => this.expire(), LIMIT_S * 1000);
    this.timer.unref();
  }

  onTestModuleStart(m: TestModule): void {
    this.running.set(m.moduleId, Date.now());
  }

  onTestModuleEnd(m: TestModule): void {
    this.running.delete(m.moduleId);
  }

  onTestRunEnd(): void {
    clearTimeout(this.timer);
  }

  private expire(): void {
    const out = (s: string) => process.stderr.write(s + '\n');
    out(`\n[deadline] the run has not ended after ${LIMIT_S} s; files still running:`);
    for (const [id, since] of this.running) out(`    ${id.replace(process.cwd() + '/', '')} (${Math.round((Date.now() - since) / 1000)} s)`);
    processTree(process.pid, (text, pids) => {
      out('[deadline] processes under vitest: ' + text);
      killUnder(process.pid, pids);
      process.exit(1);
    });
  }
}
