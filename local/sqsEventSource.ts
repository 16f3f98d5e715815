import { DeleteMessageBatchCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';

export interface EventSourceOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn?: string;
  /** The function's handler: an SQS event in, partial batch failures out. */
  readonly handler: (event: SQSEvent) => Promise<SQSBatchResponse | void>;
  /** @default 10 */
  readonly batchSize?: number;
  /** Long-poll wait in seconds. @default 1 */
  readonly waitTimeSeconds?: number;
  /** Parallel pollers. @default 2 */
  readonly pollers?: number;
  /**
   * Gather records for up to this long (or until `batchSize`) before invoking, as the mapping's
   * `MaximumBatchingWindowInSeconds` does: fewer, fuller receives and invocations. @default 0
   */
  readonly maxBatchingWindowMs?: number;
  readonly onError?: (err: unknown) => void;
}

/**
 * Lambda's SQS event source mapping, in process: long-polls a queue, invokes the handler with an
 * SQS event, deletes the records that succeeded and leaves the reported failures (and everything,
 * when the handler throws) to reappear after their visibility timeout.
 */
export function startSqsEventSource(opts: EventSourceOptions): { stop(): Promise<void> } {
  const abort = new AbortController();
  const arn = opts.queueArn ?? `arn:aws:sqs:us-east-1:000000000000:${opts.queueUrl.split('/').pop()}`;
  const batchSize = opts.batchSize ?? 10;
  const receive = async (max: number, waitSeconds: number): Promise<Message[]> => {
    const res = await opts.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: opts.queueUrl,
        MaxNumberOfMessages: max,
        WaitTimeSeconds: waitSeconds,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
      { abortSignal: abort.signal },
    );
    return res.Messages ?? [];
  };
  const poll = async () => {
    while (!abort.signal.aborted) {
      let messages: Message[];
      try {
        messages = await receive(batchSize, opts.waitTimeSeconds ?? 1);
        // The batching window: a partial batch waits for the window to close, then takes what
        // arrived meanwhile in one more receive (fewer receives and invocations per record).
        const window = opts.maxBatchingWindowMs ?? 0;
        if (messages.length > 0 && messages.length < batchSize && window > 0 && !abort.signal.aborted) {
          await new Promise((r) => setTimeout(r, window));
          if (!abort.signal.aborted) messages.push(...(await receive(batchSize - messages.length, 0)));
        }
      } catch (err) {
        if (!abort.signal.aborted) {
          opts.onError?.(err);
          await new Promise((r) => setTimeout(r, 200));
        }
        continue;
      }
      if (messages.length === 0) continue;
      const event: SQSEvent = { Records: messages.map((m) => toRecord(m, arn)) };
      let failed: Set<string>;
      try {
        const res = await opts.handler(event);
        failed = new Set((res?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
      } catch (err) {
        opts.onError?.(err);
        continue; // a failed invocation: the whole batch comes back after its visibility timeout
      }
      const done = messages.filter((m) => !failed.has(m.MessageId!));
      if (done.length === 0) continue;
      try {
        await opts.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: opts.queueUrl,
            Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
      } catch (err) {
        opts.onError?.(err);
      }
    }
  };
  const pollers = Array.from({ length: opts.pollers ?? 2 }, poll);
  return {
    async stop() {
      abort.abort();
      await Promise.allSettled(pollers);
    },
  };
}

export function toRecord(m: Message, arn: string): SQSRecord {
  const a = m.Attributes ?? {};
  return {
    messageId: m.MessageId!,
    receiptHandle: m.ReceiptHandle!,
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? String(Date.now()),
      SenderId: a.SenderId ?? '',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, { stringValue: v.StringValue, dataType: v.DataType ?? 'String' }]),
    ),
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: arn,
    awsRegion: arn.split(':')[3] ?? 'us-east-1',
  };
}
