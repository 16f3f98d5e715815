/**
 * Cells (docs/capacity.md, "Cells") against dynalite and fauxqs, with the tick state machine as
 * deployed (local/tick.ts: the CDK definition in aws-local-stepfunctions, one per cell, its cell
 * substituted) bound to the real tick and dispatch handlers:
 *
 * - each cell's tick plans and dispatches only its own groups;
 * - a live raise of the cells (1 → 2), the shards (8 → 16) and the groups (4 → 8) while jobs come
 *   due: the old wiring (ingest, submit, tick) runs, jobs are written, then the new wiring starts
 *   beside it (overlapping as a deploy does) and the old one stops; every job is delivered once,
 *   none early, none lost;
 * - a hot cell (thousands of overdue rows in one cell) drains without delaying the other cell's
 *   jobs.
 */
import { BatchWriteItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../adapters/dynamoJobStore.js';
import { groupsOfCell, resolveSettings, shardsOfGroup, type SchedulerSettings } from '../../core/model/config.js';
import { forEachLimit } from '../../core/util/backoff.js';
import { dispatchHandler, ingestHandler, tickHandler, type TickInput, type TickPlan } from '../../lambdas/runtime/handlers.js';
import { wire, type Wiring } from '../../lambdas/runtime/wiring.js';
import { startLocalTick } from '../../local/tick.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, percentile, submitJobs, type Delivery, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const BASE = { lookaheadMs: 2_000, leaseMs: 4_000 };
const RUN_MS = 6_000;
const EVERY_MS = 4_000;

/**
 * The tick of one cell as deployed: an execution now and every EVERY_MS, each running RUN_MS.
 * `stop()` ends the executions, but a handler call already running goes on to its end (a Lambda
 * invocation is not cut short by its execution's end): `settled()` waits for those.
 */
function startCell(w: Wiring, cell: number, plans: { cell: number; plan: TickPlan }[] = []) {
  const plan = tickHandler({ store: w.store, settings: w.config.settings, clock: w.dispatch.clock });
  const dispatch = dispatchHandler(w);
  const errors: unknown[] = [];
  const running = new Set<Promise<unknown>>();
  const track = <T>(call: Promise<T>): Promise<T> => {
    running.add(call);
    void call.then(
      () => running.delete(call),
      () => running.delete(call),
    );
    return call;
  };
  const tick = startLocalTick({
    cell,
    runMs: RUN_MS,
    everyMs: EVERY_MS,
    tick: (input: TickInput) =>
      track(
        plan(input).then((p) => {
          plans.push({ cell, plan: p });
          return p;
        }),
      ),
    dispatch: (input, context) => track(dispatch(input, context)),
    onError: (err) => errors.push(err),
  });
  return {
    stop: () => tick.stop(),
    /** Resolves once no plan or dispatch call of this cell's executions runs (call after `stop`). */
    async settled(): Promise<void> {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    errors,
  };
}

/** Another wiring over the same table and queues with other settings (a deploy's new functions). */
async function rewire(sys: TestSystem, settings: Partial<SchedulerSettings>): Promise<Wiring> {
  return wire({ ...sys.w.config, settings: resolveSettings(settings) }, { dynamo: em.dynamo, sqs: em.sqs, idKey: sys.idKey });
}

function startIngest(sys: TestSystem, w: Wiring) {
  const handle = ingestHandler(w);
  return startSqsEventSource({ sqs: em.sqs, queueUrl: sys.inboundUrl, handler: (e) => handle(e), waitTimeSeconds: 1 });
}

/** Every job delivered exactly once, none before its runAt. */
function checkDeliveries(deliveries: readonly Delivery[], expected: Map<string, number>): number[] {
  const perJob = new Map<string, number>();
  for (const d of deliveries) perJob.set(d.jobId, (perJob.get(d.jobId) ?? 0) + 1);
  expect(
    [...expected.keys()].filter((id) => !perJob.has(id)),
    'lost',
  ).toEqual([]);
  expect(
    [...perJob].filter(([, n]) => n > 1),
    'delivered twice',
  ).toEqual([]);
  expect(deliveries.filter((d) => !expected.has(d.jobId))).toEqual([]);
  const early = deliveries.filter((d) => d.receivedAt < Date.parse(d.runAt) || d.firstReceiveAt < Date.parse(d.runAt));
  expect(early, 'early').toEqual([]);
  for (const d of deliveries) expect(Date.parse(d.runAt)).toBe(expected.get(d.jobId));
  return deliveries.map((d) => d.firstReceiveAt - Date.parse(d.runAt));
}

async function submitDue(sys: TestSystem, w: Wiring, n: number, from: number, to: number): Promise<Map<string, number>> {
  // Beyond the lookahead however slow the submits are on a loaded machine (they go through the table).
  // (8 s: 300 jobs' submits took more than 3 s on a busy CI machine, and the last ones went straight to the queue.)
  const first = Math.max(from, Date.now() + BASE.lookaheadMs + 8_000);
  const last = Math.max(to, first + 1_000);
  const jobs = Array.from({ length: n }, (_, i) => ({
    payload: { i },
    runAt: new Date(first + Math.floor(Math.random() * (last - first))).toISOString(),
  }));
  const replies = await submitJobs({ ...sys, w }, 'demo', jobs);
  expect(replies.filter((r) => r.state !== 'SCHEDULED')).toEqual([]);
  return new Map(replies.map((r) => [r.jobId, Date.parse(r.runAt)]));
}

const shardOf = (jobId: string) => Number(jobId.split('.')[2]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('cells', () => {
  it("each cell's tick plans only its own groups", async () => {
    const settings = { ...BASE, shardCount: 16, groupCount: 8, cells: 2 };
    const sys = await createSystem(em, { settings });
    const plan = tickHandler({ store: sys.w.store, settings: { ...sys.w.config.settings, dispatcherRowsPerSecond: 0 } });
    const input = { executionName: 'e', executionStartTime: new Date().toISOString(), runMs: 5_000 };
    const zero = await plan({ ...input, cell: '0' });
    const one = await plan({ ...input, cell: 1 });
    expect(zero.items.map((i) => i.groups)).toEqual([[0], [2], [4], [6]]);
    expect(one.items.map((i) => i.groups)).toEqual([[1], [3], [5], [7]]);
    expect(one.groups.map((g) => g.group)).toEqual([1, 3, 5, 7]);
    // Together they cover every shard once.
    const shards = [...zero.items, ...one.items].flatMap((i) => i.groups.flatMap((g) => shardsOfGroup(g, settings)));
    expect(shards.sort((a, b) => a - b)).toEqual(Array.from({ length: 16 }, (_, s) => s));
    // Packed by the load, within the cell.
    const packed = await tickHandler({ store: sys.w.store, settings: sys.w.config.settings })({ ...input, cell: '1' });
    expect(packed.items.map((i) => i.groups)).toEqual([[1, 3, 5, 7]]);
    // No cell: cell 0 (an execution of a definition before cells). A cell out of range is refused.
    expect((await plan(input)).items.map((i) => i.groups)).toEqual([[0], [2], [4], [6]]);
    await expect(plan({ ...input, cell: 2 })).rejects.toThrow(/cell must be an integer from 0 to 1/);
    await expect(plan({ ...input, cell: 'x' })).rejects.toThrow(/cell must be/);
  });

  it('raising cells 1 → 2 and shards 8 → 16 live: every job once, none early, none lost', async () => {
    const OLD = { ...BASE, shardCount: 8, groupCount: 4, cells: 1 };
    const NEW = { ...BASE, shardCount: 16, groupCount: 8, cells: 2 };
    const sys = await createSystem(em, { settings: OLD });
    const wNew = await rewire(sys, NEW);
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const plans: { cell: number; plan: TickPlan }[] = [];

    // The old deployment: ingest and the one cell's tick.
    const oldIngest = startIngest(sys, sys.w);
    const oldTick = startCell(sys.w, 0, plans);
    const t0 = Date.now();
    // Jobs due before, during and after the change, written by the old submit.
    const expected = await submitDue(sys, sys.w, 300, t0 + 3_000, t0 + 16_000);
    await sleep(5_000);

    // The deploy: the new functions start beside the old ones (ingest and the cells' ticks), and
    // the new submit writes to all 16 shards; a few seconds later the old ones stop (the old
    // executions' dispatch steps run on until they lose their groups to the newer executions).
    const newIngest = startIngest(sys, wNew);
    const cells = [startCell(wNew, 0, plans), startCell(wNew, 1, plans)];
    for (const [id, due] of await submitDue(sys, wNew, 300, Date.now() + 3_000, Date.now() + 12_000)) expected.set(id, due);
    await sleep(3_000);
    oldTick.stop();
    await oldIngest.stop();
    // The old ingest's receives were cut off client-side, but each stays open in the queue service
    // until its 1 s long poll ends and would take the next inbound message with it, hidden for the
    // queue's 30 s visibility timeout (those jobs then arrive ~26 s late and the test waits for them).
    await sleep(1_500);
    for (const [id, due] of await submitDue(sys, wNew, 200, Date.now() + 3_000, Date.now() + 8_000)) expected.set(id, due);

    const lastDue = Math.max(...expected.values());
    await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= expected.size, lastDue - Date.now() + 20_000);
    await sleep(1_000); // a duplicate would arrive now
    for (const c of cells) c.stop();
    await consumer.stop();
    await newIngest.stop();

    const lateness = checkDeliveries(consumer.deliveries, expected);
    // The new shards were used, and each new cell planned its own groups only.
    expect([...expected.keys()].filter((id) => shardOf(id) >= 8).length).toBeGreaterThan(100);
    for (const { cell, plan } of plans.filter((p) => p.plan.items.some((i) => i.groups.some((g) => g >= 4)))) {
      expect(plan.items.flatMap((i) => i.groups).sort()).toEqual(groupsOfCell(cell, resolveSettings(NEW)));
    }
    expect(new Set(plans.map((p) => p.cell))).toEqual(new Set([0, 1]));
    expect(cells.flatMap((c) => c.errors).concat(oldTick.errors)).toEqual([]);
    console.log(
      `live raise: ${expected.size} jobs, lateness p50 ${percentile(lateness, 50)} ms, p99 ${percentile(lateness, 99)} ms, max ${Math.max(...lateness)} ms`,
    );
    // Let the last dispatch steps of the stopped executions reach their end before the next test
    // (or the emulators' stop): each ends idle, or at its run's end at the latest.
    for (const c of [oldTick, ...cells]) await c.settled();
  }, 120_000);

  it("a hot cell drains its backlog without delaying the other cell's jobs", async () => {
    // 2,400 rows overdue by up to a minute in cell 0 (an outage's backlog, or a hot spot). The
    // backlog and the dispatcher's planned rate are both 0.4 of the 6,000 rows and 200 rows/s this
    // test had (a 60-70 s drain on a busy 2-core machine; this one drains in 20-30 s): each tick of
    // the hot cell still finds more rows than its sample reads (600 a shard against about 320, as
    // 1,500 against about 800) and runs a dispatcher per group; the cool cell runs one, as before.
    const HOT = 2_400;
    const settings = { ...BASE, shardCount: 8, groupCount: 4, cells: 2, dispatcherRowsPerSecond: 80 };
    const sys = await createSystem(em, { settings, tenants: ['hot', 'cool'] });
    const s = sys.w.config.settings;
    const hotShards = groupsOfCell(0, s).flatMap((g) => shardsOfGroup(g, s));
    const coolShards = groupsOfCell(1, s).flatMap((g) => shardsOfGroup(g, s));
    const t0 = Date.now();
    // Written as ingest writes them (its item, without its one request per row: batches of 25).
    const chunks = Array.from({ length: HOT / 25 }, (_, c) => c);
    await forEachLimit(chunks, 16, async (c) => {
      let pending = Array.from({ length: 25 }, (_, k) => {
        const i = c * 25 + k;
        const row = { jobId: `hot-${i}`, shard: hotShards[i % hotShards.length]!, dueMs: t0 - 60_000 + Math.floor((i * 60_000) / HOT) };
        const Item = { ...keys.row(row), tenant: { S: 'hot' }, state: { S: 'SCHEDULED' }, leaseUntil: { N: '0' }, payload: { S: '{}' } };
        return { PutRequest: { Item } };
      });
      while (pending.length > 0) {
        const res = await em.dynamo.send(new BatchWriteItemCommand({ RequestItems: { [sys.tableName]: pending } }));
        pending = (res.UnprocessedItems?.[sys.tableName] ?? []) as typeof pending;
      }
    });
    // 200 jobs in cell 1, due from 3 s to 9 s from now.
    const start = Date.now();
    const cool = new Map<string, number>();
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => {
        const dueMs = start + 3_000 + i * 30;
        cool.set(`cool-${i}`, dueMs);
        return sys.w.store.putJob({ jobId: `cool-${i}`, tenant: 'cool', shard: coolShards[i % coolShards.length]!, dueMs, payload: '{}' });
      }),
    );
    const hotConsumer = consume(em.sqs, sys.tenants.hot!.url);
    const coolConsumer = consume(em.sqs, sys.tenants.cool!.url);
    const ticks = [startCell(sys.w, 0), startCell(sys.w, 1)];
    // Up to a minute: on a loaded CI machine the cool cell's jobs took over 30 s to arrive once (2026-11-28).
    await coolConsumer.waitFor((d) => d.length >= cool.size, 60_000);
    const coolDoneAt = Date.now();
    const hotAtCoolDone = new Set(hotConsumer.deliveries.map((d) => d.jobId)).size;
    await hotConsumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= HOT, 60_000);
    await sleep(1_000);
    for (const t of ticks) t.stop();
    await hotConsumer.stop();
    await coolConsumer.stop();

    // The cool cell's jobs: once each, never early, on time.
    const perJob = new Map<string, number>();
    for (const d of coolConsumer.deliveries) perJob.set(d.jobId, (perJob.get(d.jobId) ?? 0) + 1);
    expect([...cool.keys()].filter((id) => perJob.get(id) !== 1)).toEqual([]);
    const lateness = coolConsumer.deliveries.map((d) => d.firstReceiveAt - cool.get(d.jobId)!);
    expect(lateness.filter((l) => l < 0)).toEqual([]);
    // The hot cell: all drained, once each (the backlog is overdue: early cannot happen).
    const hotIds = new Set(hotConsumer.deliveries.map((d) => d.jobId));
    expect(hotIds.size).toBe(HOT);
    expect(hotConsumer.deliveries.length).toBe(HOT);
    const drainMs = Math.max(...hotConsumer.deliveries.map((d) => d.firstReceiveAt)) - start;
    console.log(
      `hot cell: ${HOT} overdue rows drained in ${drainMs} ms (${hotAtCoolDone} when the cool cell's last job arrived ${coolDoneAt - start} ms in); cool cell lateness p50 ${percentile(lateness, 50)} ms, p99 ${percentile(lateness, 99)} ms, max ${Math.max(...lateness)} ms; ${coolConsumer.deliveries.filter((d) => cool.get(d.jobId)! < Math.max(...hotConsumer.deliveries.map((h) => h.firstReceiveAt))).length} cool jobs fell due during the drain`,
    );
    // Most cool jobs fell due while the hot cell was still draining, and did not wait behind its
    // backlog (behind it, they would have waited until the drain's end).
    const hotEnd = Math.max(...hotConsumer.deliveries.map((d) => d.firstReceiveAt));
    const duringDrain = coolConsumer.deliveries.filter((d) => cool.get(d.jobId)! < hotEnd);
    expect(duringDrain.length).toBeGreaterThanOrEqual(50);
    // Behind the backlog they would wait for the drain's end: a lateness of at least drainMs - 9 s
    // (drainMs - 3 s for the first), all arriving with the hot cell's last rows. Beside it, those
    // that fell due during the drain arrive while the hot cell still drains. The lateness bound is
    // relative to the drain, not absolute: in-process on a shared 2-core machine the drain takes CPU
    // from the cool cell's dispatcher (on AWS each is its own Lambda), and a CI machine running
    // static checks beside the tests saw a p99 of 7.3 s once (2026-11-28); the lateness targets are
    // the bench's (docs/performance.md), not this test's.
    const beforeHotEnd = duringDrain.filter((d) => d.firstReceiveAt < hotEnd).length;
    expect(beforeHotEnd).toBeGreaterThanOrEqual(0.9 * duringDrain.length);
    const bound = Math.max(3_000, drainMs / 2);
    const duringLateness = duringDrain.map((d) => d.firstReceiveAt - cool.get(d.jobId)!);
    expect(percentile(duringLateness, 99)).toBeLessThan(bound);
    expect(percentile(lateness, 99)).toBeLessThan(bound);
    for (const t of ticks) await t.settled();
  }, 120_000);
});
