import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffMs } from '../../core/util/backoff.js';
import { DEFAULTS, MAX_GROUPS, resolveSettings, shardsOfGroup, type SchedulerSettings } from '../../core/model/config.js';
import { summarize } from '../../core/dispatch/loop.js';

const DAY = 24 * 3600 * 1000;

function settingsError(overrides: Partial<SchedulerSettings>): string {
  try {
    resolveSettings(overrides);
  } catch (err) {
    expect(err).toBeInstanceOf(RangeError);
    return (err as Error).message;
  }
  throw new Error(`resolveSettings(${JSON.stringify(overrides)}) did not throw`);
}

/** The "- ..." lines of a settings error: one per problem. */
function problems(message: string): string[] {
  return message.split('\n').filter((l) => l.startsWith('- '));
}

describe('resolveSettings', () => {
  it('defaults to the values of DESIGN.md', () => {
    const s = resolveSettings();
    expect(s.shardCount).toBe(64);
    expect(s.groupCount).toBeGreaterThanOrEqual(1);
    expect(s.groupCount).toBeLessThanOrEqual(40);
    expect(s.lookaheadMs).toBe(5_000);
    expect(s.leaseMs).toBe(30_000);
    expect(s.maxPayloadBytes).toBe(240 * 1024);
    expect(s.maxBatchBytes).toBe(5 * 1024 * 1024);
    expect(s.maxBatchJobs).toBe(100);
    expect(s.horizonMs).toBeGreaterThanOrEqual(10 * 365 * DAY);
    expect(s.horizonMs).toBeLessThanOrEqual(10 * 366 * DAY);
    // Cancel records are "kept at least 7 days after runAt".
    expect(s.cancelRecordRetentionMs).toBeGreaterThanOrEqual(7 * DAY);
    expect(resolveSettings({})).toEqual(s);
  });

  it('applies overrides, ignores undefined ones, and leaves DEFAULTS alone', () => {
    const before = { ...DEFAULTS };
    const s = resolveSettings({ shardCount: 128, groupCount: 40, leaseMs: 10_000, lookaheadMs: 2_000 });
    expect(s).toMatchObject({ shardCount: 128, groupCount: 40, leaseMs: 10_000, lookaheadMs: 2_000, maxBatchJobs: 100 });
    expect(resolveSettings({ lookaheadMs: undefined }).lookaheadMs).toBe(5_000);
    expect(resolveSettings({ shardCount: undefined, maxBatchJobs: 7 }).shardCount).toBe(64);
    expect(resolveSettings({ shardCount: undefined, maxBatchJobs: 7 }).maxBatchJobs).toBe(7);
    expect(DEFAULTS).toEqual(before);
  });

  it('accepts the bounds of each setting', () => {
    expect(resolveSettings({ shardCount: 1, groupCount: 1 }).shardCount).toBe(1);
    expect(resolveSettings({ shardCount: 10_000, groupCount: MAX_GROUPS }).groupCount).toBe(40);
    expect(resolveSettings({ lookaheadMs: 1_000, leaseMs: 2_000 }).leaseMs).toBe(2_000);
    expect(resolveSettings({ lookaheadMs: 60_000, leaseMs: 120_000 }).lookaheadMs).toBe(60_000);
    expect(resolveSettings({ leaseMs: 15 * 60_000 }).leaseMs).toBe(900_000);
    expect(
      resolveSettings({ maxPayloadBytes: 240 * 1024, maxBatchJobs: 1, cancelRecordRetentionMs: 0, tombstoneGraceMs: 0 }).maxBatchJobs,
    ).toBe(1);
  });

  it('rejects one step beyond the bounds', () => {
    expect(settingsError({ shardCount: 0 })).toMatch(/shardCount/);
    expect(settingsError({ shardCount: 10_001 })).toMatch(/shardCount/);
    expect(settingsError({ shardCount: 64.5 })).toMatch(/shardCount/);
    expect(settingsError({ groupCount: 41, shardCount: 100 })).toMatch(/groupCount/);
    expect(settingsError({ groupCount: 0 })).toMatch(/groupCount/);
    expect(settingsError({ lookaheadMs: 999 })).toMatch(/lookaheadMs/);
    expect(settingsError({ maxPayloadBytes: 240 * 1024 + 1 })).toMatch(/maxPayloadBytes/);
    expect(settingsError({ maxBatchJobs: 101 })).toMatch(/maxBatchJobs/);
    expect(settingsError({ horizonMs: DEFAULTS.horizonMs + 1 })).toMatch(/horizonMs/);
    expect(settingsError({ tombstoneGraceMs: Number.NaN })).toMatch(/tombstoneGraceMs/);
  });

  it('checks the settings against each other', () => {
    expect(settingsError({ shardCount: 4, groupCount: 8 })).toMatch(/groupCount \(8\) must not exceed shardCount \(4\)/);
    expect(settingsError({ leaseMs: 9_999, lookaheadMs: 5_000 })).toMatch(/leaseMs/);
    expect(resolveSettings({ leaseMs: 10_000, lookaheadMs: 5_000 }).leaseMs).toBe(10_000);
  });

  it('lists every out-of-range value at once, in one error', () => {
    const message = settingsError({
      shardCount: 0,
      groupCount: 41,
      lookaheadMs: 500,
      leaseMs: 1.5,
      maxPayloadBytes: 300 * 1024,
      maxBatchBytes: 0,
      maxBatchJobs: 101,
      horizonMs: 0,
      cancelRecordRetentionMs: -1,
      tombstoneGraceMs: Number.NaN,
    });
    const names = [
      'shardCount',
      'groupCount',
      'lookaheadMs',
      'leaseMs',
      'maxPayloadBytes',
      'maxBatchBytes',
      'maxBatchJobs',
      'horizonMs',
      'cancelRecordRetentionMs',
      'tombstoneGraceMs',
    ];
    const lines = problems(message);
    expect(lines).toHaveLength(names.length);
    for (const name of names) expect(lines.filter((l) => l.startsWith(`- ${name} `))).toHaveLength(1);
  });

  // Cross-field checks once ran only while no other problem was found (a deployer fixed one
  // problem, then met the next); now every problem is listed at once.
  it('lists both cross-field problems at once (groupCount > shardCount and leaseMs < 2 × lookaheadMs)', () => {
    const lines = problems(settingsError({ shardCount: 4, groupCount: 8, lookaheadMs: 5_000, leaseMs: 5_000 }));
    expect(lines).toHaveLength(2);
    expect(lines.join('\n')).toMatch(/groupCount/);
    expect(lines.join('\n')).toMatch(/leaseMs/);
  });

  it('lists a cross-field problem together with an unrelated out-of-range value', () => {
    const lines = problems(settingsError({ maxBatchJobs: 101, lookaheadMs: 5_000, leaseMs: 5_000 }));
    expect(lines).toHaveLength(2);
    expect(lines.join('\n')).toMatch(/maxBatchJobs/);
    expect(lines.join('\n')).toMatch(/leaseMs/);
  });
});

