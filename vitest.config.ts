import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/sequencer.js';

/**
 * Files that only compute (no emulators, no local stack, no child processes, no timers they wait
 * on): one worker runs many of them in turn without a fresh process each (`isolate: false`), so
 * aws-cdk-lib, fast-check and the sources load once per worker, not once per file (the CDK tests
 * take a third of the CPU time they took isolated). A file here must leave no state behind: no
 * global it sets, no environment variable, no module-level cache a later file could read wrong.
 */
const PURE = ['test/unit/**/*.test.ts', 'test/cdk/**/*.test.ts', 'test/package/**/*.test.ts', 'test/contract/openapi-document.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores, two files at once: most test time is waiting on timers (jobs falling due), but
    // some files are CPU-bound (thousands of rows in dynalite). A third file at once ran the suite
    // in 510 s against 634 s alone (2026-11-27), but beside CI's static checks it starved files
    // that wait on due times (a cancel race's 900 deliveries not in 30 s, a hot cell's drain).
    maxWorkers: 2,
    // The longest files start first, with or without a record of the last run (a fresh clone).
    sequence: { sequencer: LongestFirst },
    projects: [
      { extends: true, test: { name: 'pure', include: PURE, isolate: false } },
      {
        extends: true,
        test: {
          name: 'system',
          include: ['test/**/*.test.ts'],
          exclude: PURE,
          // Every reply the local stack's API gives the e2e and client tests must match docs/openapi.yaml.
          setupFiles: ['test/contract/replies.setup.ts'],
          // The local stack and the CLI bundled once from the sources, run on plain node.
          globalSetup: ['test/support/testBuild.ts'],
        },
      },
    ],
  },
});
