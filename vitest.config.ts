import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // tests that start service processes need room on a loaded 2-core machine
    testTimeout: 60000,
    hookTimeout: 60000,
    pool: 'forks',
    // most files wait on child processes and sockets: two workers keep both cores busy (the default is cores - 1)
    maxWorkers: 2,
    // a file or a run that never ends fails with what it was doing instead of holding CI (test/watchdog.ts)
    setupFiles: ['./test/watchdog.ts'],
    reporters: ['default', './test/summary-reporter.ts', './test/deadline-reporter.ts'],
  },
});
