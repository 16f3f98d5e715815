/**
 * The dispatch round's and the releaser's parts alone (core/dispatch/): fair share, the row
 * tracker, delivery limits, the marker writer and the lease keeper, each over a small fake of the
 * store role it uses.
 */
import { describe, expect, it, vi } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import type { AcquiredRow, RowKey, RowLeases } from '../../core/model/ports.js';
import { DeliveryLimits } from '../../core/dispatch/deliveryLimits.js';
import { FairShare, type FairLane } from '../../core/dispatch/fairShare.js';
import { LeaseKeeper, type Leased } from '../../core/dispatch/leaseKeeper.js';
import { MarkerWriter } from '../../core/dispatch/markerWriter.js';
import { emptyRoundReport } from '../../core/dispatch/roundReport.js';
import { newTrack, RowTracker } from '../../core/dispatch/rowTracker.js';
import { rowKeyString } from '../../core/dispatch/releaseStats.js';
import { ControlsCache, DEFAULT_CONTROLS, type TenantControls } from '../../core/tenants/controls.js';

const T0 = 1_800_000_000_000;
const key = (i: number, shard = 0): RowKey => ({ shard, dueMs: T0 + i, jobId: `j1.demo.${shard}.${T0 + i}.t.${i}` });
const row = (i: number, tenant = 'demo'): AcquiredRow => ({ ...key(i), tenant, payload: '{}', leaseUntil: T0 + 30_000 });

describe('FairShare', () => {
  const lanes = (...tenants: string[]): FairLane[] => tenants.map((tenant) => ({ tenant, pass: 0 }));

  it('gives turns in proportion to weights, and the first met among equals', () => {
    const fair = new FairShare<FairLane>();
    const [a, b] = lanes('a', 'b') as [FairLane, FairLane];
    const weight: Record<string, number> = { a: 3, b: 1 };
    const turns: string[] = [];
    for (let i = 0; i < 40; i++) {
      const next = fair.pick([a, b])!;
      turns.push(next.tenant);
      fair.served(next, weight[next.tenant]!);
    }
    expect(turns[0]).toBe('a'); // equal passes: the first met
    expect(turns.filter((t) => t === 'a')).toHaveLength(30);
    expect(turns.filter((t) => t === 'b')).toHaveLength(10);
  });

  it('skips a lane that may not go, and re-enters an idle lane at the current virtual time: no credit saved up', () => {
    const fair = new FairShare<FairLane>();
    const [busy, idle] = lanes('busy', 'idle') as [FairLane, FairLane];
    expect(fair.pick([busy, idle], (l) => l.tenant !== 'busy')).toBe(idle);
    for (let i = 0; i < 50; i++) fair.served(busy, 1);
    fair.enter(idle);
    expect(idle.pass).toBe(49);
    // Back from idle, it alternates with the busy lane instead of taking 50 turns in a row.
    const turns: string[] = [];
    for (let i = 0; i < 4; i++) {
      const next = fair.pick([busy, idle])!;
      turns.push(next.tenant);
      fair.served(next, 1);
    }
    expect(turns).toEqual(['idle', 'busy', 'idle', 'busy']);
    expect(fair.lane('new', { rows: 0 })).toEqual({ rows: 0, tenant: 'new', pass: busy.pass - 1 });
  });
});

describe('RowTracker', () => {
  function tracker() {
    const deleted: { late: RowKey[]; held: RowKey[] } = { late: [], held: [] };
    const store = {
      deleteLatePointers: async (keys: readonly RowKey[]) => (deleted.late.push(...keys), []),
      deleteHeldPointers: async (keys: readonly (RowKey & { tenant: string; priority: number })[]) => (deleted.held.push(...keys), []),
    };
    const report = emptyRoundReport();
    return { t: new RowTracker(store, report), report, deleted };
  }

  it('counts the most rows tracked, watches until their time, and gives those due back', () => {
    const { t, report } = tracker();
    const rows = [0, 1, 2].map((i) => newTrack(key(i), rowKeyString(key(i)), 'demo', { main: true }));
    rows.forEach((r) => t.track(r));
    expect([t.size, report.maxTracked]).toEqual([3, 3]);
    t.watch(rows[0]!, T0 + 100);
    t.watch(rows[1]!, T0 + 200, false);
    expect(rows[1]!.wasAcquired).toBe(false);
    expect(t.takeDue(T0 + 150)).toEqual([rows[0]]);
    expect([...t.watching]).toEqual([rows[1]]);
    t.finish(rows[2]!.id);
    expect([t.size, report.maxTracked]).toEqual([2, 3]);
  });

  it("deletes a final row's late and hold pointers in the background, and holds each shard's mark at its oldest main row", async () => {
    const { t, deleted } = tracker();
    const held = { ...key(5, 1), tenant: 'demo', priority: 5 };
    const late = newTrack(key(4, 1), rowKeyString(key(4, 1)), 'demo', { late: true, held });
    const main = newTrack(key(2, 0), rowKeyString(key(2, 0)), 'demo', { main: true });
    t.track(late);
    t.track(main);
    expect(t.holdMarksBack({ 0: T0 + 10, 1: T0 + 10 })).toEqual({ 0: T0 + 2, 1: T0 + 10 }); // only main rows hold a mark
    t.finish(late.id);
    t.drop(main); // not final: no pointer to delete (it has none)
    t.flushPointers(() => T0);
    await t.settled();
    expect(deleted).toEqual({ late: [late.key], held: [held] });
    expect(t.latePointers.goneLately(late.id, T0 + 1)).toBe(true); // a lagging read must not take it for new
    expect(t.latePointers.goneLately(late.id, T0 + 60_000)).toBe(false);
  });
});

