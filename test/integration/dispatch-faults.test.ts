import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOfGroup } from '../../core/model/config.js';
import { dispatchRound, type DispatchDeps } from '../../core/dispatch/round.js';
import { ThrottledError } from '../../core/model/errors.js';
import type { OutgoingMessage, QueueSender } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, submitJobs, waitForEmptyQueue, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 };

/** `n` jobs through the table, ingested, due `inMs` from now over `spreadMs`. */
async function dueJobs(sys: TestSystem, n: number, inMs = 1_300, spreadMs = 300) {
  const ingest = sys.startIngest();
  const start = Date.now();
  const jobs = await submitJobs(
    sys,
    'demo',
    Array.from({ length: n }, (_, i) => ({ payload: { i }, runAt: new Date(start + inMs + Math.floor((i * spreadMs) / n)).toISOString() })),
  );
  await waitForEmptyQueue(em.sqs, sys.inboundUrl);
  await ingest.stop();
  await sleepMs(Date.parse(jobs[0]!.runAt) - settings.lookaheadMs + 20 - Date.now());
  return jobs;
}

const roundOf = (deps: DispatchDeps, extra: Partial<Parameters<typeof dispatchRound>[1]> = {}) =>
  dispatchRound(deps, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 6_000, ...extra });

describe.concurrent('dispatch round under faults', () => {
  it('retries only the batch entries that failed', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const jobs = await dueJobs(sys, 30);
    const calls: string[][] = [];
    const failedOnce = new Set<string>();
    const sender = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) => {
        calls.push(messages.map((m: OutgoingMessage) => JSON.parse(m.body).jobId));
        // Refuse every third entry the first time it is offered (as SQS's per-entry failures do).
        const refuse = messages.filter((m, i) => i % 3 === 0 && !failedOnce.has(JSON.parse(m.body).jobId));
        refuse.forEach((m) => failedOnce.add(JSON.parse(m.body).jobId));
        const ok = messages.filter((m) => !refuse.includes(m));
        const failures = await orig(url, ok);
        return [...failures, ...refuse.map((m) => ({ id: m.id, retryable: true, message: 'InternalError' }))];
      },
    });
    const report = await roundOf({ ...sys.w.dispatch, sender });
    await consumer.waitFor((d) => d.length >= jobs.length, 5_000);
    await sleepMs(300);
    await consumer.stop();

    expect(failedOnce.size).toBeGreaterThan(0);
    expect(report.sendRetries).toBe(failedOnce.size);
    expect(report.sent).toBe(jobs.length);
    // Each job was offered once, or twice if its entry failed: successful entries were not resent.
    const offered = new Map<string, number>();
    for (const id of calls.flat()) offered.set(id, (offered.get(id) ?? 0) + 1);
    for (const j of jobs) expect(offered.get(j.jobId)).toBe(failedOnce.has(j.jobId) ? 2 : 1);
    expect(consumer.deliveries.map((d) => d.jobId).sort()).toEqual(jobs.map((j) => j.jobId).sort());
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
  });

  it('backs off when throttled and still delivers everything', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const jobs = await dueJobs(sys, 20);
    let queries = 0;
    let acquires = 0;
    const store = inProcess<DispatchDeps['store']>(sys.w.dispatch.store, new SimProcess(), {
      readDue: async (orig, ...args) => {
        if (queries++ < 2) throw new ThrottledError('ProvisionedThroughputExceededException (injected)');
        return orig(...args);
      },
      acquire: async (orig, ...args) => {
        if (acquires++ === 3) throw new ThrottledError('ThrottlingException (injected)');
        return orig(...args);
      },
    });
    const report = await roundOf({ ...sys.w.dispatch, store });
    await consumer.waitFor((d) => d.length >= jobs.length, 5_000);
    await consumer.stop();
    // One backoff for the first query step (two of its shard queries throttled), one for the acquire.
    expect(report.throttled).toBe(2);
    expect(report.sent).toBe(jobs.length);
    expect(new Set(consumer.deliveries.map((d) => d.jobId)).size).toBe(jobs.length);
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
  });

  it('never holds more rows than its cap', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const jobs = await dueJobs(sys, 40, 1_300, 600);
    let held = 0;
    let maxHeld = 0;
    const store = inProcess<DispatchDeps['store']>(sys.w.dispatch.store, new SimProcess(), {
      acquire: async (orig, ...args) => {
        const row = await orig(...args);
        if (row) maxHeld = Math.max(maxHeld, ++held);
        return row;
      },
    });
    const sender = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) => {
        const failures = await orig(url, messages);
        held -= messages.length - failures.length;
        return failures;
      },
    });
    const report = await roundOf({ ...sys.w.dispatch, store, sender }, { maxHeldRows: 5, acquireConcurrency: 2 });
    await consumer.waitFor((d) => d.length >= jobs.length, 5_000);
    await consumer.stop();
    expect(report.sent).toBe(jobs.length);
    expect(maxHeld).toBeLessThanOrEqual(5 + 2); // the cap, plus acquires already in flight when it was reached
    expect(maxHeld).toBeGreaterThan(1);
    expect(new Set(consumer.deliveries.map((d) => d.jobId)).size).toBe(jobs.length);
  });
});
