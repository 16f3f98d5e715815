import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestJob } from '../../core/ingest/ingest.js';
import { isLateRow } from '../../core/model/lanes.js';
import { dispatchLoop, type DispatchStepResult } from '../../core/dispatch/loop.js';
import type { JobStore } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, submitJobs } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { shardCount: 8, groupCount: 2, lookaheadMs: 2_000, leaseMs: 6_000 };

describe.concurrent('incremental reads', () => {
  it('reads each row about once at steady load, and the next execution starts where the last one stopped', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const ingest = sys.startIngest();
    const steps: DispatchStepResult[] = [];
    const run = (owner: string, startMs: number, untilMs: number, signal: AbortSignal) =>
      [0, 1].map((g) =>
        dispatchLoop(sys.w.dispatch, { groups: [g], owner, ownerStartMs: startMs, untilMs, signal, onStep: (r) => steps.push(r) }),
      );

    // 30 jobs a second for 12 s, each due 4 to 6 s after its submit (through the table even when
    // a busy machine takes 2 s to submit: at 3 to 5 s, 23 of 360 once went straight to the
    // queue and the count of rows sent fell short); a new execution takes over
    // half way, as the tick's executions do every minute (here five times as often: the two
    // overlap for up to 5 s, reading the same new rows, and the new one starts from marks up to
    // 5 s old). (50 a second before: the reads per job do not depend on the rate, as long as a
    // look reads less than a page of 200 rows a shard; each 100 jobs cost ~1 s of CPU here.)
    const abort = new AbortController();
    const t0 = Date.now();
    const loops = run('first', t0, t0 + 120_000, abort.signal);
    const jobs: { jobId: string; runAt: string }[] = [];
    let second: Promise<void>[] = [];
    for (let s = 0; s < 12; s++) {
      jobs.push(
        ...(await submitJobs(
          sys,
          'demo',
          Array.from({ length: 30 }, (_, i) => ({
            payload: { s, i },
            runAt: new Date(Date.now() + 4_000 + Math.floor(Math.random() * 2_000)).toISOString(),
          })),
        )),
      );
      if (s === 6) second = run('second', Date.now(), Date.now() + 120_000, abort.signal);
      await sleepMs(t0 + (s + 1) * 1_000 - Date.now());
    }
    await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= jobs.length, 20_000);
    await sleepMs(500);
    abort.abort();
    await Promise.all([...loops, ...second]);
    await ingest.stop();
    await consumer.stop();

    const received = new Set(consumer.deliveries.map((d) => d.jobId));
    expect(jobs.filter((j) => !received.has(j.jobId))).toEqual([]);
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
    expect(consumer.deliveries.length - received.size).toBe(0);
    // Every row is read once by its due-range read, its marker never again; a few more items
    // for the hand-over (the second execution starts from marks at most 5 s old) and late lanes.
    const itemsRead = steps.reduce((n, s) => n + s.itemsRead, 0);
    const sent = steps.reduce((n, s) => n + s.sent, 0);
    expect(sent).toBe(jobs.length);
    expect(itemsRead / sent).toBeLessThanOrEqual(2);
    expect(steps.some((s) => s.owner === 'second' && s.sent > 0)).toBe(true);
    console.log(
      `incremental reads: ${itemsRead} items read for ${sent} jobs (${(itemsRead / sent).toFixed(2)} per job), ${steps.reduce((n, s) => n + s.lateRows, 0)} through the late lane`,
    );
  }, 60_000);

  it('finds a row written behind every read position through the late lane, never early', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const seenByDueReads = new Set<string>();
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      readDue: async (orig, ...args) => {
        const page = await orig(...args);
        for (const r of page.rows) seenByDueReads.add(r.jobId);
        return page;
      },
    });
    const steps: DispatchStepResult[] = [];
    const abort = new AbortController();
    const t0 = Date.now();
    const loops = [0, 1].map((g) =>
      dispatchLoop(
        { ...sys.w.dispatch, store },
        { groups: [g], owner: 'x', ownerStartMs: t0, untilMs: t0 + 60_000, signal: abort.signal, onStep: (r) => steps.push(r) },
      ),
    );
    // One job through the table: once it is sent, the rounds' marks (kept in the lease items)
    // lie past its due time. It is due 5 s out: a row due within read-ahead + skew allowance
    // (2 s here) of its write is a late row itself, and a busy machine can take seconds to ingest.
    const ingest = sys.startIngest();
    const [first] = await submitJobs(sys, 'demo', [{ payload: 'first', runAt: new Date(t0 + 5_000).toISOString() }]);
    await consumer.waitFor((d) => d.length >= 1, 10_000);
    await ingest.stop();
    await sleepMs(1_500);
    // An ingest as slow as after an outage: a job due just after the first one, already overdue
    // when it lands, behind every read position.
    const dueMs = Date.parse(first!.runAt) + 100;
    const shard = sys.w.codec.parse(first!.jobId).shard;
    const jobId = sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random: 'late000000000000' });
    expect(isLateRow(dueMs, Date.now(), sys.w.config.settings)).toBe(true);
    expect(await ingestJob(sys.w.ingest, { jobId, tenant: 'demo', shard, dueMs, payload: '"late"' })).toBe('created');

    await consumer.waitFor((d) => d.length >= 2, 6_000);
    await sleepMs(1_200); // the round's next look deletes the pointer of the row it finished
    abort.abort();
    await Promise.all(loops);
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([first!.jobId, jobId]);
    expect(consumer.deliveries.every((d) => d.firstReceiveAt >= Date.parse(d.runAt))).toBe(true);
    // Found by the late lane alone (no due-range read returned it), and its pointer is gone.
    expect(seenByDueReads.has(first!.jobId)).toBe(true);
    expect(seenByDueReads.has(jobId)).toBe(false);
    expect(steps.reduce((n, s) => n + s.lateRows, 0)).toBe(1);
    expect(await sys.w.store.readLate(shard, dueMs + 60_000, 10)).toEqual([]);
  }, 30_000);
});
