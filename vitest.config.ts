import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores, three files at once: most test time is waiting on timers (jobs falling due), and
    // each file runs its own emulators; the tests assert invariants, not timings.
    maxWorkers: 3,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
