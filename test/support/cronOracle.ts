/**
 * A brute-force oracle for schedule tests, written independently of core/recurring/expression: it walks UTC
 * minute by minute, asks Intl what the zone's clocks show (date, time and weekday), tests the
 * cron fields from a structured description (not from the parser), and runs a wall-clock time
 * only the first time the clocks show it. Slow and obviously correct.
 */

/** One comma-separated item of a cron field. */
export type Item =
  | { readonly kind: 'all' }
  | { readonly kind: 'allStep'; readonly step: number }
  | { readonly kind: 'value'; readonly value: number }
  | { readonly kind: 'from'; readonly value: number; readonly step: number }
  | { readonly kind: 'range'; readonly from: number; readonly to: number; readonly step?: number };

export type DaySpec =
  | { readonly field: 'dom'; readonly items: readonly Item[] }
  | { readonly field: 'dom'; readonly special: 'L' | 'LW' }
  | { readonly field: 'dom'; readonly special: 'W'; readonly day: number }
  | { readonly field: 'dow'; readonly items: readonly Item[] }
  | { readonly field: 'dow'; readonly special: 'L' }
  | { readonly field: 'dow'; readonly special: 'lastOf'; readonly weekday: number }
  | { readonly field: 'dow'; readonly special: 'nth'; readonly weekday: number; readonly nth: number };

export interface OracleCron {
  readonly minutes: readonly Item[];
  readonly hours: readonly Item[];
  readonly days: DaySpec;
  readonly months: readonly Item[];
  readonly years: readonly Item[];
}

/** What the zone's clocks show during one UTC minute. */
export interface Clock {
  readonly utc: number;
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  /** 1 = Sunday ... 7 = Saturday (AWS numbering), from Intl's own weekday. */
  readonly weekday: number;
  readonly key: string;
}

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTH_NAMES = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAY_NAMES = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

