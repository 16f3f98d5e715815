import { describe, expect, it } from 'vitest';
import { type GroupRest, type GroupWakes, REST_NOTICE_MS, RowWakes, WAKE_WINDOW_MS } from '../../core/model/index.js';

/**
 * The writers' side of rests (core/model/rest.ts): what a writer read of a group is trusted for
 * less than the notice, measured from before the read was sent; a group awake needs nothing, one
 * at rest until after the row (or pending) is woken for it, one at rest until before it is not.
 */
function table(rests: Map<number, GroupRest | undefined>) {
  const calls: string[] = [];
  const groups: GroupWakes = {
    readRest: async (g) => {
      calls.push(`read ${g}`);
      return rests.get(g);
    },
    wakeBy: async (g, due) => {
      calls.push(`wake ${g} ${due}`);
      const r = rests.get(g);
      if (!r || (r.wakeAtMs !== undefined && r.wakeAtMs <= due)) return { moved: false, asleep: false };
      rests.set(g, { ...r, wakeAtMs: due });
      return { moved: true, asleep: r.asleepSinceMs !== undefined };
    },
    rouse: async (g) => {
      calls.push(`rouse ${g}`);
      const r = rests.get(g);
      if (r?.asleepSinceMs === undefined) return false;
      const { asleepSinceMs: _, ...awake } = r;
      rests.set(g, awake);
      return true;
    },
  };
  return { groups, calls };
}

