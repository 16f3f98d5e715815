import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { firstInstant, instantsOf, nextRuns, parseSchedule, wallTime } from '../../core/recurring/expression/index.js';
import { cronArb, everything, itemsArb } from '../support/cronArbitraries.js';
import { clocks, cronMatches, expectedRuns, renderCron, type Clock, type OracleCron } from '../support/cronOracle.js';

// Property tests of the evaluator against the brute-force oracle of test/support/cronOracle.ts,
// in zones with DST both ways, half-hour and 45-minute offsets, a 30-minute DST shift and DST at
// midnight, over windows of four days around each 2026 transition and around month and year ends.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const HISTORY = 26 * HOUR;
const ZONES = [
  'UTC',
  'Europe/London',
  'America/New_York',
  'Asia/Kolkata',
  'Asia/Kathmandu',
  'Australia/Sydney',
  'Australia/Lord_Howe',
  'Pacific/Chatham',
  'America/Santiago',
];

/** Instants where the zone's offset changes in `year`, found hour by hour through Intl. */
function transitions(zone: string, year: number): number[] {
  const format = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' });
  const offset = (t: number): string => format.formatToParts(t).find((p) => p.type === 'timeZoneName')?.value ?? '';
  const found: number[] = [];
  for (let t = Date.UTC(year, 0, 1); t < Date.UTC(year + 1, 0, 1); t += HOUR) {
    if (offset(t) !== offset(t + HOUR)) found.push(t);
  }
  return found;
}

interface Window {
  readonly zone: string;
  readonly from: number;
  readonly to: number;
  readonly history: readonly Clock[];
}

function windowsOf(zone: string): Window[] {
  // Month ends where W must not cross into the next or previous month: Sat 1 Aug 2026, Sun
  // 31 May 2026; a February; a year end.
  const centres = [...transitions(zone, 2026), Date.UTC(2026, 2, 1), Date.UTC(2026, 5, 1), Date.UTC(2026, 7, 2), Date.UTC(2027, 0, 1)];
  return centres.map((centre) => {
    const from = centre - 2 * DAY;
    const to = centre + 2 * DAY;
    return { zone, from, to, history: clocks(zone, from - HISTORY, to) };
  });
}

/** A minute of a window (`margin` minutes from its ends), half the time within 3 h of its centre. */
function nearCentre(margin: number): fc.Arbitrary<number> {
  const centre = 2 * 24 * 60;
  return fc.oneof(fc.integer({ min: margin, max: 4 * 24 * 60 - 1 - margin }), fc.integer({ min: centre - 180, max: centre + 180 }));
}

describe.each(ZONES)('cron in %s matches the minute-by-minute oracle', (zone) => {
  const windows = windowsOf(zone);

  it('has windows around its DST transitions (if any) and month and year ends', () => {
    const dst = ['UTC', 'Asia/Kolkata', 'Asia/Kathmandu'].includes(zone) ? 0 : 2;
    expect(windows).toHaveLength(dst + 4);
  });

  it('gives exactly the oracle runs for random expressions, starts and ends', () => {
    const arb = fc.record({
      window: fc.constantFrom(...windows),
      startMinute: fc.oneof(fc.integer({ min: 0, max: 4 * 24 * 60 - 1 }), fc.integer({ min: 24 * 60, max: 2 * 24 * 60 })),
      lengthMinutes: fc.integer({ min: 1, max: 4 * 24 * 60 }),
      startMs: fc.integer({ min: 0, max: MINUTE - 1 }),
      cron: cronArb,
      names: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ window, startMinute, lengthMinutes, startMs, cron, names }) => {
        const after = window.from + startMinute * MINUTE + startMs;
        const endAt = Math.min(window.to, after + lengthMinutes * MINUTE);
        const schedule = parseSchedule(renderCron(cron, names), zone);
        const expected = expectedRuns(window.history, after, endAt, (c) => cronMatches(cron, c)).slice(0, 1000);
        expect(nextRuns(schedule, { after, endAt, count: 1000 })).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  it('runs every-few-minutes expressions through the transition like the oracle (gap skipped, repeat once)', () => {
    const arb = fc.record({
      window: fc.constantFrom(...windows),
      startMinute: nearCentre(0),
      minutes: itemsArb(0, 59),
      hours: itemsArb(0, 23),
    });
    fc.assert(
      fc.property(arb, ({ window, startMinute, minutes, hours }) => {
        const after = window.from + Math.max(0, startMinute - 240) * MINUTE;
        const endAt = Math.min(window.to, after + 8 * HOUR);
        for (const cron of [
          { minutes, hours: everything },
          { minutes, hours },
        ]) {
          const full: OracleCron = { ...cron, days: { field: 'dom', items: everything }, months: everything, years: everything };
          const expected = expectedRuns(window.history, after, endAt, (c) => cronMatches(full, c));
          expect(nextRuns(parseSchedule(renderCron(full), zone), { after, endAt, count: 1000 })).toEqual(expected);
        }
      }),
      { numRuns: 30 },
    );
  });

  it('at() runs at the first instant the clocks show its time, or never if they skip it', () => {
    const arb = fc.record({ window: fc.constantFrom(...windows), minute: nearCentre(60) });
    fc.assert(
      fc.property(arb, ({ window, minute }) => {
        const shown = window.history.find((c) => c.utc === window.from + minute * MINUTE);
        if (!shown) throw new Error('window history is missing a minute');
        // A wall time a little before or after the one shown: around a gap, some are never shown.
        const wall = Date.UTC(shown.year, shown.month - 1, shown.day, shown.hour, shown.minute) + ((minute % 7) - 3) * 10 * MINUTE;
        const text = new Date(wall).toISOString().slice(0, 19);
        const key = (c: Clock): boolean => Date.UTC(c.year, c.month - 1, c.day, c.hour, c.minute) === wall;
        const first = window.history.find(key)?.utc;
        const runs = nextRuns(parseSchedule(`at(${text})`, zone), { after: window.from - HISTORY, count: 5 });
        expect(runs).toEqual(first === undefined ? [] : [first]);
      }),
      { numRuns: 200 },
    );
  });

  it('converts wall clock to instants and back like the oracle', () => {
    const arb = fc.record({ window: fc.constantFrom(...windows), minute: nearCentre(0) });
    fc.assert(
      fc.property(arb, ({ window, minute }) => {
        const instant = window.from + minute * MINUTE;
        const c = window.history.find((h) => h.utc === instant);
        if (!c) throw new Error('window history is missing a minute');
        const wall = Date.UTC(c.year, c.month - 1, c.day, c.hour, c.minute);
        expect(wallTime(zone, instant)).toBe(wall);
        const showing = window.history.filter((h) => h.key === c.key).map((h) => h.utc);
        expect(instantsOf(zone, wall)).toEqual(showing);
        expect(firstInstant(zone, wall)).toBe(showing[0]);
      }),
      { numRuns: 300 },
    );
  });
});
