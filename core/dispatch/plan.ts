import { type GroupLeases, type GroupWakes, groupsOfCell, type SchedulerSettings, shardsOfGroup } from '../model/index.js';

/**
 * How a tick execution splits the shard groups among its dispatchers (Map iterations).
 *
 * Each execution dispatches for `runMs` (~90 s). Before it starts, it samples the table: the
 * first shard of every group (shards are chosen at random per job, so a group's first shard
 * sees 1/shardCount of the load), every live row due before the run ends from the shard's mark
 * on (the oldest row not yet final, kept in the group lease item), overdue rows counted as due
 * now: after an outage the backlog fills the sample and every group gets its own dispatcher. The busiest 5-second bucket, scaled to all shards, is the peak rate the run must carry;
 * the groups are packed into `ceil(peak / dispatcherRowsPerSecond)` dispatchers, between 1 and
 * `groupCount`.
 *
 * With cells (`settings.cells` > 1), each cell's tick plans only the cell's groups (group `g` is in
 * cell `g mod cells`): it samples their first shards, scales to the cell's shards, and packs them
 * into the cell's own dispatchers.
 *
 * Why: a dispatcher holds a Lambda for as long as anything is due within the lookahead, and
 * batches only what it dispatches itself. At 100 jobs/s, eight dispatchers each see 12.5 rows a
 * second, so nearly every `SendMessageBatch` carries one row and eight Lambdas run; one
 * dispatcher sends ~3 rows per batch from one Lambda. Rows already in the table at plan time are
 * all a plan can see: a load that starts after it is carried by the planned dispatchers until
 * the next execution (a minute later) plans again.
 */
export interface DispatchPlan {
  /** The groups of each dispatcher; every group in exactly one. */
  readonly dispatchers: number[][];
  /** Estimated peak rows due per second during the run (Infinity when a sample was cut short). */
  readonly peakRowsPerSecond: number;
  /** Rows read by the sample. */
  readonly sampledRows: number;
  /** Why the plan is what it is (for the log). */
  readonly reason: 'packing off' | 'sampled' | 'sample cut short' | 'sample failed' | 'asleep';
  /** Groups of the cell left out: asleep past the run (docs/design-dispatch.md, "Sleep"). */
  readonly asleep: number[];
}

/** Width of the buckets the peak rate is taken over. */
export const PLAN_BUCKET_MS = 5_000;

export interface PlanDeps {
  /**
   * `groupMarks` (when given) says where each sampled shard's unfinished rows start; `readRest`
   * (when given) which groups sleep past the run.
   */
  readonly store: Pick<GroupLeases, 'dueTimes'> & Partial<Pick<GroupLeases, 'groupMarks'> & Pick<GroupWakes, 'readRest'>>;
  readonly settings: SchedulerSettings;
  readonly log?: (message: string, fields?: Record<string, unknown>) => void;
}

/**
 * Plans the dispatchers of a run from `nowMs` to `untilMs` (rows due up to `untilMs + lookahead`),
 * for the groups of `cell` (default 0: every group when there is one cell).
 */
export async function planDispatchers(deps: PlanDeps, nowMs: number, untilMs: number, cell = 0): Promise<DispatchPlan> {
  const { settings } = deps;
  const cells = settings.cells ?? 1;
  if (!Number.isInteger(cell) || cell < 0 || cell >= cells)
    throw new RangeError(`cell must be an integer from 0 to ${cells - 1}, got ${cell}`);
  const cellGroups = groupsOfCell(cell, { groupCount: settings.groupCount, cells });
  const asleep = await asleepPast(deps, cellGroups, untilMs);
  const ofCell = cellGroups.filter((g) => !asleep.includes(g));
  const groups = ofCell.length;
  const perGroup = (reason: DispatchPlan['reason'], peakRowsPerSecond: number, sampledRows: number): DispatchPlan => ({
    dispatchers: packGroups(groups, groups, ofCell),
    peakRowsPerSecond,
    sampledRows,
    reason,
    asleep,
  });
  if (groups === 0) return perGroup('asleep', 0, 0);
  if (settings.dispatcherRowsPerSecond === 0) return perGroup('packing off', 0, 0);

  const horizon = untilMs + settings.lookaheadMs;
  const sampled = ofCell.map((g) => shardsOfGroup(g, settings)[0]!);
  const cellShards = ofCell.reduce((n, g) => n + shardsOfGroup(g, settings).length, 0);
  const scale = cellShards / sampled.length;
  // Enough rows to tell that every group needs its own dispatcher, and no more.
  const enough = Math.ceil((groups * settings.dispatcherRowsPerSecond * (horizon - nowMs)) / 1000 / cellShards) + 1;
  let samples: { dueMs: number[]; more: boolean }[];
  try {
    // Rows stay at their key once final (delivered markers, tombstones): sample each shard from
    // its mark in the group lease item (the oldest row not yet final), not from its start.
    samples = await Promise.all(
      sampled.map(async (shard, i) =>
        deps.store.dueTimes(shard, horizon, enough, deps.store.groupMarks ? (await deps.store.groupMarks(ofCell[i]!))[shard] : undefined),
      ),
    );
  } catch (err) {
    deps.log?.('plan: sampling the table failed; one dispatcher per group', { error: (err as Error).message });
    return perGroup('sample failed', Number.POSITIVE_INFINITY, 0);
  }
  const sampledRows = samples.reduce((n, s) => n + s.dueMs.length, 0);
  if (samples.some((s) => s.more)) return perGroup('sample cut short', Number.POSITIVE_INFINITY, sampledRows);

  const buckets = new Map<number, number>();
  for (const s of samples) {
    for (const due of s.dueMs) {
      const b = Math.max(0, Math.floor((due - nowMs) / PLAN_BUCKET_MS));
      buckets.set(b, (buckets.get(b) ?? 0) + 1);
    }
  }
  const peakInSample = Math.max(0, ...buckets.values());
  const peakRowsPerSecond = (peakInSample * scale * 1000) / PLAN_BUCKET_MS;
  const count = Math.min(groups, Math.max(1, Math.ceil(peakRowsPerSecond / settings.dispatcherRowsPerSecond)));
  return { dispatchers: packGroups(groups, count, ofCell), peakRowsPerSecond, sampledRows, reason: 'sampled', asleep };
}

/**
 * The groups that sleep past the run (their wake-up, less the lookahead, after `untilMs`): no
 * dispatcher this execution; a later one plans for the wake-up, a writer of a row due sooner
 * starts one. One strongly consistent read of each lease item; a read that fails plans the group.
 */
async function asleepPast(deps: PlanDeps, groups: readonly number[], untilMs: number): Promise<number[]> {
  const readRest = deps.store.readRest?.bind(deps.store);
  if (!readRest) return [];
  const rests = await Promise.all(groups.map((g) => readRest(g).catch(() => undefined)));
  return groups.filter((_, i) => {
    const rest = rests[i];
    return rest?.asleepSinceMs !== undefined && rest.wakeAtMs !== undefined && rest.wakeAtMs - deps.settings.lookaheadMs > untilMs;
  });
}

/**
 * Deals `groups` groups to `count` dispatchers round-robin: sizes differ by at most one. The
 * groups are `0..groups-1`, or the ids in `ids` (a cell's groups) when given.
 */
export function packGroups(groups: number, count: number, ids?: readonly number[]): number[][] {
  const out: number[][] = Array.from({ length: count }, () => []);
  for (let g = 0; g < groups; g++) out[g % count]!.push(ids ? ids[g]! : g);
  return out;
}
