import { describe, expect, it } from 'vitest';
import { instantsOf, nextRuns, offsetAt, parseSchedule, type NextRunsOptions } from '../../core/recurring/expression/index.js';

// Worked examples with next runs computed by hand (calendars: 1 Sep 2026 is a Tuesday, 1 Jan 2027
// a Friday). The first block is the example table of the AWS cron reference
// (docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html, the same as
// EventBridge Scheduler's schedule types page); the DST blocks follow EventBridge Scheduler's
// rule: a wall time that does not exist is skipped, a repeated one runs once, at its first instance.

function runs(expression: string, zone: string | undefined, after: string, count: number, more: Partial<NextRunsOptions> = {}): string[] {
  const schedule = parseSchedule(expression, zone);
  return nextRuns(schedule, { after: Date.parse(after), count, ...more }).map((t) => new Date(t).toISOString());
}

const z = (text: string): string => `${text}.000Z`;
const SAT_5_SEP_2026 = '2026-09-05T00:00:00Z';

describe('the AWS documentation examples (UTC)', () => {
  it('cron(0 10 * * ? *): 10:00 every day', () => {
    expect(runs('cron(0 10 * * ? *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2026-09-05T10:00:00'),
      z('2026-09-06T10:00:00'),
      z('2026-09-07T10:00:00'),
    ]);
  });

  it('cron(15 12 * * ? *): 12:15 every day', () => {
    expect(runs('cron(15 12 * * ? *)', undefined, SAT_5_SEP_2026, 2)).toEqual([z('2026-09-05T12:15:00'), z('2026-09-06T12:15:00')]);
  });

  it('cron(0 18 ? * MON-FRI *): 18:00 Monday to Friday', () => {
    expect(runs('cron(0 18 ? * MON-FRI *)', undefined, SAT_5_SEP_2026, 6)).toEqual(
      ['07', '08', '09', '10', '11', '14'].map((d) => z(`2026-09-${d}T18:00:00`)),
    );
  });

  it('cron(0 8 1 * ? *): 08:00 on the first day of every month', () => {
    expect(runs('cron(0 8 1 * ? *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2026-10-01T08:00:00'),
      z('2026-11-01T08:00:00'),
      z('2026-12-01T08:00:00'),
    ]);
  });

  it('cron(0/15 * * * ? *): every 15 minutes', () => {
    expect(runs('cron(0/15 * * * ? *)', undefined, '2026-09-05T23:40:00Z', 3)).toEqual([
      z('2026-09-05T23:45:00'),
      z('2026-09-06T00:00:00'),
      z('2026-09-06T00:15:00'),
    ]);
  });

  it('cron(0/10 * ? * MON-FRI *): every 10 minutes Monday to Friday', () => {
    expect(runs('cron(0/10 * ? * MON-FRI *)', undefined, SAT_5_SEP_2026, 2)).toEqual([z('2026-09-07T00:00:00'), z('2026-09-07T00:10:00')]);
    expect(runs('cron(0/10 * ? * MON-FRI *)', undefined, '2026-09-11T23:55:00Z', 1)).toEqual([z('2026-09-14T00:00:00')]);
  });

  it('cron(0/5 8-17 ? * MON-FRI *): every 5 minutes, 08:00 to 17:55, Monday to Friday', () => {
    const day = runs('cron(0/5 8-17 ? * MON-FRI *)', undefined, SAT_5_SEP_2026, 121);
    expect(day[0]).toBe(z('2026-09-07T08:00:00'));
    expect(day[119]).toBe(z('2026-09-07T17:55:00'));
    expect(day[120]).toBe(z('2026-09-08T08:00:00'));
  });

  it('cron(0/30 20-2 ? * MON-FRI *): every 30 minutes from 22:00 to 02:00 wrapping midnight, on the day it runs', () => {
    // AWS: "Run from 12:00 am to 2:00 am on Monday morning": the weekday is the occurrence's own.
    expect(runs('cron(0/30 20-2 ? * MON-FRI *)', undefined, SAT_5_SEP_2026, 15)).toEqual([
      ...['00:00', '00:30', '01:00', '01:30', '02:00', '02:30', '20:00', '20:30', '21:00', '21:30', '22:00', '22:30', '23:00', '23:30'].map(
        (t) => z(`2026-09-07T${t}:00`),
      ),
      z('2026-09-08T00:00:00'),
    ]);
  });
});

