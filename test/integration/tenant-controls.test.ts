/**
 * Tenant controls in dispatch (issue #15, docs/tenant-controls.md): a paused tenant's jobs are
 * held in the hold lane (overdue ones too) while other tenants' go on; held jobs can be
 * cancelled; the hold survives a crash of every dispatcher; resume delivers each held job once,
 * never early; rows acquired when the pause lands are given back unsent; a delivery rate limit
 * holds across dispatchers without losing anything. Real dispatch loops on dynalite and fauxqs;
 * the controls come from an in-memory reader (the admin API's store writes the same item).
 */
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsService } from '../../core/jobs/jobsService.js';
import { dispatchRound } from '../../core/dispatch/round.js';
import type { JobStore, QueueSender } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, runAllGroups, submitJobs, type TestSystem } from '../support/system.js';
import { controlsOf } from '../support/controls.js';

const SETTINGS = { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 2 };

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** The sender, recording when each message was accepted, per tenant queue. */
function recordingSender(inner: QueueSender): { sender: QueueSender; sentAt: Map<string, number[]> } {
  const sentAt = new Map<string, number[]>();
  return {
    sentAt,
    sender: {
      ...inner,
      sendBatch: async (url, messages) => {
        const failed = await inner.sendBatch(url, messages);
        const at = Date.now();
        const list = sentAt.get(url) ?? [];
        for (let i = 0; i < messages.length - failed.length; i++) list.push(at);
        sentAt.set(url, list);
        return failed;
      },
    } as QueueSender,
  };
}

async function heldPointers(sys: TestSystem): Promise<number> {
  let n = 0;
  for (let shard = 0; shard < SETTINGS.shardCount; shard++) {
    const res = await em.dynamo.send(
      new QueryCommand({
        TableName: sys.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: `p#${shard}` } },
        ConsistentRead: true,
      }),
    );
    n += res.Count ?? 0;
  }
  return n;
}

