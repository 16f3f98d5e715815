import { expressionError, type CronFieldName } from './errors.js';

/** What one cron field accepts. */
export interface FieldDef {
  readonly name: CronFieldName;
  /** How messages call the field. */
  readonly label: string;
  readonly min: number;
  readonly max: number;
  /** Names accepted for values, in order from `min` (`JAN` = 1, `SUN` = 1). */
  readonly names?: readonly string[];
  /** `/` increments (AWS allows them everywhere except day-of-week). */
  readonly steps: boolean;
  /** A range may wrap past the maximum (`20-2` in hours, `FRI-MON`); not for years. */
  readonly wraps: boolean;
}

const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
export const WEEKDAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

/** First and last year AWS accepts in the year field (and in `at()`). */
export const MIN_YEAR = 1970;
export const MAX_YEAR = 2199;

export const FIELDS: Readonly<Record<CronFieldName, FieldDef>> = {
  minutes: { name: 'minutes', label: 'minutes', min: 0, max: 59, steps: true, wraps: true },
  hours: { name: 'hours', label: 'hours', min: 0, max: 23, steps: true, wraps: true },
  dayOfMonth: { name: 'dayOfMonth', label: 'day-of-month', min: 1, max: 31, steps: true, wraps: true },
  month: { name: 'month', label: 'month', min: 1, max: 12, names: MONTH_NAMES, steps: true, wraps: true },
  dayOfWeek: { name: 'dayOfWeek', label: 'day-of-week', min: 1, max: 7, names: WEEKDAY_NAMES, steps: false, wraps: true },
  year: { name: 'year', label: 'year', min: MIN_YEAR, max: MAX_YEAR, steps: true, wraps: false },
};

/** `'60'`, or `'60' (in '0,60')` when the token is part of a longer field. */
function quote(token: string, whole: string): string {
  return token === whole ? `'${token}'` : `'${token}' (in '${whole}')`;
}

function rangeText(def: FieldDef): string {
  const names = def.names ? ` or ${def.names[0]}-${def.names[def.names.length - 1]}` : '';
  const first = def.name === 'dayOfWeek' ? ' (1 = SUN)' : '';
  return `${def.min}-${def.max}${first}${names}`;
}

/** One value of a field: digits or (where the field has names) a name, case-insensitive. */
export function parseValue(def: FieldDef, token: string, whole: string): number {
  if (/^\d{1,4}$/.test(token)) {
    const value = Number(token);
    if (value < def.min || value > def.max) {
      throw expressionError(
        def.name,
        `${def.label} value ${quote(token, whole)} is out of range: use a value in ${rangeText(def)}, the range of the ${def.label} field`,
      );
    }
    return value;
  }
  const index = def.names ? def.names.indexOf(token.toUpperCase()) : -1;
  if (index >= 0) return def.min + index;
  const hint = def.names ? `a number ${def.min}-${def.max} or a name ${def.names.join(',')}` : `a number ${def.min}-${def.max}`;
  throw expressionError(def.name, `${def.label} value ${quote(token, whole)} is not valid: use ${hint}`);
}

function parseStep(def: FieldDef, token: string, whole: string): number {
  if (!def.steps) {
    throw expressionError(
      def.name,
      `${def.label} '${whole}' uses '/', which AWS does not allow in ${def.label}: list the days instead (e.g. MON,WED,FRI)`,
    );
  }
  const span = def.max - def.min + 1;
  if (!/^\d{1,4}$/.test(token) || Number(token) < 1 || Number(token) > span) {
    throw expressionError(
      def.name,
      `${def.label} increment ${quote(token, whole)} is not valid: write start/increment with an increment from 1 to ${span} (e.g. 0/15)`,
    );
  }
  return Number(token);
}

/** The values `from`, `from+step`, ... up to `to`, wrapping past `max` when `to < from`. */
function walk(def: FieldDef, from: number, to: number, step: number, into: Set<number>): void {
  const span = def.max - def.min + 1;
  const length = to >= from ? to - from : to - from + span;
  for (let offset = 0; offset <= length; offset += step) {
    into.add(((from - def.min + offset) % span) + def.min);
  }
}

/** One comma-separated item: `*`, `*∕s`, `v`, `v∕s`, `a-b`, `a-b∕s`. */
function parseItem(def: FieldDef, item: string, whole: string, into: Set<number>): void {
  const [base = '', stepText, extra] = item.split('/');
  if (extra !== undefined) {
    throw expressionError(def.name, `${def.label} item ${quote(item, whole)} has more than one '/': write start/increment (e.g. 0/15)`);
  }
  const step = stepText === undefined ? 1 : parseStep(def, stepText, whole);
  if (base === '*') return walk(def, def.min, def.max, step, into);
  const dash = base.indexOf('-');
  if (dash < 0) {
    const value = parseValue(def, base, whole);
    return walk(def, value, stepText === undefined ? value : def.max, step, into);
  }
  const from = parseValue(def, base.slice(0, dash), whole);
  const to = parseValue(def, base.slice(dash + 1), whole);
  if (to < from && !def.wraps) {
    throw expressionError(def.name, `${def.label} range ${quote(base, whole)} runs backwards: write the smaller ${def.label} first`);
  }
  walk(def, from, to, step, into);
}

/**
 * The sorted values a plain field allows: lists, ranges (wrapping where the field allows it),
 * increments, `*`, names. `?`, `L`, `W` and `#` are the day fields' business (days.ts).
 *
 * @example parseField(FIELDS.hours, '20-2') // [0, 1, 2, 20, 21, 22, 23]
 */
export function parseField(def: FieldDef, text: string): number[] {
  const values = new Set<number>();
  for (const item of text.split(',')) {
    if (item === '') {
      throw expressionError(def.name, `${def.label} '${text}' has an empty list item: separate values with single commas (e.g. 1,15)`);
    }
    if (/[?LW#]/i.test(item) && !def.names) {
      throw expressionError(
        def.name,
        `${def.label} '${text}' uses '${item.match(/[?LW#]/i)?.[0] ?? ''}', which ${def.label} does not allow: use values, ranges, lists, * and /`,
      );
    }
    parseItem(def, item, text, values);
  }
  return [...values].sort((a, b) => a - b);
}