/** The clocks of `zone` for every UTC minute in [from, to). */
export function clocks(zone: string, from: number, to: number): Clock[] {
  const format = new Intl.DateTimeFormat('en-GB', {
    timeZone: zone,
    weekday: 'short',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  const out: Clock[] = [];
  for (let utc = from; utc < to; utc += 60_000) {
    const p = Object.fromEntries(format.formatToParts(utc).map((part) => [part.type, part.value]));
    const [year, month, day, hour, minute] = [p.year, p.month, p.day, p.hour, p.minute].map(Number) as [
      number,
      number,
      number,
      number,
      number,
    ];
    out.push({
      utc,
      year,
      month,
      day,
      hour,
      minute,
      weekday: WEEKDAYS.indexOf(p.weekday ?? '') + 1,
      key: `${year}-${month}-${day} ${hour}:${minute}`,
    });
  }
  return out;
}

function itemMatches(item: Item, x: number, min: number, max: number): boolean {
  switch (item.kind) {
    case 'all':
      return true;
    case 'allStep':
      return (x - min) % item.step === 0;
    case 'value':
      return x === item.value;
    case 'from':
      return x >= item.value && (x - item.value) % item.step === 0;
    case 'range': {
      const step = item.step ?? 1;
      if (item.from <= item.to) return x >= item.from && x <= item.to && (x - item.from) % step === 0;
      const distance = x >= item.from ? x - item.from : x <= item.to ? x + (max - min + 1) - item.from : -1;
      return distance >= 0 && distance % step === 0;
    }
  }
}

const anyMatches = (items: readonly Item[], x: number, min: number, max: number): boolean => items.some((i) => itemMatches(i, x, min, max));

function lastDay(year: number, month: number): number {
  let day = 28;
  while (new Date(Date.UTC(year, month - 1, day + 1)).getUTCMonth() === month - 1) day++;
  return day;
}

const isWeekday = (year: number, month: number, day: number): boolean =>
  ![0, 6].includes(new Date(Date.UTC(year, month - 1, day)).getUTCDay());

function dayMatches(spec: DaySpec, c: Clock): boolean {
  const last = lastDay(c.year, c.month);
  if ('items' in spec) return spec.field === 'dom' ? anyMatches(spec.items, c.day, 1, 31) : anyMatches(spec.items, c.weekday, 1, 7);
  switch (spec.special) {
    case 'L':
      return spec.field === 'dom' ? c.day === last : c.weekday === 7;
    case 'LW': {
      const weekdays = [...Array(last).keys()].map((i) => i + 1).filter((d) => isWeekday(c.year, c.month, d));
      return c.day === weekdays[weekdays.length - 1];
    }
    case 'W': {
      if (spec.day > last) return false;
      const weekdays = [...Array(last).keys()].map((i) => i + 1).filter((d) => isWeekday(c.year, c.month, d));
      const nearest = weekdays.reduce((best, d) => (Math.abs(d - spec.day) < Math.abs(best - spec.day) ? d : best));
      return c.day === nearest;
    }
    case 'lastOf':
      return c.weekday === spec.weekday && c.day + 7 > last;
    case 'nth':
      return c.weekday === spec.weekday && Math.ceil(c.day / 7) === spec.nth;
  }
}

export function cronMatches(cron: OracleCron, c: Clock): boolean {
  return (
    anyMatches(cron.minutes, c.minute, 0, 59) &&
    anyMatches(cron.hours, c.hour, 0, 23) &&
    anyMatches(cron.months, c.month, 1, 12) &&
    anyMatches(cron.years, c.year, 1970, 2199) &&
    dayMatches(cron.days, c)
  );
}

/**
 * UTC minutes in [from, to) at which `cron` runs. `history` must start at least 26 hours before
 * `from`, so that a wall time shown earlier (before a fall back) is known to have been shown.
 */
export function expectedRuns(history: readonly Clock[], from: number, to: number, matches: (c: Clock) => boolean): number[] {
  const shown = new Set<string>();
  const runs: number[] = [];
  for (const c of history) {
    if (c.utc >= to) break;
    if (c.utc >= from && !shown.has(c.key) && matches(c)) runs.push(c.utc);
    shown.add(c.key);
  }
  return runs;
}

function renderValue(value: number, names: readonly string[] | undefined, min: number, asName: boolean): string {
  return asName && names ? (names[value - min] ?? String(value)) : String(value);
}

function renderItem(item: Item, names: readonly string[] | undefined, min: number, asName: boolean): string {
  const v = (x: number): string => renderValue(x, names, min, asName);
  switch (item.kind) {
    case 'all':
      return '*';
    case 'allStep':
      return `*/${item.step}`;
    case 'value':
      return v(item.value);
    case 'from':
      return `${v(item.value)}/${item.step}`;
    case 'range':
      return `${v(item.from)}-${v(item.to)}${item.step === undefined ? '' : `/${item.step}`}`;
  }
}

const renderItems = (items: readonly Item[], names?: readonly string[], min = 0, asName = false): string =>
  items.map((i) => renderItem(i, names, min, asName)).join(',');

/** The `cron(...)` text of a structured expression; `names` writes months and weekdays as names. */
export function renderCron(cron: OracleCron, names = false): string {
  const d = cron.days;
  let dom = '?';
  let dow = '?';
  if ('items' in d) {
    if (d.field === 'dom') dom = renderItems(d.items);
    else dow = renderItems(d.items, DAY_NAMES, 1, names);
  } else if (d.special === 'W') dom = `${d.day}W`;
  else if (d.field === 'dom') dom = d.special;
  else if (d.special === 'L') dow = 'L';
  else if (d.special === 'lastOf') dow = `${d.weekday}L`;
  else dow = `${renderValue(d.weekday, DAY_NAMES, 1, names)}#${d.nth}`;
  return `cron(${renderItems(cron.minutes)} ${renderItems(cron.hours)} ${dom} ${renderItems(cron.months, MONTH_NAMES, 1, names)} ${dow} ${renderItems(cron.years)})`;
}