describe('wildcards from the AWS reference', () => {
  it('1/10 in minutes: minute 1, 11, 21, ...', () => {
    expect(runs('cron(1/10 * * * ? *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2026-09-05T00:01:00'),
      z('2026-09-05T00:11:00'),
      z('2026-09-05T00:21:00'),
    ]);
  });

  it('JAN,FEB,MAR in months', () => {
    expect(runs('cron(0 0 1 JAN,FEB,MAR ? *)', undefined, SAT_5_SEP_2026, 4)).toEqual([
      z('2027-01-01T00:00:00'),
      z('2027-02-01T00:00:00'),
      z('2027-03-01T00:00:00'),
      z('2028-01-01T00:00:00'),
    ]);
  });

  it('3#2: the second Tuesday', () => {
    expect(runs('cron(0 12 ? * 3#2 *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2026-09-08T12:00:00'),
      z('2026-10-13T12:00:00'),
      z('2026-11-10T12:00:00'),
    ]);
  });

  it('2#1: the first Monday (7 Sep has passed)', () => {
    expect(runs('cron(0 9 ? * 2#1 *)', undefined, '2026-09-08T00:00:00Z', 2)).toEqual([z('2026-10-05T09:00:00'), z('2026-11-02T09:00:00')]);
  });

  it('2#5: the fifth Monday, only in months that have one', () => {
    expect(runs('cron(0 9 ? * MON#5 *)', undefined, '2026-06-02T00:00:00Z', 4)).toEqual([
      z('2026-06-29T09:00:00'),
      z('2026-08-31T09:00:00'),
      z('2026-11-30T09:00:00'),
      z('2027-03-29T09:00:00'),
    ]);
  });

  it('3W: the weekday nearest the 3rd (Sat 3 Oct 2026 -> Fri 2 Oct)', () => {
    expect(runs('cron(0 12 3W * ? *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2026-10-02T12:00:00'),
      z('2026-11-03T12:00:00'),
      z('2026-12-03T12:00:00'),
    ]);
  });

  it('W never crosses the month: Sat 1 Aug 2026 -> Mon 3, Sun 31 May 2026 -> Fri 29, 31W skips April', () => {
    expect(runs('cron(0 12 1W * ? *)', undefined, '2026-07-31T00:00:00Z', 1)).toEqual([z('2026-08-03T12:00:00')]);
    expect(runs('cron(0 12 31W * ? *)', undefined, '2026-03-31T13:00:00Z', 2)).toEqual([
      z('2026-05-29T12:00:00'),
      z('2026-07-31T12:00:00'),
    ]);
  });

  it('L and LW: last day and last weekday (leap years included)', () => {
    expect(runs('cron(0 0 L * ? *)', undefined, '2028-01-31T00:00:01Z', 2)).toEqual([z('2028-02-29T00:00:00'), z('2028-03-31T00:00:00')]);
    expect(runs('cron(0 7 LW * ? *)', undefined, '2026-01-01T00:00:00Z', 5)).toEqual(
      ['2026-01-30', '2026-02-27', '2026-03-31', '2026-04-30', '2026-05-29'].map((d) => z(`${d}T07:00:00`)),
    );
  });

  it('L in day-of-week is Saturday; 6L is the last Friday', () => {
    expect(runs('cron(0 12 ? * L *)', undefined, SAT_5_SEP_2026, 2)).toEqual([z('2026-09-05T12:00:00'), z('2026-09-12T12:00:00')]);
    expect(runs('cron(15 10 ? * 6L 2026-2027)', undefined, SAT_5_SEP_2026, 2)).toEqual([
      z('2026-09-25T10:15:00'),
      z('2026-10-30T10:15:00'),
    ]);
  });
});

