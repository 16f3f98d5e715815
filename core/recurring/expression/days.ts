import { expressionError } from './errors.js';
import { FIELDS, parseField, parseValue } from './fields.js';

/**
 * Which days of a month a cron expression runs on. Exactly one of the two day fields is `?`, so
 * the rule comes from the other one. Weekdays use AWS numbering: 1 = SUN ... 7 = SAT.
 */
export type DayRule =
  /** Day-of-month values, ranges, lists, increments, `*`. */
  | { readonly kind: 'monthDays'; readonly days: readonly number[] }
  /** `L` in day-of-month: the last day of the month. */
  | { readonly kind: 'lastDay' }
  /** `LW`: the last weekday (MON-FRI) of the month. */
  | { readonly kind: 'lastWeekday' }
  /** `<n>W`: the weekday nearest day n, never crossing into another month. */
  | { readonly kind: 'nearestWeekday'; readonly day: number }
  /** Day-of-week values, ranges, lists, `*`, and `L` alone (= 7, SAT). */
  | { readonly kind: 'weekdays'; readonly weekdays: readonly number[] }
  /** `<d>L` in day-of-week: the last weekday d of the month (6L = last Friday). */
  | { readonly kind: 'lastOfWeekday'; readonly weekday: number }
  /** `<d>#<n>`: the nth weekday d of the month (2#1 = first Monday); no run if there is none. */
  | { readonly kind: 'nthWeekday'; readonly weekday: number; readonly nth: number };

const QUESTION_RULE = "AWS requires '?' in exactly one of day-of-month and day-of-week";

/**
 * The day rule of a cron expression from its day-of-month and day-of-week fields.
 *
 * @example parseDays('?', '2#1') // { kind: 'nthWeekday', weekday: 2, nth: 1 } (first Monday)
 */
export function parseDays(dom: string, dow: string): DayRule {
  if (dom === '?' && dow === '?') {
    throw expressionError(
      'cron',
      `day-of-month and day-of-week are both '?': ${QUESTION_RULE}; put * in day-of-month for every day (e.g. cron(0 10 * * ? *))`,
    );
  }
  if (dom !== '?' && dow !== '?') {
    throw expressionError(
      'cron',
      `day-of-month '${dom}' and day-of-week '${dow}' are both set: ${QUESTION_RULE}; write cron(0 10 * * ? *) for every day or cron(0 10 ? * MON-FRI *) for weekdays`,
    );
  }
  return dow === '?' ? parseMonthDays(dom) : parseWeekdays(dow);
}

const LONE_FORMS: Readonly<Record<string, string>> = {
  W: 'one day with W as the whole field (e.g. 15W), or LW',
  L: 'L or LW alone as the whole field',
  dowL: 'L or one weekday with L as the whole field (e.g. 6L = last Friday)',
};

function loneSpecial(field: 'dayOfMonth' | 'dayOfWeek', text: string, special: 'L' | 'W'): never {
  const label = FIELDS[field].label;
  const forms = field === 'dayOfWeek' ? LONE_FORMS.dowL : LONE_FORMS[special];
  throw expressionError(field, `${label} '${text}' combines '${special}' with other values or ranges: use ${forms}`);
}

function parseMonthDays(text: string): DayRule {
  const upper = text.toUpperCase();
  if (upper === 'L') return { kind: 'lastDay' };
  if (upper === 'LW') return { kind: 'lastWeekday' };
  const nearest = /^(\d{1,2})W$/.exec(upper);
  if (nearest?.[1] !== undefined) return { kind: 'nearestWeekday', day: parseValue(FIELDS.dayOfMonth, nearest[1], text) };
  if (upper.includes('L') || upper.includes('W')) {
    if (/^L-\d+$/.test(upper)) {
      throw expressionError(
        'dayOfMonth',
        `day-of-month '${text}': AWS does not accept offsets from the last day; use L (last day) or LW (last weekday)`,
      );
    }
    loneSpecial('dayOfMonth', text, upper.includes('W') ? 'W' : 'L');
  }
  if (text.includes('?')) {
    throw expressionError('dayOfMonth', `day-of-month '${text}' mixes '?' with values: use '?' alone, or values without '?'`);
  }
  if (text.includes('#')) {
    throw expressionError(
      'dayOfMonth',
      `day-of-month '${text}' uses '#', which only day-of-week allows: put ? in day-of-month and use # in day-of-week (e.g. cron(0 9 ? * 2#1 *) = first Monday)`,
    );
  }
  return { kind: 'monthDays', days: parseField(FIELDS.dayOfMonth, text) };
}

