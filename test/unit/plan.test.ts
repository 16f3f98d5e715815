import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveSettings, type SchedulerSettings } from '../../core/model/config.js';
import { packGroups, planDispatchers } from '../../core/dispatch/plan.js';

const NOW = 1_800_000_000_000;
const UNTIL = NOW + 90_000;

/** An in-memory table of due times per shard, answering the sampling query as DynamoDB would. */
function table(rows: { shard: number; dueMs: number }[]) {
  const calls: { shard: number; limit: number }[] = [];
  return {
    calls,
    store: {
      async dueTimes(shard: number, untilMs: number, limit: number) {
        calls.push({ shard, limit });
        const due = rows
          .filter((r) => r.shard === shard && r.dueMs <= untilMs)
          .map((r) => r.dueMs)
          .sort((a, b) => a - b);
        return { dueMs: due.slice(0, limit), more: due.length > limit };
      },
    },
  };
}

/** `rate` rows a second from `from` for `seconds`, spread evenly over the shards and the milliseconds. */
function steady(settings: SchedulerSettings, rate: number, from: number, seconds: number) {
  const rows: { shard: number; dueMs: number }[] = [];
  const n = Math.round(rate * seconds);
  for (let i = 0; i < n; i++) rows.push({ shard: i % settings.shardCount, dueMs: from + Math.floor((i * 1000) / rate) });
  return rows;
}

const settings = resolveSettings({});

describe('planDispatchers', () => {
  it('runs one dispatcher for all groups when nothing is coming due', async () => {
    const plan = await planDispatchers({ store: table([]).store, settings }, NOW, UNTIL);
    expect(plan).toMatchObject({ dispatchers: [[0, 1, 2, 3, 4, 5, 6, 7]], peakRowsPerSecond: 0, reason: 'sampled' });
  });

  it('sizes the plan by the peak rate coming due: 100/s → 1, 900/s → 5, 5,000/s → 8 (the most)', async () => {
    for (const [rate, expected] of [
      [100, 1],
      [150, 1],
      [900, 5],
      [5_000, 8],
    ] as const) {
      const plan = await planDispatchers({ store: table(steady(settings, rate, NOW, 95)).store, settings }, NOW, UNTIL);
      expect(plan.dispatchers, `${rate}/s`).toHaveLength(expected);
      expect(plan.peakRowsPerSecond).toBeGreaterThanOrEqual(rate * 0.9);
      // 5,000/s needs every group: the sample stops reading there (an unknown, large peak).
      if (rate < 5_000) expect(plan.peakRowsPerSecond).toBeLessThanOrEqual(rate * 1.2);
    }
  });

  it('sees a burst all due at one instant, and a backlog of overdue rows, as peaks', async () => {
    const burst = Array.from({ length: 20_000 }, (_, i) => ({ shard: i % 64, dueMs: NOW + 40_000 }));
    expect((await planDispatchers({ store: table(burst).store, settings }, NOW, UNTIL)).dispatchers).toHaveLength(8);
    const backlog = Array.from({ length: 3_840 }, (_, i) => ({ shard: i % 64, dueMs: NOW - 600_000 + i }));
    const plan = await planDispatchers({ store: table(backlog).store, settings }, NOW, UNTIL);
    expect(plan.peakRowsPerSecond).toBe(768); // 3,840 rows due now, over a 5 s bucket
    expect(plan.dispatchers).toHaveLength(4);
  });

  it('ignores rows due after the run (and its lookahead), and samples one shard per group, each read bounded', async () => {
    const t = table([...steady(settings, 5_000, UNTIL + settings.lookaheadMs + 1, 60), ...steady(settings, 100, NOW, 10)]);
    const plan = await planDispatchers({ store: t.store, settings }, NOW, UNTIL);
    expect(plan.dispatchers).toHaveLength(1);
    expect(t.calls.map((c) => c.shard)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // Enough to tell that every group needs a dispatcher: 8 × 200 rows/s over 95 s, per shard.
    for (const c of t.calls) expect(c.limit).toBe(Math.ceil((8 * 200 * 95) / 64) + 1);
  });

  it('runs one dispatcher per group when the sample is cut short, when it fails, or when packing is off', async () => {
    const cut = await planDispatchers({ store: table(steady(settings, 20_000, NOW, 95)).store, settings }, NOW, UNTIL);
    expect(cut).toMatchObject({ reason: 'sample cut short', dispatchers: packGroups(8, 8) });
    const logged: string[] = [];
    const failing = {
      async dueTimes(): Promise<never> {
        throw new Error('ProvisionedThroughputExceededException');
      },
    };
    const failed = await planDispatchers({ store: failing, settings, log: (m) => logged.push(m) }, NOW, UNTIL);
    expect(failed).toMatchObject({ reason: 'sample failed', dispatchers: packGroups(8, 8) });
    expect(logged).toHaveLength(1);
    const t = table(steady(settings, 10, NOW, 95));
    const off = await planDispatchers({ store: t.store, settings: resolveSettings({ dispatcherRowsPerSecond: 0 }) }, NOW, UNTIL);
    expect(off).toMatchObject({ reason: 'packing off', dispatchers: packGroups(8, 8) });
    expect(t.calls).toEqual([]); // no read at all
  });
});

describe('packGroups', () => {
  it('puts every group in exactly one dispatcher, sizes within one (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }).chain((g) => fc.tuple(fc.constant(g), fc.integer({ min: 1, max: g }))),
        ([groups, count]) => {
          const packed = packGroups(groups, count);
          expect(packed).toHaveLength(count);
          expect(packed.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: groups }, (_, i) => i));
          const sizes = packed.map((p) => p.length);
          expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
        },
      ),
    );
  });
});
