import { BatchWriteItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../adapters/dynamoJobStore.js';
import { dueMsOf } from '../../core/model/lanes.js';
import type { GroupResting, JobStore } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess } from '../support/faults.js';
import { consume, createSystem, runAllGroups, submitJobs } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('backlog independence', () => {
  it('reads only due rows while 20,000 future rows wait in the same shards', async () => {
    const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 16, groupCount: 4 };
    const sys = await createSystem(em, { settings });
    const now = Date.now();
    // 20,000 rows due between one hour and one year from now, in every shard.
    const future = Array.from({ length: 20_000 }, (_, i) => {
      const dueMs = now + 3_600_000 + Math.floor(Math.random() * 365 * 86_400_000);
      const jobId = `future-${i}`;
      return {
        ...keys.row({ shard: i % settings.shardCount, dueMs, jobId }),
        tenant: { S: 'demo' },
        state: { S: 'SCHEDULED' },
        leaseUntil: { N: '0' },
        payload: { S: '{}' },
      };
    });
    const chunks = Array.from({ length: future.length / 25 }, (_, c) => future.slice(c * 25, c * 25 + 25));
    for (let c = 0; c < chunks.length; c += 40) {
      await Promise.all(
        chunks
          .slice(c, c + 40)
          .map((items) =>
            em.dynamo.send(
              new BatchWriteItemCommand({ RequestItems: { [sys.tableName]: items.map((Item) => ({ PutRequest: { Item } })) } }),
            ),
          ),
      );
    }

    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const due = await submitJobs(
      sys,
      'demo',
      Array.from({ length: 20 }, (_, i) => ({ payload: { i }, runAt: new Date(Date.now() + 1_500 + i * 50).toISOString() })),
    );

    // Record every read: the rows it returned and the bound it asked for.
    const seen: { untilMs: number; rows: { dueMs: number; jobId: string }[] }[] = [];
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      readDue: async (orig, shard, range, limit) => {
        const page = await orig(shard, range, limit);
        seen.push({ untilMs: dueMsOf(range.through), rows: page.rows });
        return page;
      },
      readLate: async (orig, shard, untilMs, limit) => {
        const rows = await orig(shard, untilMs, limit);
        seen.push({ untilMs, rows });
        return rows;
      },
    });
    // A group about to rest reads the first row and late pointer of each of its shards (one item
    // each, whatever the backlog): when to wake (docs/design-dispatch.md#rest).
    const firsts: (number | undefined)[] = [];
    const s = sys.w.store;
    const resting: GroupResting = {
      readRest: (g) => s.readRest(g),
      wakeBy: (g, due) => s.wakeBy(g, due),
      intendRest: (g, owner, epoch, now) => s.intendRest(g, owner, epoch, now),
      rest: (g, owner, epoch, at, now) => s.rest(g, owner, epoch, at, now),
      wake: (g, owner) => s.wake(g, owner),
      sleep: (g, owner, epoch, at, now) => s.sleep(g, owner, epoch, at, now),
      rouse: (g) => s.rouse(g),
      firstDue: async (shard, fromMs) => {
        const first = await s.firstDue(shard, fromMs);
        firsts.push(first);
        return first;
      },
    };
    const before = sys.w.store.stats.itemsRead;
    const rounds = runAllGroups({ ...sys.w.dispatch, store, resting });
    await consumer.waitFor((d) => d.length >= due.length, 15_000);
    await rounds.stop();
    await consumer.stop();
    await ingest.stop();

    expect(new Set(consumer.deliveries.map((d) => d.jobId))).toEqual(new Set(due.map((j) => j.jobId)));
    const returned = seen.reduce((n, q) => n + q.rows.length, 0);
    // Items read (DynamoDB's ScannedCount) are the rows returned, and at most two per look at a
    // shard's first row and first late pointer: nothing filtered away...
    const extra = sys.w.store.stats.itemsRead - before - returned;
    expect(extra).toBeGreaterThanOrEqual(firsts.filter((d) => d !== undefined).length);
    expect(extra).toBeLessThanOrEqual(2 * firsts.length);
    // ...and every one was due within its read's bound: no future row was ever read.
    expect(seen.flatMap((q) => q.rows.filter((r) => r.dueMs > q.untilMs))).toEqual([]);
    expect(seen.flatMap((q) => q.rows).filter((r) => r.jobId.startsWith('future-'))).toEqual([]);
    expect(seen.length).toBeGreaterThan(0);
    console.log(`backlog: ${seen.length} reads read ${returned} items with 20,000 future rows in the table`);
  }, 90_000);
});
