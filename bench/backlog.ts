/**
 * Phase 4: backlog independence. The dispatch rate of the same burst as phase 2, on the same
 * table, once `rows` future jobs (due between an hour and a year ahead, in every shard) wait in
 * it, over the rate phase 2 measured with none. A due-range query starts at its shard's first
 * row and stops at `now + lookahead`, so future rows are never read: the ratio should be about 1.
 *
 * The rate without is measured again beside it, on a fresh table of the same emulator: the
 * same machine load and the same storage underneath (dynalite's LevelDB is slower for a while
 * after a 200,000-row load, whichever table is written), so the ratio shows the design alone.
 * The pair is repeated (alternating which goes first) and the median ratio reported with its
 * spread. Phase 2's rate is kept beside it.
 */
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, type TestSystem } from '../test/support/system.js';
import { burst, spread, writeRows, type BurstResult, type Spread } from './dispatch.js';
import { progress } from './support.js';

export interface BacklogResult {
  /**
   * Dispatch rate with the backlog over the rate without, measured right beside it on a fresh
   * table: the median over `repeats` interleaved pairs (alternating which goes first), spread in
   * `repeats.ratio`.
   */
  ratio: number;
  repeats: { ratio: Spread; withJobsPerSec: Spread; withoutJobsPerSec: Spread; storageCpuRatio?: Spread };
  /**
   * The table emulator's CPU per job without the backlog over with it (median over the pairs): the
   * storage work the backlog adds per job (none: about 1), steady on a shared machine.
   */
  storageCpuRatio?: number;
  /** The same over phase 2's rate (minutes earlier, before the load). */
  ratioToPhase2: number;
  futureRows: number;
  loadMs: number;
  /** Rows written per second while loading (parallel BatchWriteItem). */
  loadRowsPerSec: number;
  without: BurstResult;
  /** The burst on a fresh table right after the one with the backlog. */
  withoutAdjacent: BurstResult;
  with: BurstResult;
  /** Items the due-range queries read during the burst with the backlog: the burst's rows only. */
  itemsRead: number;
}

export async function runBacklog(
  em: Emulators,
  sys: TestSystem,
  opts: { rows: number; without: BurstResult; repeats: number },
): Promise<BacklogResult> {
  progress(`backlog: loading ${opts.rows} future rows (parallel BatchWriteItem)`);
  const now = Date.now();
  const t0 = performance.now();
  await writeRows(em, sys, opts.rows, () => now + 3_600_000 + Math.floor(Math.random() * 365 * 86_400_000), { prefix: 'f' });
  const loadMs = performance.now() - t0;
  const n = opts.without.jobs;
  progress(`backlog: loaded in ${(loadMs / 1000).toFixed(1)} s; the same burst of ${n} with and without, ${opts.repeats} times`);
  const fresh = await createSystem(em, { settings: sys.w.config.settings, tenants: Object.keys(sys.tenants) });
  const withB: BurstResult[] = [];
  const withoutB: BurstResult[] = [];
  for (let i = 0; i < opts.repeats; i++) {
    const a = async () => withB.push(await burst(em, sys, n, `k${i}`));
    const b = async () => withoutB.push(await burst(em, fresh, n, `n${i}`));
    if (i % 2 === 0) {
      await a();
      await b();
    } else {
      await b();
      await a();
    }
    progress(
      `backlog: repeat ${i + 1}/${opts.repeats}: ${withB[i]!.jobsPerSec} jobs/s with the backlog, ${withoutB[i]!.jobsPerSec} without: ratio ${(withB[i]!.jobsPerSec / withoutB[i]!.jobsPerSec).toFixed(2)} (storage CPU ${withB[i]!.storageCpuUsPerJob ?? '?'} vs ${withoutB[i]!.storageCpuUsPerJob ?? '?'} µs per job)`,
    );
  }
  const ratios = withB.map((w, i) => w.jobsPerSec / withoutB[i]!.jobsPerSec);
  const cpuRatios = withB.flatMap((w, i) => {
    const wo = withoutB[i]!.storageCpuUsPerJob;
    return w.storageCpuUsPerJob && wo ? [wo / w.storageCpuUsPerJob] : [];
  });
  const repeats = {
    ratio: spread(ratios),
    withJobsPerSec: spread(
      withB.map((x) => x.jobsPerSec),
      0,
    ),
    withoutJobsPerSec: spread(
      withoutB.map((x) => x.jobsPerSec),
      0,
    ),
    ...(cpuRatios.length === withB.length ? { storageCpuRatio: spread(cpuRatios) } : {}),
  };
  const m = ratios.indexOf([...ratios].sort((x, y) => x - y)[Math.floor((ratios.length - 1) / 2)]!);
  const w = withB[m]!;
  const wo = withoutB[m]!;
  const ratio = repeats.ratio.median;
  const ratioToPhase2 = +(repeats.withJobsPerSec.median / opts.without.jobsPerSec).toFixed(3);
  progress(
    `backlog: median ratio ${ratio} (${repeats.ratio.min}–${repeats.ratio.max})${repeats.storageCpuRatio ? `, storage CPU ratio ${repeats.storageCpuRatio.median} (${repeats.storageCpuRatio.min}–${repeats.storageCpuRatio.max})` : ''}: ${repeats.withJobsPerSec.median} jobs/s with ${opts.rows} future rows vs ${repeats.withoutJobsPerSec.median} without (fresh table); ${ratioToPhase2} against phase 2's ${opts.without.jobsPerSec}; queries read ${w.itemsRead} items`,
  );
  return {
    ratio,
    ...(repeats.storageCpuRatio ? { storageCpuRatio: repeats.storageCpuRatio.median } : {}),
    repeats,
    ratioToPhase2,
    futureRows: opts.rows,
    loadMs: Math.round(loadMs),
    loadRowsPerSec: Math.round(opts.rows / (loadMs / 1000)),
    without: opts.without,
    withoutAdjacent: wo,
    with: w,
    itemsRead: w.itemsRead,
  };
}
