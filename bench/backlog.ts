/**
 * Phase 4: backlog independence. The dispatch rate of the same burst as phase 2, on the same
 * table, once `rows` future jobs (due between an hour and a year ahead, in every shard) wait in
 * it, over the rate phase 2 measured with none. A due-range query starts at its shard's first
 * row and stops at `now + lookahead`, so future rows are never read: the ratio should be about 1.
 *
 * The rate without is measured again right after, on a fresh table of the same emulator: the
 * same machine load and the same storage underneath (dynalite's LevelDB is slower for a while
 * after a 200,000-row load, whichever table is written), so the ratio shows the design alone.
 * Phase 2's rate is kept beside it.
 */
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, type TestSystem } from '../test/support/system.js';
import { burst, writeRows, type BurstResult } from './dispatch.js';
import { progress } from './support.js';

export interface BacklogResult {
  /** Dispatch rate with the backlog over the rate without, measured right after on a fresh table. */
  ratio: number;
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

export async function runBacklog(em: Emulators, sys: TestSystem, opts: { rows: number; without: BurstResult }): Promise<BacklogResult> {
  progress(`backlog: loading ${opts.rows} future rows (parallel BatchWriteItem)`);
  const now = Date.now();
  const t0 = performance.now();
  await writeRows(em, sys, opts.rows, () => now + 3_600_000 + Math.floor(Math.random() * 365 * 86_400_000), { prefix: 'f' });
  const loadMs = performance.now() - t0;
  progress(`backlog: loaded in ${(loadMs / 1000).toFixed(1)} s; the same burst of ${opts.without.jobs} again`);
  const w = await burst(em, sys, opts.without.jobs, 'k');
  const fresh = await createSystem(em, { settings: sys.w.config.settings, tenants: Object.keys(sys.tenants) });
  const wo = await burst(em, fresh, opts.without.jobs, 'n');
  const ratio = +(w.jobsPerSec / wo.jobsPerSec).toFixed(3);
  const ratioToPhase2 = +(w.jobsPerSec / opts.without.jobsPerSec).toFixed(3);
  progress(
    `backlog: ${w.jobsPerSec} jobs/s with ${opts.rows} future rows vs ${wo.jobsPerSec} without right after (fresh table): ratio ${ratio} (${ratioToPhase2} against phase 2's ${opts.without.jobsPerSec}); queries read ${w.itemsRead} items`,
  );
  return {
    ratio,
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
