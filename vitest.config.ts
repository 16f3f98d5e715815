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
/**
 * System files that change their process for good (environment variables the Lambda entry points
 * or the SDK's default credentials read, a module replaced with `vi.mock`): each in a fresh process.
 */
const ISOLATED = [
  'test/integration/lambda-entries.test.ts',
  'test/integration/sfn-starter.test.ts',
  'test/client/client.test.ts',
  'test/client/lambda.test.ts',
];

/** What the system files share: the reply check and the bundles of the local stack and the CLI. */
const SYSTEM = {
  // Every reply the local stack's API gives the e2e and client tests must match docs/openapi.yaml.
  setupFiles: ['test/contract/replies.setup.ts'],
  // The local stack and the CLI bundled once from the sources, run on plain node.
  globalSetup: ['test/support/testBuild.ts'],
};

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Three files at once on two cores: the suite mostly waits on due times (about 650 CPU-seconds
    // in 1,350 seconds of tests), so a third file fills the waits: tests 553 s against about 700
    // with two (CI, 2026-11-28). Its timing-sensitive tests were made for that contention: each
    // waits for what it checks with a margin for a starved machine, and bounds what it times
    // relative to what else it measured, not absolutely (the figures are the benchmark's).
    maxWorkers: 3,
    // The longest files start first, with or without a record of the last run (a fresh clone).
    sequence: { sequencer: LongestFirst },
    projects: [
      { extends: true, test: { name: 'pure', include: PURE, isolate: false } },
      {
        extends: true,
        test: {
          name: 'system',
          include: ['test/**/*.test.ts'],
          exclude: [...PURE, ...ISOLATED],
          // One worker runs many files in turn: the AWS SDK, the emulators and the sources load
          // once per worker, not once per file (about 1.6 CPU-seconds a file: 26 short integration
          // files took 27 CPU-seconds so against 69 isolated, 2026-11-28). Each file stops what it
          // started (emulators, loops, stacks) in its afterAll, and leaves the environment as it was.
          isolate: false,
          ...SYSTEM,
        },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED, ...SYSTEM } },
    ],
  },
});
