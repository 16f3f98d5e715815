import fc from 'fast-check';
import type { DaySpec, Item, OracleCron } from './cronOracle.js';

/** fast-check arbitraries of structured cron expressions for the oracle tests. */

function itemArb(min: number, max: number, steps: boolean, wraps: boolean): fc.Arbitrary<Item> {
  const span = max - min + 1;
  const value = fc.integer({ min, max });
  const step = fc.integer({ min: 1, max: span });
  const range = fc.record({ from: value, to: value }).filter((r) => wraps || r.from <= r.to);
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Item>({ kind: 'all' }) },
    { weight: steps ? 2 : 0, arbitrary: step.map<Item>((s) => ({ kind: 'allStep', step: s })) },
    { weight: 3, arbitrary: value.map<Item>((v) => ({ kind: 'value', value: v })) },
    { weight: steps ? 2 : 0, arbitrary: fc.record({ value, step }).map<Item>((r) => ({ kind: 'from', ...r })) },
    { weight: 2, arbitrary: range.map<Item>((r) => ({ kind: 'range', ...r })) },
    { weight: steps ? 2 : 0, arbitrary: fc.record({ r: range, step }).map<Item>(({ r, step: s }) => ({ kind: 'range', ...r, step: s })) },
  );
}

export const itemsArb = (min: number, max: number, steps = true, wraps = true): fc.Arbitrary<Item[]> =>
  fc.array(itemArb(min, max, steps, wraps), { minLength: 1, maxLength: 3 });
export const everything: Item[] = [{ kind: 'all' }];

export const daysArb: fc.Arbitrary<DaySpec> = fc.oneof(
  { weight: 3, arbitrary: itemsArb(1, 31).map<DaySpec>((items) => ({ field: 'dom', items })) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<DaySpec>({ field: 'dom', special: 'L' }, { field: 'dom', special: 'LW' }, { field: 'dow', special: 'L' }),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(fc.integer({ min: 1, max: 31 }), fc.constantFrom(1, 30, 31))
      .map<DaySpec>((day) => ({ field: 'dom', special: 'W', day })),
  },
  { weight: 3, arbitrary: itemsArb(1, 7, false).map<DaySpec>((items) => ({ field: 'dow', items })) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 7 }).map<DaySpec>((weekday) => ({ field: 'dow', special: 'lastOf', weekday })) },
  {
    weight: 1,
    arbitrary: fc
      .record({ weekday: fc.integer({ min: 1, max: 7 }), nth: fc.integer({ min: 1, max: 5 }) })
      .map<DaySpec>((r) => ({ field: 'dow', special: 'nth', ...r })),
  },
);

/** Mostly dense expressions (so that runs fall inside a four-day window), some sparse ones. */
export const cronArb: fc.Arbitrary<OracleCron> = fc.record({
  minutes: itemsArb(0, 59),
  hours: fc.oneof({ weight: 1, arbitrary: fc.constant(everything) }, { weight: 2, arbitrary: itemsArb(0, 23) }),
  days: fc.oneof({ weight: 1, arbitrary: fc.constant<DaySpec>({ field: 'dom', items: everything }) }, { weight: 3, arbitrary: daysArb }),
  months: fc.oneof({ weight: 4, arbitrary: fc.constant(everything) }, { weight: 1, arbitrary: itemsArb(1, 12) }),
  years: fc.oneof({ weight: 4, arbitrary: fc.constant(everything) }, { weight: 1, arbitrary: itemsArb(2024, 2028, true, false) }),
});
