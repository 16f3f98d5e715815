/**
 * The simulation's models (every figure and its source: docs/capacity.md, "Simulation"), its
 * validation against the local stack, and the scale search the benchmark's `scaleSimulation`
 * phase reports.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULTS } from '../../core/model/config.js';
import { simulate, type KeyedFigures, type KeyedLoad, type SimConfig, type SimResult } from './engine.js';
import { AWS_TABLE_LIMITS, NO_TABLE_LIMITS, type CallModel, type CpuModel } from './store.js';

/** The measured figures the models take from a committed full benchmark run. */
export interface Measured {
  /** capacity.cpuUsPerJob: acquire, release, planPerExecution (µs at 1 vCPU). */
  readonly acquireUs: number;
  readonly releaseUs: number;
  readonly planUs: number;
  /** bundles.dispatch.loadMs: importing the dispatch bundle. */
  readonly bundleLoadMs: number;
  /** dispatch.ceiling: dynalite's conditional writes/s and batched markers/s, alone. */
  readonly conditionalWritesPerSec: number;
  readonly batchedMarkersPerSec: number;
  /** dispatch.storageCpuUsPerJob − dispatch.ceiling.storageCpuUsPerJob: dynalite's CPU per job besides the writes (its queries). */
  readonly storageQueryUsPerJob: number;
  /** The local figures to validate against. */
  readonly local: {
    readonly burstJobsPerSec: number;
    readonly burstJobs: number;
    readonly latenessP95Ms: number;
    readonly latenessRate: number;
  };
}

export const FULL_RESULTS = fileURLToPath(new URL('../results/full.json', import.meta.url));

export function measuredFrom(file = FULL_RESULTS): Measured {
  return measuredOf(JSON.parse(readFileSync(file, 'utf8')));
}

/** The figures the model needs, from a benchmark result (a run's own, or a results file). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function measuredOf(r: any): Measured {
  const c = r.capacity.cpuUsPerJob;
  return {
    acquireUs: c.acquire,
    releaseUs: c.release,
    planUs: c.planPerExecution,
    bundleLoadMs: r.bundles.dispatch.loadMs,
    conditionalWritesPerSec: r.dispatch.ceiling.conditionalWritesPerSec,
    batchedMarkersPerSec: r.dispatch.ceiling.batchedMarkersPerSec,
    storageQueryUsPerJob: Math.max(0, r.dispatch.storageCpuUsPerJob - r.dispatch.ceiling.storageCpuUsPerJob),
    local: {
      burstJobsPerSec: r.dispatch.jobsPerSec,
      burstJobs: r.dispatch.jobs,
      latenessP95Ms: r.lateness.p95Ms,
      latenessRate: r.sizes.lateness.rate,
    },
  };
}

/**
 * CPU per call from the measured CPU per job: the acquire's on the acquire; the rest of a job's
 * dispatch (`release`: due-range read, send, marker) split half to its send, a quarter to its
 * marker and a quarter to reading it; every request also costs `callUs` (an SDK request with
 * nothing in it; not measured apart: an estimate, small beside the per-job shares at load).
 */
export function cpuModel(m: Measured): CpuModel {
  return {
    acquireUs: m.acquireUs,
    sendPerMessageUs: m.releaseUs * 0.5,
    markerPerRowUs: m.releaseUs * 0.25,
    readPerItemUs: m.releaseUs * 0.25,
    callUs: 150,
  };
}

/** AWS call latencies (medians, log-normal spread σ 0.35: p99 ≈ 2.3 × median). */
export const AWS_CALLS: CallModel = {
  write: { medianMs: 6, sigma: 0.35 },
  query: { medianMs: 8, sigma: 0.35 },
  batchWrite: { medianMs: 12, sigma: 0.35 },
  send: { medianMs: 15, sigma: 0.35 },
};

/** The local stack: loopback HTTP to dynalite (one serial process: service times from the measured ceiling) and fauxqs. */
export function localCalls(m: Measured): CallModel {
  const perQueryItem = 10;
  return {
    write: { medianMs: 0.5, sigma: 0.3 },
    query: { medianMs: 0.5, sigma: 0.3 },
    batchWrite: { medianMs: 0.5, sigma: 0.3 },
    send: { medianMs: 1.5, sigma: 0.3 },
    server: {
      writeUs: 1e6 / m.conditionalWritesPerSec,
      batchItemUs: 1e6 / m.batchedMarkersPerSec,
      queryUs: Math.max(50, m.storageQueryUsPerJob * 5),
      queryItemUs: perQueryItem,
    },
  };
}

/** Settings of one cell as deployed by default: 8 groups, 64 shards (core/model/config.ts DEFAULTS). */
export const CELL = { groups: DEFAULTS.groupCount, shards: DEFAULTS.shardCount };

