import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchStep } from '../../core/dispatch/loop.js';
import { tickHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem } from '../support/system.js';

/** The tick's plan against dynalite: the sampling query (keys only, bounded by Limit) and the packing it drives. */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('tick plan', () => {
  it('packs groups by the rows coming due, reading at most what it needs', async () => {
    const settings = { shardCount: 16, groupCount: 4, lookaheadMs: 2_000, leaseMs: 4_000 };
    const sys = await createSystem(em, { settings });
    const now = Date.now();
    // 100 rows a second for 20 s, 30 s from now (writing them may take a while on a busy machine),
    // spread over the shards; and tombstone-free.
    const rows = Array.from({ length: 2_000 }, (_, i) => ({ shard: i % 16, dueMs: now + 30_000 + i * 10 }));
    for (let i = 0; i < rows.length; i += 100) {
      await Promise.all(
        rows
          .slice(i, i + 100)
          .map((r, k) => sys.w.store.putJob({ jobId: `j-${i + k}`, tenant: 'demo', shard: r.shard, dueMs: r.dueMs, payload: '{}' })),
      );
    }
    const input = { executionName: 'exec', executionStartTime: new Date(now).toISOString() };
    const plan = (rate: number) =>
      tickHandler({ store: sys.w.store, settings: { ...sys.w.config.settings, dispatcherRowsPerSecond: rate } })(input);

    const sized = await plan(60); // ~100 rows/s peak → 2 dispatchers of 2 groups
    expect(sized.reason).toBe('sampled');
    expect(sized.peakRowsPerSecond).toBeGreaterThanOrEqual(90);
    expect(sized.peakRowsPerSecond).toBeLessThanOrEqual(120);
    expect(sized.items.map((i) => i.groups)).toEqual([
      [0, 2],
      [1, 3],
    ]);
    expect(sized.items.map((i) => i.shards)).toEqual([8, 8]);
    expect((await plan(1_000)).items.map((i) => i.groups)).toEqual([[0, 1, 2, 3]]);

    // At 1 row/s per dispatcher, 4 dispatchers are needed long before a shard's 125 rows are read.
    const before = sys.w.store.stats.itemsRead;
    const cut = await plan(1);
    expect(cut).toMatchObject({ reason: 'sample cut short', peakRowsPerSecond: null });
    expect(cut.items.map((i) => i.groups)).toEqual([[0], [1], [2], [3]]);
    const limit = Math.ceil((4 * 1 * (90_000 + 2_000)) / 1000 / 16) + 1;
    expect(sys.w.store.stats.itemsRead - before).toBeLessThanOrEqual(4 * limit);
  });

  it('a dispatcher of several groups drops a group a newer execution took and goes on with the rest', async () => {
    const sys = await createSystem(em, { settings: { shardCount: 8, groupCount: 4, lookaheadMs: 2_000, leaseMs: 4_000 } });
    const t0 = Date.now();
    const step = (owner: string, ownerStartMs: number, input: { groups?: number[]; group?: number }) =>
      dispatchStep(sys.w.dispatch, { ...input, owner, ownerStartMs, untilMs: t0 + 60_000 }, { deadlineMs: Date.now() + 2_000 });

    const first = await step('A', t0, { groups: [0, 1, 2] });
    expect(first).toMatchObject({ groups: [0, 1, 2], lostGroup: false, done: false, idle: true });
    // A newer execution takes group 1: A's next step dispatches groups 0 and 2 only.
    expect(await step('B', t0 + 60_000, { groups: [1] })).toMatchObject({ groups: [1], lostGroup: false });
    const second = await step('A', t0, { groups: first.groups });
    expect(second).toMatchObject({ groups: [0, 2], lostGroup: true, done: false });
    expect(second.queries).toBe(12); // two shards each for groups 0 and 2, one look (idle): due range, late lane, probe
    // Once B has them all, A is done.
    await step('B', t0 + 60_000, { groups: [0, 2, 3] });
    expect(await step('A', t0, { groups: second.groups })).toMatchObject({ groups: [], lostGroup: true, done: true });
    // The one-group input of earlier definitions still works, and its result still carries
    // `group` (an execution started before a deploy selects it for its next step).
    expect(await step('B', t0 + 60_000, { group: 3 })).toMatchObject({ group: 3, groups: [3], done: false });
    expect(await step('B', t0 + 60_000, { groups: [3] })).not.toHaveProperty('group');
    // A malformed input is refused before anything is written.
    for (const bad of [{}, { groups: [] }, { groups: [4] }, { groups: [1, 1] }, { groups: [0.5] }, { group: -1 }]) {
      await expect(step('C', t0 + 120_000, bad as never)).rejects.toThrow(/distinct integers from 0 to 3/);
    }
    expect(await step('B', t0 + 60_000, { groups: [0, 1, 2, 3] })).toMatchObject({ groups: [0, 1, 2, 3], lostGroup: false });
  });
});
