/**
 * A cancelled job stays cancelled for as long as its message can come back: a tombstone (and a
 * dead-lettered job's record) outlives the inbound queue's retention plus its DLQ's. The clock
 * is injected and moved days ahead; DynamoDB's TTL sweep (which dynalite does not run) is played
 * by deleting every item whose `expiresAt` has passed, as DynamoDB may at any moment after it.
 */
import { DeleteItemCommand, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordDeadLetters } from '../../core/ingest/recordDeadLetters.js';
import { dispatchRound } from '../../core/dispatch/round.js';
import { ingest } from '../../core/ingest/ingest.js';
import type { Clock } from '../../core/model/ports.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, submitJobs, type TestSystem } from '../support/system.js';

const DAY_MS = 86_400_000;
const settings = { shardCount: 2, groupCount: 1 };

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** A clock that runs with real time, `offset` ms ahead of it (dispatch rounds need time to pass). */
function shiftedClock(): Clock & { offset: number } {
  const clock = { offset: 0, now: () => Date.now() + clock.offset };
  return clock;
}

/** DynamoDB's TTL sweep: deletes every item whose `expiresAt` (epoch seconds) is at or before `nowMs`. */
async function sweepExpired(tableName: string, nowMs: number): Promise<number> {
  let swept = 0;
  let start: Record<string, AttributeValue> | undefined;
  do {
    const res = await em.dynamo.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }));
    for (const item of res.Items ?? []) {
      if (item.expiresAt?.N === undefined || Number(item.expiresAt.N) * 1000 > nowMs) continue;
      await em.dynamo.send(new DeleteItemCommand({ TableName: tableName, Key: { pk: item.pk!, sk: item.sk! } }));
      swept++;
    }
    start = res.LastEvaluatedKey;
  } while (start);
  return swept;
}

/** Takes the inbound messages off the queue without ingesting them: the test plays ingest (and the redrive). */
async function takeInbound(sys: TestSystem, n: number): Promise<string[]> {
  const bodies: string[] = [];
  while (bodies.length < n) {
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.inboundUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    for (const m of res.Messages ?? []) {
      bodies.push(m.Body!);
      await em.sqs.send(new DeleteMessageCommand({ QueueUrl: sys.inboundUrl, ReceiptHandle: m.ReceiptHandle! }));
    }
  }
  return bodies;
}

/** Runs a dispatch round over every shard, then reads what reached the tenant queue. */
async function delivered(sys: TestSystem, clock: Clock): Promise<string[]> {
  await dispatchRound(sys.w.dispatch, { shards: [0, 1], deadlineMs: clock.now() + 1_500 });
  const res = await em.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: sys.tenants.demo!.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
  );
  return (res.Messages ?? []).map((m) => (JSON.parse(m.Body!) as { jobId: string }).jobId);
}

/** On day 13 (records past their TTL swept), the job's message is ingested again: nothing is created or delivered, it stays CANCELLED. */
async function expectStillCancelledOnDay13(sys: TestSystem, clock: Clock & { offset: number }, jobId: string, body: string): Promise<void> {
  clock.offset = 13 * DAY_MS;
  await sweepExpired(sys.tableName, clock.now());
  expect(await ingest(sys.w.ingest, body)).not.toContain('created');
  expect((await sys.w.jobs.status('demo', jobId)).state).toBe('CANCELLED');
  expect(await delivered(sys, clock)).toEqual([]);
}

describe('tombstones outlive the inbound queue and its DLQ', () => {
  it('a cancelled DEAD_LETTERED job redriven on day 13 is never delivered, and status stays CANCELLED', async () => {
    const clock = shiftedClock();
    const sys = await createSystem(em, { settings, clock });
    const [job] = await submitJobs(sys, 'demo', [{ payload: { n: 1 }, delaySeconds: 3_600 }]);
    const [body] = await takeInbound(sys, 1);
    // Ingest's last attempt failed: the message goes to the inbound DLQ, the job is DEAD_LETTERED.
    expect(await recordDeadLetters(sys.w.ingest, body!)).toBe(1);
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('DEAD_LETTERED');
    expect(await sys.w.jobs.cancel('demo', job!.jobId)).toEqual({ jobId: job!.jobId, state: 'CANCELLED' });

    // The operator redrives the inbound DLQ: the message is ingested again.
    await expectStillCancelledOnDay13(sys, clock, job!.jobId, body!);
  });

  it('a job cancelled while its message waited in the inbound queue is never delivered when the message arrives on day 13', async () => {
    const clock = shiftedClock();
    const sys = await createSystem(em, { settings, clock });
    const [job] = await submitJobs(sys, 'demo', [{ payload: { n: 2 }, delaySeconds: 3_600 }]);
    const [body] = await takeInbound(sys, 1);
    // Cancelled before ingest: a tombstone at the job's key.
    expect(await sys.w.jobs.cancel('demo', job!.jobId)).toEqual({ jobId: job!.jobId, state: 'CANCELLED' });

    await expectStillCancelledOnDay13(sys, clock, job!.jobId, body!);
  });

  it('the tombstone goes once no copy of the message can come back (inbound retention + DLQ retention after submit)', async () => {
    const clock = shiftedClock();
    const sys = await createSystem(em, { settings, clock });
    const [job] = await submitJobs(sys, 'demo', [{ payload: { n: 3 }, delaySeconds: 3_600 }]);
    await takeInbound(sys, 1);
    await sys.w.jobs.cancel('demo', job!.jobId);
    clock.offset = 20 * DAY_MS; // the DLQ may still hold a copy: kept
    expect(await sweepExpired(sys.tableName, clock.now())).toBe(0);
    clock.offset = 21 * DAY_MS + 3_600_000 + 10_000; // past runAt (in an hour) + 21 days
    expect(await sweepExpired(sys.tableName, clock.now())).toBeGreaterThan(0);
  });
});
