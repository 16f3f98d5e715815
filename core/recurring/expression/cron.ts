import { matchingDays, parseDays, type DayRule } from './days.js';
import { expressionError } from './errors.js';
import { FIELDS, parseField } from './fields.js';

/** A parsed `cron(...)` body: the allowed values of each field, sorted, and the day rule. */
export interface CronSpec {
  readonly minutes: readonly number[];
  readonly hours: readonly number[];
  readonly days: DayRule;
  readonly months: readonly number[];
  readonly years: readonly number[];
}

const FORM = 'cron(minutes hours day-of-month month day-of-week year)';

/**
 * Parses the inside of `cron(...)`: exactly six fields separated by white space, with AWS
 * semantics (see docs/schedules.md). Throws `ScheduleExpressionError` naming the field.
 *
 * @example parseCron('0/15 8-17 ? * MON-FRI *').minutes // [0, 15, 30, 45]
 */
export function parseCron(body: string): CronSpec {
  const fields = body
    .trim()
    .split(/\s+/)
    .filter((field) => field !== '');
  if (fields.length !== 6) {
    const hint =
      fields.length === 5
        ? '; AWS cron ends with a year field: add * at the end (e.g. cron(0 10 * * ? *))'
        : '; write all six, e.g. cron(0 10 * * ? *)';
    throw expressionError('cron', `cron has ${fields.length} field${fields.length === 1 ? '' : 's'} but needs exactly 6, ${FORM}${hint}`);
  }
  const [minutes = '', hours = '', dom = '', month = '', dow = '', year = ''] = fields;
  for (const [name, text] of [
    ['minutes', minutes],
    ['hours', hours],
    ['month', month],
    ['year', year],
  ] as const) {
    if (text.includes('?')) {
      throw expressionError(
        name,
        `${FIELDS[name].label} '${text}' uses '?', which only day-of-month and day-of-week allow: use * for every ${FIELDS[name].label.replace(/s$/, '')}`,
      );
    }
  }
  return {
    minutes: parseField(FIELDS.minutes, minutes),
    hours: parseField(FIELDS.hours, hours),
    days: parseDays(dom, dow),
    months: parseField(FIELDS.month, month),
    years: parseField(FIELDS.year, year),
  };
}

function firstAtLeast(values: readonly number[], floor: number): number | undefined {
  for (const value of values) if (value >= floor) return value;
  return undefined;
}

/**
 * The first wall-clock minute at or after `from` that `spec` matches, or null if there is none
 * before the end of the year field's range (2199). Wall-clock times are "naive" epoch
 * milliseconds: `Date.UTC(y, m - 1, d, h, min)` of the local calendar, with no zone applied.
 * Jumps field by field (year, month, day, hour, minute), so even an expression that never
 * matches (`cron(0 0 30 2 ? *)`) costs at most one step per month of the year range.
 *
 * @example nextCronWall(parseCron('0 8 1 * ? *'), Date.UTC(2026, 8, 2)) // Date.UTC(2026, 9, 1, 8, 0)
 */
export function nextCronWall(spec: CronSpec, from: number): number | null {
  const start = new Date(Math.ceil(from / 60_000) * 60_000);
  let year = start.getUTCFullYear();
  let month = start.getUTCMonth() + 1;
  let day = start.getUTCDate();
  let hour = start.getUTCHours();
  let minute = start.getUTCMinutes();
  for (;;) {
    const y = firstAtLeast(spec.years, year);
    if (y === undefined) return null;
    if (y !== year) [year, month, day, hour, minute] = [y, 1, 1, 0, 0];
    const m = firstAtLeast(spec.months, month);
    if (m === undefined) {
      [year, month, day, hour, minute] = [year + 1, 1, 1, 0, 0];
      continue;
    }
    if (m !== month) [month, day, hour, minute] = [m, 1, 0, 0];
    const d = firstAtLeast(matchingDays(spec.days, year, month), day);
    if (d === undefined) {
      [month, day, hour, minute] = [month + 1, 1, 0, 0];
      if (month > 12) [year, month] = [year + 1, 1];
      continue;
    }
    if (d !== day) [day, hour, minute] = [d, 0, 0];
    const h = firstAtLeast(spec.hours, hour);
    if (h === undefined) {
      [day, hour, minute] = [day + 1, 0, 0]; // past the month's end, the day lookup moves on
      continue;
    }
    if (h !== hour) [hour, minute] = [h, 0];
    const min = firstAtLeast(spec.minutes, minute);
    if (min === undefined) {
      [hour, minute] = [hour + 1, 0]; // hour 24: no hour matches, the next day is tried
      continue;
    }
    return Date.UTC(year, month - 1, day, hour, min);
  }
}
