import type { SchedulerSettings } from './config.js';

/**
 * Positions in a shard's due range, and the rule that says which rows ingest must also note in
 * the late lane. See docs/design-dispatch.md for the reasoning and the proofs sketch.
 *
 * A dispatcher reads each shard incrementally: it remembers the sort key up to which it has read
 * (every item with `sk <= position` has been read) and reads only what lies beyond, up to
 * `now + readAhead`. Items stay at their key once final (delivered markers, tombstones, DEAD
 * records), so reading from the shard's start every round, as earlier releases did, would read
 * every record kept for the retention.
 */

const pad = (ms: number) => String(Math.max(0, Math.floor(ms))).padStart(13, '0');

/** The position just before every row due at `ms`: reading after it starts with rows due at `ms`. */
export const positionBefore = (ms: number): string => `${pad(ms)}#`;

/** The position just after every row due at `ms` ('~' sorts after every job id character). */
export const positionThrough = (ms: number): string => `${pad(ms)}#~`;

/** The due time a position (or a row's sort key) lies at. */
export const dueMsOf = (position: string): number => Number(position.slice(0, 13));

/**
 * How far ahead of now a round reads and acquires rows: the lookahead less 2 s (at least half
 * the lookahead). Reading less far than the lookahead leaves a job that went through the inbound
 * queue (due more than the lookahead after its submit) the time of its ingest before any read
 * position can pass it, so that ingest seldom needs the late lane.
 */
export function readAheadMs(settings: Pick<SchedulerSettings, 'lookaheadMs'>): number {
  return Math.max(Math.floor(settings.lookaheadMs / 2), settings.lookaheadMs - 2_000);
}

/**
 * Allowance for the clocks of two Lambdas to disagree (Amazon Time Sync keeps them within a
 * millisecond or so; this is three orders of magnitude more).
 */
export const CLOCK_SKEW_ALLOWANCE_MS = 1_000;

/**
 * Whether a row whose write was acknowledged at `writtenAtMs` (the writer's clock) may lie behind
 * some dispatcher's read position, so that ingest must also put a late-lane pointer.
 *
 * A read that began before the row's write committed reached at most `begin + readAhead` (the
 * reader's clock); the write committed before `writtenAtMs`. So a row due at or after
 * `writtenAtMs + readAhead + skew` is beyond every read that could have missed it: the read
 * position never passes it unseen. Anything due sooner is noted in the late lane, which rounds
 * read whole every time.
 */
export function isLateRow(dueMs: number, writtenAtMs: number, settings: Pick<SchedulerSettings, 'lookaheadMs'>): boolean {
  return dueMs < writtenAtMs + readAheadMs(settings) + CLOCK_SKEW_ALLOWANCE_MS;
}

/**
 * The read state of one shard in a round: a fresh head that follows `now + readAhead`, and,
 * after an outage, a backlog head that drains the overdue rows oldest first in bounded pages.
 */
export class ShardLane {
  /** Every item with `sk <= fresh` has been read (undefined: nothing yet, from the shard's start). */
  fresh: string | undefined;
  /** Overdue items still to read, oldest first: `after < sk <= end` (`end` is where `fresh` jumped from). */
  backlog: { after: string; end: string } | undefined;
  /** Backlog rows handed to the acquirer and not yet acquired or resolved. */
  backlogOpen = 0;
  /** The last fresh read reached its bound (nothing more within the read-ahead). */
  caughtUp = false;
  /** A probe found an item due then: no need to probe again before it is within the read-ahead. */
  probeHintMs: number | undefined;
  /**
   * The shard's hold lane (rows of paused tenants, docs/tenant-controls.md): the tenants found
   * with pointers there, and how far each has been read since it was last found.
   */
  readonly holds = new Map<string, { after?: string; more: boolean }>();
  /** When to look for tenants in the hold lane again (epoch ms). */
  holdScanAt = 0;
  /**
   * Where the next look for tenants in the hold lane goes on (past this tenant's pointers; none:
   * the lane's start). Each look reads a bounded number of tenants from there and wraps round at
   * the lane's end, so that every tenant is found within a bounded number of looks.
   */
  holdCursor: string | undefined;
  /** Tenants whose pointers this round wrote here (looked at again before the round ends idle). */
  readonly holdsWritten = new Set<string>();

  constructor(
    readonly shard: number,
    mark?: number,
  ) {
    this.fresh = mark === undefined ? undefined : positionBefore(mark);
  }

  /**
   * Where a new reader of this shard may start (epoch ms): nothing before it still needs this
   * reader, except the rows it tracks, which the round adds (undefined: the shard's start).
   */
  mark(): number | undefined {
    const pos = this.backlog ? this.backlog.after : this.fresh;
    return pos === undefined ? undefined : dueMsOf(pos);
  }
}
