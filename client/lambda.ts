import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { ChangeMessageVisibilityCommand, SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { cutText, limiter } from '../core/util/index.js';
import {
  DEFAULT_RETRY_BACKOFF,
  UnrecoverableError,
  latenessMs,
  parseDelivery,
  queueUrlOfArn,
  receiveCountOf,
  retryDelaySeconds,
  type DeliveredJob,
  type JobHandler,
  type RetryBackoff,
} from './delivery.js';
import { errorText, HISTORY_ATTRIBUTE, OutcomeReporter, resultOf, type OutcomeReport, type OutcomeSink } from './outcomes.js';

export interface LambdaConsumerOptions {
  /** Records handled at once within one invocation. @default 10 */
  readonly concurrency?: number;
  /**
   * With a client, a failed record's visibility is set by backoff from its receive count (needs
   * `sqs:ChangeMessageVisibility`), and an {@link UnrecoverableError} sends the record to
   * `deadLetterQueueUrl` (needs `sqs:SendMessage` there). Without one, failures come back after
   * the queue's visibility timeout, and unrecoverable ones are retried until `maxReceiveCount`.
   */
  readonly sqs?: SQSClient;
  /** @default derived from the record's eventSourceARN */
  readonly queueUrl?: string;
  readonly deadLetterQueueUrl?: string;
  /** @default { baseMs: 10_000, capMs: 900_000 } */
  readonly backoff?: RetryBackoff;
  /** Handlers' signals abort this long before the function's timeout. @default 2_000 */
  readonly timeoutMarginMs?: number;
  /**
   * Reports outcomes for tenants with history on (records with the `dynein-history` attribute;
   * docs/history.md): a {@link DyneinClient} (or an {@link OutcomeReporter}). An invocation's
   * outcomes go in one request (up to 100), sent before it returns. Without it, such records are
   * still handled, with a warning once.
   */
  readonly client?: OutcomeSink | OutcomeReporter;
  /** The queue's maxReceiveCount, when known: a failure on that receive is reported `DEAD`. @default unknown */
  readonly maxReceiveCount?: number;
  /** Failures, for logs (the handler's error, and the record). */
  readonly onError?: (error: unknown, record: SQSRecord, job?: DeliveredJob) => void;
  readonly now?: () => number;
  readonly random?: () => number;
}

/**
 * A Lambda handler for a function consuming a tenant queue (event source mapping with
 * `ReportBatchItemFailures`): runs `handler` for each record, and reports the records that failed
 * so that only those come back. One bad record never fails the others. The batch itself (running
 * the records, collecting failures, the partial batch response) is Powertools' batch processing
 * (`BatchProcessor` with `EventType.SQS`, `processPartialResponse`); this wrapper adds what a
 * Dynein job needs per record: parsing, the job context, backoff and the dead-letter path.
 *
 * @example
 * // lambda/worker.ts, with the function subscribed to the tenant queue (reportBatchItemFailures: true)
 * export const handler = dyneinLambdaHandler<{ invoiceId: string }>(async (job, { latenessMs }) => {
 *   await sendReminder(job.payload.invoiceId);
 * });
 */
export function dyneinLambdaHandler<P = unknown>(handler: JobHandler<P>, opts: LambdaConsumerOptions = {}) {
  const now = opts.now ?? Date.now;
  const random = opts.random ?? Math.random;
  const backoff = opts.backoff ?? DEFAULT_RETRY_BACKOFF;
  const reporter =
    opts.client instanceof OutcomeReporter
      ? opts.client
      : opts.client
        ? new OutcomeReporter(opts.client, { onError: (error) => console.error('dynein: outcomes not reported', error) })
        : undefined;
  let warned = false;
  /** For a record asking for outcome reports (history on): reports one; undefined otherwise. */
  const reportFor = (record: SQSRecord, job: DeliveredJob<P>, attempts: number, receivedAt: number) => {
    if (record.messageAttributes?.[HISTORY_ATTRIBUTE]?.stringValue !== '1') return undefined;
    if (!reporter) {
      if (!warned)
        console.warn(
          `dynein: tenant '${job.tenant}' keeps job history, but dyneinLambdaHandler has no client to report outcomes with: pass { client: new DyneinClient(...) } (docs/history.md)`,
        );
      warned = true;
      return undefined;
    }
    return (outcome: OutcomeReport['outcome'], extra: { error?: string; result?: unknown }) =>
      reporter.report(job.tenant, {
        jobId: job.jobId,
        outcome,
        attempts,
        receivedAt: new Date(receivedAt).toISOString(),
        durationMs: Math.max(0, now() - receivedAt),
        ...(extra.error !== undefined ? { error: extra.error } : {}),
        ...(extra.result !== undefined ? { result: extra.result } : {}),
      });
  };
  return async (event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> => {
    const abort = new AbortController();
    const remaining = context?.getRemainingTimeInMillis?.();
    const timer =
      remaining === undefined
        ? undefined
        : setTimeout(
            () => abort.abort(new Error('the function is about to time out')),
            Math.max(0, remaining - (opts.timeoutMarginMs ?? 2_000)),
          );
    const slot = limiter(opts.concurrency ?? 10);

    /** One record: resolves when it succeeded (or went to the DLQ), throws to report it as a failure. */
    const processRecord = async (record: SQSRecord): Promise<void> => {
      const receivedAt = now();
      const receiveCount = receiveCountOf(record.attributes as unknown as Record<string, string>);
      let job: DeliveredJob<P> | undefined;
      let report: ReturnType<typeof reportFor>;
      try {
        job = parseDelivery<P>(record.body);
        report = reportFor(record, job, receiveCount, receivedAt);
        const runAt = record.messageAttributes?.runAt?.stringValue ?? job.runAt;
        const value: unknown = await handler(job, {
          signal: abort.signal,
          receiveCount,
          latenessMs: latenessMs(runAt, receivedAt),
          receivedAt,
          messageId: record.messageId,
        });
        void report?.('SUCCEEDED', { result: resultOf(value) });
      } catch (error) {
        opts.onError?.(error, record, job);
        const dead = error instanceof UnrecoverableError || (opts.maxReceiveCount !== undefined && receiveCount >= opts.maxReceiveCount);
        // Reported before the record can come back, so a retry's report lands after it.
        await report?.(dead ? 'DEAD' : 'FAILED', { error: errorText(error) });
        if (error instanceof UnrecoverableError && (await toDeadLetterQueue(opts, record, error))) return;
        if (opts.sqs) await backOff(opts, record, retryDelaySeconds(receiveCount, backoff, random));
        throw error;
      }
    };

    // A processor per invocation: invocations running at once in one process (Lambda's
    // multi-concurrency, or the local stack's event source) never share records.
    const processor = new BatchProcessor(EventType.SQS);
    try {
      // A batch where every record failed is reported as such, not thrown: each record has had
      // its own backoff, which an invocation error would override with the queue's timeout.
      return await processPartialResponse(event, (record: SQSRecord) => slot(() => processRecord(record)), processor, {
        throwOnFullBatchFailure: false,
      });
    } finally {
      clearTimeout(timer);
      // This invocation's outcomes, in one request before the function freezes.
      await reporter?.flush();
    }
  };
}

async function toDeadLetterQueue(opts: LambdaConsumerOptions, record: SQSRecord, error: Error): Promise<boolean> {
  if (!opts.sqs || !opts.deadLetterQueueUrl) return false;
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [k, v] of Object.entries(record.messageAttributes ?? {})) {
    if (v.stringValue !== undefined) attributes[k] = { DataType: v.dataType, StringValue: v.stringValue };
  }
  attributes.dyneinError = { DataType: 'String', StringValue: cutText(error.message, 1024) || 'unrecoverable' };
  try {
    await opts.sqs.send(
      new SendMessageCommand({ QueueUrl: opts.deadLetterQueueUrl, MessageBody: record.body, MessageAttributes: attributes }),
    );
    return true; // reported as a success: the event source mapping deletes it from the queue
  } catch (sendError) {
    opts.onError?.(sendError, record);
    return false;
  }
}

async function backOff(opts: LambdaConsumerOptions, record: SQSRecord, seconds: number): Promise<void> {
  try {
    await opts.sqs!.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: opts.queueUrl ?? queueUrlOfArn(record.eventSourceARN),
        ReceiptHandle: record.receiptHandle,
        VisibilityTimeout: seconds,
      }),
    );
  } catch (error) {
    opts.onError?.(error, record); // the record still comes back, after the queue's visibility timeout
  }
}