export function awsConfig(
  m: Measured,
  cells: number,
  ratePerSec: number,
  windowMs: number,
  tableWru = AWS_TABLE_LIMITS.tableWru,
): SimConfig {
  const vcpu = 1024 / 1769;
  return {
    settings: { cells, groupCount: CELL.groups * cells, shardCount: CELL.shards * cells },
    mode: 'aws',
    limits: { ...AWS_TABLE_LIMITS, tableWru, tableRru: Math.max(AWS_TABLE_LIMITS.tableRru, tableWru) },
    calls: AWS_CALLS,
    cpu: cpuModel(m),
    // Cold start: the bundle's import at the dispatcher's CPU share, plus ~150 ms of sandbox and runtime start.
    lambda: { dispatchMemoryMb: 1024, tickMemoryMb: 256, concurrency: 1_000, coldStartMs: Math.round(150 + m.bundleLoadMs / vcpu) },
    planUs: m.planUs,
    transitionMs: 20,
    tick: { everyMs: 60_000, runMs: 90_000, firstAtMs: 17_000 },
    load: { ratePerSec, windowMs, dueStartMs: 20_000, minAheadMs: 5_500, maxAheadMs: 15_000 },
    drainMs: 10_000,
    warmupMs: 2_000,
    seed: 1_000 + cells,
  };
}

/** The local stack at its defaults (local/settings.ts: 1 cell, 64 shards, 8 groups; tick 90 s every 60 s), one process. */
export function localConfig(m: Measured, load: SimConfig['load'], firstTickAtMs: number): SimConfig {
  return {
    settings: {},
    mode: 'local',
    limits: NO_TABLE_LIMITS,
    calls: localCalls(m),
    cpu: cpuModel(m),
    lambda: { dispatchMemoryMb: 1769, tickMemoryMb: 1769, concurrency: Infinity, coldStartMs: 0 },
    planUs: m.planUs,
    transitionMs: 1,
    tick: { everyMs: 60_000, runMs: 90_000, firstAtMs: firstTickAtMs },
    load,
    drainMs: 10_000,
    warmupMs: 0,
    seed: 7,
  };
}

export interface Validation {
  /** Phase 2's burst: the measured jobs/s, the simulated, and the error. */
  dispatchJobsPerSec: { measured: number; simulated: number; errorPct: number };
  /** Phase 1's steady load: p95 lateness. */
  latenessP95Ms: { measured: number; simulated: number; errorPct: number };
  withinPct: number;
  /** Jobs the simulated burst and steady runs did not deliver: the validation fails on any. */
  lost: { burst: number; steady: number };
  pass: boolean;
}

/**
 * Validation at the local stack's settings: the burst of phase 2 (rows all due at once when
 * dispatch starts, every group dispatching in one process) and the steady load of phase 1.
 */
export async function validate(m: Measured, opts: { latenessWindowMs: number } = { latenessWindowMs: 60_000 }): Promise<Validation> {
  // Burst: every row due at one millisecond, written before the tick starts; jobs/s from the first
  // execution's start to the last delivered marker (what phase 2 times).
  // The run goes on until every row can have gone at 100 jobs/s or more (10,000 rows: 100 s): with
  // the default 10 s after the due time, a burst slower than its size per 10 s counted as lost.
  const burst = {
    ...localConfig(
      m,
      { ratePerSec: m.local.burstJobs * 1000, windowMs: 1, dueStartMs: 10_000, minAheadMs: 5_000, maxAheadMs: 9_000 },
      10_000,
    ),
    drainMs: Math.max(10_000, m.local.burstJobs * 10),
  };
  const b = await simulate(burst);
  const burstMs = b.counters.lastMarkerMs;
  const simulatedBurst = burstMs > 0 ? Math.round((b.delivered * 1000) / burstMs) : 0;
  // Steady: phase 1's load (100 jobs/s due 5.5–60 s ahead), the tick starting with the load.
  const steady = localConfig(
    m,
    { ratePerSec: m.local.latenessRate, windowMs: opts.latenessWindowMs, dueStartMs: 60_000, minAheadMs: 5_500, maxAheadMs: 60_000 },
    0,
  );
  const s = await simulate(steady);
  const err = (sim: number, meas: number) => +((100 * (sim - meas)) / meas).toFixed(1);
  const v = {
    dispatchJobsPerSec: {
      measured: m.local.burstJobsPerSec,
      simulated: simulatedBurst,
      errorPct: err(simulatedBurst, m.local.burstJobsPerSec),
    },
    latenessP95Ms: { measured: m.local.latenessP95Ms, simulated: s.lateness.p95Ms, errorPct: err(s.lateness.p95Ms, m.local.latenessP95Ms) },
    withinPct: 25,
    lost: { burst: b.lost, steady: s.lost },
    pass: false,
  };
  v.pass = Math.abs(v.dispatchJobsPerSec.errorPct) <= 25 && Math.abs(v.latenessP95Ms.errorPct) <= 25 && b.lost === 0 && s.lost === 0;
  return v;
}

