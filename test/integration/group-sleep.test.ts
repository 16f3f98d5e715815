import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchLoop, type DispatchDeps } from '../../core/dispatch/index.js';
import { ingestJob } from '../../core/ingest/ingest.js';
import { type DispatchStarter, RowWakes, WAKE_WINDOW_MS } from '../../core/model/index.js';
import { tickHandler, type TickPlan } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, rowInGroup, type TestSystem } from '../support/system.js';

/**
 * Sleep (docs/design-dispatch.md, "Sleep"): groups at rest past their execution's end give their
 * leases up and their dispatcher ends; the tick plans no dispatcher for them until their wake-up
 * falls within an execution's run. A writer of a row due too soon for the tick's next execution
 * starts one at once (one start for a burst); a start that fails leaves the group awake for the
 * tick's next execution: the minute rule is the safety net. Never early, none lost.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { shardCount: 4, groupCount: 2, lookaheadMs: 2_000, leaseMs: 4_000 };

/** One tick execution as the state machine runs it: the plan, then a dispatcher per item until the run ends. */
function ticker(sys: TestSystem, deps: DispatchDeps, runMs: number) {
  const plan = tickHandler({ store: sys.w.store, settings: sys.w.config.settings });
  const running: Promise<unknown>[] = [];
  let n = 0;
  const execute = async (startMs = Date.now()): Promise<{ plan: TickPlan; done: Promise<void> }> => {
    const owner = `exec-${startMs}-${n++}`;
    const p = await plan({ executionName: owner, executionStartTime: new Date(startMs).toISOString(), runMs });
    const done = Promise.all(
      p.items.map((item) => dispatchLoop(deps, { groups: item.groups, owner, ownerStartMs: startMs, untilMs: item.untilMs })),
    ).then(() => undefined);
    running.push(done);
    return { plan: p, done };
  };
  return { execute, settled: () => Promise.all(running) };
}

const row = (sys: TestSystem, group: number, dueMs: number, random: string) => rowInGroup(sys, settings, group, dueMs, random);

