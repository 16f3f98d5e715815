import { DeleteItemCommand } from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../adapters/dynamoJobStore.js';
import { DEFAULTS, shardsOfGroup } from '../../core/model/config.js';
import { dispatchRound, type DispatchDeps } from '../../core/dispatch/round.js';
import { ingest } from '../../core/ingest/ingest.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sleepMs } from '../support/faults.js';
import { consume, createSystem, submitJobs, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1, tombstoneGraceMs: 300 };

/** Takes the inbound messages off the queue without ingesting them: the test plays ingest. */
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

const keyOf = (jobId: string, sys: TestSystem) => {
  const id = sys.w.codec.parse(jobId);
  return { shard: id.shard, dueMs: id.dueMs, jobId };
};

/** A job cancelled while still inbound (a tombstone), its inbound body in hand, now due + grace. */
async function cancelledPastGrace() {
  const sys = await createSystem(em, { settings });
  // Due 3 s beyond the lookahead: the submit, the take and the cancel all fit before the cut-off
  // on a loaded machine (at 0.2 s beyond it, a CI run's cancel came too late).
  const [job] = await submitJobs(sys, 'demo', [
    { payload: { late: true }, runAt: new Date(Date.now() + settings.lookaheadMs + 3_000).toISOString() },
  ]);
  const [body] = await takeInbound(sys, 1);
  const key = keyOf(job!.jobId, sys);
  await sys.w.jobs.cancel('demo', job!.jobId);
  await sleepMs(key.dueMs + settings.tombstoneGraceMs + 50 - Date.now());
  return { sys, job: job!, body: body!, key };
}

const round = (deps: DispatchDeps) => dispatchRound(deps, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 5_000 });

describe.concurrent('ingest', () => {
  it('is idempotent: a redelivered message never creates a second row nor resets an acquired one', async () => {
    const sys = await createSystem(em, { settings });
    const [job] = await submitJobs(sys, 'demo', [{ payload: { a: 1 }, delaySeconds: 60 }]);
    const [body] = await takeInbound(sys, 1);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['created']);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    const key = keyOf(job!.jobId, sys);
    const now = Date.now();
    expect(await sys.w.store.acquire(key, now, now + 10_000)).toBeDefined();
    // Redelivered twice more, once in the same SQS batch: no failure reported, the row stays ACQUIRED.
    const handler = ingestHandler(sys.w);
    const record = (id: string) => ({ messageId: id, body: body! }) as never;
    expect(await handler({ Records: [record('m1'), record('m2')] })).toEqual({ batchItemFailures: [] });
    expect((await sys.w.store.getRow(key))?.state).toBe('ACQUIRED');
    // A malformed message is reported as failed (so it ends in the DLQ), the good one is not.
    const res = await handler({ Records: [record('ok'), { messageId: 'bad', body: '{"v":1,"jobId":"nope"}' } as never] });
    expect(res.batchItemFailures).toEqual([{ itemIdentifier: 'bad' }]);
  });

  it('an early cancel leaves a tombstone that stays at its key: it fails the ingest, status reads it, a late ingest never revives it', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const [job] = await submitJobs(sys, 'demo', [
      { payload: { b: 1 }, runAt: new Date(Date.now() + settings.lookaheadMs + 3_000).toISOString() },
    ]);
    const [body] = await takeInbound(sys, 1);
    const key = keyOf(job!.jobId, sys);

    expect(await sys.w.jobs.cancel('demo', job!.jobId)).toEqual({ jobId: job!.jobId, state: 'CANCELLED' });
    expect((await sys.w.store.getRow(key))?.state).toBe('CANCELLED');
    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('CANCELLED');

    // Once due + grace, rounds read the tombstone and leave it: it is final, and stays until its TTL.
    await sleepMs(key.dueMs + settings.tombstoneGraceMs + 50 - Date.now());
    const r = await round(sys.w.dispatch);
    expect(r).toMatchObject({ acquired: 0, idle: true });
    // The late ingest noted the key in the late lane; the round found the tombstone there and cleared it.
    expect(await sys.w.store.readLate(key.shard, key.dueMs + 60_000, 10)).toEqual([]);
    const tombstone = await sys.w.store.getRow(key);
    expect(tombstone?.state).toBe('CANCELLED');
    expect(tombstone?.expiresAtMs).toBeGreaterThanOrEqual(key.dueMs + settings.tombstoneGraceMs + DEFAULTS.cancelRecordRetentionMs);
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('CANCELLED');
    expect((await sys.w.jobs.cancel('demo', job!.jobId)).state).toBe('CANCELLED');

    // The inbound message comes back late (redelivery): its put meets the tombstone.
    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    expect((await sys.w.store.getRow(key))?.state).toBe('CANCELLED');
    await round(sys.w.dispatch);
    await sleepMs(300);
    await consumer.stop();
    expect(consumer.deliveries).toEqual([]);
  });

  it('a job whose tombstone an earlier release moved to a cancel record is never revived by a late ingest', async () => {
    const { sys, job, body, key } = await cancelledPastGrace();
    // What earlier releases did once a tombstone was due: cancel record first, then the tombstone deleted.
    expect(await sys.w.store.putCancelRecord(key, { kind: 'CANCELLED', atMs: Date.now() }, key.dueMs + 86_400_000)).toBe(true);
    await em.dynamo.send(new DeleteItemCommand({ TableName: sys.tableName, Key: keys.row(key) }));

    expect(await ingest(sys.w.ingest, body)).toEqual(['cancelled']);
    expect(await sys.w.store.getRow(key)).toBeUndefined();
    expect((await sys.w.jobs.status('demo', job.jobId)).state).toBe('CANCELLED');
    expect((await sys.w.jobs.cancel('demo', job.jobId)).state).toBe('CANCELLED');
  });

  it('a delivered job keeps a marker at its key: a redelivered inbound message does not deliver it again', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const [job] = await submitJobs(sys, 'demo', [
      { payload: { c: 1 }, runAt: new Date(Date.now() + settings.lookaheadMs + 3_000).toISOString() },
    ]);
    const [body] = await takeInbound(sys, 1);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['created']);
    const key = keyOf(job!.jobId, sys);
    await sleepMs(key.dueMs - settings.lookaheadMs + 50 - Date.now());
    expect((await round(sys.w.dispatch)).recorded).toBe(1);
    await consumer.waitFor((d) => d.length >= 1, 3_000);

    const marker = await sys.w.store.getRow(key);
    expect(marker).toMatchObject({ state: 'QUEUED', tenant: 'demo' });
    expect(marker?.deliveredAtMs).toBeGreaterThanOrEqual(key.dueMs);
    const status = await sys.w.jobs.status('demo', job!.jobId);
    expect(status).toMatchObject({ state: 'QUEUED', deliveredAt: new Date(marker!.deliveredAtMs!).toISOString() });
    await expect(sys.w.jobs.cancel('demo', job!.jobId)).rejects.toMatchObject({ code: 'AlreadyQueued' });

    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    await round(sys.w.dispatch);
    await sleepMs(300);
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([job!.jobId]);
  });
});