export interface ScaleRow {
  cells: number;
  jobsPerSec: number;
  p95Ms: number;
  binding: string;
  /** The table's write quota the row ran with (WRU/s). */
  tableWruQuota: number;
  /** Simulations run by the search, and the lowest failing rate. */
  runs: number;
  failedAt?: number;
}

/**
 * The highest sustained rate for `cells` cells: growing from `startRate` (× `growth`) until a run fails, then
 * bisection (`steps` runs) to within `resolution` jobs/s. A run passes when nothing is lost or
 * early and p95 lateness ≤ 1 s; `binding` is what stopped the lowest failing run.
 */
export async function searchCapacity(
  m: Measured,
  cells: number,
  opts: {
    startRate: number;
    windowMs: number;
    steps: number;
    tableWru?: number;
    /** Factor of the rate between runs until one fails. @default 2 */
    growth?: number;
    log?: (line: string) => void;
  },
): Promise<ScaleRow> {
  let lo: { rate: number; r: SimResult } | undefined;
  let hi: { rate: number; r: SimResult } | undefined;
  let runs = 0;
  const attempt = async (rate: number) => {
    const r = await simulate(awsConfig(m, cells, rate, opts.windowMs, opts.tableWru));
    runs++;
    opts.log?.(
      `  ${cells} cell(s) at ${rate} jobs/s: ${r.pass ? 'ok' : `fails (${r.binding})`}, p95 ${r.lateness.p95Ms} ms (last quarter ${r.tailP95Ms} ms), lost ${r.lost}, early ${r.early}, dup ${r.duplicates}, cpu ${r.counters.maxCpuUtilisation}, dispatchers ${r.counters.dispatchersPlanned.join('/')}, ${r.realMs} ms real`,
    );
    if (r.pass) lo = lo && lo.rate > rate ? lo : { rate, r };
    else hi = hi && hi.rate < rate ? hi : { rate, r };
  };
  let rate = opts.startRate;
  for (let i = 0; i < 8 && !hi; i++, rate = Math.round((rate * (opts.growth ?? 2)) / 100) * 100) await attempt(rate);
  for (let i = 0; i < opts.steps && hi; i++) {
    const l = lo?.rate ?? 0;
    const mid = Math.round((l + hi.rate) / 2 / 100) * 100;
    if (mid <= l || mid >= hi.rate) break;
    await attempt(mid);
  }
  return {
    cells,
    jobsPerSec: lo?.rate ?? 0,
    p95Ms: lo?.r.lateness.p95Ms ?? 0,
    binding: hi?.r.binding ?? 'not reached',
    tableWruQuota: opts.tableWru ?? AWS_TABLE_LIMITS.tableWru,
    runs,
    ...(hi ? { failedAt: hi.rate } : {}),
  };
}

/**
 * A keyed job's worker on AWS (estimates, not measured here): received about 20 ms after its send
 * was acknowledged (a worker long-polling its queue), and its slot freed about 45 ms after its
 * work ended (DeleteMessage, then the outcome through API Gateway to a warm outcomes function and
 * its UpdateItem of the key's item).
 */
export const AWS_WORKER: Pick<KeyedLoad, 'receive' | 'report'> = {
  receive: { medianMs: 20, sigma: 0.5 },
  report: { medianMs: 45, sigma: 0.4 },
};

export interface KeyedShape {
  readonly keys: number;
  readonly limit: number;
  readonly jobs: number;
  readonly workMs: number;
}

/**
 * Concurrency by key on the simulated AWS deployment (one cell, its defaults): the benchmark's
 * flowControl phase (`jobs` jobs due the same millisecond over `keys` keys of limit `limit`, each
 * worked `workMs`), its dispatchers the real ones (core/dispatch: the key gate's takes and asks)
 * against the simulated table's key items, the worker as {@link AWS_WORKER}.
 */
export async function simulateFlowControl(
  m: Measured,
  shape: KeyedShape,
): Promise<KeyedFigures & { lost: number; early: number; duplicates: number; handoffFloorMs: number; ratioBound: number }> {
  const idealMs = (shape.jobs / (shape.keys * shape.limit)) * shape.workMs;
  const base = awsConfig(m, 1, shape.jobs * 1000, 1);
  const run = await simulate({
    ...base,
    load: { ...base.load, ratePerSec: shape.jobs * 1000, windowMs: 1, burst: true },
    keyed: { keys: shape.keys, limit: shape.limit, workMs: shape.workMs, ...AWS_WORKER },
    drainMs: Math.max(30_000, 20 * idealMs),
  });
  // A slot's hand-over at best: the report, the next take and the renewal (writes), the send, the receive.
  const handoffFloorMs = AWS_WORKER.report.medianMs + 2 * AWS_CALLS.write.medianMs + AWS_CALLS.send.medianMs + AWS_WORKER.receive.medianMs;
  return {
    ...run.keyed!,
    lost: run.lost,
    early: run.early,
    duplicates: run.duplicates,
    handoffFloorMs,
    ratioBound: +(shape.workMs / (shape.workMs + handoffFloorMs)).toFixed(3),
  };
}
