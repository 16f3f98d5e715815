import { type AttributeValue, GetItemCommand, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoWaitingChildren, waitingPartition } from '../../adapters/dynamoWaitingChildren.js';
import { sortKey, type RowKey } from '../../core/model/index.js';
import { limiter } from '../../core/util/index.js';
import { decideChild, type NewWaitingChild, type WaitingRecord } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

/**
 * The store of jobs waiting for parents (issue #25) on the DynamoDB emulator, through the real SDK:
 * a fan-in (of 40 parents, kept on the child's record; of 1,000, kept beside it), some reported
 * twice, concurrently and in random order, releases its child exactly once, never before the last
 * parent ended.
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

/** The record a parent's end returned (not `'waiting'`, not none). */
const rec = async (p: Promise<WaitingRecord | 'waiting' | undefined>): Promise<WaitingRecord> => {
  const r = await p;
  if (r === undefined || r === 'waiting') throw new Error(`expected a record, got ${r}`);
  return r;
};

/** What a write of `item` costs (the emulator sizes it as DynamoDB does), written at a scratch key. */
const writeUnits = async (item: Record<string, AttributeValue>) =>
  (
    await em.dynamo.send(
      new PutItemCommand({ TableName: table, Item: { ...item, sk: { S: 'size-probe' } }, ReturnConsumedCapacity: 'TOTAL' }),
    )
  ).ConsumedCapacity?.CapacityUnits;

