import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores, two files at once: most test time is waiting on timers (jobs falling due), but
    // some files are CPU-bound (thousands of rows in dynalite), and a third file at once starved
    // the event loops of the files that wait on due times.
    maxWorkers: 2,
    // Every reply the local stack's API gives the e2e and client tests must match docs/openapi.yaml.
    setupFiles: ['test/contract/replies.setup.ts'],
  },
});
