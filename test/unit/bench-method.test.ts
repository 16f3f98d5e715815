import { describe, expect, it } from 'vitest';
import { spread } from '../../bench/dispatch.js';
import { readsPerJob } from '../../bench/lateness.js';

describe("the benchmark's repeated figures", () => {
  it('reports the median with its spread, in the order measured', () => {
    expect(spread([0.9, 0.6, 0.8])).toEqual({ median: 0.8, min: 0.6, max: 0.9, values: [0.9, 0.6, 0.8] });
    expect(spread([4, 1, 3, 2], 1)).toEqual({ median: 2.5, min: 1, max: 4, values: [4, 1, 3, 2] });
    expect(spread([1234.4, 1000.6], 0).median).toBe(1118);
  });
});

describe('items read per job over the steady window', () => {
  const sample = (at: number, dispatched: number, dispatchItems: number, due: number, late: number, planItems = 0) => ({
    at,
    dispatched,
    reads: { dispatchItems, planItems, byRead: { readDue: { calls: at / 100, items: due }, readLate: { calls: at / 100, items: late } } },
  });

  it('counts only what was read and sent between the samples bounding the window', () => {
    const samples = [
      sample(1_000, 0, 50, 0, 0), // idle probes before the first jobs fall due: not counted
      sample(2_000, 100, 170, 110, 0),
      sample(3_000, 200, 290, 210, 20, 64),
      sample(4_000, 300, 400, 310, 30, 64),
      sample(5_000, 310, 500, 320, 30, 64), // after the load: not counted
    ];
    const r = readsPerJob(samples, 1_500, 4_500);
    expect(r.jobs).toBe(200);
    expect(r.itemsRead).toBe(230);
    expect(r.itemsReadPerJobSteady).toBe(1.15);
    expect(r.windowMs).toBe(2_000);
    expect(r.planItemsPerJob).toBe(0.32);
    expect(r.byRead.readDue).toEqual({ calls: 20, items: 200, itemsPerJob: 1 });
    expect(r.byRead.readLate).toEqual({ calls: 20, items: 30, itemsPerJob: 0.15 });
  });

  it('reports nothing rather than a figure when the window holds no interval (an old compute without read counts)', () => {
    expect(readsPerJob([{ at: 1_000, dispatched: 0 }], 0, 10_000)).toMatchObject({ itemsReadPerJobSteady: 0, jobs: 0 });
    expect(readsPerJob([sample(1_000, 0, 0, 0, 0)], 0, 10_000).jobs).toBe(0);
  });
});
