import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoWaitingChildren, waitingPartition } from '../../adapters/dynamoWaitingChildren.js';
import { sortKey, type RowKey } from '../../core/model/index.js';
import { limiter } from '../../core/util/index.js';
import { decideChild, type NewWaitingChild } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

/**
 * The store of jobs waiting for parents (issue #25) on the DynamoDB emulator, through the real SDK:
 * a fan-in of 1,000 parents, some reported twice, concurrently and in random order, releases its
 * child exactly once, never before the last parent ended.
 */
let em: Emulators;
let store: DynamoWaitingChildren;
let table: string;
const T0 = Date.parse('2030-01-01T00:00:00Z');
let n = 0;
const child = (parents: number, extra: Partial<NewWaitingChild> = {}): NewWaitingChild => ({
  key: { shard: 3, dueMs: T0, jobId: `j-child-${++n}` },
  tenant: 'wf',
  parents,
  timing: { kind: 'delay', delayMs: 60_000 },
  onParentFailure: 'cancel',
  ...extra,
});

beforeAll(async () => {
  em = await startEmulators();
  table = await em.createTable('waiting');
  store = new DynamoWaitingChildren(em.dynamo, table);
});
afterAll(async () => em?.stop());

const itemAt = async (key: RowKey) =>
  (
    await em.dynamo.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: waitingPartition(key.shard) }, sk: { S: sortKey(key.dueMs, key.jobId) } } }),
    )
  ).Item;

describe('jobs waiting for parents, in the table', () => {
  it('a fan-in of 1,000 parents, 300 of them reported twice, 32 at a time in random order: released once, after the last end', async () => {
    const c = child(1_000);
    expect(await store.create([c])).toBe(1);
    expect(await store.create([c])).toBe(0); // a retried submit writes nothing
    const ends = Array.from({ length: 1_000 }, (_, i) => T0 + 1_000 + ((i * 7_919) % 1_000_000));
    // Every parent once, and 300 of them again later (a retried report: its end must not move).
    const reports = [...ends.keys(), ...[...ends.keys()].filter((i) => i % 10 < 3)].map((parent, k) => ({
      parent,
      at: k < 1_000 ? ends[parent]! : ends[parent]! + 5_000,
    }));
    for (let i = reports.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [reports[i], reports[j]] = [reports[j]!, reports[i]!];
    }
    const limit = limiter(32);
    let released = 0;
    let dueSeen: number[] = [];
    await Promise.all(
      reports.map((r) =>
        limit(async () => {
          const record = await store.recordParentEnd(c.key, r.parent, true, r.at);
          const decision = decideChild(record!);
          if (decision.kind !== 'due') return;
          dueSeen.push(decision.dueMs);
          if (await store.transition(c.key, 'WAITING', 'RELEASING', decision.dueMs)) released++;
        }),
      ),
    );
    expect(released).toBe(1);
    // Whichever report's repeat came first, a parent's first end stands: the due time is fixed.
    const record = await store.get(c.key);
    expect(record).toMatchObject({ state: 'RELEASING', parents: 1_000, failed: new Set() });
    expect(record!.succeeded.size).toBe(1_000);
    expect(record!.dueMs).toBe(record!.lastEndMs + 60_000);
    expect(record!.lastEndMs).toBeGreaterThanOrEqual(Math.max(...ends));
    dueSeen = [...new Set(dueSeen)];
    expect(dueSeen).toEqual([record!.dueMs]);
  });

  it('a failed parent cancels a child under "cancel", and one under "run" waits for the rest', async () => {
    const cancel = child(3);
    const run = child(3, { onParentFailure: 'run', timing: { kind: 'at', atMs: T0 + 86_400_000 } });
    await store.create([cancel, run]);
    for (const c of [cancel, run]) await store.recordParentEnd(c.key, 0, true, T0 + 1);
    expect(decideChild((await store.recordParentEnd(cancel.key, 2, false, T0 + 2))!)).toEqual({ kind: 'cancel', failedParent: 2 });
    expect(decideChild((await store.recordParentEnd(run.key, 2, false, T0 + 2))!)).toEqual({ kind: 'wait', remaining: 1 });
    // A later success of the failed parent does not undo its failure.
    expect((await store.recordParentEnd(run.key, 2, true, T0 + 3))!.failed).toEqual(new Set([2]));
    expect(decideChild((await store.recordParentEnd(run.key, 1, true, T0 + 4))!)).toEqual({ kind: 'due', dueMs: T0 + 86_400_000 });
  });

  it('writes nothing for a child that is not there, and moves a record only from the state named', async () => {
    const missing = { shard: 3, dueMs: T0, jobId: 'j-never-written' };
    expect(await store.recordParentEnd(missing, 0, true, T0 + 1)).toBeUndefined();
    expect(await itemAt(missing)).toBeUndefined();
    const c = child(1);
    await store.create([c]);
    expect(await store.transition(c.key, 'RELEASING', 'QUEUED')).toBe(false);
    expect(await store.transition(c.key, 'WAITING', 'CANCELLED')).toBe(true);
    expect(await store.transition(c.key, 'WAITING', 'RELEASING', T0)).toBe(false);
    expect(await store.get(c.key)).toMatchObject({ state: 'CANCELLED', tenant: 'wf', timing: { kind: 'delay', delayMs: 60_000 } });
    expect((await store.get(c.key))!.dueMs).toBeUndefined();
  });

  it("records an only parent's end and the move in one write, only from WAITING and only once; a cancelled child stays cancelled", async () => {
    const c = child(1);
    const cancelled = child(1);
    await store.create([c, cancelled]);
    expect(await store.cancelWaiting(cancelled.key, 'cancelled (DELETE of the job)', T0 + 1)).toBe(true);
    expect(await store.moveOnParentEnd(cancelled.key, 0, T0 + 2, 'QUEUING', T0 + 2, T0 + 3)).toBe(false);
    expect(await store.get(cancelled.key)).toMatchObject({ state: 'CANCELLED', succeeded: new Set(), end: { outcome: 'CANCELLED' } });
    expect(await store.moveOnParentEnd(c.key, 0, T0 + 2, 'QUEUING', T0 + 62_002, T0 + 3)).toBe(true);
    // A repeated report: the first end and move stand.
    expect(await store.moveOnParentEnd(c.key, 0, T0 + 9, 'RELEASING', T0 + 99)).toBe(false);
    expect(await store.get(c.key)).toMatchObject({
      state: 'QUEUING',
      dueMs: T0 + 62_002,
      handedAtMs: T0 + 3,
      succeeded: new Set([0]),
      lastEndMs: T0 + 2,
    });
    expect(await store.recordEnd(c.key, { outcome: 'SUCCEEDED', atMs: T0 + 70_000 })).toEqual({
      end: { outcome: 'SUCCEEDED', atMs: T0 + 70_000 },
      childrenTold: false,
    });
    await store.markChildrenTold(c.key);
    expect(await store.recordEnd(c.key, { outcome: 'DEAD', atMs: T0 + 80_000 })).toEqual({
      end: { outcome: 'SUCCEEDED', atMs: T0 + 70_000 },
      childrenTold: true,
    });
    const missing = { shard: 3, dueMs: T0, jobId: 'j-not-there' };
    await store.markChildrenTold(missing);
    expect(await itemAt(missing)).toBeUndefined();
  });
});