async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.concurrent('pause', () => {
  it('holds every job of a paused tenant, overdue ones too, across a crash; held jobs cancel; resume delivers each once, never early', async () => {
    const sys = await createSystem(em, { tenants: ['paused', 'other'], settings: SETTINGS });
    const controls = controlsOf({ paused: { paused: true } });
    const deps = { ...sys.w.dispatch, controls: controls.cache };
    const jobs = new JobsService({ ...depsOfJobs(sys), controls: controls.cache });
    const ingest = sys.startIngest();
    const held = consume(em.sqs, sys.tenants.paused!.url);
    const other = consume(em.sqs, sys.tenants.other!.url);
    let rounds = runAllGroups(deps, { owner: 'first' });
    try {
      // Well past the lookahead even when the submits are slow (a busy machine): the submitter here
      // reads the table's controls, not the test's, so a job within the lookahead would go straight
      // to the queue instead of being held.
      const due = Date.now() + 8_000;
      const batch = (n: number) => Array.from({ length: n }, (_, i) => ({ payload: { i }, runAt: new Date(due + i * 40).toISOString() }));
      const pausedJobs = await submitJobs(sys, 'paused', batch(20));
      const otherJobs = await submitJobs(sys, 'other', batch(20));
      await other.waitFor((d) => d.length === 20, 15_000);
      await until(async () => (await heldPointers(sys)) === 20, 20_000, 'the paused jobs in the hold lane'); // slow on a busy machine
      await sleep(1_000);
      expect(held.deliveries).toHaveLength(0);

      // Held jobs are SCHEDULED and overdue: cancel answers 200; another tenant's overdue job is past its cut-off.
      const cancelled = pausedJobs.slice(0, 2).map((j) => j.jobId);
      for (const id of cancelled) expect(await jobs.cancel('paused', id)).toEqual({ jobId: id, state: 'CANCELLED' });
      await expect(jobs.cancel('other', otherJobs[0]!.jobId)).rejects.toMatchObject({ status: 409 });

      // Every dispatcher dies; new ones start: the jobs stay held.
      await rounds.stop();
      rounds = runAllGroups(deps, { owner: 'second' });
      await sleep(1_500);
      expect(held.deliveries).toHaveLength(0);

      controls.update('paused', { paused: false });
      const resumedAt = Date.now();
      await held.waitFor((d) => d.length >= 18, 15_000);
      await sleep(500);
      const ids = held.deliveries.map((d) => d.jobId);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.sort()).toEqual(
        pausedJobs
          .map((j) => j.jobId)
          .filter((id) => !cancelled.includes(id))
          .sort(),
      );
      for (const d of [...held.deliveries, ...other.deliveries]) expect(d.receivedAt).toBeGreaterThanOrEqual(Date.parse(d.runAt));
      for (const d of held.deliveries) expect(d.receivedAt).toBeGreaterThanOrEqual(resumedAt);
      expect(new Set(other.deliveries.map((d) => d.jobId)).size).toBe(20);
      // The pointers go once their rows are final (delivered or cancelled).
      await until(async () => (await heldPointers(sys)) === 0, 10_000, 'the hold lane to empty');
    } finally {
      await rounds.stop();
      await ingest.stop();
      await held.stop();
      await other.stop();
    }
  }, 60_000);

  it('rows already acquired when the pause lands are given back unsent, and delivered after resume', async () => {
    const sys = await createSystem(em, { tenants: ['late'], settings: SETTINGS });
    const controls = controlsOf({});
    let givenBack = 0;
    let pausedAt = 0;
    const store = new Proxy(sys.w.dispatch.store, {
      get(target, prop, receiver) {
        if (prop === 'unacquire')
          return async (...args: Parameters<JobStore['unacquire']>) => {
            const ok = await target.unacquire(...args);
            if (ok) givenBack++;
            return ok;
          };
        if (prop === 'acquire')
          return async (...args: Parameters<JobStore['acquire']>) => {
            const row = await target.acquire(...args);
            // The pause lands as the first row is acquired, whenever that is on a busy machine:
            // that row (and any acquired with it) is held by the release timer, the rest are not
            // acquired at all.
            if (row && !pausedAt) {
              pausedAt = Date.now();
              controls.update('late', { paused: true });
              controls.cache.invalidate('late');
            }
            return row;
          };
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const deps = { ...sys.w.dispatch, store, controls: controls.cache };
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.late!.url);
    const rounds = runAllGroups(deps);
    try {
      // Read and acquired about a second before they are due (the read-ahead).
      const due = Date.now() + 4_000;
      const submitted = await submitJobs(
        sys,
        'late',
        Array.from({ length: 10 }, (_, i) => ({ payload: i, runAt: new Date(due + i).toISOString() })),
      );
      while (!pausedAt) await sleep(20);
      await sleep(Math.max(0, due - Date.now()) + 2_000);
      expect(consumer.deliveries).toHaveLength(0);
      expect(givenBack).toBeGreaterThan(0);
      controls.update('late', { paused: false });
      await consumer.waitFor((d) => d.length >= 10, 15_000);
      await sleep(300);
      expect(consumer.deliveries.map((d) => d.jobId).sort()).toEqual(submitted.map((j) => j.jobId).sort());
    } finally {
      await rounds.stop();
      await ingest.stop();
      await consumer.stop();
    }
  }, 40_000);
});

describe.concurrent('delivery rate limit', () => {
  it('never sends more than the limit (plus one per dispatcher) in any second, over two dispatchers, and loses nothing', async () => {
    const sys = await createSystem(em, { tenants: ['limited', 'free'], settings: SETTINGS });
    const controls = controlsOf({ limited: { maxDeliveriesPerSecond: 10 } });
    const rec = recordingSender(sys.w.dispatch.sender);
    const deps = { ...sys.w.dispatch, sender: rec.sender, controls: controls.cache };
    const ingest = sys.startIngest();
    const limited = consume(em.sqs, sys.tenants.limited!.url);
    const free = consume(em.sqs, sys.tenants.free!.url);
    const rounds = runAllGroups(deps);
    try {
      const due = Date.now() + SETTINGS.lookaheadMs + 3_000; // through the table, however slow the submits
      const all = (n: number) => Array.from({ length: n }, (_, i) => ({ payload: i, runAt: new Date(due).toISOString() }));
      const submitted = await submitJobs(sys, 'limited', all(40));
      // The free tenant's jobs due as far after their own submit (a slow submit of the first 40 on
      // a busy machine would put them within the lookahead: sent straight to the queue, unrecorded).
      const freeDue = Date.now() + SETTINGS.lookaheadMs + 3_000;
      await submitJobs(
        sys,
        'free',
        all(40).map((j) => ({ ...j, runAt: new Date(freeDue).toISOString() })),
      );
      await free.waitFor((d) => d.length === 40, 15_000);
      await limited.waitFor((d) => d.length === 40, 20_000);
      const times = rec.sentAt.get(sys.tenants.limited!.url)!.sort((a, b) => a - b);
      expect(times).toHaveLength(40);
      let lo = 0;
      let busiest = 0;
      for (let hi = 0; hi < times.length; hi++) {
        while (times[hi]! - times[lo]! >= 1_000) lo++;
        busiest = Math.max(busiest, hi - lo + 1);
      }
      expect(busiest).toBeLessThanOrEqual(10 + SETTINGS.groupCount);
      // Late, never early; each once.
      expect(times[0]!).toBeGreaterThanOrEqual(due);
      expect(new Set(limited.deliveries.map((d) => d.jobId)).size).toBe(40);
      expect(limited.deliveries.map((d) => d.jobId).sort()).toEqual(submitted.map((j) => j.jobId).sort());
      // The unlimited tenant was not held back.
      const freeTimes = rec.sentAt.get(sys.tenants.free!.url) ?? [];
      expect(freeTimes).toHaveLength(40);
      expect(Math.max(...freeTimes) - freeDue).toBeLessThan(Math.max(...times) - due);
    } finally {
      await rounds.stop();
      await ingest.stop();
      await limited.stop();
      await free.stop();
    }
  }, 40_000);
});

describe.concurrent('priority', () => {
  it("among a tenant's due jobs held back by its delivery limit, higher priority goes first; none early, none lost", async () => {
    // One group: one dispatcher orders every row (with two, how the shards split the high and the
    // low rows between them would decide what leaves first).
    const sys = await createSystem(em, { tenants: ['ranked'], settings: { ...SETTINGS, groupCount: 1 } });
    const controls = controlsOf({ ranked: { maxDeliveriesPerSecond: 8 } });
    const rec = recordingSender(sys.w.dispatch.sender);
    const deps = { ...sys.w.dispatch, sender: rec.sender, controls: controls.cache };
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.ranked!.url);
    try {
      const due = Date.now() + SETTINGS.lookaheadMs + 3_000; // through the table, however slow the submits
      // Low priority first in due order and in submit order: only priority can put the others ahead.
      const jobs = [
        ...Array.from({ length: 16 }, (_, i) => ({ payload: { p: 1, i }, runAt: new Date(due + i).toISOString(), priority: 1 })),
        ...Array.from({ length: 16 }, (_, i) => ({ payload: { p: 9, i }, runAt: new Date(due + 100 + i).toISOString(), priority: 9 })),
      ];
      const submitted = await submitJobs(sys, 'ranked', jobs);
      // All overdue when the dispatchers start (after an outage, say), so that they are due together.
      await sleep(due + 700 - Date.now());
      await ingest.stop();
      const rounds = runAllGroups(deps);
      try {
        await consumer.waitFor((d) => d.length >= 32, 20_000);
      } finally {
        await rounds.stop();
      }
      await sleep(300);
      const order = [...consumer.deliveries].sort((a, b) => a.firstReceiveAt - b.firstReceiveAt).map((d) => (d.payload as { p: number }).p);
      expect(new Set(consumer.deliveries.map((d) => d.jobId))).toEqual(new Set(submitted.map((j) => j.jobId)));
      for (const d of consumer.deliveries) expect(d.firstReceiveAt).toBeGreaterThanOrEqual(Date.parse(d.runAt));
      // The later half of the sends holds far more low-priority jobs than the first half.
      const highFirstHalf = order.slice(0, 16).filter((p) => p === 9).length;
      expect(highFirstHalf).toBeGreaterThanOrEqual(12);
    } finally {
      await ingest.stop();
      await consumer.stop();
    }
  }, 40_000);
});

