/** Ends the run with the plain closing line CI reads: "N passed, N failed[, N skipped]". */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const m of modules) {
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
      if (m.state() === 'failed' && ![...m.children.allTests()].length) counts.failed++;
    }
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}
