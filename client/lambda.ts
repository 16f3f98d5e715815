import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { ChangeMessageVisibilityCommand, SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { cutText, limiter } from '../core/util/index.js';
import { inHandlerSpan, otelApi, type OtelApi, queueNameOf } from './tracing.js';
import {
  DEFAULT_RETRY_BACKOFF,
  JobCancelledError,
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
import {
  CONCURRENCY_KEY_ATTRIBUTE,
  errorText,
  heartbeatSinkOf,
  HISTORY_ATTRIBUTE,
  MAX_WORKFLOW_RESULT_BYTES,
  OutcomeReporter,
  outcomeReport,
  requestedStops,
  resultOf,
  WORKFLOW_ATTRIBUTE,
  type OutcomeNotReportedError,
  type OutcomeReport,
  type OutcomeSink,
} from './outcomes.js';

/** Tries of a workflow job's report before its record fails (waits of full jitter, 200 ms doubling, in between). */
const WORKFLOW_REPORT_ATTEMPTS = 5;

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
   * Reports outcomes: a {@link DyneinClient} (or an {@link OutcomeReporter}).
   *
   * For tenants with history on (records with the `dynein-history` attribute; docs/history.md),
   * an invocation's outcomes go in one request (up to 100), sent before it returns. Without a
   * client, such records are still handled, with a warning once.
   *
   * A workflow job (a record with the `workflow` attribute) is reported at once (in a request
   * shared with the other workflow jobs ending at the same time: up to 100 a request, at most 4
   * under way per tenant) and retried (5 tries, while the function has time): the record succeeds
   * only once the report was answered, and a report given up on fails the record
   * (`batchItemFailures`: it comes back and runs again). Its handler's return value is its
   * `result` (JSON of at most 64 KiB, else left out with a warning). Without a client, such
   * records are not run and fail, with a warning once.
   *
   * Cancel a running job (docs/flow-control.md): before it runs the batch's records whose
   * outcomes are reported (history on, or a workflow's job), the wrapper asks the client's
   * `heartbeats` (a DyneinClient has them; one request per tenant and 100 jobs) which of them a
   * `DELETE` asked to stop. Such a record is not run: it is reported `CANCELLED` and succeeds
   * (deleted from the queue; a workflow job's report given up on fails it, as above). A heartbeat
   * request that fails is logged and its records run. While such records run, the wrapper asks
   * again every `heartbeatMs`: a record a `DELETE` asked to stop meanwhile sees its handler's
   * `signal` abort with a {@link JobCancelledError}, and whatever the handler then returns or
   * throws, it is reported `CANCELLED` and succeeds.
   *
   * A keyed job (a record with the `concurrencyKey` attribute: concurrency by key,
   * docs/flow-control.md) holds one of its key's slots until its outcome is reported: its outcome
   * goes with its key whatever the history setting (in the invocation's request, as a history
   * tenant's), and its key goes in those heartbeats (`concurrencyKeys`), renewing the slot's lease
   * before it runs and every `heartbeatMs` while it runs. Without a client such records still run, with a warning once:
   * their slots are then freed only when the key lease (`keyLeaseSeconds`, default 900 s) runs out.
   */
  readonly client?: OutcomeSink | OutcomeReporter;
  /** How often the records whose outcomes are reported are heartbeated while they run (see `client`). @default 10_000 */
  readonly heartbeatMs?: number;
  /** The queue's maxReceiveCount, when known: a failure on that receive is reported `DEAD`. @default unknown */
  readonly maxReceiveCount?: number;
  /** Failures, for logs (the handler's error, and the record). */
  readonly onError?: (error: unknown, record: SQSRecord, job?: DeliveredJob) => void;
  /**
   * OpenTelemetry: each record's handler runs in a span started from its message's `traceparent`
   * (docs/tracing.md#the-workers-span). Pass the API module (`import * as otel from
   * '@opentelemetry/api'`: a bundled function must), or `false` for none. @default
   * `@opentelemetry/api` when it resolves at run time, else none
   */
  readonly otel?: OtelApi | false;
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
  const reports = new RecordReports<P>(reporter, now, random);
  const heartbeats = heartbeatSinkOf(reporter);
  const otel = otelApi(opts.otel);
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

    // Cancel a running job (docs/flow-control.md): the records whose outcomes are reported are
    // checked before any runs, in one heartbeat request per tenant (and 100 jobs) for the batch.
    const parsed = new Map<SQSRecord, DeliveredJob<P>>();
    let stops: Promise<Set<string>> | undefined;
    /** The reported records whose handlers run now: heartbeated every `heartbeatMs`, stopped when asked. */
    const running = new Map<string, { job: DeliveredJob<P>; abort: AbortController }>();
    let beating = false;
    const beatRunning = async (): Promise<void> => {
      if (beating || running.size === 0 || !heartbeats) return;
      beating = true;
      try {
        const asked = await requestedStops(
          heartbeats,
          [...running.values()].map((r) => r.job),
          (error, tenant, jobIds) =>
            console.error(`dynein: the heartbeat of ${jobIds.length} running job(s) of tenant '${tenant}' failed`, error),
          abort.signal,
        );
        for (const jobId of asked) running.get(jobId)?.abort.abort(new JobCancelledError(jobId));
      } finally {
        beating = false;
      }
    };
    if (heartbeats) {
      const reportable: DeliveredJob<P>[] = [];
      for (const record of event.Records) {
        let job: DeliveredJob<P>;
        try {
          job = parseRecord<P>(record);
        } catch {
          continue; // fails in processRecord, as ever
        }
        parsed.set(record, job);
        if (isReported(record, job)) reportable.push(job);
      }
      if (reportable.length > 0)
        stops = requestedStops(
          heartbeats,
          reportable,
          (error, tenant, jobIds) =>
            console.error(`dynein: the heartbeat of ${jobIds.length} job(s) of tenant '${tenant}' failed: they run unchecked`, error),
          abort.signal,
        );
    }

    /**
     * One record: resolves when it succeeded (or went to the DLQ), throws to report it as a
     * failure. A workflow job succeeds only once its report was answered; a report given up on
     * fails the record, which comes back (after the backoff, with `sqs`) and runs again.
     */
    const processRecord = async (record: SQSRecord): Promise<void> => {
      const receivedAt = now();
      // The record's own signal: the invocation's (the function's timeout), or a stop asked while it runs.
      const own = new AbortController();
      const onTimeout = () => own.abort(abort.signal.reason);
      if (abort.signal.aborted) onTimeout();
      else abort.signal.addEventListener('abort', onTimeout, { once: true });
      const receiveCount = receiveCountOf(record.attributes as unknown as Record<string, string>);
      let job: DeliveredJob<P> | undefined;
      let report: RecordReport | undefined;
      let value: unknown;
      let cancelled = false;
      try {
        job = parsed.get(record) ?? parseRecord<P>(record);
        report = reports.for(record, job, receiveCount, receivedAt, abort.signal);
        // A job a DELETE asked to stop is not run: reported CANCELLED below, and done.
        cancelled = report !== undefined && stops !== undefined && (await stops).has(job.jobId);
        const runAt = record.messageAttributes?.runAt?.stringValue ?? job.runAt;
        if (!cancelled) {
          if (report && heartbeats) running.set(job.jobId, { job, abort: own });
          const ctx = {
            signal: own.signal,
            receiveCount,
            latenessMs: latenessMs(runAt, receivedAt),
            receivedAt,
            messageId: record.messageId,
          };
          const info = {
            queue: queueNameOf(record.eventSourceARN),
            messageId: record.messageId,
            attempt: receiveCount,
            latenessMs: ctx.latenessMs,
          };
          const current = job;
          value = await inHandlerSpan(await otel, current, info, async () => handler(current, ctx));
        }
      } catch (error) {
        if (stopped(own.signal)) cancelled = true;
        else {
          opts.onError?.(error, record, job);
          const dead = error instanceof UnrecoverableError || (opts.maxReceiveCount !== undefined && receiveCount >= opts.maxReceiveCount);
          // Reported before the record can come back, so a retry's report lands after it.
          const unreported = await report?.send(dead ? 'DEAD' : 'FAILED', { error: errorText(error) });
          if (unreported) opts.onError?.(unreported, record, job);
          // A workflow job's DEAD not reported stays out of the DLQ: it comes back and reports again.
          if (error instanceof UnrecoverableError && !unreported && (await toDeadLetterQueue(opts, record, error))) return;
          if (opts.sqs) await backOff(opts, record, retryDelaySeconds(receiveCount, backoff, random));
          throw error;
        }
      } finally {
        if (job) running.delete(job.jobId);
        abort.signal.removeEventListener('abort', onTimeout);
      }
      // A stop asked while the handler ran: CANCELLED, whatever it returned.
      if (stopped(own.signal)) cancelled = true;
      if (cancelled) {
        // Not run: CANCELLED is final (deleted, no retry); a workflow job's report given up on fails the record.
        if (!report!.workflow) return void report!.send('CANCELLED', {});
        const unreported = await report!.send('CANCELLED', {});
        if (!unreported) return;
        opts.onError?.(unreported, record, job);
        if (opts.sqs) await backOff(opts, record, retryDelaySeconds(receiveCount, backoff, random));
        throw unreported;
      }
      if (!report?.workflow) return void report?.send('SUCCEEDED', { result: resultOf(value) });
      const result = resultOf(value, MAX_WORKFLOW_RESULT_BYTES);
      if (result === undefined && value !== undefined)
        console.warn(`dynein: the result of workflow job ${job?.jobId} is not JSON of at most 64 KiB: it is reported without one`);
      const unreported = await report.send('SUCCEEDED', { result });
      if (!unreported) return;
      opts.onError?.(unreported, record, job);
      if (opts.sqs) await backOff(opts, record, retryDelaySeconds(receiveCount, backoff, random));
      throw unreported;
    };

    // A processor per invocation: invocations running at once in one process (Lambda's
    // multi-concurrency, or the local stack's event source) never share records.
    const processor = new BatchProcessor(EventType.SQS);
    const beat = heartbeats ? setInterval(() => void beatRunning(), opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS) : undefined;
    try {
      // A batch where every record failed is reported as such, not thrown: each record has had
      // its own backoff, which an invocation error would override with the queue's timeout.
      return await processPartialResponse(event, (record: SQSRecord) => slot(() => processRecord(record)), processor, {
        throwOnFullBatchFailure: false,
      });
    } finally {
      clearTimeout(timer);
      clearInterval(beat);
      // This invocation's outcomes, in one request before the function freezes.
      await reporter?.flush();
    }
  };
}

/** How often running records whose outcomes are reported are heartbeated, by default. */
const DEFAULT_HEARTBEAT_MS = 10_000;

/** Whether a record's signal aborted because a `DELETE` asked to stop its job. */
function stopped(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof JobCancelledError;
}

/** A record's job, with its `concurrencyKey` attribute when it has one. */
function parseRecord<P>(record: SQSRecord): DeliveredJob<P> {
  const attrs = record.messageAttributes;
  return parseDelivery<P>(record.body, {
    concurrencyKey: attrs?.[CONCURRENCY_KEY_ATTRIBUTE]?.stringValue,
    traceparent: attrs?.traceparent?.stringValue,
    tracestate: attrs?.tracestate?.stringValue,
  });
}

/** Whether a record's outcome is reported: a workflow's job, a history tenant's, or a keyed job. */
function isReported(record: SQSRecord, job: DeliveredJob<unknown>): boolean {
  const attrs = record.messageAttributes;
  return (
    (attrs?.[WORKFLOW_ATTRIBUTE]?.stringValue ?? job.workflow) !== undefined ||
    attrs?.[HISTORY_ATTRIBUTE]?.stringValue === '1' ||
    job.concurrencyKey !== undefined
  );
}

/** How one record's outcome is reported. */
interface RecordReport {
  /** A workflow job's: sent at once and retried; else batched, sent before the invocation ends. */
  readonly workflow: boolean;
  /** Resolves once sent; for a workflow job, to the error it gave up on (undefined: answered). */
  send(outcome: OutcomeReport['outcome'], extra: { error?: string; result?: unknown }): Promise<OutcomeNotReportedError | undefined>;
}

/** The reports of records: a workflow job's, a history tenant's or a keyed job's; none for other records. */
class RecordReports<P> {
  #warnedHistory = false;
  #warnedWorkflow = false;
  #warnedKeyed = false;

  constructor(
    private readonly reporter: OutcomeReporter | undefined,
    private readonly now: () => number,
    private readonly random: () => number,
  ) {}

  /**
   * The report of `record`, or undefined when it needs none (or, history on or a keyed job, there
   * is no client: warned once). A workflow job's is retried up to {@link WORKFLOW_REPORT_ATTEMPTS}
   * tries, no retry after `signal` aborts (the function is about to time out).
   *
   * @throws for a workflow job when there is no client: the record is not run, and fails
   */
  for(record: SQSRecord, job: DeliveredJob<P>, attempts: number, receivedAt: number, signal: AbortSignal): RecordReport | undefined {
    if (!isReported(record, job)) return undefined;
    const workflow = record.messageAttributes?.[WORKFLOW_ATTRIBUTE]?.stringValue ?? job.workflow;
    const reporter = this.reporter;
    if (!reporter) return this.#noClient(job, workflow);
    const { now, random } = this;
    const report = (outcome: OutcomeReport['outcome'], extra: { error?: string; result?: unknown }) =>
      outcomeReport(
        job.jobId,
        outcome,
        { attempts, receivedAt, endedAt: now() },
        { ...extra, concurrencyKey: job.concurrencyKey, traceparent: job.traceparent },
      );
    if (workflow === undefined)
      return { workflow: false, send: async (outcome, extra) => void (await reporter.report(job.tenant, report(outcome, extra))) };
    return {
      workflow: true,
      async send(outcome, extra) {
        const opts = { signal, maxAttempts: WORKFLOW_REPORT_ATTEMPTS, now, random };
        const answer = await reporter.reportNow(job.tenant, report(outcome, extra), opts);
        return answer.answered ? undefined : answer.error;
      },
    };
  }

  #noClient(job: DeliveredJob<P>, workflow: string | undefined): undefined {
    if (workflow !== undefined) {
      if (!this.#warnedWorkflow)
        console.warn(
          `dynein: job '${job.jobId}' belongs to workflow '${workflow}', whose outcomes must be reported, but dyneinLambdaHandler has no client: such records are not run and fail. Pass { client: new DyneinClient(...) }`,
        );
      this.#warnedWorkflow = true;
      throw new Error(`workflow job ${job.jobId} was not run: dyneinLambdaHandler has no client to report its outcome with`);
    }
    if (job.concurrencyKey !== undefined) {
      if (!this.#warnedKeyed)
        console.warn(
          `dynein: job '${job.jobId}' has concurrency key '${job.concurrencyKey}', but dyneinLambdaHandler has no client to report its outcome with: such records run, but each holds its key's slot until the key lease runs out (tenant setting keyLeaseSeconds, default 900 s), holding the key's next jobs back until then. Pass { client: new DyneinClient(...) } (docs/flow-control.md)`,
        );
      this.#warnedKeyed = true;
      return undefined;
    }
    if (!this.#warnedHistory)
      console.warn(
        `dynein: tenant '${job.tenant}' keeps job history, but dyneinLambdaHandler has no client to report outcomes with: pass { client: new DyneinClient(...) } (docs/history.md)`,
      );
    this.#warnedHistory = true;
    return undefined;
  }
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