describe('jobs waiting for parents, in the table', () => {
  it.each([
    // The most a record keeps itself (a child of more keeps them beside it, as every new one does).
    ['40 parents, their ends on its record', 40, undefined],
    ['1,000 parents, their ends 40 to an item beside its record', 1_000, 40],
  ])(
    'a fan-in of %s, 30 % of them reported twice, 32 at a time in random order: released once, after the last end',
    async (_, parents, perItem) => {
      const c = child(parents, perItem === undefined ? {} : { endsPerItem: perItem });
      const bucketed = perItem === undefined ? undefined : { perItem, parents };
      expect(await store.create([c])).toBe(1);
      expect(await store.create([c])).toBe(0); // a retried submit writes nothing
      const ends = Array.from({ length: parents }, (_, i) => T0 + 1_000 + ((i * 7_919) % 1_000_000));
      // Every parent once, and 30 % of them again later (a retried report: its end must not move).
      const reports = [...ends.keys(), ...[...ends.keys()].filter((i) => i % 10 < 3)].map((parent, k) => ({
        parent,
        at: k < parents ? ends[parent]! : ends[parent]! + 5_000,
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
            const record = await store.recordParentEnd(c.key, r.parent, true, r.at, bucketed);
            if (record === 'waiting') return;
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
      expect(record).toMatchObject({ state: 'RELEASING', parents, failed: new Set() });
      expect(record!.succeeded.size).toBe(parents);
      expect(record!.dueMs).toBe(record!.lastEndMs + 60_000);
      // The latest end: the last parent's first report (a repeat shuffled ahead of it stands).
      expect(record!.lastEndMs).toBeGreaterThanOrEqual(Math.max(...ends));
      expect(record!.lastEndMs).toBeLessThanOrEqual(Math.max(...ends) + 5_000);
      dueSeen = [...new Set(dueSeen)];
      expect(dueSeen).toEqual([record!.dueMs]);
      // Each end recorded rewrites a small item, whatever the fan-in: the record stays within one
      // write unit (1 KB).
      expect(await writeUnits((await itemAt(c.key))!)).toBe(1);
    },
  );

  it('a child of 100 parents kept 40 to an item: a failure cancels it at once under "cancel"; under "run" it counts once its item is full', async () => {
    const bucketed = { perItem: 40, parents: 100 };
    const cancel = child(100, { endsPerItem: 40 });
    const run = child(100, { endsPerItem: 40, onParentFailure: 'run', timing: { kind: 'now' } });
    await store.create([cancel, run]);
    // A success whose item waits for other parents: nothing to decide, no read of the record.
    for (const c of [cancel, run]) expect(await store.recordParentEnd(c.key, 0, true, T0 + 1, bucketed)).toBe('waiting');
    expect(decideChild(await rec(store.recordParentEnd(cancel.key, 57, false, T0 + 2, bucketed)))).toEqual({
      kind: 'cancel',
      failedParent: 57,
    });
    // Under "run" a parent counts once its item is summed up: none is yet.
    expect(decideChild(await rec(store.recordParentEnd(run.key, 57, false, T0 + 2, bucketed)))).toEqual({ kind: 'wait', remaining: 100 });
    // Every other parent of the second item (40..79) ends: its summary counts 57 failed, once.
    for (let i = 40; i < 80; i++) if (i !== 57) await store.recordParentEnd(run.key, i, true, T0 + 10 + i, bucketed);
    const partial = (await store.get(run.key))!;
    expect(partial.failed).toEqual(new Set([57]));
    expect(partial.succeeded.size).toBe(39);
    expect(decideChild(partial)).toEqual({ kind: 'wait', remaining: 60 });
    for (let i = 1; i < 100; i++) if (i < 40 || i >= 80) await store.recordParentEnd(run.key, i, true, T0 + 200 - i, bucketed);
    expect(decideChild((await store.get(run.key))!)).toEqual({ kind: 'due', dueMs: T0 + 199 });
  });

  it('a report that died after its end was kept, before the item was summed up: its repeat completes the summary', async () => {
    const bucketed = { perItem: 40, parents: 41 };
    const c = child(41, { endsPerItem: 40 });
    await store.create([c]);
    await store.recordParentEnd(c.key, 40, true, T0 + 5, bucketed);
    for (let i = 0; i < 39; i++) await store.recordParentEnd(c.key, i, true, T0 + 1, bucketed);
    // Parent 39's end reached its item (the last of the first item), and its process died there.
    await em.dynamo.send(
      new UpdateItemCommand({
        TableName: table,
        Key: { pk: { S: waitingPartition(c.key.shard) }, sk: { S: `${sortKey(c.key.dueMs, c.key.jobId)}#e0` } },
        UpdateExpression: 'SET p39 = :end',
        ExpressionAttributeValues: { ':end': { N: String(T0 + 9) } },
      }),
    );
    expect(decideChild((await store.get(c.key))!)).toEqual({ kind: 'wait', remaining: 40 });
    // Its repeat (a later time: the first end stands) finds the item full and writes its summary.
    const record = await rec(store.recordParentEnd(c.key, 39, true, T0 + 60_000, bucketed));
    expect(decideChild(record)).toEqual({ kind: 'due', dueMs: T0 + 9 + 60_000 });
    expect(record.lastEndMs).toBe(T0 + 9);
  });

  it('a failed parent cancels a child under "cancel", and one under "run" waits for the rest', async () => {
    const cancel = child(3);
    const run = child(3, { onParentFailure: 'run', timing: { kind: 'at', atMs: T0 + 86_400_000 } });
    await store.create([cancel, run]);
    for (const c of [cancel, run]) await store.recordParentEnd(c.key, 0, true, T0 + 1);
    expect(decideChild(await rec(store.recordParentEnd(cancel.key, 2, false, T0 + 2)))).toEqual({ kind: 'cancel', failedParent: 2 });
    expect(decideChild(await rec(store.recordParentEnd(run.key, 2, false, T0 + 2)))).toEqual({ kind: 'wait', remaining: 1 });
    // A later success of the failed parent does not undo its failure.
    expect((await rec(store.recordParentEnd(run.key, 2, true, T0 + 3))).failed).toEqual(new Set([2]));
    expect(decideChild(await rec(store.recordParentEnd(run.key, 1, true, T0 + 4)))).toEqual({ kind: 'due', dueMs: T0 + 86_400_000 });
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
    // Two of its children cancelled while it waits, registered on it; its success reads them back.
    expect(await store.holdBack(c.key, 'j-kid-1')).toBe(true);
    expect(await store.holdBack(c.key, 'j-kid-2')).toBe(true);
    expect(await store.recordEnd(c.key, { outcome: 'SUCCEEDED', atMs: T0 + 70_000 }, undefined, T0 + 70_001)).toEqual({
      end: { outcome: 'SUCCEEDED', atMs: T0 + 70_000 },
      recordedNow: true,
      childrenTold: false,
      heldBack: new Set(['j-kid-1', 'j-kid-2']),
      releasingAtMs: T0 + 70_001,
    });
    // Once it succeeded, no cancel registers there: its end released them.
    expect(await store.holdBack(c.key, 'j-kid-3')).toBe(false);
    await store.markChildrenTold(c.key);
    expect(await store.recordEnd(c.key, { outcome: 'DEAD', atMs: T0 + 80_000 })).toEqual({
      end: { outcome: 'SUCCEEDED', atMs: T0 + 70_000 },
      recordedNow: false,
      childrenTold: true,
      heldBack: new Set(['j-kid-1', 'j-kid-2']),
      releasingAtMs: T0 + 70_001,
    });
    // A parent that failed carries that on through each child's record: a cancel registers still.
    const failed = child(1);
    await store.create([failed]);
    expect(await store.recordEnd(failed.key, { outcome: 'DEAD', atMs: T0 + 1 })).toMatchObject({ recordedNow: true, heldBack: new Set() });
    expect(await store.holdBack(failed.key, 'j-kid-4')).toBe(true);
    const missing = { shard: 3, dueMs: T0, jobId: 'j-not-there' };
    await store.markChildrenTold(missing);
    expect(await store.holdBack(missing, 'j-kid-5')).toBe(false);
    expect(await itemAt(missing)).toBeUndefined();
  });
});
