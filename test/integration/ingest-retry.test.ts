import { ReceiveMessageCommand, SendMessageCommand, SetQueueAttributesCommand, type Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_RETRY_SECONDS, QUEUE_SETTINGS } from '../../core/model/index.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { createSystem, type TestSystem } from '../support/system.js';

/**
 * An inbound message whose ingest failed comes back to ingest: after 5, 30 and 90 s on its first
 * three receives (INGEST_RETRY_SECONDS: most failures are a throttle or a timeout, its jobs are late
 * by seconds), after the queue's own visibility timeout (181 s, as deployed) on later ones, so that
 * six receives still ride out minutes of an outage before the DLQ. On the SQS emulator through the
 * real SDK.
 */
let em: Emulators;
let sys: TestSystem;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em);
  await em.sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: sys.inboundUrl,
      Attributes: { VisibilityTimeout: String(QUEUE_SETTINGS.inbound.visibilityTimeoutSeconds) },
    }),
  );
});
afterAll(async () => em?.stop());

/** The next inbound message within `seconds`, with its receive count; undefined when none comes. */
async function receive(seconds: number): Promise<Message | undefined> {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const wait = Math.max(1, Math.min(5, Math.ceil((until - Date.now()) / 1000)));
    const res = await em.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: sys.inboundUrl,
        WaitTimeSeconds: wait,
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
    );
    if (res.Messages?.[0]) return res.Messages[0];
  }
  return undefined;
}

const asRecord = (m: Message) =>
  sqsRecordFor({
    body: m.Body!,
    messageId: m.MessageId!,
    receiptHandle: m.ReceiptHandle!,
    attributes: { ApproximateReceiveCount: m.Attributes!.ApproximateReceiveCount! },
  });

describe('an inbound message whose ingest failed', () => {
  it(`comes back after ${INGEST_RETRY_SECONDS.join(', ')} s the first times, after the queue's timeout the next`, async () => {
    // The visibility each failed receive asks for, on its way to SQS.
    const asked: (number | undefined)[] = [];
    const inboundRetry = sys.w.inboundRetry!;
    const handle = ingestHandler({ ...sys.w, inboundRetry: (receipt, seconds) => (asked.push(seconds), inboundRetry(receipt, seconds)) });
    // Fails every time (as a malformed message does): the same path as a throttled write.
    await em.sqs.send(new SendMessageCommand({ QueueUrl: sys.inboundUrl, MessageBody: '{"v":1,"jobId":"nope"}' }));
    const first = (await receive(5))!;
    expect(first.Attributes?.ApproximateReceiveCount).toBe('1');
    const failedAt = Date.now();
    expect((await handle({ Records: [asRecord(first)] })).batchItemFailures).toEqual([{ itemIdentifier: first.MessageId }]);
    const second = await receive(INGEST_RETRY_SECONDS[0]! + 5);
    expect(second?.Attributes?.ApproximateReceiveCount).toBe('2');
    const backAfterMs = Date.now() - failedAt;
    expect(backAfterMs).toBeGreaterThanOrEqual(INGEST_RETRY_SECONDS[0]! * 1000 - 250);
    expect(backAfterMs).toBeLessThan((INGEST_RETRY_SECONDS[0]! + 5) * 1000);

    // Its second failure asks for the next rung (30 s): not back within 5 s.
    expect((await handle({ Records: [asRecord(second!)] })).batchItemFailures).toEqual([{ itemIdentifier: second!.MessageId }]);
    expect(await receive(5)).toBeUndefined();
    // The third asks for 90 s; past the ladder nothing is asked: the queue's timeout (181 s) applies.
    const as = (count: number) => ({
      ...asRecord(second!),
      attributes: { ...asRecord(second!).attributes, ApproximateReceiveCount: String(count) },
    });
    for (const count of [3, INGEST_RETRY_SECONDS.length + 1, QUEUE_SETTINGS.inbound.maxReceiveCount])
      await handle({ Records: [as(count)] });
    expect(asked).toEqual(INGEST_RETRY_SECONDS);
  }, 60_000);
});
