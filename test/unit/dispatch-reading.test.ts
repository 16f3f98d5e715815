/**
 * A round's reading and acquiring parts alone (core/dispatch/shardReader.ts, holdLanes.ts,
 * rowAcquire.ts), over the simulation's table (bench/sim/store.ts: the store's operations done
 * atomically, as DynamoDB's conditional writes do them), with a round reduced to its row moves.
 */
import { describe, expect, it } from 'vitest';
import { VirtualTime } from '../../bench/sim/clock.js';
import { NO_TABLE_LIMITS, SimTable } from '../../bench/sim/store.js';
import { resolveSettings } from '../../core/model/config.js';
import { ShardLane } from '../../core/model/lanes.js';
import type { AcquiredRow, JobStore } from '../../core/model/ports.js';
import { HoldLanes, type RoundRows } from '../../core/dispatch/holdLanes.js';
import { ParkedTenants } from '../../core/dispatch/parked.js';
import { rowKeyString } from '../../core/dispatch/releaseStats.js';
import { emptyRoundReport } from '../../core/dispatch/roundReport.js';
import { RowAcquire } from '../../core/dispatch/rowAcquire.js';
import { RowTracker, type Track } from '../../core/dispatch/rowTracker.js';
import { ShardReader } from '../../core/dispatch/shardReader.js';
import { ControlsCache, DEFAULT_CONTROLS } from '../../core/tenants/controls.js';
import { TenantRegistry } from '../../core/tenants/registry.js';

const T0 = 1_800_000_000_000;
const settings = resolveSettings({ lookaheadMs: 5_000, leaseMs: 30_000 });

/** The simulation's table as the store's roles (async, as the adapter is). */
function storeOf(table: SimTable): JobStore {
  return {
    putJob: async (r) => table.putJob(r),
    readDue: async (s, r, l) => table.readDue(s, r, l),
    dueTimes: async (s, u, l, f) => table.dueTimes(s, u, l, f),
    putLatePointer: async (k) => table.putLatePointer(k),
    readLate: async (s, u, l) => table.readLate(s, u, l),
    deleteLatePointers: async (k) => table.deleteLatePointers(k),
    putHeldPointers: async (p) => table.putHeldPointers(p),
    readHeld: async (s, r, l) => table.readHeld(s, r, l),
    deleteHeldPointers: async (p) => table.deleteHeldPointers(p),
    unacquire: async () => false,
    acquire: async (k, n, u) => table.acquire(k, n, u),
    renew: async () => true,
    markDelivered: async () => [],
    cancel: async (k, t, e) => table.cancel(k, t, e),
    cancelWaiting: async () => false,
    getRow: async (k) => table.getRow(k),
    putDead: async () => false,
    putCancelRecord: async () => false,
    getCancelRecord: async () => undefined,
    takeGroupLease: async (g, o, s, n, u, m) => table.takeGroupLease(g, o, s, n, u, m),
    groupMarks: async (g) => table.groupMarks(g),
  };
}

/** A round reduced to its row moves: rows queued in order, a cap, reads counted. */
function roundOf(table: SimTable, maxRows = 1_000): RoundRows & { queued: Track[]; lanes: Map<number, ShardLane> } {
  const report = emptyRoundReport();
  const lanes = new Map<number, ShardLane>();
  const queued: Track[] = [];
  return {
    report,
    tracker: new RowTracker(storeOf(table), report),
    queued,
    lanes,
    room: () => queued.length < maxRows,
    queue: (t, backlog) => {
      t.backlog = backlog;
      const lane = lanes.get(t.key.shard);
      if (backlog && lane) lane.backlogOpen++;
      queued.push(t);
    },
    count: (items) => {
      report.queries++;
      report.itemsRead += items;
    },
    laneOf: (shard) => lanes.get(shard),
  };
}

const jobId = (tenant: string, i: number, dueMs: number) => `j1.${tenant}.0.${dueMs}.t.${String(i).padStart(16, '0')}.x`;
const registered = new TenantRegistry({
  getTenant: async (name) => ({ name, queueUrl: `q/${name}`, dlqUrl: `q/${name}-dlq` }),
  putTenant: async () => {},
});

