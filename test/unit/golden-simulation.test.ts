/**
 * The refactoring net: seeded simulation runs (bench/sim: the real plan, loop, dispatch rounds,
 * Acquirer and Releaser over the simulated table, queues and CPU, in virtual time) whose figures
 * are the same on every run, on any machine, for the same code. They are checked in
 * (golden-simulation.json): a change that moves code without changing behaviour leaves every
 * figure as it was; one that changes what dispatch does (reads, acquires, sends, marks, when)
 * changes some, and must say why when it updates the file
 * (`DYNEIN_UPDATE_GOLDEN=1 npx vitest run test/unit/golden-simulation.test.ts`).
 *
 * Each run counts what was sent, early, lost and duplicated, the lateness percentiles, and the
 * table's work (items read per job, write units, retries, throttles).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { seededRandom } from '../../bench/sim/clock.js';
import { simulate, type SimConfig, type SimResult } from '../../bench/sim/engine.js';
import { AWS_WORKER, awsConfig, localConfig } from '../../bench/sim/run.js';
import { MEASURED } from '../support/simMeasured.js';

const GOLDEN = new URL('./golden-simulation.json', import.meta.url);
const update = process.env.DYNEIN_UPDATE_GOLDEN === '1';
const golden = JSON.parse(readFileSync(GOLDEN, 'utf8')) as Record<string, unknown>;
const fresh: Record<string, unknown> = {};

/** The scenarios: each a different path through dispatch. */
const SCENARIOS: Record<string, () => SimConfig> = {
  // AWS, one cell: 8 groups of Lambda dispatchers, cold starts, the table's limits, 400 jobs/s.
  'aws one cell': () => awsConfig(MEASURED, 1, 400, 8_000),
  // AWS, two cells on a table whose write quota throttles (SDK retries, backoff), nothing lost.
  'aws two cells, throttled': () => ({ ...awsConfig(MEASURED, 2, 1_000, 4_000, 1_600), drainMs: 20_000 }),
  // An outage's backlog: dispatch starts 20 s after the first rows fell due (the late path).
  'aws backlog': () => {
    const cfg = awsConfig(MEASURED, 1, 2_000, 6_000);
    return { ...cfg, tick: { ...cfg.tick, firstAtMs: 40_000 }, drainMs: 30_000 };
  },
  // The local stack's model: every dispatcher in one process; rows due in a burst.
  'local burst': () =>
    localConfig(MEASURED, { ratePerSec: 4_000_000, windowMs: 1, dueStartMs: 10_000, minAheadMs: 5_000, maxAheadMs: 9_000 }, 10_000),
  // Concurrency by key: 400 jobs due at once over 20 keys of limit 2, a worker 100 ms a job (the key gate's takes and asks).
  'aws keyed burst': () => {
    const cfg = awsConfig(MEASURED, 1, 400_000, 1);
    return {
      ...cfg,
      load: { ...cfg.load, burst: true },
      keyed: { keys: 20, limit: 2, workMs: 100, ...AWS_WORKER },
      drainMs: 30_000,
    };
  },
  // Fair share: a flood tenant beside a light one, dispatch saturated.
  'local flood beside a light tenant': () => ({
    ...localConfig(MEASURED, { ratePerSec: 10, windowMs: 10_000, dueStartMs: 15_000, minAheadMs: 5_500, maxAheadMs: 8_000 }, 1_000),
    tenants: [{ tenant: 'flood', ratePerSec: 2_000, windowMs: 6_000, dueStartMs: 15_000, minAheadMs: 10_000, maxAheadMs: 14_000 }],
    drainMs: 30_000,
  }),
};

/** What a run must reproduce: everything but the wall-clock time it took. */
function figures(r: SimResult): unknown {
  const { realMs: _realMs, ...rest } = r;
  return JSON.parse(JSON.stringify(rest));
}

describe('golden simulation runs (the refactoring net)', () => {
  afterEach(() => {
    if (update) writeFileSync(GOLDEN, `${JSON.stringify({ ...golden, ...fresh }, null, 2)}\n`);
  });

  it.each(Object.keys(SCENARIOS))(
    '%s: the same figures as checked in',
    async (name) => {
      const result = figures(await simulate(SCENARIOS[name]!()));
      fresh[name] = result;
      if (update) return;
      expect(golden[name], `no golden figures for "${name}": run with DYNEIN_UPDATE_GOLDEN=1`).toBeDefined();
      expect(result).toEqual(golden[name]);
    },
    60_000,
  );

  // Core's own jitter (backoff, the key gate's asks) draws Math.random: the simulation seeds it
  // while it runs (bench/sim/clock.ts), whatever Math.random did before.
  it('a run repeats itself exactly (else the net could not hold)', async () => {
    const cfg = SCENARIOS['aws keyed burst']!;
    const first = figures(await simulate(cfg()));
    vi.spyOn(Math, 'random').mockImplementation(seededRandom(5));
    try {
      expect(figures(await simulate(cfg()))).toEqual(first);
    } finally {
      vi.restoreAllMocks();
    }
  }, 60_000);

  it('the checked-in figures are sane: nothing lost or early, every job delivered', () => {
    for (const name of Object.keys(SCENARIOS)) {
      const g = golden[name] as SimResult | undefined;
      expect(g, name).toBeDefined();
      expect([g!.lost, g!.early, g!.delivered], name).toEqual([0, 0, g!.jobs]);
      // A keyed run: never more than a key's limit at once, every job run, every slot freed.
      const k = g!.keyed;
      if (k) expect([k.maxConcurrentPerKey <= k.keyLimit, k.finished, k.slotsHeldAtEnd], name).toEqual([true, g!.jobs, 0]);
    }
  });
});
