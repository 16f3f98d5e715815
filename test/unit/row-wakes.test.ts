import { describe, expect, it } from 'vitest';
import { type GroupRest, type GroupWakes, REST_NOTICE_MS, RowWakes } from '../../core/model/index.js';

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
      if (!r || (r.wakeAtMs !== undefined && r.wakeAtMs <= due)) return false;
      rests.set(g, { ...r, wakeAtMs: due });
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
      wakeBy: async () => false,
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
});
