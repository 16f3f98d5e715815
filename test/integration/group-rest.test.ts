import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchLoop, dispatchStep } from '../../core/dispatch/loop.js';
import { ingestJob } from '../../core/ingest/ingest.js';
import { REST_NOTICE_MS, RowWakes, shardsOfGroup } from '../../core/model/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sleepMs } from '../support/faults.js';
import { consume, createSystem, rowInGroup, runSystem, submitJobs, waitForEmptyQueue, type TestSystem } from '../support/system.js';

/**
 * Shard groups at rest (docs/design-dispatch.md, "Rest"): a group with nothing due soon is not
 * read (its steps renew the lease and nothing more) until its first row is due, or a writer of a
 * row due sooner wakes it. Never early, never late for it; and a writer that trusted an older
 * read of the group while its rest was being decided wrote its row before the reads that decide.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { shardCount: 8, groupCount: 2, lookaheadMs: 3_000, leaseMs: 6_000 };

async function untilResting(sys: TestSystem, timeoutMs: number): Promise<Map<number, number>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const rests = await Promise.all([0, 1].map((g) => sys.w.store.readRest(g)));
    if (rests.every((r) => r?.wakeAtMs !== undefined)) return new Map(rests.map((r, g) => [g, r!.wakeAtMs!]));
    if (Date.now() > end) throw new Error(`groups not at rest after ${timeoutMs} ms: ${JSON.stringify(rests)}`);
    await sleepMs(200);
  }
}

describe.concurrent('shard groups at rest', () => {
  it('an idle system reads no shard; a row stored before the rest wakes its group on time, and jobs submitted into the rest are delivered on time, none early', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const running = runSystem(sys);
    try {
      // Stored before the groups rest, due after they do: its group rests until it.
      const [later] = await submitJobs(sys, 'demo', [{ payload: 'later', runAt: new Date(Date.now() + 25_000).toISOString() }]);
      const laterDue = Date.parse(later!.runAt);
      const { shard } = sys.w.codec.parse(later!.jobId);
      const laterGroup = shard % settings.groupCount;
      // Ingested first, its message done with (a busy machine's ingest takes seconds: a CI run saw
      // its reads land in the rest's window below, 2026-11-28).
      await waitForEmptyQueue(em.sqs, sys.inboundUrl, 15_000);
      expect(await sys.w.store.getRow({ shard, dueMs: laterDue, jobId: later!.jobId })).toBeDefined();
      const wakeAt = await untilResting(sys, 20_000);
      expect(wakeAt.get(laterGroup)).toBe(laterDue);
      expect(wakeAt.get(1 - laterGroup)).toBeGreaterThan(laterDue); // nothing stored: no row to wake for

      // At rest: dispatch renews its leases and reads nothing.
      const before = sys.w.store.stats.itemsRead;
      await sleepMs(2_500);
      expect(sys.w.store.stats.itemsRead).toBe(before);

      // Jobs submitted into the rest, due 4 to 8 s out: ingest wakes the groups for them.
      const soon = await submitJobs(
        sys,
        'demo',
        Array.from({ length: 10 }, (_, i) => ({ payload: i, runAt: new Date(Date.now() + 4_000 + i * 400).toISOString() })),
      );
      await consumer.waitFor((d) => soon.every((j) => d.some((x) => x.jobId === j.jobId)), 20_000);
      await consumer.waitFor((d) => d.some((x) => x.jobId === later!.jobId), 30_000);
      for (const j of [...soon, later!]) {
        const d = consumer.deliveries.find((x) => x.jobId === j.jobId)!;
        expect(d.firstReceiveAt, `${j.jobId} early`).toBeGreaterThanOrEqual(Date.parse(j.runAt));
        expect(d.firstReceiveAt - Date.parse(j.runAt), `${j.jobId} late`).toBeLessThan(2_000);
      }
      expect(consumer.deliveries.length).toBe(11);
    } finally {
      await running.stop();
      await consumer.stop();
    }
  });

  it('a writer that trusted a read from before the intent to rest wrote its row before the reads that decide: the rest ends at it', async () => {
    const one = { shardCount: 4, groupCount: 1, lookaheadMs: 3_000, leaseMs: 6_000 };
    const sys = await createSystem(em, { settings: one });
    const t0 = Date.now();
    const step = () => dispatchStep(sys.w.dispatch, { groups: [0], owner: 'exec-a', ownerStartMs: t0, untilMs: t0 + 120_000 });
    // The writer reads the group awake, and trusts that for the notice. (Its monotonic clock
    // stands still here: on a loaded machine the steps below may take longer than the notice, and
    // the writer would look again; the case is a writer whose trust has not run out.)
    let reads = 0;
    const writer = new RowWakes(
      {
        readRest: (g) => (reads++, sys.w.store.readRest(g)),
        wakeBy: (g, d) => sys.w.store.wakeBy(g, d),
        rouse: (g) => sys.w.store.rouse(g),
      },
      one,
      () => 0,
    );
    await writer.written(0, t0 + 3_600_000);
    // An idle step: the intent to rest is written.
    expect((await step()).idle).toBe(true);
    const intendedBy = Date.now();
    const intent = await sys.w.store.readRest(0);
    expect(intent).toMatchObject({ epoch: expect.any(String) });
    expect(intent!.wakeAtMs).toBeUndefined();
    // Within the notice, a row due in 20 s: the writer does not look again (it read the group awake).
    const dueMs = Date.now() + 20_000;
    const shard = shardsOfGroup(0, one)[2]!;
    const jobId = sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random: 'rest000000000000' });
    expect(await ingestJob({ ...sys.w.ingest, wakes: writer }, { jobId, tenant: 'demo', shard, dueMs, payload: '"r"' })).toBe('created');
    expect(reads).toBe(1);
    expect((await sys.w.store.readRest(0))!.wakeAtMs).toBeUndefined();
    // Before the notice has passed, a step does not decide. (Checked when this step starts
    // within the notice of the intent: on a loaded machine it may not, and then it decides.)
    const early = Date.now() - intendedBy < REST_NOTICE_MS - 100;
    expect((await step()).idle).toBe(true);
    if (early) expect((await sys.w.store.readRest(0))!.wakeAtMs).toBeUndefined();
    // Once it has, the deciding step's reads find the row: the group rests until it.
    await sleepMs(REST_NOTICE_MS + 50);
    expect((await step()).idle).toBe(true);
    expect(await sys.w.store.readRest(0)).toMatchObject({ epoch: intent!.epoch, wakeAtMs: dueMs });
    // At rest, a step reads nothing.
    const read = sys.w.store.stats.itemsRead;
    const asleep = await step();
    expect(asleep).toMatchObject({ idle: true, queries: 0, itemsRead: 0 });
    expect(sys.w.store.stats.itemsRead).toBe(read);
    // A row due sooner, by a writer that looks: the wake-up comes forward to it.
    const sooner = Date.now() + 10_000;
    const soonerId = sys.w.codec.encode({ tenant: 'demo', shard, dueMs: sooner, path: 't', random: 'rest000000000001' });
    await ingestJob(sys.w.ingest, { jobId: soonerId, tenant: 'demo', shard, dueMs: sooner, payload: '"s"' });
    expect((await sys.w.store.readRest(0))!.wakeAtMs).toBe(sooner);
    // A step within the lookahead of it wakes the group: its round reads, and (finding work) ends the rest.
    await sleepMs(sooner - one.lookaheadMs - Date.now() + 50);
    const woken = await step();
    expect(woken.queries).toBeGreaterThan(0);
  });

  it('a pending intent a writer woke is not slept through: a row written between the round and the intent is still found', async () => {
    const one = { shardCount: 4, groupCount: 1, lookaheadMs: 3_000, leaseMs: 6_000 };
    const sys = await createSystem(em, { settings: one });
    const t0 = Date.now();
    const owner = 'exec-b';
    const step = () => dispatchStep(sys.w.dispatch, { groups: [0], owner, ownerStartMs: t0, untilMs: t0 + 120_000 });
    expect((await step()).idle).toBe(true); // the lease taken, an intent written
    await sys.w.store.wake(0, owner); // as if that step's round had just read: awake again
    // A writer that read the group awake writes row A (due in 20 s) and does not look again...
    const trusting = new RowWakes(sys.w.store, one);
    await trusting.written(0, t0 + 3_600_000);
    const shard = shardsOfGroup(0, one)[1]!;
    const row = (dueMs: number, random: string) => ({
      jobId: sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random }),
      tenant: 'demo',
      shard,
      dueMs,
      payload: '"x"',
    });
    const a = row(Date.now() + 20_000, 'restA00000000000');
    await ingestJob({ ...sys.w.ingest, wakes: trusting }, a);
    // ...then the step that read before it writes its intent, and a writer of row B (due in 60 s) wakes it for B.
    expect(await sys.w.store.intendRest(0, owner, 'e-late', Date.now())).toBe(true);
    const b = row(Date.now() + 60_000, 'restB00000000000');
    await ingestJob({ ...sys.w.ingest, wakes: new RowWakes(sys.w.store, one) }, b);
    expect(await sys.w.store.readRest(0)).toMatchObject({ epoch: 'e-late', wakeAtMs: b.dueMs });
    // Not a decided rest: the next step reads (and, idle, intends anew); the rest it then decides ends at A.
    expect((await step()).queries).toBeGreaterThan(0);
    await sleepMs(REST_NOTICE_MS + 50);
    await step();
    expect(await sys.w.store.readRest(0)).toMatchObject({ wakeAtMs: a.dueMs, restingSinceMs: expect.any(Number) });
  });

  it('a step whose round runs for one group reads the resting others too: a row due in a group at rest goes out on time while its neighbour is busy', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const t0 = Date.now();
    const stop = new AbortController();
    // One dispatcher over both groups (as the tick packs them at low load).
    const loop = dispatchLoop(sys.w.dispatch, {
      groups: [0, 1],
      owner: 'packed',
      ownerStartMs: t0,
      untilMs: t0 + 60_000,
      signal: stop.signal,
    });
    try {
      await untilResting(sys, 20_000);
      const row = (group: number, dueMs: number, random: string) => rowInGroup(sys, settings, group, dueMs, random);
      const now = Date.now();
      // Group 0 busy from 4 s on (a row a second for 10 s); group 1 one row due at 9 s, its rest
      // (decided) brought forward to it: asleep when group 0's round begins, due while it runs.
      const busy = Array.from({ length: 10 }, (_, i) => row(0, now + 4_000 + i * 1_000, `busyRow${String(i).padStart(9, '0')}`));
      const quiet = row(1, now + 9_000, 'quietRow00000000');
      for (const r of [...busy, quiet]) await ingestJob({ ...sys.w.ingest, wakes: new RowWakes(sys.w.store, settings) }, r);
      await consumer.waitFor((d) => d.some((x) => x.jobId === quiet.jobId), 20_000);
      const d = consumer.deliveries.find((x) => x.jobId === quiet.jobId);
      expect(d, "the resting group's row").toBeDefined();
      expect(d!.firstReceiveAt).toBeGreaterThanOrEqual(quiet.dueMs);
      expect(d!.firstReceiveAt - quiet.dueMs).toBeLessThan(2_000);
    } finally {
      stop.abort();
      await loop;
      await consumer.stop();
    }
  });
});
