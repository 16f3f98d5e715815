import type { Measured } from '../../bench/sim/run.js';

/**
 * Figures of the shape bench/results/full.json gives, for the simulation's tests (fixed here: a
 * test does not read the results, which change with each full run and the machine it ran on).
 */
export const MEASURED: Measured = {
  acquireUs: 347,
  releaseUs: 313,
  planUs: 6356,
  bundleLoadMs: 83.5,
  conditionalWritesPerSec: 1618,
  batchedMarkersPerSec: 27977,
  storageQueryUsPerJob: 19,
  local: { burstJobsPerSec: 1231, burstJobs: 10_000, latenessP95Ms: 21, latenessRate: 100 },
};