describe.concurrent('a flood', () => {
  it("past the round cap, the largest tenant's excess goes to the hold lane and comes back: the reads go on, nothing lost or doubled", async () => {
    const sys = await createSystem(em, { tenants: ['flood', 'quiet'], settings: SETTINGS });
    const controls = controlsOf({});
    const deps = { ...sys.w.dispatch, controls: controls.cache };
    const { shardCount } = sys.w.config.settings;
    const now = Date.now();
    const rows = [
      ...Array.from({ length: 300 }, (_, i) => ({ tenant: 'flood', dueMs: now + 1_200 + i })),
      ...Array.from({ length: 10 }, (_, i) => ({ tenant: 'quiet', dueMs: now + 1_500 + i * 10 })),
    ].map(({ tenant, dueMs }) => {
      const { shard, random } = sys.w.codec.placement(tenant, shardCount);
      return { shard, dueMs, tenant, jobId: sys.w.codec.encode({ tenant, shard, dueMs, path: 't' as const, random }), payload: '{}' };
    });
    await Promise.all(rows.map((r) => sys.w.store.putJob(r)));
    const flood = consume(em.sqs, sys.tenants.flood!.url);
    const quiet = consume(em.sqs, sys.tenants.quiet!.url);
    try {
      const report = await dispatchRound(deps, {
        shards: Array.from({ length: shardCount }, (_, i) => i),
        deadlineMs: Date.now() + 20_000,
        maxHeldRows: 40,
        pageRows: 10,
        acquireConcurrency: 4,
      });
      await flood.waitFor((d) => d.length >= 300, 10_000);
      await quiet.waitFor((d) => d.length >= 10, 10_000);
      await sleep(300);
      expect(report.spilled).toBeGreaterThan(0);
      expect(report.unheld).toBeGreaterThanOrEqual(report.spilled);
      expect(report.held).toBe(0); // nobody was paused
      for (const c of [flood, quiet]) expect(new Set(c.deliveries.map((d) => d.jobId)).size).toBe(c.deliveries.length);
      expect(flood.deliveries).toHaveLength(300);
      for (const d of quiet.deliveries) expect(d.receivedAt).toBeGreaterThanOrEqual(Date.parse(d.runAt));
      await until(async () => (await heldPointers(sys)) === 0, 10_000, 'the hold lane to empty');
    } finally {
      await flood.stop();
      await quiet.stop();
    }
  }, 40_000);
});

function depsOfJobs(sys: TestSystem) {
  return {
    store: sys.w.store,
    codec: sys.w.codec,
    tenants: sys.w.dispatch.tenants,
    clock: sys.w.dispatch.clock,
    settings: sys.w.config.settings,
  };
}