describe('shardsOfGroup', () => {
  const validArb = fc
    .integer({ min: 1, max: 10_000 })
    .chain((shardCount) =>
      fc.record({ shardCount: fc.constant(shardCount), groupCount: fc.integer({ min: 1, max: Math.min(MAX_GROUPS, shardCount) }) }),
    );

  it('partitions all shards: every shard in exactly one group, groups balanced within one (property)', () => {
    fc.assert(
      fc.property(validArb, ({ shardCount, groupCount }) => {
        const settings = resolveSettings({ shardCount, groupCount });
        const seen = new Array<number>(shardCount).fill(0);
        const outOfRange: number[] = [];
        const sizes: number[] = [];
        for (let g = 0; g < groupCount; g++) {
          const shards = shardsOfGroup(g, settings);
          sizes.push(shards.length);
          for (const s of shards) {
            if (Number.isInteger(s) && s >= 0 && s < shardCount) seen[s]! += 1;
            else outOfRange.push(s);
          }
        }
        expect(outOfRange).toEqual([]);
        expect(seen.filter((n) => n !== 1)).toEqual([]);
        expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
        expect(Math.min(...sizes)).toBeGreaterThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  it('splits the default 64 shards over the default groups', () => {
    const s = resolveSettings();
    const all = Array.from({ length: s.groupCount }, (_, g) => shardsOfGroup(g, s))
      .flat()
      .sort((a, b) => a - b);
    expect(all).toEqual(Array.from({ length: 64 }, (_, i) => i));
  });

  it('gives shards in ascending order', () => {
    expect(shardsOfGroup(1, { shardCount: 10, groupCount: 3 })).toEqual([1, 4, 7]);
    expect(shardsOfGroup(0, { shardCount: 1, groupCount: 1 })).toEqual([0]);
  });
});

describe('backoffMs', () => {
  /** The ceiling min(cap, base × 2^attempt), by doubling (no exponent arithmetic). */
  function ceiling(attempt: number, baseMs: number, capMs: number): number {
    let c = baseMs;
    for (let i = 0; i < attempt && c < capMs; i++) c *= 2;
    return Math.min(c, capMs);
  }

  const optsArb = fc.record({ baseMs: fc.integer({ min: 1, max: 10_000 }), capMs: fc.integer({ min: 1, max: 1_000_000 }) });
  const attemptArb = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: -5, max: 5_000 }));
  const randomArb = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

  it('stays in [0, min(cap, base × 2^attempt)) and is a whole number of ms (property)', () => {
    fc.assert(
      fc.property(attemptArb, optsArb, randomArb, (attempt, opts, r) => {
        const ms = backoffMs(attempt, opts, () => r);
        expect(Number.isInteger(ms)).toBe(true);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(ms).toBeLessThan(ceiling(Math.max(0, attempt), opts.baseMs, opts.capMs));
      }),
      { numRuns: 5_000 },
    );
  });

  it('uses the whole range (full jitter): 0 at the bottom, ceiling − 1 at the top', () => {
    const justBelowOne = 1 - 2 ** -53;
    fc.assert(
      fc.property(attemptArb, optsArb, (attempt, opts) => {
        const c = ceiling(Math.max(0, attempt), opts.baseMs, opts.capMs);
        expect(backoffMs(attempt, opts, () => 0)).toBe(0);
        expect(backoffMs(attempt, opts, () => justBelowOne)).toBe(c - 1);
      }),
      { numRuns: 1_000 },
    );
  });

  it('matches the documented example and doubles per attempt up to the cap', () => {
    const opts = { baseMs: 50, capMs: 2_000 };
    const top = (attempt: number) => backoffMs(attempt, opts, () => 1 - 2 ** -53) + 1;
    expect([0, 1, 2, 3, 4, 5, 6, 100].map(top)).toEqual([50, 100, 200, 400, 800, 1_600, 2_000, 2_000]);
    expect(backoffMs(3, opts, () => 0.5)).toBe(200);
  });

  it('stays in range with the default random source', () => {
    for (let i = 0; i < 1_000; i++) {
      const ms = backoffMs(3, { baseMs: 50, capMs: 2_000 });
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(400);
    }
  });
});

describe('summarize', () => {
  /** Nearest-rank definition: the smallest value with at least p % of the values at or below it. */
  function expectNearestRank(values: readonly number[], p: number, got: number): void {
    const n = values.length;
    expect(values).toContain(got);
    expect(values.filter((v) => v <= got).length * 100).toBeGreaterThanOrEqual(p * n);
    expect(values.filter((v) => v < got).length * 100).toBeLessThan(p * n);
  }

  it('summarizes nothing as zeros', () => {
    expect(summarize([])).toEqual({ count: 0, p50Ms: 0, p95Ms: 0, p99Ms: 0, maxMs: 0 });
  });

  it('gives percentile p of 1..100 as p, in any order', () => {
    const values = Array.from({ length: 100 }, (_, i) => ((i * 37) % 100) + 1);
    expect(summarize(values)).toEqual({ count: 100, p50Ms: 50, p95Ms: 95, p99Ms: 99, maxMs: 100 });
  });

  it('uses nearest rank on small lists', () => {
    expect(summarize([7])).toEqual({ count: 1, p50Ms: 7, p95Ms: 7, p99Ms: 7, maxMs: 7 });
    // 10 values: p50 is the 5th, p95 and p99 the 10th.
    expect(summarize([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])).toEqual({ count: 10, p50Ms: 5, p95Ms: 10, p99Ms: 10, maxMs: 10 });
  });

  it('sorts numerically, not as strings', () => {
    // As strings, 100 < 9 and the median would be 100.
    expect(summarize([100, 9, 10])).toMatchObject({ p50Ms: 10, maxMs: 100 });
  });

  it('matches the nearest-rank definition and leaves its input alone (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -1_000, max: 100_000 }), { minLength: 1, maxLength: 500 }), (values) => {
        const input = Object.freeze([...values]);
        const s = summarize(input);
        expect(input).toEqual(values);
        expect(s.count).toBe(values.length);
        expect(s.maxMs).toBe(values.reduce((a, b) => Math.max(a, b)));
        expectNearestRank(values, 50, s.p50Ms);
        expectNearestRank(values, 95, s.p95Ms);
        expectNearestRank(values, 99, s.p99Ms);
        expect(s.p50Ms).toBeLessThanOrEqual(s.p95Ms);
        expect(s.p95Ms).toBeLessThanOrEqual(s.p99Ms);
        expect(s.p99Ms).toBeLessThanOrEqual(s.maxMs);
      }),
      { numRuns: 1_000 },
    );
  });
});