describe('RowWakes', () => {
  it('reads a group once per notice while it is awake, and writes nothing', async () => {
    let now = 0;
    const { groups, calls } = table(new Map());
    const wakes = new RowWakes(groups, { groupCount: 4 }, () => now);
    await wakes.written(5, 1_000); // group 1
    await wakes.written(9, 2_000); // group 1 again: trusted
    now = REST_NOTICE_MS - 1;
    await wakes.written(1, 3_000);
    expect(calls).toEqual(['read 1']);
    now = REST_NOTICE_MS; // the notice has passed since the read was sent: read again
    await wakes.written(1, 3_000);
    expect(calls).toEqual(['read 1', 'read 1']);
  });

  it('wakes a pending group, and a resting one for a row due before its wake-up, never one that wakes sooner', async () => {
    const rests = new Map<number, GroupRest | undefined>([
      [0, { epoch: 'a', pendingAtMs: 0 }],
      [1, { epoch: 'b', pendingAtMs: 0, wakeAtMs: 50_000 }],
      [2, { epoch: 'c', pendingAtMs: 0, wakeAtMs: 10_000 }],
    ]);
    const { groups, calls } = table(rests);
    const wakes = new RowWakes(groups, { groupCount: 3 }, () => 0);
    await wakes.written(0, 20_000);
    await wakes.written(1, 20_000);
    await wakes.written(2, 20_000);
    expect(calls).toEqual(['read 0', 'wake 0 20000', 'read 1', 'wake 1 20000', 'read 2']);
    expect(rests.get(0)?.wakeAtMs).toBe(20_000);
    expect(rests.get(1)?.wakeAtMs).toBe(20_000);
    expect(rests.get(2)?.wakeAtMs).toBe(10_000);
    // After a wake it knows the group wakes by then: a row due later needs nothing, one due sooner a wake.
    await wakes.written(3, 25_000);
    expect(calls.slice(5)).toEqual([]);
    await wakes.written(3, 15_000);
    expect(calls.slice(5)).toEqual(['wake 0 15000']);
    expect(rests.get(0)?.wakeAtMs).toBe(15_000);
  });

  it('shares a read in flight only while it was sent less than the notice before', async () => {
    let now = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const calls: string[] = [];
    const groups: GroupWakes = {
      readRest: async () => {
        calls.push(`read at ${now}`);
        if (calls.length === 1) await gate;
        return undefined;
      },
      wakeBy: async () => ({ moved: false, asleep: false }),
      rouse: async () => false,
    };
    const wakes = new RowWakes(groups, { groupCount: 1 }, () => now);
    const first = wakes.written(0, 1);
    const second = wakes.written(0, 2); // joins the read in flight
    now = REST_NOTICE_MS + 5; // a write acknowledged now was not covered by a read sent at 0
    const third = wakes.written(0, 3);
    release();
    await Promise.all([first, second, third]);
    expect(calls).toEqual(['read at 0', `read at ${REST_NOTICE_MS + 5}`]);
  });

  it("starts a dispatcher for a sleeping group once, for the first row due too soon for the tick; a row due later is the tick's", async () => {
    const far = 10 * 60_000;
    const rests = new Map<number, GroupRest | undefined>([
      [0, { epoch: 'a', pendingAtMs: 0, wakeAtMs: far, restingSinceMs: 1, asleepSinceMs: 2 }],
      [1, { epoch: 'b', pendingAtMs: 0, wakeAtMs: far, restingSinceMs: 1, asleepSinceMs: 2 }],
    ]);
    const { groups, calls } = table(rests);
    const started: number[] = [];
    const settings = { groupCount: 2, cells: 2, lookaheadMs: 5_000 };
    const wakes = new RowWakes(groups, settings, () => 0, { starter: { start: async (cell) => void started.push(cell) }, now: () => 0 });
    // Due after the window: the wake-up moves, the group sleeps on (the tick plans for it).
    await wakes.written(1, WAKE_WINDOW_MS + 5_000);
    expect(calls).toEqual(['read 1', `wake 1 ${WAKE_WINDOW_MS + 5_000}`]);
    expect(started).toEqual([]);
    // Due within it: woken, roused and started (group 0 is in cell 0).
    await wakes.written(0, 30_000);
    expect(started).toEqual([0]);
    expect(rests.get(0)?.wakeAtMs).toBe(30_000);
    expect(rests.get(0)?.asleepSinceMs).toBeUndefined();
    // A second writer of a sooner row finds it roused already: no second start.
    const other = new RowWakes(groups, settings, () => 0, { starter: { start: async (cell) => void started.push(cell) }, now: () => 0 });
    await other.written(0, 20_000);
    expect(started).toEqual([0]);
    expect(calls.slice(-2)).toEqual(['read 0', 'wake 0 20000']);
    expect(calls.filter((c) => c.startsWith('rouse'))).toEqual(['rouse 0']);
  });

  it('a start that fails is logged, not thrown (the group no longer sleeps: the tick plans a dispatcher)', async () => {
    const rests = new Map<number, GroupRest | undefined>([
      [0, { epoch: 'a', pendingAtMs: 0, wakeAtMs: 600_000, restingSinceMs: 1, asleepSinceMs: 2 }],
    ]);
    const { groups } = table(rests);
    const logged: string[] = [];
    const wakes = new RowWakes(groups, { groupCount: 1, lookaheadMs: 5_000 }, () => 0, {
      starter: {
        start: async () => {
          throw new Error('ThrottlingException');
        },
      },
      now: () => 0,
      log: (message, fields) => logged.push(`${message} ${String(fields?.error)}`),
    });
    await wakes.written(0, 10_000);
    expect(logged).toEqual([expect.stringContaining('ThrottlingException')]);
    expect(rests.get(0)?.asleepSinceMs).toBeUndefined();
  });

  it('without a starter, a sleeping group is woken as a resting one and never roused', async () => {
    const rests = new Map<number, GroupRest | undefined>([
      [0, { epoch: 'a', pendingAtMs: 0, wakeAtMs: 600_000, restingSinceMs: 1, asleepSinceMs: 2 }],
    ]);
    const { groups, calls } = table(rests);
    await new RowWakes(groups, { groupCount: 1 }, () => 0).written(0, 10_000);
    expect(calls).toEqual(['read 0', 'wake 0 10000']);
  });
});
