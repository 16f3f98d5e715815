import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextRuns, parseSchedule } from '../../core/recurring/expression/index.js';
import { daysArb, everything, itemsArb } from '../support/cronArbitraries.js';
import { clocks, cronMatches, renderCron, type OracleCron } from '../support/cronOracle.js';

// The day rules (values, ranges, wrap-around ranges, L, LW, W, <d>L, #) against the oracle over
// whole months anywhere in the year range, in UTC: the evaluator's runs at noon in a month must
// be the days the oracle's own calendar checks pick.

const DAY = 86_400_000;

/** Noon UTC of each day of a month, as the oracle sees it. */
function noons(year: number, month: number) {
  const first = Date.UTC(year, month - 1, 1, 12);
  const next = Date.UTC(year, month, 1, 12);
  const out = [];
  for (let t = first; t < next; t += DAY) out.push(...clocks('UTC', t, t + 60_000));
  return out;
}

describe('day-of-month and day-of-week rules match the oracle in any month', () => {
  it('for random day rules, months and years', () => {
    const arb = fc.record({
      days: daysArb,
      year: fc.oneof(fc.integer({ min: 1970, max: 2199 }), fc.integer({ min: 2024, max: 2030 })),
      month: fc.integer({ min: 1, max: 12 }),
      names: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ days, year, month, names }) => {
        const cron: OracleCron = {
          minutes: [{ kind: 'value', value: 0 }],
          hours: [{ kind: 'value', value: 12 }],
          days,
          months: everything,
          years: everything,
        };
        const expected = noons(year, month)
          .filter((c) => cronMatches(cron, c))
          .map((c) => c.utc);
        const runs = nextRuns(parseSchedule(renderCron(cron, names)), {
          after: Date.UTC(year, month - 1, 1),
          endAt: Date.UTC(year, month, 1),
          count: 31,
        });
        expect(runs).toEqual(expected);
      }),
      { numRuns: 600 },
    );
  });

  it('for random month and year fields (names, steps, wrap-around month ranges)', () => {
    const arb = fc.record({
      months: itemsArb(1, 12),
      years: itemsArb(1970, 2199, true, false),
      start: fc.integer({ min: 1970, max: 2190 }),
      names: fc.boolean(),
    });
    fc.assert(
      fc.property(arb, ({ months, years, start, names }) => {
        const cron: OracleCron = {
          minutes: [{ kind: 'value', value: 0 }],
          hours: [{ kind: 'value', value: 0 }],
          days: { field: 'dom', items: [{ kind: 'value', value: 1 }] },
          months,
          years,
        };
        const expected: number[] = [];
        for (let y = start; y < start + 10; y++) {
          for (let m = 1; m <= 12; m++) {
            const c = clocks('UTC', Date.UTC(y, m - 1, 1), Date.UTC(y, m - 1, 1) + 60_000)[0];
            if (c && cronMatches(cron, c)) expected.push(c.utc);
          }
        }
        const runs = nextRuns(parseSchedule(renderCron(cron, names)), {
          after: Date.UTC(start, 0, 1),
          endAt: Date.UTC(start + 10, 0, 1),
          count: 1000,
        });
        expect(runs).toEqual(expected);
      }),
      { numRuns: 200 },
    );
  });
});
