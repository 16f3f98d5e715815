/**
 * The order test files start in. The workers take files in turn; a long file that starts last
 * makes the run that much longer. Vitest starts the files that took longest last time first, but a
 * fresh clone (CI) has no such record and starts the largest files first, which are not the long
 * ones. The files below are the longest (wall time in CI's fresh-clone run, 2 cores, three workers, 2026-11-28): they start
 * first, in this order, then the rest in Vitest's own order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const LONGEST_FIRST = [
  'test/e2e/recurring.test.ts',
  'test/integration/tick-definition.test.ts',
  'test/integration/cells.test.ts',
  'test/client/cli.test.ts',
  'test/client/ui-local.test.ts',
  'test/e2e/local-stack.test.ts',
  'test/e2e/lifecycle.test.ts',
  'test/integration/concurrency-keys.test.ts',
  'test/integration/group-rest.test.ts',
  'test/e2e/tenant-controls-local.test.ts',
  'test/e2e/faults-local.test.ts',
  'test/client/schedules-e2e.test.ts',
  'test/integration/held-jobs.test.ts',
  'test/client/bulk-cancel-cli.test.ts',
  'test/integration/key-wait-lease.test.ts',
  'test/unit/schedule-oracle.test.ts',
  'test/integration/trace-propagation.test.ts',
  'test/integration/listing.test.ts',
];

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      const at = LONGEST_FIRST.findIndex((path) => spec.moduleId.replaceAll('\\', '/').endsWith(path));
      return at < 0 ? LONGEST_FIRST.length : at;
    };
    return sorted
      .map((spec, order) => ({ spec, order, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.order - b.order)
      .map(({ spec }) => spec);
  }
}
