import { ScheduleExpressionError } from './errors.js';

/**
 * Wall clock <-> instant conversion for IANA time zones, on the ICU data of the runtime (Node
 * ships full ICU). A wall-clock time is "naive" epoch milliseconds: `Date.UTC(...)` of the local
 * calendar fields, no zone applied. Offsets are whatever the zone says, to the second: +05:30,
 * +05:45, +13:45, 30-minute DST shifts, southern-hemisphere DST, DST at midnight.
 */

const HOUR = 3_600_000;
/** UTC offsets in use lie within -12:00 and +14:00; one hour of margin on each side. */
const MAX_AHEAD = 15 * HOUR;
const MAX_BEHIND = 13 * HOUR;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, format);
  }
  return format;
}

/** Names shaped like IANA zone ids: `UTC`, `EST5EDT`, `Etc/GMT+5`, `America/Port-au-Prince`. */
const ZONE_SHAPE = /^[A-Z][A-Za-z0-9_+-]*(\/[A-Z][A-Za-z0-9_+-]*){0,2}$/;

let canonical: Map<string, string> | undefined;

/** The runtime's canonical zone ids by lower-case name, to refuse mis-cased spellings. */
function canonicalNames(): Map<string, string> {
  canonical ??= new Map(Intl.supportedValuesOf('timeZone').map((name) => [name.toLowerCase(), name]));
  return canonical;
}

/**
 * Checks an IANA time zone name and returns it; `undefined` means UTC. Refuses what the runtime
 * does not know (`Mars/Olympus`), and junk the runtime would quietly accept: other casings
 * (`america/new_york`), offsets (`+05:30`), white space. Links such as `US/Eastern` are accepted.
 *
 * @example validateTimeZone('Asia/Kathmandu') // 'Asia/Kathmandu'
 */
export function validateTimeZone(zone: unknown): string {
  if (zone === undefined) return 'UTC';
  const fix = 'use an IANA time zone name such as UTC, Europe/London or America/New_York';
  if (typeof zone !== 'string' || zone.length === 0 || zone.length > 64) {
    throw new ScheduleExpressionError('timezone', 'timezone', `timezone must be a non-empty string of at most 64 characters: ${fix}`);
  }
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw new ScheduleExpressionError('timezone', 'timezone', `'${zone}' is not a time zone this scheduler knows: ${fix}`);
  }
  const proper = canonicalNames().get(zone.toLowerCase()) ?? (resolved.toLowerCase() === zone.toLowerCase() ? resolved : undefined);
  if (!ZONE_SHAPE.test(zone) || (proper !== undefined && proper !== zone)) {
    const suggestion = proper !== undefined ? `: write '${proper}'` : `: ${fix}`;
    throw new ScheduleExpressionError('timezone', 'timezone', `'${zone}' is not spelled as an IANA time zone name${suggestion}`);
  }
  return zone;
}

/**
 * The zone's UTC offset at `instant`, in milliseconds (local minus UTC).
 *
 * @example offsetAt('Asia/Kathmandu', Date.UTC(2026, 0, 1)) // 20_700_000 (+05:45)
 */
export function offsetAt(zone: string, instant: number): number {
  if (zone === 'UTC') return 0;
  const second = Math.floor(instant / 1000) * 1000;
  const parts: Record<string, number> = {};
  for (const part of formatter(zone).formatToParts(second)) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  const { year = 0, month = 1, day = 1, hour = 0, minute = 0, second: sec = 0 } = parts;
  return Date.UTC(year, month - 1, day, hour, minute, sec) - second;
}

/** The wall-clock time (naive milliseconds) in `zone` at `instant`. */
export function wallTime(zone: string, instant: number): number {
  return instant + offsetAt(zone, instant);
}

/**
 * Every instant at which the clocks of `zone` show `wall`, earliest first: none in a gap
 * (spring forward), two in an overlap (fall back), one otherwise.
 *
 * @example instantsOf('America/New_York', Date.UTC(2026, 10, 1, 1, 30)) // [05:30Z, 06:30Z]
 */
export function instantsOf(zone: string, wall: number): number[] {
  if (zone === 'UTC') return [wall];
  // Any instant showing `wall` lies in [wall - 15 h, wall + 13 h]; the offsets in force there
  // are those at both ends plus, should a zone change twice in a day, the ones near `wall`.
  const guess = offsetAt(zone, wall);
  const offsets = new Set([offsetAt(zone, wall - MAX_AHEAD), offsetAt(zone, wall + MAX_BEHIND), guess, offsetAt(zone, wall - guess)]);
  const instants = new Set<number>();
  for (const offset of offsets) {
    const instant = wall - offset;
    if (offsetAt(zone, instant) === offset) instants.add(instant);
  }
  return [...instants].sort((a, b) => a - b);
}

/**
 * The first instant at which the clocks of `zone` show `wall`, or null if they never do
 * (skipped by a spring-forward gap). A repeated wall time (fall back) maps to its first instance.
 */
export function firstInstant(zone: string, wall: number): number | null {
  return instantsOf(zone, wall)[0] ?? null;
}