describe('DeliveryLimits', () => {
  it("gives this round its share of a tenant's limit, and forgets the bucket of a tenant no longer limited", async () => {
    let now = T0;
    let controls: TenantControls = { ...DEFAULT_CONTROLS, maxDeliveriesPerSecond: 100 };
    const cache = new ControlsCache({ getControls: async () => controls }, { clock: { now: () => now } });
    await cache.get('demo');
    const limits = new DeliveryLimits(cache, 0.25);
    expect(limits.rateOf('demo')).toBe(25);
    const bucket = limits.bucketOf('demo', now)!;
    expect(bucket.take(now, 100)).toBeLessThanOrEqual(25);
    expect(limits.bucketOf('demo', now + 10)).toBe(bucket); // the same bucket, its rate kept current
    // The limit is lifted: once the cache has read it, the tenant is unlimited and its bucket gone.
    controls = { ...DEFAULT_CONTROLS };
    now += 10_000;
    await cache.get('demo');
    expect(limits.rateOf('demo')).toBeUndefined();
    expect(limits.bucketOf('demo', now)).toBeUndefined();
    expect(new DeliveryLimits(undefined, 1).rateOf('demo')).toBeUndefined();
  });
});

describe('MarkerWriter', () => {
  function writer(markDelivered: RowLeases['markDelivered']) {
    const stats = { recorded: 0 };
    const recorded: string[] = [];
    const dropped: string[] = [];
    const inflight: Promise<void>[] = [];
    const w = new MarkerWriter(
      { store: { markDelivered }, clock: { now: () => T0 }, settings: resolveSettings({}) },
      stats,
      { onRecorded: (rows) => recorded.push(...rows.map((r) => r.jobId)), onDropped: (r) => dropped.push(r.jobId) },
      (p) => inflight.push(p),
    );
    return { w, stats, recorded, dropped, settled: () => Promise.all(inflight) };
  }

  it('writes a full batch at once, a part batch within a second, and retries the keys that failed', async () => {
    vi.useFakeTimers();
    try {
      let calls = 0;
      const m = writer(async (rows) => (calls++ === 0 ? [rows[0]!] : []));
      m.w.add(
        Array.from({ length: 25 }, (_, i) => ({ row: row(i), leaseUntil: T0 + 30_000 })),
        false,
        true,
      );
      expect(m.w.waiting).toBe(0); // 25: written at once
      m.w.add([{ row: row(99), leaseUntil: T0 + 30_000 }], false, true);
      expect(m.w.waiting).toBe(1);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(m.w.waiting).toBe(0);
      await vi.runAllTimersAsync();
      await m.settled();
      expect(m.stats.recorded).toBe(26);
      expect(new Set(m.recorded).size).toBe(26);
      expect(m.dropped).toEqual([]);
      expect(calls).toBe(3); // the full batch, its one failed key again, the part batch
    } finally {
      vi.useRealTimers();
    }
  });

  it('gives a row up to be sent again (a duplicate, never a loss) after five failed attempts', async () => {
    vi.useFakeTimers();
    try {
      const m = writer(async () => {
        throw new Error('throttled');
      });
      m.w.add([{ row: row(1), leaseUntil: T0 + 30_000 }], true, true);
      await vi.runAllTimersAsync();
      await m.settled();
      expect([m.stats.recorded, m.dropped]).toEqual([0, [row(1).jobId]]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('LeaseKeeper', () => {
  it('renews once for concurrent askers, and after an error keeps the lease only while it is long enough to send under', async () => {
    let now = T0;
    let renews = 0;
    let fail = false;
    const store = {
      renew: async () => {
        renews++;
        if (fail) throw new Error('timeout');
        return true;
      },
    };
    const stats = { renewed: 0 };
    const keeper = new LeaseKeeper<Leased>(
      { store, clock: { now: () => now }, settings: resolveSettings({ leaseMs: 30_000 }) },
      stats,
      () => new Map(),
      () => {},
      () => {},
    );
    const h: Leased = { key: 'k', row: row(1), leaseUntil: T0 + 30_000, busy: false };
    const [a, b] = await Promise.all([keeper.renew(h, T0 + 60_000), keeper.renew(h, T0 + 60_000)]);
    expect([a, b, renews, stats.renewed, h.leaseUntil]).toEqual([true, true, 1, 1, T0 + 60_000]);
    fail = true;
    now = T0 + 60_000 - keeper.safetyMs - 1; // more than the safety margin left
    expect(await keeper.renew(h, now + 30_000)).toBe(true);
    now = T0 + 60_000 - keeper.safetyMs + 1; // less: not safe to send
    expect(await keeper.renew(h, now + 30_000)).toBe(false);
  });
});