function parseWeekdays(text: string): DayRule {
  const upper = text.toUpperCase();
  const def = FIELDS.dayOfWeek;
  if (upper === 'L') return { kind: 'weekdays', weekdays: [7] };
  const last = /^([0-9A-Z]+)L$/.exec(upper);
  if (last?.[1] !== undefined && !upper.includes(',') && !upper.includes('-')) {
    return { kind: 'lastOfWeekday', weekday: parseValue(def, last[1], text) };
  }
  if (upper.includes('#')) {
    const nth = /^([0-9A-Z]+)#(\d+)$/.exec(upper);
    if (nth?.[1] === undefined || nth[2] === undefined) {
      throw expressionError(
        'dayOfWeek',
        `day-of-week '${text}' is not a valid '#' expression: AWS allows one weekday#n as the whole field, so use a single one such as 2#1 (first Monday) and a second schedule for another`,
      );
    }
    const n = Number(nth[2]);
    if (n < 1 || n > 5) {
      throw expressionError(
        'dayOfWeek',
        `day-of-week '${text}' asks for occurrence ${nth[2]} of a weekday: use 1 to 5 after '#' (e.g. 6#3 = third Friday)`,
      );
    }
    return { kind: 'nthWeekday', weekday: parseValue(def, nth[1], text), nth: n };
  }
  // Weekday names end in letters that are not L (SUN..SAT), so an L here is the special.
  if (/L(,|-|$)/.test(upper)) loneSpecial('dayOfWeek', text, 'L');
  if (upper.replace(/WED/g, '').includes('W')) {
    throw expressionError(
      'dayOfWeek',
      `day-of-week '${text}' uses 'W', which only day-of-month allows: put ? in day-of-week and use W in day-of-month (e.g. cron(0 9 15W * ? *))`,
    );
  }
  if (text.includes('?')) {
    throw expressionError('dayOfWeek', `day-of-week '${text}' mixes '?' with values: use '?' alone, or values without '?'`);
  }
  return { kind: 'weekdays', weekdays: parseField(def, text) };
}

/** Days in month `month` (1-12) of `year`. */
export function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** AWS weekday (1 = SUN ... 7 = SAT) of a date. */
export function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month - 1, day)).getUTCDay() + 1;
}

function nearestWeekday(year: number, month: number, day: number, last: number): number {
  const weekday = weekdayOf(year, month, day);
  if (weekday === 7) return day === 1 ? 3 : day - 1; // Saturday: Friday before, or Monday the 3rd
  if (weekday === 1) return day === last ? day - 2 : day + 1; // Sunday: Monday after, or Friday before the last
  return day;
}

/**
 * The sorted days of `month` (1-12) in `year` on which `rule` runs.
 *
 * @example matchingDays({ kind: 'lastOfWeekday', weekday: 6 }, 2026, 9) // [25] (last Friday)
 */
export function matchingDays(rule: DayRule, year: number, month: number): number[] {
  const last = daysInMonth(year, month);
  switch (rule.kind) {
    case 'monthDays':
      return rule.days.filter((day) => day <= last);
    case 'lastDay':
      return [last];
    case 'lastWeekday':
      return [nearestWeekday(year, month, last, last)];
    case 'nearestWeekday':
      return rule.day > last ? [] : [nearestWeekday(year, month, rule.day, last)];
    case 'weekdays': {
      const first = weekdayOf(year, month, 1);
      const days: number[] = [];
      for (let day = 1; day <= last; day++) {
        if (rule.weekdays.includes(((first - 1 + day - 1) % 7) + 1)) days.push(day);
      }
      return days;
    }
    case 'lastOfWeekday': {
      const back = (weekdayOf(year, month, last) - rule.weekday + 7) % 7;
      return [last - back];
    }
    case 'nthWeekday': {
      const firstMatch = 1 + ((rule.weekday - weekdayOf(year, month, 1) + 7) % 7);
      const day = firstMatch + 7 * (rule.nth - 1);
      return day <= last ? [day] : [];
    }
  }
}
