import { DeleteMessageCommand, ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOfGroup } from '../../core/model/config.js';
import { QUEUE_SETTINGS } from '../../core/model/index.js';
import { JobsService } from '../../core/jobs/jobsService.js';
import { dispatchRound } from '../../core/dispatch/round.js';
import type { JobStore } from '../../core/model/ports.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { consume, createSystem, submitJobs, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1 };

/** Takes one inbound message off the queue (the test plays the event source). */
async function takeInbound(sys: TestSystem): Promise<Message> {
  for (;;) {
    const res = await em.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: sys.inboundUrl,
        MaxNumberOfMessages: 1,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const m = res.Messages?.[0];
    if (m) {
      await em.sqs.send(new DeleteMessageCommand({ QueueUrl: sys.inboundUrl, ReceiptHandle: m.ReceiptHandle! }));
      return m;
    }
  }
}

/** The message as the event source hands it to ingest, on its `receiveCount`th receive. */
function eventOf(m: Message, receiveCount: number): SQSEvent {
  const record = sqsRecordFor({
    messageId: m.MessageId!,
    receiptHandle: m.ReceiptHandle!,
    body: m.Body!,
    attributes: { ApproximateReceiveCount: String(receiveCount) },
  });
  return { Records: [record] };
}

const round = (sys: TestSystem) => dispatchRound(sys.w.dispatch, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 4_000 });

describe.concurrent('status tells only what the table records', () => {
  it('answers UNKNOWN, not SCHEDULED or QUEUED, for a job the system cannot find (its inbound message lost)', async () => {
    const sys = await createSystem(em, { settings });
    const [job] = await submitJobs(sys, 'demo', [
      { payload: { lost: true }, runAt: new Date(Date.now() + settings.lookaheadMs + 3_000).toISOString() },
    ]);
    await takeInbound(sys); // gone, as if the buffer had lost it: nothing will ever store the job

    const before = await sys.w.jobs.status('demo', job!.jobId);
    expect(before).toMatchObject({ jobId: job!.jobId, runAt: job!.runAt, state: 'UNKNOWN' });
    expect(before.message).toMatch(/no record of this job yet.*inbound queue/);
    await sleepMs(Date.parse(job!.runAt) + 100 - Date.now());
    const after = await sys.w.jobs.status('demo', job!.jobId);
    expect(after).toMatchObject({ state: 'UNKNOWN' });
    expect(after.message).toMatch(/no record of this job: it was never stored.*or its record expired/);
  });

  it('answers QUEUED from the delivered marker (with deliveredAt), and UNKNOWN once the marker has expired', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const ingest = sys.startIngest();
    const [job] = await submitJobs(sys, 'demo', [{ payload: { n: 1 }, runAt: new Date(Date.now() + 2_000).toISOString() }]);
    const [direct] = await submitJobs(sys, 'demo', [{ payload: { n: 2 }, delaySeconds: 0 }]);
    await consumer.waitFor(() => false, 1_500);
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('SCHEDULED');
    await round(sys);
    await consumer.waitFor((d) => d.length >= 2, 3_000);
    await ingest.stop();
    await consumer.stop();

    const queued = await sys.w.jobs.status('demo', job!.jobId);
    expect(queued).toMatchObject({ state: 'QUEUED', deliveredAt: expect.any(String) });
    expect(Date.parse(queued.deliveredAt!)).toBeGreaterThanOrEqual(Date.parse(job!.runAt));
    // Sent straight to its queue at submit: the id's MAC proves submit took that path, and submit
    // only returns such an id once SQS has the message.
    expect(await sys.w.jobs.status('demo', direct!.jobId)).toMatchObject({ state: 'QUEUED' });

    // Eight days on, the marker has expired (DynamoDB deletes it some time after; dynalite never does).
    const later = new JobsService({
      store: sys.w.store,
      codec: sys.w.codec,
      tenants: sys.w.dispatch.tenants,
      settings: sys.w.config.settings,
      clock: { now: () => Date.parse(job!.runAt) + 8 * 86_400_000 },
    });
    expect(await later.status('demo', job!.jobId)).toMatchObject({
      state: 'UNKNOWN',
      message: expect.stringMatching(/record expired \(records are kept 7 days after runAt\)/),
    });
  });

  it('answers DEAD_LETTERED for a job whose inbound message ingest gave up on; a redrive schedules it again, a cancel keeps it from ever being delivered', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const [kept, dropped] = await submitJobs(sys, 'demo', [
      { payload: { keep: true }, runAt: new Date(Date.now() + 3_000).toISOString() },
      { payload: { drop: true }, runAt: new Date(Date.now() + 3_000).toISOString() },
    ]);
    const message = await takeInbound(sys); // both jobs travel in one inbound message

    // The table refuses the rows (as during an outage), on every receive of the message.
    let failing = true;
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      putJob: async (orig, row) => {
        if (failing) throw new Error('InternalServerError (injected)');
        return orig(row);
      },
    });
    const handler = ingestHandler({ ...sys.w, ingest: { ...sys.w.ingest, store } });
    const last = QUEUE_SETTINGS.inbound.maxReceiveCount;
    expect((await handler(eventOf(message, last - 1))).batchItemFailures).toHaveLength(1);
    expect((await sys.w.jobs.status('demo', kept!.jobId)).state).toBe('UNKNOWN'); // not the last receive: no record yet
    expect((await handler(eventOf(message, last))).batchItemFailures).toHaveLength(1); // the last: the queue moves it to its DLQ
    for (const j of [kept!, dropped!]) {
      const s = await sys.w.jobs.status('demo', j.jobId);
      expect(s).toMatchObject({ state: 'DEAD_LETTERED', message: expect.stringMatching(/inbound dead-letter queue.*redrive/) });
    }

    // One is cancelled while dead-lettered; then the DLQ is redriven and ingest works again.
    expect(await sys.w.jobs.cancel('demo', dropped!.jobId)).toEqual({ jobId: dropped!.jobId, state: 'CANCELLED' });
    failing = false;
    expect((await handler(eventOf(message, 1))).batchItemFailures).toEqual([]);
    expect((await sys.w.jobs.status('demo', kept!.jobId)).state).toBe('SCHEDULED');
    expect((await sys.w.jobs.status('demo', dropped!.jobId)).state).toBe('CANCELLED');

    await sleepMs(Date.parse(kept!.runAt) - settings.lookaheadMs + 50 - Date.now());
    await round(sys);
    await consumer.waitFor((d) => d.length >= 1, 3_000);
    await sleepMs(300);
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([kept!.jobId]);
    expect((await sys.w.jobs.status('demo', kept!.jobId)).state).toBe('QUEUED');
  });
});
