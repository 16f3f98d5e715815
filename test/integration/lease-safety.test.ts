import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOfGroup } from '../../core/model/config.js';
import { dispatchRound, type DispatchDeps, type RoundReport } from '../../core/dispatch/round.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, runAllGroups, submitJobs, waitForEmptyQueue } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('lease safety', () => {
  it('a round slowed past its lease never sends a row another round re-acquired', async () => {
    const settings = { lookaheadMs: 1_000, leaseMs: 2_000, shardCount: 4, groupCount: 1 };
    const sys = await createSystem(em, { settings });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const replies = await submitJobs(
      sys,
      'demo',
      Array.from({ length: 40 }, (_, i) => ({ payload: { i }, runAt: new Date(Date.now() + 2_500 + i * 10).toISOString() })),
    );
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);

    // Round A: every acquire succeeds in DynamoDB, but its reply reaches A only after the lease
    // has run out and round B has re-acquired the row (as SDK retries under throttling would
    // make it). Waiting for B's acquire, not for a time, keeps the order on a starved machine:
    // a reply that came back before B took the row would let A renew its lease and send, rightly.
    const reacquired = new Map<string, () => void>();
    const reacquiredBy = new Map<string, Promise<void>>();
    const byB = (jobId: string): Promise<void> => {
      let p = reacquiredBy.get(jobId);
      if (!p) {
        p = new Promise<void>((r) => reacquired.set(jobId, r));
        reacquiredBy.set(jobId, p);
      }
      return p;
    };
    let firstAcquire: () => void = () => {};
    const acquiredOnce = new Promise<void>((r) => (firstAcquire = r));
    const slow: DispatchDeps = {
      ...sys.w.dispatch,
      store: inProcess(sys.w.dispatch.store, new SimProcess(), {
        acquire: async (orig, key, now, lease) => {
          const row = await orig(key, now, lease);
          firstAcquire();
          // (bounded, so that a B that never came would fail the checks below, not hang)
          if (row) await Promise.race([byB(key.jobId), sleepMs(30_000)]);
          return row;
        },
      }),
    };
    // Start A once the first job is within the lookahead (an idle round would return at once).
    await sleepMs(Date.parse(replies[0]!.runAt) - settings.lookaheadMs + 100 - Date.now());
    const roundA: Promise<RoundReport> = dispatchRound(slow, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 12_000 });
    await acquiredOnce;
    // Round B, healthy, starts once A holds rows: it re-acquires them when A's leases expire.
    const other = await sys.another();
    const watched: DispatchDeps = {
      ...other.dispatch,
      store: inProcess(other.dispatch.store, new SimProcess(), {
        acquire: async (orig, key, now, lease) => {
          const row = await orig(key, now, lease);
          if (row) {
            void byB(key.jobId);
            reacquired.get(key.jobId)!();
          }
          return row;
        },
      }),
    };
    const roundsB = runAllGroups(watched, { owner: 'b' });

    const a = await roundA;
    await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= replies.length, 15_000);
    await sleepMs(500);
    await roundsB.stop();
    await consumer.stop();
    await ingest.stop();

    const counts = new Map<string, number>();
    for (const d of consumer.deliveries) counts.set(d.jobId, (counts.get(d.jobId) ?? 0) + 1);
    expect(replies.filter((r) => !counts.has(r.jobId))).toEqual([]);
    expect([...counts.values()].filter((n) => n > 1)).toEqual([]); // no row sent by both rounds
    expect(a.acquired).toBeGreaterThan(0);
    expect(a.sent).toBe(0);
    expect(a.leaseLost).toBe(a.acquired);
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
  }, 90_000);
});