describe('the year field and expressions that stop', () => {
  it('a fixed year runs in that year only', () => {
    expect(runs('cron(0 0 1 1 ? 2030)', undefined, SAT_5_SEP_2026, 5)).toEqual([z('2030-01-01T00:00:00')]);
    expect(runs('cron(0 0 1 1 ? 2030-2032)', undefined, SAT_5_SEP_2026, 5)).toHaveLength(3);
    expect(runs('cron(0 0 * * ? 2020)', undefined, SAT_5_SEP_2026, 5)).toEqual([]);
  });

  it('29 February runs in leap years; 30 February never (and the search ends)', () => {
    expect(runs('cron(0 0 29 2 ? *)', undefined, SAT_5_SEP_2026, 3)).toEqual([
      z('2028-02-29T00:00:00'),
      z('2032-02-29T00:00:00'),
      z('2036-02-29T00:00:00'),
    ]);
    expect(runs('cron(0 0 30 2 ? *)', 'Pacific/Chatham', SAT_5_SEP_2026, 100)).toEqual([]);
  });

  it('the last possible occurrence is in 2199 on the local clock', () => {
    expect(runs('cron(59 23 31 12 ? *)', undefined, '2199-01-01T00:00:00Z', 3)).toEqual([z('2199-12-31T23:59:00')]);
    expect(runs('cron(0 20 31 12 ? 2199)', 'America/New_York', '2199-01-01T00:00:00Z', 3)).toEqual([z('2200-01-01T01:00:00')]);
    expect(runs('at(2199-12-31T23:59:59)', 'Etc/GMT+12', '2199-01-01T00:00:00Z', 3)).toEqual([z('2200-01-01T11:59:59')]);
  });

  it('the first possible occurrence is in 1970, whenever the search starts', () => {
    const first = (zone: string): string[] => runs('cron(0 0 1 1 ? *)', zone, '-271821-04-20T00:00:00Z', 1);
    expect(first('Asia/Tokyo')).toEqual([z('1969-12-31T15:00:00')]);
    expect(first('Pacific/Kiritimati')).toEqual([z('1970-01-01T10:40:00')]); // -10:40 until 1979
  });
});

