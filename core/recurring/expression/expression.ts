import { parseCron, type CronSpec } from './cron.js';
import { daysInMonth } from './days.js';
import { expressionError } from './errors.js';
import { MAX_YEAR, MIN_YEAR } from './fields.js';
import { validateTimeZone } from './zone.js';

export type RateUnit = 'minute' | 'hour' | 'day';

const UNIT_MS: Readonly<Record<RateUnit, number>> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };

/** Largest `n` in `rate(n unit)`. AWS documents no maximum; this keeps the arithmetic exact. */
export const MAX_RATE_VALUE = 1_000_000;

/** Longest expression accepted. */
export const MAX_EXPRESSION_LENGTH = 256;

interface Common {
  /** The expression as given. */
  readonly expression: string;
  /** The IANA zone the expression is evaluated in (UTC when none was given). */
  readonly timezone: string;
}

/** A validated schedule expression with its zone; `nextRuns` evaluates it. */
export type Schedule =
  | (Common & { readonly kind: 'cron'; readonly cron: CronSpec })
  | (Common & { readonly kind: 'rate'; readonly value: number; readonly unit: RateUnit; readonly periodMs: number })
  /** `wall`: the local date and time of `at()`, as naive milliseconds (`Date.UTC` of its fields). */
  | (Common & { readonly kind: 'at'; readonly wall: number });

const FORMS = 'cron(minutes hours day-of-month month day-of-week year), rate(n minutes|hours|days) or at(yyyy-mm-ddThh:mm:ss)';

/**
 * Validates an EventBridge Scheduler expression and its time zone. Throws
 * `ScheduleExpressionError` (a 400 `ValidationError`) naming the field and saying how to fix it.
 *
 * @example
 * parseSchedule('cron(0 9 ? * MON-FRI *)', 'Europe/London') // { kind: 'cron', ... }
 * parseSchedule('rate(5 minutes)')                          // { kind: 'rate', periodMs: 300_000, ... }
 * parseSchedule('at(2027-03-15T06:30:00)', 'Asia/Tokyo')    // { kind: 'at', ... }
 */
export function parseSchedule(expression: unknown, timezone?: unknown): Schedule {
  if (typeof expression !== 'string' || expression.length === 0) {
    throw expressionError('expression', `expression must be a non-empty string: use ${FORMS}`);
  }
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    throw expressionError(
      'expression',
      `expression is ${expression.length} characters long, the limit is ${MAX_EXPRESSION_LENGTH}: use ${FORMS}`,
    );
  }
  const call = /^(cron|rate|at)\((.*)\)$/s.exec(expression);
  if (call?.[1] === undefined || call[2] === undefined) {
    const lower = /^\s*(cron|rate|at)\s*\(/i.exec(expression);
    const hint = lower ? `: write ${lower[1]?.toLowerCase()}(...) in lower case, with no spaces around it, and close the parenthesis` : '';
    throw expressionError('expression', `'${expression}' is not a schedule expression${hint}; use ${FORMS}`);
  }
  // The expression is checked before the zone, so a request with both wrong names the first.
  const body = call[2];
  switch (call[1]) {
    case 'cron': {
      const cron = parseCron(body);
      return { expression, timezone: validateTimeZone(timezone), kind: 'cron', cron };
    }
    case 'rate': {
      const rate = parseRate(body);
      return { expression, timezone: validateTimeZone(timezone), kind: 'rate', ...rate };
    }
    default: {
      const wall = parseAt(body);
      return { expression, timezone: validateTimeZone(timezone), kind: 'at', wall };
    }
  }
}

/** `n unit`: n a positive integer, the unit singular exactly when n is 1 (AWS's rule). */
function parseRate(body: string): { value: number; unit: RateUnit; periodMs: number } {
  const parts = body.trim().split(/\s+/);
  const [valueText = '', unitText = ''] = parts;
  if (parts.length !== 2) {
    throw expressionError('rate', `rate(${body}) is not a value and a unit: write e.g. rate(5 minutes), rate(1 hour) or rate(7 days)`);
  }
  if (!/^\d+$/.test(valueText) || Number(valueText) < 1 || Number(valueText) > MAX_RATE_VALUE) {
    throw expressionError(
      'rate',
      `rate value '${valueText}' is not valid: use a whole number from 1 to ${MAX_RATE_VALUE}, e.g. rate(5 minutes)`,
    );
  }
  const value = Number(valueText);
  const singular = unitText.replace(/s$/, '');
  if (!(singular in UNIT_MS) || unitText !== unitText.toLowerCase()) {
    throw expressionError(
      'rate',
      `rate unit '${unitText}' is not valid: use minute, minutes, hour, hours, day or days (e.g. rate(2 hours); a week is rate(7 days))`,
    );
  }
  const unit = singular as RateUnit;
  if (value === 1 && unitText !== unit) {
    throw expressionError('rate', `rate(1 ${unitText}) uses a plural unit with 1: AWS requires the singular, write rate(1 ${unit})`);
  }
  if (value > 1 && unitText === unit) {
    throw expressionError(
      'rate',
      `rate(${value} ${unitText}) uses a singular unit with ${value}: AWS requires the plural, write rate(${value} ${unit}s)`,
    );
  }
  return { value, unit, periodMs: value * UNIT_MS[unit] };
}

/** `yyyy-mm-ddThh:mm:ss`, a real calendar date and time, year 1970-2199. */
function parseAt(body: string): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})$/.exec(body);
  const example = 'e.g. at(2027-03-15T06:30:00)';
  if (!match) {
    throw expressionError(
      'at',
      `at(${body}) is not a date and time: write at(yyyy-mm-ddThh:mm:ss) in the schedule's time zone, ${example}`,
    );
  }
  const [year, month, day, hour, minute, second] = match.slice(1).map(Number) as [number, number, number, number, number, number];
  if (year < MIN_YEAR || year > MAX_YEAR) {
    throw expressionError('at', `at(${body}): year ${year} is out of range: use ${MIN_YEAR}-${MAX_YEAR}`);
  }
  if (month < 1 || month > 12) {
    throw expressionError('at', `at(${body}) is not a calendar date: use a month from 01 to 12, ${example}`);
  }
  if (day < 1 || day > daysInMonth(year, month)) {
    throw expressionError(
      'at',
      `at(${body}) is not a calendar date: use a day from 01 to ${daysInMonth(year, month)}, the days of that month`,
    );
  }
  if (hour > 23 || minute > 59 || second > 59) {
    throw expressionError('at', `at(${body}) is not a time of day: use hh 00-23, mm 00-59, ss 00-59, ${example}`);
  }
  return Date.UTC(year, month - 1, day, hour, minute, second);
}
