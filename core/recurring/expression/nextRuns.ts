import { nextCronWall } from './cron.js';
import type { Schedule } from './expression.js';
import { MAX_YEAR } from './fields.js';
import { firstInstant, wallTime } from './zone.js';

/** Most occurrences one call computes (the API previews 5, a dry run up to 100). */
export const MAX_RUNS_PER_CALL = 1000;

/**
 * No occurrence is at or after this instant: the year field and `at()` stop at the end of 2199 on
 * the local clock, which is 2200-01-01T12:00Z at the latest (UTC-12). `rate()` stops there too.
 */
export const END_OF_TIME = Date.UTC(MAX_YEAR + 1, 0, 1, 12);

/** Wall-clock searches start no earlier than this: the year field starts in 1970 (local). */
const START_OF_TIME = Date.UTC(1969, 11, 31);

/** The widest UTC offset in use (+14:00): a wall time is never shown later than this after it. */
const MAX_OFFSET_MS = 14 * 3_600_000;

export interface NextRunsOptions {
  /** Occurrences at or after this instant (epoch ms), usually now. */
  readonly after: number;
  /** At most this many occurrences (0 to MAX_RUNS_PER_CALL). */
  readonly count: number;
  /** The schedule's start (epoch ms): nothing runs before it; `rate()` runs first at it. */
  readonly startAt?: number;
  /** The schedule's end (epoch ms, exclusive): nothing runs at or after it. */
  readonly endAt?: number;
  /** `rate()` without `startAt` counts its period from this instant (the schedule's creation). */
  readonly createdAt?: number;
}

function checkInstant(name: string, value: number | undefined): void {
  if (value !== undefined && !Number.isFinite(value))
    throw new RangeError(`nextRuns: ${name} must be a finite epoch-millisecond number, got ${value}`);
}

/**
 * The next occurrences of `schedule` as epoch milliseconds, ascending: at or after
 * max(after, startAt), before endAt (exclusive), at most `count`. Fewer (or none) when the
 * schedule ends first, including expressions that never fire again (`cron(0 0 30 2 ? *)`).
 *
 * - cron: wall-clock minutes in the schedule's zone. A wall time that does not exist (spring
 *   forward) is skipped; one that happens twice (fall back) runs once, at its first instance.
 * - rate: every `periodMs` of elapsed time from startAt, or from createdAt without a startAt
 *   (so `rate(1 day)` stays 24 h apart across DST); the first run is that anchor itself.
 * - at: once, at the first instant its zone shows that date and time (never, if its clocks skip it).
 *
 * @example
 * const s = parseSchedule('cron(30 6 ? * MON *)', 'Europe/Paris');
 * nextRuns(s, { after: Date.parse('2027-03-10T00:00:00Z'), count: 2 }).map((t) => new Date(t).toISOString());
 * // ['2027-03-15T05:30:00.000Z', '2027-03-22T05:30:00.000Z']
 */
export function nextRuns(schedule: Schedule, options: NextRunsOptions): number[] {
  const { after, count, startAt, endAt = END_OF_TIME, createdAt } = options;
  checkInstant('after', after);
  checkInstant('startAt', startAt);
  checkInstant('endAt', endAt);
  checkInstant('createdAt', createdAt);
  if (!Number.isInteger(count) || count < 0 || count > MAX_RUNS_PER_CALL) {
    throw new RangeError(`nextRuns: count must be a whole number from 0 to ${MAX_RUNS_PER_CALL}, got ${count}`);
  }
  const from = Math.max(after, startAt ?? -Infinity);
  const until = Math.min(endAt, END_OF_TIME);
  if (count === 0 || from >= until) return [];
  switch (schedule.kind) {
    case 'cron':
      return cronRuns(schedule, from, until, count);
    case 'rate': {
      const anchor = startAt ?? createdAt;
      if (anchor === undefined)
        throw new RangeError('nextRuns: a rate() schedule needs startAt or createdAt, the instant its period counts from');
      return rateRuns(schedule.periodMs, anchor, from, until, count);
    }
    case 'at': {
      const instant = firstInstant(schedule.timezone, schedule.wall);
      return instant !== null && instant >= from && instant < until ? [instant] : [];
    }
  }
}

function rateRuns(period: number, anchor: number, from: number, until: number, count: number): number[] {
  const runs: number[] = [];
  const periodsBefore = Math.max(0, Math.ceil((from - anchor) / period));
  for (let run = anchor + periodsBefore * period; run < until && runs.length < count; run += period) {
    runs.push(run);
  }
  return runs;
}

function cronRuns(schedule: Extract<Schedule, { kind: 'cron' }>, from: number, until: number, count: number): number[] {
  const zone = schedule.timezone;
  const runs: number[] = [];
  // Walk wall-clock minutes from the one showing at `from`. A wall time repeated by a fall back
  // maps to its first instance, which may precede `from`: such minutes are passed over.
  let wall: number | null = Math.floor(wallTime(zone, Math.max(from, START_OF_TIME)) / 60_000) * 60_000;
  while (runs.length < count) {
    wall = nextCronWall(schedule.cron, wall);
    if (wall === null || wall - MAX_OFFSET_MS >= until) break;
    const instant = firstInstant(zone, wall);
    if (instant !== null && instant >= from) {
      if (instant >= until) break;
      // First instances rise with wall time; the check only guards the order of the output.
      if (runs.length === 0 || instant > (runs[runs.length - 1] ?? 0)) runs.push(instant);
    }
    wall += 60_000;
  }
  return runs;
}