describe('time zones and DST (2026 transitions)', () => {
  it('New York: 02:30 does not exist on 8 March (skipped); 01:30 on 1 November runs once, in EDT', () => {
    expect(runs('cron(30 2 * * ? *)', 'America/New_York', '2026-03-07T00:00:00Z', 3)).toEqual([
      z('2026-03-07T07:30:00'),
      z('2026-03-09T06:30:00'),
      z('2026-03-10T06:30:00'),
    ]);
    expect(runs('cron(30 1 * * ? *)', 'America/New_York', '2026-10-31T00:00:00Z', 3)).toEqual([
      z('2026-10-31T05:30:00'),
      z('2026-11-01T05:30:00'),
      z('2026-11-02T06:30:00'),
    ]);
  });

  it('New York: every 15 minutes leaves out the repeated hour', () => {
    expect(runs('cron(0/15 * * * ? *)', 'America/New_York', '2026-11-01T05:30:00Z', 4)).toEqual([
      z('2026-11-01T05:30:00'),
      z('2026-11-01T05:45:00'),
      z('2026-11-01T07:00:00'),
      z('2026-11-01T07:15:00'),
    ]);
    // Asked from inside the repeated hour (01:30 EST), the next run is 02:00 EST.
    expect(runs('cron(0/15 * * * ? *)', 'America/New_York', '2026-11-01T06:30:00Z', 1)).toEqual([z('2026-11-01T07:00:00')]);
  });

  it('London: 01:30 does not exist on 29 March', () => {
    expect(runs('cron(30 1 * * ? *)', 'Europe/London', '2026-03-28T00:00:00Z', 2)).toEqual([
      z('2026-03-28T01:30:00'),
      z('2026-03-30T00:30:00'),
    ]);
  });

  it('Sydney (southern hemisphere): repeat on 5 April, gap on 4 October', () => {
    expect(runs('cron(30 2 * * ? *)', 'Australia/Sydney', '2026-04-03T00:00:00Z', 3)).toEqual([
      z('2026-04-03T15:30:00'),
      z('2026-04-04T15:30:00'),
      z('2026-04-05T16:30:00'),
    ]);
    expect(runs('cron(30 2 * * ? *)', 'Australia/Sydney', '2026-10-02T00:00:00Z', 2)).toEqual([
      z('2026-10-02T16:30:00'),
      z('2026-10-04T15:30:00'),
    ]);
  });

  it('Lord Howe (30-minute DST): 01:45 repeated on 5 April, 02:15 skipped on 4 October', () => {
    expect(runs('cron(45 1 * * ? *)', 'Australia/Lord_Howe', '2026-04-03T00:00:00Z', 3)).toEqual([
      z('2026-04-03T14:45:00'),
      z('2026-04-04T14:45:00'),
      z('2026-04-05T15:15:00'),
    ]);
    expect(runs('cron(15 2 * * ? *)', 'Australia/Lord_Howe', '2026-10-02T00:00:00Z', 2)).toEqual([
      z('2026-10-02T15:45:00'),
      z('2026-10-04T15:15:00'),
    ]);
  });

  it('Chatham (+12:45 / +13:45): 03:00 skipped on 27 September, repeated on 5 April', () => {
    expect(runs('cron(0 3 * * ? *)', 'Pacific/Chatham', '2026-09-25T00:00:00Z', 2)).toEqual([
      z('2026-09-25T14:15:00'),
      z('2026-09-27T13:15:00'),
    ]);
    expect(runs('cron(0 3 * * ? *)', 'Pacific/Chatham', '2026-04-03T00:00:00Z', 3)).toEqual([
      z('2026-04-03T13:15:00'),
      z('2026-04-04T13:15:00'),
      z('2026-04-05T14:15:00'),
    ]);
  });

  it('Santiago (DST at midnight): midnight skipped on 6 September, 23:30 on 4 April runs once', () => {
    expect(runs('cron(0 0 * * ? *)', 'America/Santiago', '2026-09-04T00:00:00Z', 3)).toEqual([
      z('2026-09-04T04:00:00'),
      z('2026-09-05T04:00:00'),
      z('2026-09-07T03:00:00'),
    ]);
    expect(runs('cron(30 23 * * ? *)', 'America/Santiago', '2026-04-03T03:00:00Z', 3)).toEqual([
      z('2026-04-04T02:30:00'),
      z('2026-04-05T02:30:00'),
      z('2026-04-06T03:30:00'),
    ]);
  });

  it('Kolkata (+5:30) and Kathmandu (+5:45)', () => {
    expect(runs('cron(0 9 * * ? *)', 'Asia/Kolkata', SAT_5_SEP_2026, 1)).toEqual([z('2026-09-05T03:30:00')]);
    expect(runs('cron(0 9 * * ? *)', 'Asia/Kathmandu', SAT_5_SEP_2026, 1)).toEqual([z('2026-09-05T03:15:00')]);
  });

  it('the day of week is the local one: Monday 00:30 in Tokyo is Sunday in UTC', () => {
    expect(runs('cron(30 0 ? * MON *)', 'Asia/Tokyo', SAT_5_SEP_2026, 1)).toEqual([z('2026-09-06T15:30:00')]);
  });
});

