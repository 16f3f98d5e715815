/** Scheduling settings shared by the core, the Lambdas, the CDK constructs and the local stack. */
export interface SchedulerSettings {
  /** Number of shards (partition keys `0..shardCount-1`). */
  readonly shardCount: number;
  /** Number of shard groups the tick dispatches in parallel (at most 40). */
  readonly groupCount: number;
  /** Jobs due within this many ms of submit skip the table; cancel cut-off before runAt. */
  readonly lookaheadMs: number;
  /** How long an acquired row is held before another round may take it. */
  readonly leaseMs: number;
  /** Largest serialized payload in bytes. */
  readonly maxPayloadBytes: number;
  /** Largest batch request body in bytes. */
  readonly maxBatchBytes: number;
  /** Most jobs in one batch request. */
  readonly maxBatchJobs: number;
  /** Furthest runAt accepted, in ms from now. */
  readonly horizonMs: number;
  /** How long cancel records stay readable after runAt, in ms. */
  readonly cancelRecordRetentionMs: number;
  /**
   * A due tombstone is moved to its cancel record only this long after runAt, so that an ingest
   * that read its clock before runAt has landed its write (ingest's timeout is shorter).
   */
  readonly tombstoneGraceMs: number;
  /**
   * Rows due within this many ms of the first due row share its `SendMessageBatch`, sent when
   * the last of them is due (never early; at most this much later). Only rows that would share
   * a batch wait, so a lone row is sent at its due millisecond. 0 sends each due ms on its own.
   */
  readonly releaseWindowMs: number;
  /**
   * Due rows per second one dispatcher (a Map iteration of the tick, one Lambda at a time) is
   * planned to carry. Each tick execution estimates the peak rate coming due during its run and
   * packs the groups into just enough dispatchers: one at low load (fewer Lambdas running, fuller
   * `SendMessageBatch`es), one per group at high load. 0 always runs one dispatcher per group.
   */
  readonly dispatcherRowsPerSecond: number;
  /**
   * Cells (docs/capacity.md, "Cells"): each cell has its own tick state machine and dispatchers;
   * group `g` belongs to cell `g mod cells`. `groupCount` is the total over cells and a multiple
   * of it; each cell dispatches at most {@link MAX_GROUPS} groups.
   */
  readonly cells: number;
}

export const DEFAULTS: SchedulerSettings = {
  shardCount: 64,
  groupCount: 8,
  lookaheadMs: 5_000,
  leaseMs: 30_000,
  maxPayloadBytes: 240 * 1024,
  maxBatchBytes: 5 * 1024 * 1024,
  maxBatchJobs: 100,
  horizonMs: Math.round(10 * 365.25 * 24 * 3600 * 1000),
  cancelRecordRetentionMs: 7 * 24 * 3600 * 1000,
  tombstoneGraceMs: 60_000,
  releaseWindowMs: 35,
  dispatcherRowsPerSecond: 200,
  cells: 1,
};

/** Largest number of shard groups of one cell: an inline Map state's concurrency limit. */
export const MAX_GROUPS = 40;
/** Largest number of cells (tick state machines) of a deployment. */
export const MAX_CELLS = 20;

/**
 * Merges overrides into the defaults and checks every value, throwing once with every problem
 * listed.
 */
export function resolveSettings(overrides: Partial<SchedulerSettings> = {}): SchedulerSettings {
  const s: SchedulerSettings = { ...DEFAULTS, ...stripUndefined(overrides) };
  const problems: string[] = [];
  const bad = new Set<keyof SchedulerSettings>();
  const int = (name: keyof SchedulerSettings, min: number, max: number) => {
    const v = s[name];
    if (!Number.isInteger(v) || v < min || v > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}, got ${v}`);
      bad.add(name);
    }
  };
  int('shardCount', 1, 10_000);
  int('cells', 1, MAX_CELLS);
  int('groupCount', 1, MAX_GROUPS * (bad.has('cells') ? 1 : s.cells));
  int('lookaheadMs', 1_000, 60_000);
  int('leaseMs', 1_000, 15 * 60_000);
  int('maxPayloadBytes', 1, 240 * 1024);
  int('maxBatchBytes', 1, 6 * 1024 * 1024);
  int('maxBatchJobs', 1, 100);
  int('horizonMs', 1, DEFAULTS.horizonMs);
  int('cancelRecordRetentionMs', 0, 365 * 24 * 3600 * 1000);
  int('tombstoneGraceMs', 0, 3600 * 1000);
  int('releaseWindowMs', 0, 1_000);
  int('dispatcherRowsPerSecond', 0, 1_000_000);
  // Cross-field checks run whatever else is wrong (every problem is listed at once), but only
  // between values that are valid on their own.
  const valid = (...names: (keyof SchedulerSettings)[]) => names.every((n) => !bad.has(n));
  if (valid('groupCount', 'shardCount') && s.groupCount > s.shardCount)
    problems.push(`groupCount (${s.groupCount}) must not exceed shardCount (${s.shardCount})`);
  if (valid('groupCount', 'cells') && s.groupCount % s.cells !== 0)
    problems.push(`groupCount (${s.groupCount}) must be a multiple of cells (${s.cells}): it is the total over the cells`);
  if (valid('leaseMs', 'lookaheadMs') && s.leaseMs < 2 * s.lookaheadMs)
    problems.push(`leaseMs (${s.leaseMs}) must be at least twice lookaheadMs (${s.lookaheadMs})`);
  if (problems.length > 0) throw new RangeError(`invalid scheduler settings:\n- ${problems.join('\n- ')}`);
  return s;
}

/** Shards dispatched by `group`: every shard whose number is `group` modulo the group count. */
export function shardsOfGroup(group: number, settings: Pick<SchedulerSettings, 'shardCount' | 'groupCount'>): number[] {
  const shards: number[] = [];
  for (let s = group; s < settings.shardCount; s += settings.groupCount) shards.push(s);
  return shards;
}

/** The groups of `cell`: every group whose number is `cell` modulo the number of cells. */
export function groupsOfCell(cell: number, settings: Pick<SchedulerSettings, 'groupCount' | 'cells'>): number[] {
  const groups: number[] = [];
  for (let g = cell; g < settings.groupCount; g += settings.cells) groups.push(g);
  return groups;
}

/** The cell of `group`. */
export function cellOfGroup(group: number, settings: Pick<SchedulerSettings, 'cells'>): number {
  return group % settings.cells;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
