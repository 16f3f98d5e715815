import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../core/model/errors.js';
import { parseSchedule, ScheduleExpressionError, validateTimeZone, type SchedulePart } from '../../core/recurring/expression/index.js';

// Validation of expressions and zones: every refusal is a 400 ValidationError naming the field
// and the part, with a message that says how to fix it; every accepted form parses to the values
// AWS gives it.

/** Messages end with a way out: a form to use, a value to write, an example. */
const SAYS_HOW_TO_FIX = /\b(use|write|add|put|list|check|separate)\b/;

function refusal(expression: unknown, timezone?: unknown): ScheduleExpressionError {
  try {
    parseSchedule(expression, timezone);
  } catch (error) {
    if (error instanceof ScheduleExpressionError) return error;
    throw error;
  }
  throw new Error(`accepted ${String(expression)} in ${String(timezone)}`);
}

const INVALID_EXPRESSIONS: ReadonlyArray<readonly [string, SchedulePart, RegExp?]> = [
  // Out-of-range values, field by field.
  ['cron(60 * * * ? *)', 'minutes', /0-59/],
  ['cron(0 24 * * ? *)', 'hours', /0-23/],
  ['cron(0 0 32 * ? *)', 'dayOfMonth', /1-31/],
  ['cron(0 0 0 * ? *)', 'dayOfMonth', /1-31/],
  ['cron(0 0 * 13 ? *)', 'month', /1-12 or JAN-DEC/],
  ['cron(0 0 ? * 8 *)', 'dayOfWeek', /1-7 \(1 = SUN\) or SUN-SAT/],
  ['cron(0 0 ? * 0 *)', 'dayOfWeek', /1-7/],
  ['cron(0 0 * * ? 1969)', 'year', /1970-2199/],
  ['cron(0 0 * * ? 2200)', 'year', /1970-2199/],
  ['cron(0 0 1 FOO ? *)', 'month', /JAN/],
  ['cron(0 0 ? * MONDAY *)', 'dayOfWeek', /SUN/],
  // Field count.
  ['cron(0 10 * * ?)', 'cron', /exactly 6.*year field/],
  ['cron(0 10 * * ? * *)', 'cron', /7 fields/],
  ['cron()', 'cron', /0 fields/],
  // The '?' rule.
  ['cron(0 10 * * * *)', 'cron', /exactly one/],
  ['cron(0 10 ? * ? *)', 'cron', /both '\?'/],
  ['cron(0 10 1 * MON *)', 'cron', /both set/],
  ['cron(? * * * ? *)', 'minutes', /only day-of-month and day-of-week/],
  ['cron(0 0 * * ? ?)', 'year'],
  ['cron(0 0 1,? * ? *)', 'dayOfMonth'],
  // Lists, ranges, increments.
  ['cron(1,,2 * * * ? *)', 'minutes', /empty list item/],
  ['cron(0/0 * * * ? *)', 'minutes', /increment/],
  ['cron(0/61 * * * ? *)', 'minutes', /increment/],
  ['cron(1/2/3 * * * ? *)', 'minutes', /more than one/],
  ['cron(5- * * * ? *)', 'minutes'],
  ['cron(0 0 * * ? 2030-2020)', 'year', /backwards/],
  ['cron(0 0 ? * */2 *)', 'dayOfWeek', /'\/'/],
  ['cron(0 0 ? * 2-6/2 *)', 'dayOfWeek', /'\/'/],
  // L, W and #.
  ['cron(0 0 L,15 * ? *)', 'dayOfMonth', /whole/],
  ['cron(0 0 L-2 * ? *)', 'dayOfMonth', /offsets/],
  ['cron(0 0 1W,15 * ? *)', 'dayOfMonth', /whole/],
  ['cron(0 0 1-5W * ? *)', 'dayOfMonth'],
  ['cron(0 0 32W * ? *)', 'dayOfMonth', /1-31/],
  ['cron(0 0 # * ? *)', 'dayOfMonth', /only day-of-week/],
  ['cron(0 0 ? * 15W *)', 'dayOfWeek', /only day-of-month/],
  ['cron(0 0 ? * 3#1,6#3 *)', 'dayOfWeek', /one weekday#n/],
  ['cron(0 0 ? * MON#1,WED *)', 'dayOfWeek', /one weekday#n/],
  ['cron(0 0 ? * 2#6 *)', 'dayOfWeek', /1 to 5/],
  ['cron(0 0 ? * 2#0 *)', 'dayOfWeek', /1 to 5/],
  ['cron(0 0 ? * 8#1 *)', 'dayOfWeek', /1-7/],
  ['cron(0 0 ? * 5L,2 *)', 'dayOfWeek', /whole/],
  ['cron(0 0 ? * 8L *)', 'dayOfWeek', /1-7/],
  ['cron(L * * * ? *)', 'minutes'],
  // rate().
  ['rate(0 minutes)', 'rate', /1 to/],
  ['rate(-1 minutes)', 'rate'],
  ['rate(1.5 hours)', 'rate'],
  ['rate(1000001 minutes)', 'rate', /1000000/],
  ['rate(5 weeks)', 'rate', /rate\(7 days\)/],
  ['rate(5 seconds)', 'rate', /minute/],
  ['rate(5 Minutes)', 'rate'],
  ['rate(1 minutes)', 'rate', /rate\(1 minute\)/],
  ['rate(1 days)', 'rate', /rate\(1 day\)/],
  ['rate(5 minute)', 'rate', /rate\(5 minutes\)/],
  ['rate(2 hour)', 'rate', /rate\(2 hours\)/],
  ['rate(5)', 'rate'],
  ['rate(minutes)', 'rate'],
  ['rate(1 hour 5 minutes)', 'rate'],
  // at().
  ['at(2026-02-30T00:00:00)', 'at', /01 to 28/],
  ['at(2027-02-29T00:00:00)', 'at', /calendar date/],
  ['at(2026-13-01T00:00:00)', 'at', /01 to 12/],
  ['at(2026-01-01 00:00:00)', 'at', /yyyy-mm-ddThh:mm:ss/],
  ['at(2026-01-01T24:00:00)', 'at', /00-23/],
  ['at(2026-01-01T00:60:00)', 'at', /00-59/],
  ['at(2026-01-01T00:00)', 'at'],
  ['at(2026-01-01T00:00:00Z)', 'at'],
  ['at(2026-01-01T00:00:00.000)', 'at'],
  ['at(1969-12-31T23:59:59)', 'at', /1970-2199/],
  ['at(tomorrow)', 'at'],
  // Free text and near misses.
  ['every day at 10', 'expression', /cron\(minutes hours/],
  ['0 10 * * ? *', 'expression'],
  ['CRON(0 10 * * ? *)', 'expression', /lower case/],
  ['cron (0 10 * * ? *)', 'expression'],
  ['cron(0 10 * * ? *', 'expression'],
  [' cron(0 10 * * ? *)', 'expression'],
  ['weekly(MON)', 'expression'],
  [`cron(${'0,'.repeat(200)}0 * * * ? *)`, 'expression', /256/],
];

describe('parseSchedule refuses', () => {
  it.each(INVALID_EXPRESSIONS)('%s (%s)', (expression, part, pattern) => {
    const error = refusal(expression);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.status).toBe(400);
    expect(error.code).toBe('ValidationError');
    expect(error.name).toBe('ScheduleExpressionError');
    expect(error.field).toBe('expression');
    expect(error.part).toBe(part);
    expect(error.message.startsWith('expression: ')).toBe(true);
    expect(error.message).toMatch(SAYS_HOW_TO_FIX);
    if (pattern) expect(error.message).toMatch(pattern);
  });

  it.each([[''], [42], [null], [undefined], [{ cron: '0 10 * * ? *' }]])('a non-string or empty expression: %j', (expression) => {
    const error = refusal(expression);
    expect([error.field, error.part]).toEqual(['expression', 'expression']);
    expect(error.message).toMatch(SAYS_HOW_TO_FIX);
  });

  it.each([
    ['Mars/Olympus'],
    ['+05:30'],
    ['UTC+5'],
    ['america/new_york'],
    ['utc'],
    [' UTC'],
    ['UTC '],
    [''],
    ['Europe/London/'],
    ['Local'],
    [42],
    [null],
  ])('an unknown or misspelt time zone: %j', (zone) => {
    const error = refusal('rate(1 hour)', zone);
    expect([error.field, error.part]).toEqual(['timezone', 'timezone']);
    expect(error.message.startsWith('timezone: ')).toBe(true);
    expect(error.message).toMatch(SAYS_HOW_TO_FIX);
  });

  it('names the correct spelling of a mis-cased zone', () => {
    expect(refusal('rate(1 hour)', 'america/new_york').message).toContain("write 'America/New_York'");
  });

  it('reports the expression before the zone when both are wrong', () => {
    expect(refusal('rate(0 minutes)', 'Mars/Olympus').field).toBe('expression');
  });
});

describe('parseSchedule accepts', () => {
  it.each([
    'UTC',
    'Europe/London',
    'America/Argentina/Buenos_Aires',
    'Etc/GMT+5',
    'US/Eastern',
    'Asia/Calcutta',
    'Europe/Kyiv',
    'Pacific/Chatham',
    'America/Port-au-Prince',
    'EST5EDT',
  ])('the IANA zone %s as given', (zone) => {
    expect(validateTimeZone(zone)).toBe(zone);
    expect(parseSchedule('rate(1 hour)', zone).timezone).toBe(zone);
  });

  it('UTC when no zone is given', () => {
    expect(parseSchedule('cron(0 10 * * ? *)').timezone).toBe('UTC');
  });

  const cron = (expression: string) => {
    const schedule = parseSchedule(expression);
    if (schedule.kind !== 'cron') throw new Error(`${expression} did not parse as cron`);
    return schedule.cron;
  };

  it('increments, ranges with increments and */n', () => {
    expect(cron('cron(0/15 * * * ? *)').minutes).toEqual([0, 15, 30, 45]);
    expect(cron('cron(1/10 * * * ? *)').minutes).toEqual([1, 11, 21, 31, 41, 51]);
    expect(cron('cron(10-50/10 * * * ? *)').minutes).toEqual([10, 20, 30, 40, 50]);
    expect(cron('cron(*/5 * * * ? *)').minutes).toEqual([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55]);
    expect(cron('cron(0 */6 * * ? *)').hours).toEqual([0, 6, 12, 18]);
    expect(cron('cron(0 0 1 */3 ? *)').months).toEqual([1, 4, 7, 10]);
    expect(cron('cron(0 0 1 1 ? 2030/50)').years).toEqual([2030, 2080, 2130, 2180]);
  });

  it('ranges that wrap past the end of the field (AWS documents 20-2)', () => {
    expect(cron('cron(0/30 20-2 ? * MON-FRI *)').hours).toEqual([0, 1, 2, 20, 21, 22, 23]);
    expect(cron('cron(0 0 ? * FRI-MON *)').days).toEqual({ kind: 'weekdays', weekdays: [1, 2, 6, 7] });
    expect(cron('cron(0 0 1 NOV-FEB ? *)').months).toEqual([1, 2, 11, 12]);
    expect(cron('cron(50-10/5 * * * ? *)').minutes).toEqual([0, 5, 10, 50, 55]);
  });

  it('names in any case, lists, and runs of white space', () => {
    expect(cron('cron(0  10 ? jan,Mar,DEC mon-fri *)')).toEqual({
      minutes: [0],
      hours: [10],
      days: { kind: 'weekdays', weekdays: [2, 3, 4, 5, 6] },
      months: [1, 3, 12],
      years: expect.any(Array) as unknown,
    });
    expect(cron('cron(0 10 ? * SUN,SAT *)').days).toEqual({ kind: 'weekdays', weekdays: [1, 7] });
  });

  it('L, LW, nW, nL and # in their fields', () => {
    expect(cron('cron(0 0 L * ? *)').days).toEqual({ kind: 'lastDay' });
    expect(cron('cron(0 0 LW * ? *)').days).toEqual({ kind: 'lastWeekday' });
    expect(cron('cron(0 0 15W * ? *)').days).toEqual({ kind: 'nearestWeekday', day: 15 });
    expect(cron('cron(0 0 ? * L *)').days).toEqual({ kind: 'weekdays', weekdays: [7] });
    expect(cron('cron(0 0 ? * 6L *)').days).toEqual({ kind: 'lastOfWeekday', weekday: 6 });
    expect(cron('cron(0 0 ? * FRIL *)').days).toEqual({ kind: 'lastOfWeekday', weekday: 6 });
    expect(cron('cron(0 0 ? * 2#1 *)').days).toEqual({ kind: 'nthWeekday', weekday: 2, nth: 1 });
    expect(cron('cron(0 0 ? * MON#5 *)').days).toEqual({ kind: 'nthWeekday', weekday: 2, nth: 5 });
  });

  it('rate() with the singular for 1 and the plural above', () => {
    expect(parseSchedule('rate(1 minute)')).toMatchObject({ kind: 'rate', value: 1, unit: 'minute', periodMs: 60_000 });
    expect(parseSchedule('rate(5 minutes)')).toMatchObject({ kind: 'rate', value: 5, unit: 'minute', periodMs: 300_000 });
    expect(parseSchedule('rate(1 hour)')).toMatchObject({ periodMs: 3_600_000 });
    expect(parseSchedule('rate(12 hours)')).toMatchObject({ periodMs: 43_200_000 });
    expect(parseSchedule('rate(1 day)')).toMatchObject({ periodMs: 86_400_000 });
    expect(parseSchedule('rate(7 days)')).toMatchObject({ periodMs: 604_800_000 });
  });

  it('at() with a calendar date and time, leap days included', () => {
    expect(parseSchedule('at(2028-02-29T23:59:59)', 'Asia/Tokyo')).toMatchObject({
      kind: 'at',
      wall: Date.UTC(2028, 1, 29, 23, 59, 59),
      timezone: 'Asia/Tokyo',
    });
  });
});