describe('zone conversion', () => {
  const H = 3_600_000;
  const M = 60_000;

  it('offsets that are not whole hours, both DST seasons', () => {
    expect(offsetAt('Asia/Kolkata', Date.UTC(2026, 0, 1))).toBe(5 * H + 30 * M);
    expect(offsetAt('Asia/Kathmandu', Date.UTC(2026, 0, 1))).toBe(5 * H + 45 * M);
    expect(offsetAt('Pacific/Chatham', Date.UTC(2026, 0, 1))).toBe(13 * H + 45 * M);
    expect(offsetAt('Pacific/Chatham', Date.UTC(2026, 6, 1))).toBe(12 * H + 45 * M);
    expect(offsetAt('Australia/Lord_Howe', Date.UTC(2026, 0, 1))).toBe(11 * H);
    expect(offsetAt('Australia/Lord_Howe', Date.UTC(2026, 6, 1))).toBe(10 * H + 30 * M);
    expect(offsetAt('America/Santiago', Date.UTC(2026, 0, 1))).toBe(-3 * H);
    expect(offsetAt('America/Santiago', Date.UTC(2026, 6, 1))).toBe(-4 * H);
  });

  it('a wall time has two instants in an overlap, none in a gap, one otherwise', () => {
    const iso = (wall: number, zone: string): string[] => instantsOf(zone, wall).map((t) => new Date(t).toISOString());
    expect(iso(Date.UTC(2026, 10, 1, 1, 30), 'America/New_York')).toEqual([z('2026-11-01T05:30:00'), z('2026-11-01T06:30:00')]);
    expect(iso(Date.UTC(2026, 2, 8, 2, 30), 'America/New_York')).toEqual([]);
    expect(iso(Date.UTC(2026, 3, 5, 1, 45), 'Australia/Lord_Howe')).toEqual([z('2026-04-04T14:45:00'), z('2026-04-04T15:15:00')]);
    expect(iso(Date.UTC(2026, 8, 6, 0, 30), 'America/Santiago')).toEqual([]);
    expect(iso(Date.UTC(2026, 8, 6, 1, 0), 'America/Santiago')).toEqual([z('2026-09-06T04:00:00')]);
  });
});

describe('startAt, endAt and after', () => {
  it('nothing before startAt, nothing at or after endAt', () => {
    const at = (s: string): number => Date.parse(s);
    expect(
      runs('cron(0 10 * * ? *)', undefined, '2026-09-01T00:00:00Z', 5, {
        startAt: at('2026-09-10T10:00:00Z'),
        endAt: at('2026-09-12T10:00:00Z'),
      }),
    ).toEqual([z('2026-09-10T10:00:00'), z('2026-09-11T10:00:00')]);
  });

  it('after is inclusive to the millisecond', () => {
    expect(runs('cron(0 10 * * ? *)', undefined, '2026-09-10T10:00:00.000Z', 1)).toEqual([z('2026-09-10T10:00:00')]);
    expect(runs('cron(0 10 * * ? *)', undefined, '2026-09-10T10:00:00.001Z', 1)).toEqual([z('2026-09-11T10:00:00')]);
  });

  it('count 0, or a window that is empty, gives nothing', () => {
    expect(runs('cron(* * * * ? *)', undefined, SAT_5_SEP_2026, 0)).toEqual([]);
    expect(runs('cron(* * * * ? *)', undefined, SAT_5_SEP_2026, 5, { endAt: Date.parse(SAT_5_SEP_2026) })).toEqual([]);
  });

  it('refuses a bad count or a non-finite instant (programming errors)', () => {
    const schedule = parseSchedule('cron(* * * * ? *)');
    expect(() => nextRuns(schedule, { after: 0, count: 1001 })).toThrow(RangeError);
    expect(() => nextRuns(schedule, { after: 0, count: 1.5 })).toThrow(RangeError);
    expect(() => nextRuns(schedule, { after: Number.NaN, count: 1 })).toThrow(RangeError);
  });
});
