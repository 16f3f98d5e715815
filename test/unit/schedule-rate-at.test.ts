import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextRuns, parseSchedule, type RateUnit } from '../../core/recurring/expression/index.js';
import { cronArb } from '../support/cronArbitraries.js';
import { renderCron } from '../support/cronOracle.js';

// rate() counts elapsed time from its anchor (startAt, else the creation time), whatever the
// zone's clocks do; at() runs once, in its zone. And any schedule can be paged: asking again from
// just after the last run continues the same sequence (what the materialiser does).

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const iso = (t: number): string => new Date(t).toISOString();
const UNIT_MS: Record<RateUnit, number> = { minute: MINUTE, hour: HOUR, day: DAY };
const instantArb = fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2150, 0, 1) });

describe('rate()', () => {
  it('rate(1 day) stays 24 h apart across DST, and its first run is startAt', () => {
    const schedule = parseSchedule('rate(1 day)', 'America/New_York');
    const startAt = Date.parse('2026-03-07T12:00:00Z'); // 07:00 EST; DST starts on the 8th
    const runs = nextRuns(schedule, { after: Date.parse('2026-03-01T00:00:00Z'), startAt, count: 3 });
    expect(runs.map(iso)).toEqual(['2026-03-07T12:00:00.000Z', '2026-03-08T12:00:00.000Z', '2026-03-09T12:00:00.000Z']);
  });

  it('counts from createdAt without a startAt, to the millisecond, and from startAt when both are given', () => {
    const schedule = parseSchedule('rate(5 minutes)');
    const createdAt = Date.parse('2026-01-01T00:00:30.250Z');
    expect(nextRuns(schedule, { after: Date.parse('2026-01-01T00:07:00Z'), createdAt, count: 2 }).map(iso)).toEqual([
      '2026-01-01T00:10:30.250Z',
      '2026-01-01T00:15:30.250Z',
    ]);
    expect(nextRuns(schedule, { after: createdAt, createdAt, count: 1 })).toEqual([createdAt]);
    const startAt = Date.parse('2026-06-01T00:00:00Z');
    expect(nextRuns(schedule, { after: createdAt, createdAt, startAt, count: 1 })).toEqual([startAt]);
  });

  it('needs an anchor', () => {
    expect(() => nextRuns(parseSchedule('rate(1 hour)'), { after: 0, count: 1 })).toThrow(/startAt or createdAt/);
  });

  it('gives anchor + k periods: the first at or after max(after, anchor), none at or after endAt', () => {
    const arb = fc.record({
      value: fc.integer({ min: 1, max: 1000 }),
      unit: fc.constantFrom<RateUnit>('minute', 'hour', 'day'),
      anchor: instantArb,
      after: instantArb,
      length: fc.integer({ min: 0, max: 400 * DAY }),
      count: fc.integer({ min: 0, max: 200 }),
      zone: fc.constantFrom('UTC', 'Australia/Lord_Howe', 'America/Santiago'),
    });
    fc.assert(
      fc.property(arb, ({ value, unit, anchor, after, length, count, zone }) => {
        const period = value * UNIT_MS[unit];
        const expression = value === 1 ? `rate(1 ${unit})` : `rate(${value} ${unit}s)`;
        const endAt = Math.max(after, anchor) + length;
        const runs = nextRuns(parseSchedule(expression, zone), { after, createdAt: anchor, endAt, count });
        const from = Math.max(after, anchor);
        let expected = anchor;
        while (expected < from) expected += period;
        for (const run of runs) {
          expect(run).toBe(expected);
          expected += period;
        }
        // Fewer than asked only when the next one would be at or after endAt.
        if (runs.length < count) expect(expected).toBeGreaterThanOrEqual(endAt);
      }),
      { numRuns: 300 },
    );
  });
});

describe('at()', () => {
  const once = (expression: string, zone: string, after = 0, more = {}): string[] =>
    nextRuns(parseSchedule(expression, zone), { after, count: 5, ...more }).map(iso);

  it('runs once at its wall-clock time in its zone, seconds included', () => {
    expect(once('at(2027-03-15T06:30:00)', 'Europe/Paris')).toEqual(['2027-03-15T05:30:00.000Z']);
    expect(once('at(2026-12-01T10:00:45)', 'UTC')).toEqual(['2026-12-01T10:00:45.000Z']);
    expect(once('at(2026-12-01T10:00:00)', 'Pacific/Chatham')).toEqual(['2026-11-30T20:15:00.000Z']);
  });

  it('a repeated time runs at its first instance; a skipped one never runs', () => {
    expect(once('at(2026-11-01T01:30:00)', 'America/New_York')).toEqual(['2026-11-01T05:30:00.000Z']);
    expect(once('at(2026-03-08T02:30:00)', 'America/New_York')).toEqual([]);
  });

  it('not before after or startAt, not at or after endAt', () => {
    const at = Date.parse('2026-12-01T10:00:00Z');
    expect(once('at(2026-12-01T10:00:00)', 'UTC', at)).toHaveLength(1);
    expect(once('at(2026-12-01T10:00:00)', 'UTC', at + 1)).toEqual([]);
    expect(once('at(2026-12-01T10:00:00)', 'UTC', 0, { startAt: at + 1 })).toEqual([]);
    expect(once('at(2026-12-01T10:00:00)', 'UTC', 0, { endAt: at })).toEqual([]);
  });
});

describe('paging', () => {
  it('asking again from just after the last run continues the same sequence (cron and rate, any zone)', () => {
    const arb = fc.record({
      expression: fc.oneof(
        cronArb.map((c) => renderCron(c)),
        fc.constantFrom('rate(1 minute)', 'rate(7 minutes)', 'rate(3 hours)', 'rate(1 day)'),
      ),
      zone: fc.constantFrom('UTC', 'Europe/London', 'America/New_York', 'Australia/Lord_Howe', 'Pacific/Chatham', 'America/Santiago'),
      after: fc.integer({ min: Date.UTC(2025, 0, 1), max: Date.UTC(2027, 0, 1) }),
      split: fc.integer({ min: 1, max: 19 }),
    });
    fc.assert(
      fc.property(arb, ({ expression, zone, after, split }) => {
        const schedule = parseSchedule(expression, zone);
        const createdAt = Date.UTC(2024, 11, 31, 23, 59, 59, 999);
        const whole = nextRuns(schedule, { after, createdAt, count: 20 });
        const first = whole.slice(0, split);
        const last = first[first.length - 1];
        const rest = last === undefined ? [] : nextRuns(schedule, { after: last + 1, createdAt, count: 20 - first.length });
        expect(first.length < split ? first : [...first, ...rest]).toEqual(whole);
        // Ascending, never repeated.
        whole.slice(1).forEach((run, i) => expect(run).toBeGreaterThan(whole[i] ?? Infinity));
      }),
      { numRuns: 200 },
    );
  });
});
