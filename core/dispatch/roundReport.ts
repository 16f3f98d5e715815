/**
 * What a dispatch round is asked to do ({@link RoundOptions}) and what it did
 * ({@link RoundReport}): shared by the round and its parts (core/dispatch/round.ts).
 */
import type { ShardMarks } from '../model/index.js';
import type { ReleaseStats } from './releaseStats.js';

export interface RoundOptions {
  /** Shards this round dispatches. */
  readonly shards: readonly number[];
  /** The round has returned by then (epoch ms), having released what it holds. */
  readonly deadlineMs: number;
  /**
   * Where to start reading each shard (epoch ms): the marks kept in the group lease item. A shard
   * without one is read from its start.
   */
  readonly marks?: ShardMarks;
  /** Re-read interval while busy. @default 500 */
  readonly queryIntervalMs?: number;
  /** Most rows held (acquired, not yet sent). @default 10_000 */
  readonly maxHeldRows?: number;
  /** Most payload bytes held. @default 64 MiB */
  readonly maxHeldBytes?: number;
  /** Conditional acquires in flight. @default 32 */
  readonly acquireConcurrency?: number;
  /** Items per page of a shard read. @default 200 */
  readonly pageRows?: number;
  /**
   * Checked every `ownerCheckMs` with the marks to keep: false ends the round (another
   * execution took the group).
   */
  readonly stillOwner?: (marks: ShardMarks) => Promise<boolean>;
  /** @default 5_000 */
  readonly ownerCheckMs?: number;
  /** Aborting stops the round at once: no further calls, timers cleared (a crash, in tests). */
  readonly signal?: AbortSignal;
  /** Called as rows are sent, with their lateness (metrics that stay current during a long round). */
  readonly onSent?: (latenessMs: readonly number[]) => void;
  /**
   * Before ending idle, scan every hold lane afresh (core/dispatch/rest.ts): the round's
   * `restable` then stands on reads begun after its groups' intent to rest had stood long enough.
   */
  readonly confirmRest?: boolean;
}

export interface RoundReport extends ReleaseStats {
  /** Rows taken with the conditional acquire. */
  acquired: number;
  /** Of those, rows whose earlier lease had expired (a crashed or slow dispatcher's). */
  recovered: number;
  /** Acquires whose condition failed: another round got there first, or the row was cancelled. */
  conflicts: number;
  /** Reads of the table: due-range pages, late-lane reads, idle probes, and key lookups after a conflict. */
  queries: number;
  /** Items those reads returned (DynamoDB's ScannedCount: nothing is filtered away). */
  itemsRead: number;
  /** Overdue rows the backlog heads read (an outage's backlog, drained oldest first). */
  backlogRows: number;
  /** Rows found through the late lane. */
  lateRows: number;
  /** Most rows tracked at once (read, not yet final): what the round's memory follows. */
  maxTracked: number;
  /** Backoffs after throttling (one per failed step, however many of its calls were throttled). */
  throttled: number;
  /** Backoffs after other errors. */
  errors: number;
  /** The round ended because nothing was due within the lookahead. */
  idle: boolean;
  /**
   * The round may let its groups rest (docs/design-dispatch.md, "Rest"): idle, with no row of a
   * paused or unregistered tenant in its hold lanes or held back.
   */
  restable: boolean;
  /** The round ended because another execution took over the group. */
  lostGroup: boolean;
  /** Rows still held at the end (abandoned: dispatched again when their lease expires). */
  abandoned: number;
  /** Where the next reader of each shard may start (kept in the group lease item). */
  marks: ShardMarks;
  /** Most rows of unregistered tenants the round held back, parked (core/dispatch/parked.ts). */
  parked: number;
  /** Those rows' tenants. */
  parkedTenants: string[];
  /** Rows put in the hold lane because their tenant was paused (docs/tenant-controls.md). */
  held: number;
  /** Rows read back from the hold lane (their tenant resumed, or its queue drained). */
  unheld: number;
  /** Queued rows moved to the hold lane to keep the round's queue bounded (a flood, or a delivery-limited backlog). */
  spilled: number;
  /** Those rows' tenants (paused during the round). */
  heldTenants: string[];
  /** Paused tenants with jobs in the hold lanes of the round's shards (for the PausedTooLong alarm). */
  pausedTenants: string[];
  /**
   * The longest any tenant that may send (not paused, registered) has had the same first row in
   * the hold lanes of the round's shards, as this process saw it across its looks (ms; 0: none):
   * rows that should be read back and are not (the HeldAfterResume alarm).
   */
  heldAfterResumeMs: number;
  /** Those tenants whose first held row waited so (over 0 ms), longest first, at most 10. */
  heldAfterResumeTenants: string[];
  durationMs: number;
}

/** A report with nothing done yet (a round starts from it; a step that dispatches nothing answers it). */
export function emptyRoundReport(): RoundReport {
  return {
    acquired: 0,
    recovered: 0,
    conflicts: 0,
    queries: 0,
    itemsRead: 0,
    backlogRows: 0,
    lateRows: 0,
    maxTracked: 0,
    throttled: 0,
    errors: 0,
    idle: false,
    restable: false,
    lostGroup: false,
    abandoned: 0,
    marks: {},
    parked: 0,
    parkedTenants: [],
    held: 0,
    unheld: 0,
    spilled: 0,
    heldTenants: [],
    pausedTenants: [],
    heldAfterResumeMs: 0,
    heldAfterResumeTenants: [],
    durationMs: 0,
    sent: 0,
    recorded: 0,
    leaseLost: 0,
    renewed: 0,
    sendRetries: 0,
    latenessMs: [],
    deferred: 0,
    givenBack: 0,
  };
}