describe('ShardReader', () => {
  const noHolds = { read: async () => {} };

  it('reads each row once: the new rows of each look, up to the horizon, then only what came after', async () => {
    const table = new SimTable(new VirtualTime(T0), NO_TABLE_LIMITS);
    for (let i = 0; i < 30; i++)
      table.putJob({ shard: 0, dueMs: T0 + i * 100, jobId: jobId('demo', i, T0 + i * 100), tenant: 'demo', payload: '{}' });
    const round = roundOf(table);
    const lane = new ShardLane(0);
    round.lanes.set(0, lane);
    const reader = new ShardReader({ store: storeOf(table), settings }, round, noHolds, 10);

    expect(await reader.read(lane, T0, T0 + 1_450)).toBe(false);
    expect(round.queued.map((t) => t.key.dueMs)).toEqual(Array.from({ length: 15 }, (_, i) => T0 + i * 100));
    expect(lane.caughtUp).toBe(true);
    const read = round.report.itemsRead;
    await reader.read(lane, T0 + 1_000, T0 + 2_950);
    expect(round.queued).toHaveLength(30);
    expect(round.report.itemsRead - read).toBe(15); // the 15 new rows, not the first 15 again
    expect(round.queued.every((t) => t.main && !t.backlog && t.tenant === 'demo')).toBe(true);
  });

  it('after an outage, drains the overdue rows oldest first from a backlog head while the fresh head jumps to now', async () => {
    const table = new SimTable(new VirtualTime(T0), NO_TABLE_LIMITS);
    const now = T0 + 3_600_000;
    // 50 rows overdue by up to an hour, and 5 falling due just after now.
    for (let i = 0; i < 50; i++)
      table.putJob({ shard: 0, dueMs: T0 + i * 1_000, jobId: jobId('demo', i, T0 + i * 1_000), tenant: 'demo', payload: '{}' });
    for (let i = 0; i < 5; i++)
      table.putJob({ shard: 0, dueMs: now + 100 + i, jobId: jobId('demo', 100 + i, now + 100 + i), tenant: 'demo', payload: '{}' });
    const round = roundOf(table);
    const lane = new ShardLane(0);
    round.lanes.set(0, lane);
    const reader = new ShardReader({ store: storeOf(table), settings }, round, noHolds, 10);

    await reader.read(lane, now, now + 1_000);
    expect(lane.backlog).toBeDefined();
    const fresh = round.queued.filter((t) => !t.backlog).map((t) => t.key.dueMs);
    expect(fresh).toEqual([0, 1, 2, 3, 4].map((i) => now + 100 + i)); // the rows falling due are read at once
    expect(round.report.backlogRows).toBeGreaterThanOrEqual(10);
    // The backlog head reads a page only once fewer than half a page of it waits for an acquire.
    for (let look = 0; look < 20 && lane.backlog; look++) {
      lane.backlogOpen = 0; // as if the acquirer took what it had
      await reader.read(lane, now, now + 1_000);
    }
    expect(lane.backlog).toBeUndefined();
    const backlog = round.queued.filter((t) => t.backlog).map((t) => t.key.dueMs);
    expect(backlog).toEqual([...backlog].sort((a, b) => a - b)); // oldest first
    expect(new Set(round.queued.map((t) => t.id)).size).toBe(55);
  });

  it('watches a row another round holds until its lease ends; a late-lane row past the horizon keeps the round from idling', async () => {
    const table = new SimTable(new VirtualTime(T0), NO_TABLE_LIMITS);
    const held = { shard: 0, dueMs: T0 + 100, jobId: jobId('demo', 1, T0 + 100) };
    table.putJob({ ...held, tenant: 'demo', payload: '{}' });
    table.acquire(held, T0, T0 + 30_000);
    const ahead = { shard: 0, dueMs: T0 + 4_000, jobId: jobId('demo', 2, T0 + 4_000) };
    table.putLatePointer(ahead);
    const round = roundOf(table);
    const lane = new ShardLane(0);
    round.lanes.set(0, lane);
    const reader = new ShardReader({ store: storeOf(table), settings }, round, noHolds, 10);
    expect(await reader.read(lane, T0 + 50, T0 + 1_000)).toBe(true); // the pointer is due within the lookahead
    expect(round.queued).toEqual([]);
    const watched = round.tracker.get(rowKeyString(held));
    expect(watched && round.tracker.watching.has(watched)).toBe(true);
    expect(watched?.retryAt).toBe(T0 + 30_001);
    // Once the horizon reaches it, the late row is tracked and queued like any other.
    await reader.read(lane, T0 + 3_500, T0 + 4_500);
    expect(round.queued.map((t) => [t.key.jobId, t.late])).toEqual([[ahead.jobId, true]]);
    expect(round.report.lateRows).toBe(1);
  });
});

describe('HoldLanes and RowAcquire', () => {
  it("holds a paused tenant's row in the hold lane, lets it go, and reads it back once the tenant may send", async () => {
    const vt = new VirtualTime(T0);
    const table = new SimTable(vt, NO_TABLE_LIMITS);
    const store = storeOf(table);
    let paused = true;
    let now = T0;
    const clock = { now: () => now };
    const controls = new ControlsCache({ getControls: async () => ({ ...DEFAULT_CONTROLS, paused }) }, { clock });
    const round = roundOf(table);
    const lane = new ShardLane(0);
    round.lanes.set(0, lane);
    const parked = new ParkedTenants();
    const holds = new HoldLanes(
      { store, controls, tenants: registered, clock },
      parked,
      round,
      { queuedOf: () => 0, queued: 0, backlogQueued: 0, releasing: 0 },
      { maxRows: 100, pageRows: 10 },
    );
    const released: AcquiredRow[] = [];
    const acquire = new RowAcquire(
      { store, tenants: registered, controls, clock, settings },
      parked,
      round,
      holds,
      () => ({ pushFresh: () => {}, paused: false, pause: () => {} }),
      (r) => released.push(r),
    );
    const key = { shard: 0, dueMs: T0 + 100, jobId: jobId('payroll', 1, T0 + 100) };
    table.putJob({ ...key, tenant: 'payroll', payload: '{}' });
    const reader = new ShardReader({ store, settings, controls }, round, holds, 10);
    await reader.read(lane, T0, T0 + 1_000);
    const t = round.queued[0]!;
    await acquire.acquire(t); // paused: to the hold lane, the row SCHEDULED
    await holds.written();
    expect(round.report.held).toBe(1);
    expect(round.tracker.size).toBe(0);
    expect(table.getRow(key)?.state).toBe('SCHEDULED');
    expect(lane.holds.get('payroll')).toEqual({ more: true });

    paused = false;
    now = T0 + 6_000; // past the controls' 5 s cache
    round.queued.length = 0;
    holds.startLook();
    await holds.read(lane, now, true);
    expect(round.report.unheld).toBe(1);
    await acquire.acquire(round.queued[0]!);
    expect(released.map((r) => r.jobId)).toEqual([key.jobId]);
    expect(round.report.acquired).toBe(1);
  });
});
