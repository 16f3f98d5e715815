/**
 * Benchmark phase `scaleSimulation` (issue #16 §5; docs/capacity.md, "Simulation"): validates the
 * simulation against the local stack's measured figures, then searches the highest sustained rate
 * of 1, 2, 4 (full: and 8) cells on the simulated AWS deployment.
 */
import { AWS_TABLE_LIMITS } from './store.js';
import { measuredFrom, searchCapacity, validate, type Measured, type ScaleRow, type Validation } from './run.js';

export interface ScaleShape {
  /** Cell counts searched. */
  readonly cells: readonly number[];
  /** Virtual length of each run's load, ms. */
  readonly windowMs: number;
  /** Bisection runs after the doubling found a failing rate. */
  readonly steps: number;
  /** The table's write quota for the scale series, WRU/s (raised as docs/capacity.md's path says); a default-quota row is added. */
  readonly tableWru: number;
  /** Virtual length of the validation's steady load (phase 1: 60 s). */
  readonly validationWindowMs: number;
  /** Also search the largest size at the table's default write quota. */
  readonly defaultQuotaRow: boolean;
}

export const QUICK_SCALE: ScaleShape = {
  cells: [1, 2],
  windowMs: 5_000,
  steps: 2,
  tableWru: 1_000_000,
  validationWindowMs: 30_000,
  defaultQuotaRow: false,
};
export const FULL_SCALE: ScaleShape = {
  cells: [1, 2, 4],
  windowMs: 15_000,
  steps: 3,
  tableWru: 1_000_000,
  validationWindowMs: 60_000,
  defaultQuotaRow: true,
};

export interface ScaleSimulationResult {
  scaleSimulation: ScaleRow[];
  /** The same search at the default table quota (40,000 WRU/s), at the largest size (full mode). */
  atDefaultQuota?: ScaleRow;
  simulationValidation: Validation & { measuredFrom: string };
  shape: ScaleShape;
  realMs: number;
}

export async function runScaleSimulation(
  shape: ScaleShape,
  log: (line: string) => void,
  m: Measured = measuredFrom(),
  source = 'bench/results/full.json',
): Promise<ScaleSimulationResult> {
  const started = performance.now();
  const v = await validate(m, { latenessWindowMs: shape.validationWindowMs });
  log(
    `  validation at the local stack's settings: dispatch ${v.dispatchJobsPerSec.simulated} jobs/s simulated vs ${v.dispatchJobsPerSec.measured} measured (${v.dispatchJobsPerSec.errorPct} %), lateness p95 ${v.latenessP95Ms.simulated} vs ${v.latenessP95Ms.measured} ms (${v.latenessP95Ms.errorPct} %), lost ${v.lost.burst} (burst) and ${v.lost.steady} (steady) in the simulation: ${v.pass ? 'passes' : 'FAILS'} (within ${v.withinPct} % of both, nothing lost)`,
  );
  const rows: ScaleRow[] = [];
  for (const cells of shape.cells) {
    const one = rows[0]?.jobsPerSec;
    // From the first size's result on, start at 0.75 × the proportional rate and grow by 1.5:
    // fewer runs (the costly ones are those far past capacity), the same bisection.
    const startRate = one ? Math.max(1_000, Math.floor((one * cells * 0.75) / 100) * 100) : 2_000;
    rows.push(
      await searchCapacity(m, cells, {
        startRate,
        growth: one ? 1.5 : 2,
        windowMs: shape.windowMs,
        steps: shape.steps,
        tableWru: shape.tableWru,
        log,
      }),
    );
  }
  const largest = shape.cells.at(-1)!;
  const atDefaultQuota = shape.defaultQuotaRow
    ? await searchCapacity(m, largest, {
        startRate: 8_000,
        windowMs: shape.windowMs,
        steps: shape.steps,
        tableWru: AWS_TABLE_LIMITS.tableWru,
        log,
      })
    : undefined;
  return {
    scaleSimulation: rows,
    ...(atDefaultQuota ? { atDefaultQuota } : {}),
    simulationValidation: { ...v, measuredFrom: source },
    shape,
    realMs: Math.round(performance.now() - started),
  };
}
