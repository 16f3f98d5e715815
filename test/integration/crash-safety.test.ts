import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchDeps } from '../../core/dispatch/round.js';
import type { JobStore, QueueSender } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, runAllGroups, submitJobs, waitForEmptyQueue } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 8, groupCount: 2 };

/**
 * Runs one crash scenario: jobs go through the table, a dispatcher process dies at the injected
 * point, a fresh dispatcher takes over once leases expire, and every job must arrive, none early.
 */
async function crashScenario(
  hooks: (proc: SimProcess) => { store?: Parameters<typeof inProcess<JobStore>>[2]; sender?: Parameters<typeof inProcess<QueueSender>>[2] },
) {
  const sys = await createSystem(em, { settings });
  const ingest = sys.startIngest();
  const consumer = consume(em.sqs, sys.tenants.demo!.url);
  const jobs = Array.from({ length: 60 }, (_, i) => ({ payload: { i }, runAt: new Date(Date.now() + 2_000 + i * 20).toISOString() }));
  const replies = await submitJobs(sys, 'demo', jobs);
  expect(replies.every((r) => r.state === 'SCHEDULED')).toBe(true);
  await waitForEmptyQueue(em.sqs, sys.inboundUrl);

  const proc = new SimProcess();
  const h = hooks(proc);
  const crashed: DispatchDeps = {
    ...sys.w.dispatch,
    store: inProcess(sys.w.dispatch.store, proc, h.store),
    sender: inProcess(sys.w.dispatch.sender, proc, h.sender),
  };
  void runAllGroups(crashed, { owner: 'crashing', signal: proc.signal });
  const until = Date.now() + 10_000;
  while (!proc.dead && Date.now() < until) await sleepMs(20);
  expect(proc.dead).toBe(true);
  const killedAt = Date.now();

  // A new instance, as Lambda starts one: it recovers the rows once their lease expires.
  const fresh = await sys.another();
  const recovery = runAllGroups({ ...fresh.dispatch }, { owner: 'fresh' });
  await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= replies.length, 20_000);
  // Every job has arrived once; the rows the dead process still held come back only when their
  // lease expires, possibly after that. Wait out the lease plus a recovery round, so a duplicate
  // (or the absence of one) is counted, not raced.
  await sleepMs(Math.max(500, killedAt + settings.leaseMs + 2_500 - Date.now()));
  await recovery.stop();
  await consumer.stop();
  await ingest.stop();

  const received = new Set(consumer.deliveries.map((d) => d.jobId));
  expect(replies.filter((r) => !received.has(r.jobId)).map((r) => r.jobId)).toEqual([]);
  expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
  const duplicates = consumer.deliveries.length - received.size;
  return { duplicates, delivered: received.size };
}

describe.concurrent('crash safety', () => {
  it('loses nothing when the dispatcher dies between acquire and send', async () => {
    const { duplicates, delivered } = await crashScenario((proc) => ({
      sender: {
        sendBatch: () => {
          proc.kill(); // dies as the first send starts: rows are ACQUIRED, nothing sent
          return new Promise(() => {});
        },
      },
    }));
    console.log(`acquire→send crash: ${delivered} delivered, ${duplicates} duplicates`);
    expect(duplicates).toBe(0); // the dead process sent nothing, so nothing can be doubled
  });

  it('loses nothing when the dispatcher dies between send and its delivered marker, and reports the duplicates', async () => {
    const { duplicates, delivered } = await crashScenario((proc) => ({
      store: {
        markDelivered: () => {
          proc.kill(); // the send succeeded; the rows stay ACQUIRED and are sent again later
          return new Promise(() => {});
        },
      },
    }));
    console.log(`send→marker crash: ${delivered} delivered, ${duplicates} duplicates (at least once)`);
    expect(duplicates).toBeGreaterThan(0);
  });
});
