/**
 * Ends the run with the slowest files (where the suite's time budget goes) and the plain closing line CI
 * reads: "N passed, N failed[, N skipped]".
 */
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
    const slowest = [...modules].sort((a, b) => b.diagnostic().duration - a.diagnostic().duration).slice(0, 15);
    process.stdout.write('\nslowest files:\n');
    for (const m of slowest) process.stdout.write(`  ${(m.diagnostic().duration / 1000).toFixed(1).padStart(6)} s  ${m.moduleId.replace(process.cwd() + '/', '')}\n`);
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}