describe.concurrent('shard groups asleep', () => {
  it('an idle dispatcher lets its groups sleep and ends; the tick plans none until a wake-up is within its run; a row due soon starts one at once, once, on time', async () => {
    const sys = await createSystem(em, { settings });
    const deps: DispatchDeps = { ...sys.w.dispatch, groupsSleep: true };
    const tick = ticker(sys, deps, 20_000);
    const starts: number[] = [];
    const starter: DispatchStarter = {
      start: async (cell) => {
        starts.push(cell);
        void tick.execute();
      },
    };
    const writer = () => ({ ...sys.w.ingest, wakes: new RowWakes(sys.w.store, settings, undefined, { starter, now: () => Date.now() }) });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    try {
      // Group 0 holds a row due in 10 minutes; group 1 nothing.
      const far = row(sys, 0, Date.now() + 600_000, 'sleepFar00000000');
      await ingestJob(writer(), far);
      const first = await tick.execute();
      expect(first.plan.items.map((i) => i.groups)).toEqual([[0, 1]]);
      const t0 = Date.now();
      await first.done;
      // Idle: intent, then (a notice later) the rest, then sleep, long before the run's end.
      expect(Date.now() - t0).toBeLessThan(12_000);
      const rests = await Promise.all([0, 1].map((g) => sys.w.store.readRest(g)));
      expect(rests[0]).toMatchObject({ wakeAtMs: far.dueMs, asleepSinceMs: expect.any(Number) });
      expect(rests[1]?.asleepSinceMs).toBeDefined();
      // Asleep: the next execution plans no dispatcher, and reads no shard.
      const reads = sys.w.store.stats.itemsRead;
      const idle = await tick.execute();
      expect(idle.plan.items).toEqual([]);
      expect(idle.plan.reason).toBe('asleep');
      expect(sys.w.store.stats.itemsRead).toBe(reads);
      // An execution whose run reaches the far row's wake-up plans its group, and only it.
      const late = await tickHandler({ store: sys.w.store, settings: sys.w.config.settings })({
        executionName: 'planning-only',
        executionStartTime: new Date(far.dueMs - 60_000).toISOString(),
        runMs: 90_000,
      });
      expect(late.items.map((i) => i.groups)).toEqual([[0]]);

      // A row due after the window into a sleeping group moves its wake-up and starts nothing...
      const later = row(sys, 1, Date.now() + WAKE_WINDOW_MS + settings.lookaheadMs + 60_000, 'sleepLater000000');
      await ingestJob(writer(), later);
      expect(starts).toEqual([]);
      expect(await sys.w.store.readRest(1)).toMatchObject({ wakeAtMs: later.dueMs, asleepSinceMs: expect.any(Number) });
      // ...rows due in 4 s, written at once by three writers, start one execution, which sends them on time.
      const soon = [0, 1, 2].map((i) => row(sys, 1, Date.now() + 4_000 + i * 100, `sleepSoon${i}000000`));
      await Promise.all(soon.map((r) => ingestJob(writer(), r)));
      expect(starts).toEqual([0]);
      await consumer.waitFor((d) => d.length >= 3, 15_000);
      for (const r of soon) {
        const d = consumer.deliveries.find((x) => x.jobId === r.jobId);
        expect(d, r.jobId).toBeDefined();
        expect(d!.firstReceiveAt, `${r.jobId} early`).toBeGreaterThanOrEqual(r.dueMs);
        expect(d!.firstReceiveAt - r.dueMs, `${r.jobId} late`).toBeLessThan(2_000);
      }
      expect(consumer.deliveries.map((d) => d.jobId).sort()).toEqual(soon.map((r) => r.jobId).sort());
    } finally {
      await tick.settled();
      await consumer.stop();
    }
  });

  it('a lost start (StartExecution failed) leaves the group awake: the tick’s next execution plans it and the row goes out on time', async () => {
    const sys = await createSystem(em, { settings });
    const deps: DispatchDeps = { ...sys.w.dispatch, groupsSleep: true };
    const tick = ticker(sys, deps, 20_000);
    const logged: string[] = [];
    const failing: DispatchStarter = {
      start: async () => {
        throw new Error('ThrottlingException: Rate exceeded');
      },
    };
    const wakes = new RowWakes(sys.w.store, settings, undefined, {
      starter: failing,
      now: () => Date.now(),
      log: (message) => logged.push(message),
    });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    try {
      await (
        await tick.execute()
      ).done;
      expect((await sys.w.store.readRest(0))?.asleepSinceMs).toBeDefined();
      const r = row(sys, 0, Date.now() + 6_000, 'sleepLost0000000');
      await ingestJob({ ...sys.w.ingest, wakes }, r); // the start fails: logged, not thrown
      expect(logged).toEqual([expect.stringContaining('the next tick plans one')]);
      expect((await sys.w.store.readRest(0))?.asleepSinceMs).toBeUndefined();
      // The minute rule's next execution (here: now) plans the group; the row goes out at its time.
      const next = await tick.execute();
      expect(next.plan.items.flatMap((i) => i.groups)).toContain(0);
      await consumer.waitFor((d) => d.length >= 1, 15_000);
      const d = consumer.deliveries.find((x) => x.jobId === r.jobId);
      expect(d).toBeDefined();
      expect(d!.firstReceiveAt).toBeGreaterThanOrEqual(r.dueMs);
      expect(d!.firstReceiveAt - r.dueMs).toBeLessThan(2_000);
    } finally {
      await tick.settled();
      await consumer.stop();
    }
  });

  it('without groupsSleep, an idle dispatcher rests its groups but runs to its execution’s end (writers that cannot start one)', async () => {
    const sys = await createSystem(em, { settings });
    const t0 = Date.now();
    await dispatchLoop(sys.w.dispatch, { groups: [0, 1], owner: 'awake', ownerStartMs: t0, untilMs: t0 + 6_000 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4_500);
    const rests = await Promise.all([0, 1].map((g) => sys.w.store.readRest(g)));
    for (const r of rests) expect(r?.asleepSinceMs).toBeUndefined();
  });
});
