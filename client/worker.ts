import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
  type Message,
  type MessageAttributeValue,
} from '@aws-sdk/client-sqs';
import { backoffMs, cutText, sleep } from '../core/util/index.js';
import {
  DEFAULT_RETRY_BACKOFF,
  JobCancelledError,
  MAX_VISIBILITY_SECONDS,
  UnrecoverableError,
  latenessMs,
  parseDelivery,
  receiveCountOf,
  retryDelaySeconds,
  type DeliveredJob,
  type JobContext,
  type JobHandler,
  type RetryBackoff,
} from './delivery.js';
import { inHandlerSpan, otelApi, type OtelApi, queueNameOf } from './tracing.js';
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
  type HeartbeatJob,
  type HeartbeatSink,
  type OutcomeReport,
  type OutcomeSink,
  type ReportAnswer,
} from './outcomes.js';

export interface WorkerOptions<P = unknown> {
  /** The tenant queue (`local.json`'s `queueUrl`, or the DyneinTenant's `queue.queueUrl`). */
  readonly queueUrl: string;
  readonly handler: JobHandler<P>;
  /** Handlers running at once. @default 10 */
  readonly concurrency?: number;
  /** @default a new SQSClient (region from the queue URL or the environment), destroyed on stop */
  readonly sqs?: SQSClient;
  /**
   * Where an {@link UnrecoverableError} sends the message (needs `sqs:SendMessage` on it). Without
   * it, the worker releases the message at once on every receive until SQS moves it to the DLQ
   * (after `maxReceiveCount`), never running the handler again in this process.
   */
  readonly deadLetterQueueUrl?: string;
  /** Visibility timeout asked for on receive and renewed by the heartbeat. @default 30 */
  readonly visibilityTimeoutSeconds?: number;
  /** Heartbeat period while a handler runs. @default a third of the visibility timeout */
  readonly heartbeatMs?: number;
  /** Visibility after a failure, from the receive count. @default { baseMs: 10_000, capMs: 900_000 } */
  readonly backoff?: RetryBackoff;
  /** Long-poll wait. On stop, a receive under way is left to finish (within the grace period). @default 20 */
  readonly waitTimeSeconds?: number;
  /**
   * On stop, how long in-flight handlers may finish before they are aborted and their messages
   * released (visible again at once, for another worker). The release itself gets at most
   * another 400 ms, so by default the worker stops within 2 s of SIGTERM. Raise it where the
   * platform waits longer before SIGKILL (ECS and Kubernetes: 30 s) and jobs are worth finishing.
   * @default 1_500
   */
  readonly shutdownGraceMs?: number;
  /** Stop gracefully on SIGTERM and SIGINT. @default true */
  readonly handleSignals?: boolean;
  /**
   * Reports outcomes: a {@link DyneinClient} (or an {@link OutcomeReporter} to share).
   *
   * For tenants with history on (messages with the `dynein-history` attribute; docs/history.md),
   * outcomes are sent in batches of up to 100, at least every second, and on stop (within 1 s
   * more than the grace period and releases), after the message was deleted. Without a client,
   * such messages are still handled, with a warning once.
   *
   * A workflow job (a message with the `workflow` attribute; docs/workflows.md) is reported
   * whatever the history setting, at once, retried until answered, and its message is deleted
   * only then; a report given up on leaves the message to come back (its handler runs again: at
   * least once). Reports of workflow jobs ending at the same time share requests (up to 100 a
   * request, at most 4 requests under way per tenant: {@link OutcomeReporter.reportNow}), so
   * 50 handlers ending together make a few requests, not 50. Without a client, such messages are
   * not run (a `failed` event, the message backed off) and the worker warns once.
   *
   * A keyed job (a message with the `concurrencyKey` attribute: concurrency by key,
   * docs/flow-control.md) holds one of its key's slots until its outcome is reported: its outcome
   * goes with its key whatever the history setting, at once (sharing requests as workflow jobs'
   * do; up to 5 tries, an `error` event if given up on), and every `heartbeatMs` while it runs its
   * key goes in the heartbeat (`concurrencyKeys`), which renews the slot's lease. Without a client
   * such jobs still run, with a warning and an `error` event once: their slots are then freed only
   * when the key lease (`keyLeaseSeconds`, default 900 s) runs out, holding the key's next jobs
   * back until then. A client without `heartbeats` renews no lease: a keyed job running longer
   * than the key lease may see another job of its key take its slot.
   *
   * Cancel a running job (docs/flow-control.md): every `heartbeatMs` while such jobs (history
   * on, or a workflow's) run, the worker asks the client's `heartbeats` (a DyneinClient has them;
   * one request per tenant and 100 jobs) which of them a `DELETE` asked to stop. Each such
   * handler's `signal` aborts with a {@link JobCancelledError}; once the handler settles, whatever
   * it returns or throws, the job is reported `CANCELLED` (a `cancelled` event) and its message
   * deleted: no retry, no dead-letter queue. A heartbeat request that fails is an `error` event
   * (operation `heartbeats`) and never fails a job: the next heartbeat asks again.
   */
  readonly client?: OutcomeSink | OutcomeReporter;
  /**
   * The queue's maxReceiveCount, when known: a failure on that receive (the one that sends the
   * message to the DLQ) is reported `DEAD` rather than `FAILED`. @default unknown (only an
   * {@link UnrecoverableError} is reported DEAD)
   */
  readonly maxReceiveCount?: number;
  /** Everything that happens, for logs and metrics. */
  readonly onEvent?: (event: WorkerEvent<P>) => void;
  /**
   * OpenTelemetry: each handler runs in a span started from its message's `traceparent`
   * (docs/tracing.md#the-workers-span). Pass the API module (`import * as otel from
   * '@opentelemetry/api'`), or `false` for none. @default `@opentelemetry/api` when it resolves
   * from here, else none
   */
  readonly otel?: OtelApi | false;
  readonly now?: () => number;
  readonly random?: () => number;
}

export type WorkerEvent<P = unknown> =
  | { type: 'completed'; job: DeliveredJob<P>; messageId: string; receiveCount: number; durationMs: number }
  // A `DELETE` of the running job asked to stop it: reported CANCELLED, its message deleted (docs/flow-control.md).
  | { type: 'cancelled'; job: DeliveredJob<P>; messageId: string; receiveCount: number; durationMs: number }
  | { type: 'failed'; job: DeliveredJob<P>; messageId: string; receiveCount: number; error: unknown; retryInSeconds: number }
  | {
      type: 'dead';
      job?: DeliveredJob<P>;
      messageId: string;
      receiveCount: number;
      error: unknown;
      to: 'dead-letter-queue' | 'redrive-policy';
    }
  | { type: 'released'; job?: DeliveredJob<P>; messageId: string; reason: 'shutdown' | 'unrecoverable' }
  | { type: 'lost'; job: DeliveredJob<P>; messageId: string; error: unknown }
  | { type: 'error'; operation: string; error: unknown };

type HandlerOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

interface InFlight {
  readonly msg: Message;
  /** The handler's signal. */
  readonly abort: AbortController;
  /** Aborts when the message is released (shutdown) or lost: no more tries of its report. */
  readonly gone: AbortController;
  readonly done: Promise<void>;
  released: boolean;
  /** A `DELETE` asked to stop the job while its handler ran: its signal aborted with a {@link JobCancelledError}. */
  cancelled: boolean;
}

/** Default grace period on stop: with {@link RELEASE_BUDGET_MS}, the worker stops within 2 s. */
const DEFAULT_SHUTDOWN_GRACE_MS = 1_500;
/** After the grace period, how long the releases of the jobs still running may take. */
const RELEASE_BUDGET_MS = 400;

/** On stop, how long the last outcome reports (history on) may take after the releases. */
const FLUSH_BUDGET_MS = 1_000;

/**
 * How long a workflow job's report is retried (the message held by the heartbeat) before it is
 * given up on and the message left to come back: 5 minutes.
 */
const WORKFLOW_REPORT_BUDGET_MS = 300_000;

/**
 * Tries of a keyed job's report (waits of full jitter, 200 ms doubling, in between): the message
 * is not held for it (a final outcome's message is already deleted), and a report given up on only
 * leaves the key's slot to its lease.
 */
const KEYED_REPORT_ATTEMPTS = 5;

/** What reports one delivery's outcome; resolves once sent or given up on (never rejects). */
type ReportFn = (outcome: OutcomeReport['outcome'], extra: { error?: string; result?: unknown }) => Promise<void>;

/** Message ids remembered as unrecoverable when no DLQ URL is known (bounded). */
const MAX_DOOMED = 10_000;

/**
 * Consumes a tenant queue: long-polls (20 s, up to 10 messages), runs at most `concurrency`
 * handlers, deletes a message when its handler succeeds, and on failure sets its visibility
 * timeout by exponential backoff with jitter from the receive count, so SQS moves it to the DLQ
 * after `maxReceiveCount`. A heartbeat extends the visibility while a handler runs. `stop()` (or
 * SIGTERM) stops receiving, lets in-flight handlers finish within the grace period (1.5 s by
 * default: the worker stops within 2 s), then aborts the rest and releases their messages
 * (ChangeMessageVisibility 0): nothing is lost. One bad message never affects others. A
 * workflow job's outcome is reported (and answered) before its message is deleted: see `client`.
 * A running job whose outcomes are reported can be stopped by a `DELETE` of it: its handler's
 * `signal` aborts with a {@link JobCancelledError} at the next heartbeat (see `client`). A keyed
 * job's (concurrency by key) outcome is reported with its key, and its heartbeats renew its key's
 * slot lease (see `client`).
 *
 * @example
 * const worker = new Worker({ queueUrl, concurrency: 5, handler: async (job, { signal }) => { await charge(job.payload, signal); } });
 * await worker.run(); // until SIGTERM
 */
export class Worker<P = unknown> {
  readonly #o: Required<
    Omit<WorkerOptions<P>, 'sqs' | 'deadLetterQueueUrl' | 'heartbeatMs' | 'onEvent' | 'client' | 'maxReceiveCount' | 'otel'>
  > &
    Pick<WorkerOptions<P>, 'deadLetterQueueUrl' | 'onEvent' | 'maxReceiveCount'> & { heartbeatMs: number };
  /** The OpenTelemetry API the handlers' spans are started with (none: no span). */
  readonly #otel: Promise<OtelApi | undefined>;
  readonly #reporter: OutcomeReporter | undefined;
  /** The client's heartbeats, asked every `heartbeatMs` about {@link #stoppable}'s jobs. */
  readonly #heartbeats: HeartbeatSink | undefined;
  /**
   * Jobs whose handler runs and whose outcomes are reported: a `DELETE` may ask to stop them, and
   * a keyed job's heartbeat renews its key's slot lease.
   */
  readonly #stoppable = new Map<InFlight, HeartbeatJob>();
  #stopCheck: ReturnType<typeof setInterval> | undefined;
  #checkingStops = false;
  /** Aborts once the worker has stopped: heartbeats under way, and keyed jobs' report retries. */
  readonly #stopCheckAbort = new AbortController();
  #warnedNoClient = false;
  #warnedNoWorkflowClient = false;
  #warnedNoKeyedClient = false;
  readonly #sqs: SQSClient;
  readonly #ownsClient: boolean;
  readonly #inFlight = new Map<string, InFlight>();
  readonly #doomed = new Set<string>();
  readonly #poll = new AbortController();
  #reserved = 0;
  #wake: (() => void)[] = [];
  #running: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #stopRequested = false;
  readonly #stopAbort = new AbortController();
  readonly #receiving = new Set<Promise<void>>();
  readonly #onSignal = () => void this.stop();

  constructor(opts: WorkerOptions<P>) {
    const visibility = opts.visibilityTimeoutSeconds ?? 30;
    const concurrency = opts.concurrency ?? 10;
    if (!Number.isInteger(concurrency) || concurrency < 1)
      throw new RangeError(`concurrency must be a whole number ≥ 1, got ${concurrency}`);
    if (!Number.isInteger(visibility) || visibility < 1 || visibility > MAX_VISIBILITY_SECONDS)
      throw new RangeError(`visibilityTimeoutSeconds must be a whole number from 1 to ${MAX_VISIBILITY_SECONDS}, got ${visibility}`);
    this.#o = {
      concurrency,
      visibilityTimeoutSeconds: visibility,
      heartbeatMs: opts.heartbeatMs ?? Math.max(200, (visibility * 1000) / 3),
      backoff: opts.backoff ?? DEFAULT_RETRY_BACKOFF,
      waitTimeSeconds: opts.waitTimeSeconds ?? 20,
      shutdownGraceMs: opts.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS,
      handleSignals: opts.handleSignals ?? true,
      now: opts.now ?? Date.now,
      random: opts.random ?? Math.random,
      queueUrl: opts.queueUrl,
      handler: opts.handler,
      deadLetterQueueUrl: opts.deadLetterQueueUrl,
      onEvent: opts.onEvent,
      maxReceiveCount: opts.maxReceiveCount,
    };
    this.#reporter =
      opts.client instanceof OutcomeReporter
        ? opts.client
        : opts.client
          ? new OutcomeReporter(opts.client, { onError: (error) => this.#emit({ type: 'error', operation: 'report outcomes', error }) })
          : undefined;
    this.#heartbeats = heartbeatSinkOf(this.#reporter);
    this.#otel = otelApi(opts.otel);
    this.#ownsClient = opts.sqs === undefined;
    const region = /^https:\/\/sqs\.([a-z0-9-]+)\.amazonaws\.com/.exec(opts.queueUrl)?.[1];
    this.#sqs = opts.sqs ?? new SQSClient(region && !process.env.AWS_REGION ? { region } : {});
  }

  /** Handlers running now. */
  get active(): number {
    return this.#inFlight.size;
  }

  /** Starts consuming; resolves once the worker has stopped (after `stop()` or a signal). */
  run(): Promise<void> {
    if (this.#running) return this.#running;
    if (this.#o.handleSignals) {
      process.once('SIGTERM', this.#onSignal);
      process.once('SIGINT', this.#onSignal);
    }
    if (this.#heartbeats) this.#stopCheck = setInterval(() => void this.#checkStops(), this.#o.heartbeatMs);
    const pollers = Array.from({ length: Math.ceil(this.#o.concurrency / 10) }, () => this.#pollLoop());
    this.#running = Promise.all(pollers).then(() => this.stop());
    return this.#running;
  }

  /**
   * Stops receiving: no new receive starts, and what a receive already under way brings back is
   * released at once (a long poll is left to finish rather than cut, since SQS may already have
   * handed its messages to the cut connection). Waits up to the grace period for in-flight
   * handlers and receives, then aborts the rest and makes their messages visible again.
   * Idempotent; resolves when the worker has stopped.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopRequested = true;
      this.#stopAbort.abort();
      this.#wakeAll();
      const grace = new AbortController();
      const idle = (async () => {
        while (this.#receiving.size > 0 || this.#inFlight.size > 0) {
          await Promise.race([...this.#receiving, ...[...this.#inFlight.values()].map((f) => f.done)]);
        }
      })();
      await Promise.race([idle, sleep(this.#o.shutdownGraceMs, grace.signal)]);
      grace.abort();
      // Past the grace period: hand the running jobs back (visible again at once) while the
      // receives are still open, since a receive under way may pick one of them up and would
      // otherwise hide it for a whole visibility timeout once cut; what a receive brings back
      // now is released at once too (#process). All within a bounded time: a release that does
      // not make it leaves its message to come back after its visibility timeout. Then the
      // receives still waiting are cut.
      const releaseBy = AbortSignal.timeout(RELEASE_BUDGET_MS);
      // A job asked to stop (cancelled) is not handed back: its message is deleted once its handler settles.
      const releases = [...this.#inFlight.values()]
        .filter((f) => !f.cancelled)
        .map(async (f) => {
          f.released = true;
          const reason = new Error('the worker is shutting down: the message is released to another worker');
          f.gone.abort(reason);
          f.abort.abort(reason);
          if (await this.#setVisibility(f.msg, 0, 'release', releaseBy))
            this.#emit({ type: 'released', messageId: f.msg.MessageId!, reason: 'shutdown' });
        });
      const settled = (async () => {
        await Promise.all(releases);
        const pending = () => [...this.#receiving, ...[...this.#inFlight.values()].filter((f) => !f.released).map((f) => f.done)];
        while (pending().length > 0) await Promise.race(pending());
      })();
      await Promise.race([settled, new Promise((r) => releaseBy.addEventListener('abort', r, { once: true }))]);
      // The outcomes still buffered (history tenants), within a bounded time.
      if (this.#reporter) await Promise.race([this.#reporter.flush(), sleep(FLUSH_BUDGET_MS)]);
      clearInterval(this.#stopCheck);
      this.#stopCheckAbort.abort();
      this.#poll.abort();
      process.off('SIGTERM', this.#onSignal);
      process.off('SIGINT', this.#onSignal);
      if (this.#ownsClient) this.#sqs.destroy();
    })();
    return this.#stopping;
  }

  async #pollLoop(): Promise<void> {
    let errors = 0;
    while (!this.#stopRequested) {
      const free = this.#o.concurrency - this.#inFlight.size - this.#reserved;
      if (free <= 0) {
        await new Promise<void>((r) => this.#wake.push(r));
        continue;
      }
      const want = Math.min(10, free);
      this.#reserved += want;
      let messages: Message[];
      const receiving = this.#sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: this.#o.queueUrl,
          MaxNumberOfMessages: want,
          WaitTimeSeconds: this.#o.waitTimeSeconds,
          VisibilityTimeout: this.#o.visibilityTimeoutSeconds,
          MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp'],
          MessageAttributeNames: ['All'],
        }),
        { abortSignal: this.#poll.signal },
      );
      const tracked: Promise<void> = receiving.then(
        () => void this.#receiving.delete(tracked),
        () => void this.#receiving.delete(tracked),
      );
      this.#receiving.add(tracked);
      try {
        messages = (await receiving).Messages ?? [];
        errors = 0;
      } catch (error) {
        messages = [];
        if (!this.#stopRequested) this.#emit({ type: 'error', operation: 'ReceiveMessage', error });
        errors++;
      }
      this.#reserved -= want;
      if (errors > 0 && !this.#stopRequested) {
        await sleep(backoffMs(errors - 1, { baseMs: 200, capMs: 10_000 }, this.#o.random), this.#stopAbort.signal);
        continue;
      }
      for (const msg of messages) this.#start(msg);
    }
  }

  #start(msg: Message): void {
    const abort = new AbortController();
    const entry: InFlight = { msg, abort, gone: new AbortController(), released: false, cancelled: false, done: Promise.resolve() };
    (entry as { done: Promise<void> }).done = this.#process(entry)
      .catch((error) => this.#emit({ type: 'error', operation: 'process', error }))
      .finally(() => {
        this.#inFlight.delete(msg.ReceiptHandle!);
        this.#wakeAll();
      });
    this.#inFlight.set(msg.ReceiptHandle!, entry);
  }

  async #process(entry: InFlight): Promise<void> {
    const { msg, abort } = entry;
    const receivedAt = this.#o.now();
    const receiveCount = receiveCountOf(msg.Attributes);
    const messageId = msg.MessageId!;
    if (this.#stopRequested) {
      // Received while stopping: hand it straight back.
      if (await this.#setVisibility(msg, 0, 'release')) this.#emit({ type: 'released', messageId, reason: 'shutdown' });
      return;
    }
    if (this.#doomed.has(messageId)) {
      // Unrecoverable, no DLQ URL: hand it back at once until the redrive policy takes it.
      if (await this.#setVisibility(msg, 0, 'release')) this.#emit({ type: 'released', messageId, reason: 'unrecoverable' });
      return;
    }
    let job: DeliveredJob<P>;
    try {
      const attrs = msg.MessageAttributes;
      job = parseDelivery<P>(msg.Body, {
        concurrencyKey: attrs?.[CONCURRENCY_KEY_ATTRIBUTE]?.StringValue,
        traceparent: attrs?.traceparent?.StringValue,
        tracestate: attrs?.tracestate?.StringValue,
      });
    } catch (error) {
      return this.#dead(msg, undefined, receiveCount, error);
    }
    const runAt = msg.MessageAttributes?.runAt?.StringValue ?? job.runAt;
    const ctx: JobContext = { signal: abort.signal, receiveCount, latenessMs: latenessMs(runAt, receivedAt), receivedAt, messageId };
    if (msg.MessageAttributes?.[WORKFLOW_ATTRIBUTE]?.StringValue !== undefined || job.workflow !== undefined)
      return this.#processWorkflowJob(entry, job, ctx);
    const report = this.#reportFor(msg, job, receiveCount, receivedAt);
    const heartbeat = this.#heartbeat(entry, job, receivedAt);
    if (report) this.#stoppable.set(entry, { tenant: job.tenant, jobId: job.jobId, concurrencyKey: job.concurrencyKey });
    const outcome = await this.#run(job, ctx).finally(() => {
      heartbeat.stop();
      this.#stoppable.delete(entry);
    });
    if (entry.cancelled) {
      // Stopped on a cancel request (whatever the handler returned or threw): final, never retried.
      if (await this.#delete(msg)) this.#emitCancelled(job, ctx);
      void report?.('CANCELLED', {});
      return;
    }
    if (outcome.ok) {
      // Even after a release (shutdown) the job did complete: deleting avoids a duplicate.
      if (await this.#delete(msg)) this.#emit({ type: 'completed', job, messageId, receiveCount, durationMs: this.#o.now() - receivedAt });
      void report?.('SUCCEEDED', { result: resultOf(outcome.value) });
      return;
    }
    if (entry.released) return; // already handed back; its next delivery retries it
    if (outcome.error instanceof UnrecoverableError) {
      void report?.('DEAD', { error: errorText(outcome.error) });
      return this.#dead(msg, job, receiveCount, outcome.error);
    }
    const max = this.#o.maxReceiveCount;
    // The failure is reported before the message becomes visible again, so the retry's report
    // always lands after it (the record keeps the latest outcome; docs/history.md).
    await report?.(max !== undefined && receiveCount >= max ? 'DEAD' : 'FAILED', { error: errorText(outcome.error) });
    await this.#backOff(msg, job, receiveCount, outcome.error);
  }

  /** Runs the handler (in its span, with OpenTelemetry): what it returned, or what it threw. */
  async #run(job: DeliveredJob<P>, ctx: JobContext): Promise<HandlerOutcome> {
    const otel = await this.#otel;
    const info = { queue: queueNameOf(this.#o.queueUrl), messageId: ctx.messageId, attempt: ctx.receiveCount, latenessMs: ctx.latenessMs };
    try {
      return { ok: true, value: await inHandlerSpan(otel, job, info, async () => this.#o.handler(job, ctx)) };
    } catch (error) {
      return { ok: false, error };
    }
  }

  /**
   * A workflow job (issue #25): its outcome is what moves its workflow on, so it is reported
   * before its message is deleted, at once (not in the 1 s batch; in a request shared with the
   * workflow jobs ending at the same time: {@link OutcomeReporter.reportNow}), and the report is
   * retried (full jitter from 200 ms up to 5 s between tries) while the heartbeat keeps the
   * message held: until the route answers with a state, refuses it for good (`NotDelivered`,
   * `ValidationError`, a 4xx), the message is released (`stop()`) or lost, or
   * {@link WORKFLOW_REPORT_BUDGET_MS} has passed. Answered, the message goes on as an ordinary
   * job's: deleted, dead-lettered or backed off. Given up on, it emits an `error` event
   * (an `OutcomeNotReportedError`) and leaves the message to come back (backed off like a
   * failure, unless released): its handler runs again (at least once) and reports again.
   */
  async #processWorkflowJob(entry: InFlight, job: DeliveredJob<P>, ctx: JobContext): Promise<void> {
    const reporter = this.#reporter;
    if (!reporter) return this.#refuseWithoutClient(entry.msg, job, ctx.receiveCount);
    const heartbeat = this.#heartbeat(entry, job, ctx.receivedAt);
    let outcome: HandlerOutcome;
    let answer: ReportAnswer;
    try {
      this.#stoppable.set(entry, { tenant: job.tenant, jobId: job.jobId, concurrencyKey: job.concurrencyKey });
      outcome = await this.#run(job, ctx).finally(() => this.#stoppable.delete(entry));
      const cancelled = entry.cancelled;
      if (!outcome.ok && entry.released && !cancelled) return; // already handed back; its next delivery retries it
      const report = cancelled
        ? this.#outcomeReport(job, ctx.receiveCount, ctx.receivedAt, 'CANCELLED', {})
        : this.#workflowReport(job, ctx, outcome);
      const opts = { signal: entry.gone.signal, budgetMs: WORKFLOW_REPORT_BUDGET_MS, now: this.#o.now, random: this.#o.random };
      answer = await reporter.reportNow(job.tenant, report, opts);
    } finally {
      heartbeat.stop();
    }
    const { msg } = entry;
    if (!answer.answered) {
      this.#emit({ type: 'error', operation: 'report outcome (workflow job)', error: answer.error });
      if (entry.released) return; // released or lost: it comes back as it is
      if (!outcome.ok && !entry.cancelled) return this.#backOff(msg, job, ctx.receiveCount, outcome.error);
      await this.#setVisibility(msg, retryDelaySeconds(ctx.receiveCount, this.#o.backoff, this.#o.random), 'backoff');
      return;
    }
    if (entry.cancelled) {
      if (await this.#delete(msg)) this.#emitCancelled(job, ctx);
      return;
    }
    if (outcome.ok) {
      if (await this.#delete(msg))
        this.#emit({
          type: 'completed',
          job,
          messageId: ctx.messageId,
          receiveCount: ctx.receiveCount,
          durationMs: this.#o.now() - ctx.receivedAt,
        });
      return;
    }
    if (outcome.error instanceof UnrecoverableError) return this.#dead(msg, job, ctx.receiveCount, outcome.error);
    await this.#backOff(msg, job, ctx.receiveCount, outcome.error);
  }

  /**
   * A workflow job's report: `SUCCEEDED` with the handler's return value as `result` (JSON of at
   * most 64 KiB; anything else is left out, with an `error` event, and the job still succeeds:
   * running it again would return the same), `DEAD` for an {@link UnrecoverableError} or a failure
   * on receive `maxReceiveCount`, `FAILED` otherwise.
   */
  #workflowReport(job: DeliveredJob<P>, ctx: JobContext, outcome: HandlerOutcome): OutcomeReport {
    if (!outcome.ok) {
      const max = this.#o.maxReceiveCount;
      const dead = outcome.error instanceof UnrecoverableError || (max !== undefined && ctx.receiveCount >= max);
      return this.#outcomeReport(job, ctx.receiveCount, ctx.receivedAt, dead ? 'DEAD' : 'FAILED', { error: errorText(outcome.error) });
    }
    const result = resultOf(outcome.value, MAX_WORKFLOW_RESULT_BYTES);
    if (result === undefined && outcome.value !== undefined) {
      const error = new Error(`the result of workflow job ${job.jobId} is not JSON of at most 64 KiB: it is reported without one`);
      this.#emit({ type: 'error', operation: 'report outcome (result left out)', error });
    }
    return this.#outcomeReport(job, ctx.receiveCount, ctx.receivedAt, 'SUCCEEDED', { result });
  }

  /**
   * A workflow job reaching a Worker without a client is not run: its outcome could not be
   * reported, and a job whose end is never recorded holds its workflow back for good. Its message
   * is backed off like a failure (another worker, or this one once given a client, takes it).
   */
  async #refuseWithoutClient(msg: Message, job: DeliveredJob<P>, receiveCount: number): Promise<void> {
    if (!this.#warnedNoWorkflowClient) {
      this.#warnedNoWorkflowClient = true;
      console.warn(
        `dynein worker: job '${job.jobId}' belongs to workflow '${job.workflow ?? msg.MessageAttributes?.[WORKFLOW_ATTRIBUTE]?.StringValue}', whose outcomes must be reported, but this Worker has no client: such jobs are not run. Pass { client: new DyneinClient(...) }`,
      );
    }
    const error = new Error(`workflow job ${job.jobId} was not run: this Worker has no client to report its outcome with`);
    await this.#backOff(msg, job, receiveCount, error);
  }

  /** A failure: the message comes back after the backoff of its receive count. */
  async #backOff(msg: Message, job: DeliveredJob<P>, receiveCount: number, error: unknown): Promise<void> {
    const retryInSeconds = retryDelaySeconds(receiveCount, this.#o.backoff, this.#o.random);
    await this.#setVisibility(msg, retryInSeconds, 'backoff');
    this.#emit({ type: 'failed', job, messageId: msg.MessageId!, receiveCount, error, retryInSeconds });
  }

  /**
   * For a message whose outcome is reported (history on, or a keyed job): reports one; undefined
   * otherwise, or without a client (warned once). A history job's goes in the 1 s batch; a keyed
   * job's, whose final outcome frees its key's slot, at once ({@link OutcomeReporter.reportNow}),
   * up to {@link KEYED_REPORT_ATTEMPTS} tries, an `error` event when given up on.
   */
  #reportFor(msg: Message, job: DeliveredJob<P>, attempts: number, receivedAt: number): ReportFn | undefined {
    const keyed = job.concurrencyKey !== undefined;
    if (!keyed && msg.MessageAttributes?.[HISTORY_ATTRIBUTE]?.StringValue !== '1') return undefined;
    const reporter = this.#reporter;
    if (!reporter) return this.#warnNoClient(job);
    const reportOf = (outcome: OutcomeReport['outcome'], extra: { error?: string; result?: unknown }) =>
      this.#outcomeReport(job, attempts, receivedAt, outcome, extra);
    if (!keyed) return (outcome, extra) => reporter.report(job.tenant, reportOf(outcome, extra));
    const opts = { signal: this.#stopCheckAbort.signal, maxAttempts: KEYED_REPORT_ATTEMPTS, now: this.#o.now, random: this.#o.random };
    return async (outcome, extra) => {
      const answer = await reporter.reportNow(job.tenant, reportOf(outcome, extra), opts);
      if (!answer.answered) this.#emit({ type: 'error', operation: 'report outcome (keyed job)', error: answer.error });
    };
  }

  /**
   * A job whose outcome should be reported reached a Worker without a client: it runs all the
   * same, with a warning once per kind. A keyed job's warning is also an `error` event: its key's
   * slot stays taken until the key lease runs out, holding the key's next jobs back.
   */
  #warnNoClient(job: DeliveredJob<P>): undefined {
    if (job.concurrencyKey === undefined) {
      if (!this.#warnedNoClient) {
        this.#warnedNoClient = true;
        console.warn(
          `dynein worker: tenant '${job.tenant}' keeps job history, but this Worker has no client to report outcomes with: pass { client: new DyneinClient(...) } (docs/history.md)`,
        );
      }
      return undefined;
    }
    if (this.#warnedNoKeyedClient) return undefined;
    this.#warnedNoKeyedClient = true;
    const error = new Error(
      `dynein worker: job '${job.jobId}' has concurrency key '${job.concurrencyKey}', but this Worker has no client to report its outcome with: such jobs run, but each holds its key's slot until the key lease runs out (tenant setting keyLeaseSeconds, default 900 s), holding the key's next jobs back until then. Pass { client: new DyneinClient(...) } (docs/flow-control.md)`,
    );
    console.warn(error.message);
    this.#emit({ type: 'error', operation: 'report outcome (keyed job, no client)', error });
    return undefined;
  }

  #outcomeReport(
    job: DeliveredJob<P>,
    attempts: number,
    receivedAt: number,
    outcome: OutcomeReport['outcome'],
    extra: { error?: string; result?: unknown },
  ): OutcomeReport {
    const delivery = { attempts, receivedAt, endedAt: this.#o.now() };
    return outcomeReport(job.jobId, outcome, delivery, { ...extra, concurrencyKey: job.concurrencyKey, traceparent: job.traceparent });
  }

  /** Renews the visibility every `heartbeatMs` while the handler runs; aborts the handler if the message is lost. */
  #heartbeat(entry: InFlight, job: DeliveredJob<P>, receivedAt: number): { stop(): void } {
    const vis = this.#o.visibilityTimeoutSeconds;
    let visibleAt = receivedAt + vis * 1000;
    let busy = false;
    const lose = (error: unknown) => {
      entry.released = true;
      clearInterval(timer);
      entry.gone.abort(error);
      entry.abort.abort(error);
      this.#emit({ type: 'lost', job, messageId: entry.msg.MessageId!, error });
    };
    const timer = setInterval(async () => {
      if (busy || entry.released) return;
      busy = true;
      const now = this.#o.now();
      // SQS caps a message's total visibility at 12 h from its receipt.
      const seconds = Math.min(vis, MAX_VISIBILITY_SECONDS - Math.ceil((now - receivedAt) / 1000));
      try {
        if (seconds <= 0) return lose(new Error("the message reached SQS's 12-hour visibility limit"));
        await this.#sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: this.#o.queueUrl,
            ReceiptHandle: entry.msg.ReceiptHandle,
            VisibilityTimeout: seconds,
          }),
        );
        visibleAt = now + seconds * 1000;
      } catch (error) {
        const gone = /ReceiptHandleIsInvalid|MessageNotInflight|InvalidParameterValue/.test((error as Error).name ?? '');
        if (gone || this.#o.now() >= visibleAt) lose(error);
        else this.#emit({ type: 'error', operation: 'ChangeMessageVisibility', error });
      } finally {
        busy = false;
      }
    }, this.#o.heartbeatMs);
    return { stop: () => clearInterval(timer) };
  }

  /**
   * One heartbeat of the running jobs whose outcomes are reported (docs/flow-control.md "Cancel a
   * running job"): asks which of them a `DELETE` asked to stop (one request per tenant and 100
   * jobs, naming the keyed jobs' keys, which renews their slot leases), and aborts those handlers'
   * signals with a {@link JobCancelledError}. Skipped while the
   * last one is still under way; a failed request is an `error` event and stops nothing.
   */
  async #checkStops(): Promise<void> {
    const sink = this.#heartbeats;
    if (!sink || this.#checkingStops || this.#stoppable.size === 0 || this.#stopRequested) return;
    this.#checkingStops = true;
    try {
      const stops = await requestedStops(
        sink,
        this.#stoppable.values(),
        (error) => this.#emit({ type: 'error', operation: 'heartbeats', error }),
        this.#stopCheckAbort.signal,
      );
      if (stops.size === 0) return;
      for (const [entry, { jobId }] of this.#stoppable) {
        if (!stops.has(jobId) || entry.cancelled || entry.released) continue;
        entry.cancelled = true;
        entry.abort.abort(new JobCancelledError(jobId));
      }
    } finally {
      this.#checkingStops = false;
    }
  }

  #emitCancelled(job: DeliveredJob<P>, ctx: JobContext): void {
    this.#emit({
      type: 'cancelled',
      job,
      messageId: ctx.messageId,
      receiveCount: ctx.receiveCount,
      durationMs: this.#o.now() - ctx.receivedAt,
    });
  }

  /** Skips the remaining retries: to the DLQ when its URL is known, else released until the redrive policy moves it. */
  async #dead(msg: Message, job: DeliveredJob<P> | undefined, receiveCount: number, error: unknown): Promise<void> {
    const messageId = msg.MessageId!;
    if (this.#o.deadLetterQueueUrl) {
      try {
        const attributes: Record<string, MessageAttributeValue> = { ...msg.MessageAttributes };
        if (Object.keys(attributes).length < 10)
          attributes.dyneinError = {
            DataType: 'String',
            StringValue: cutText(String((error as Error)?.message ?? error), 1024) || 'unrecoverable',
          };
        await this.#sqs.send(
          new SendMessageCommand({ QueueUrl: this.#o.deadLetterQueueUrl, MessageBody: msg.Body ?? '', MessageAttributes: attributes }),
        );
        if (await this.#delete(msg)) this.#emit({ type: 'dead', job, messageId, receiveCount, error, to: 'dead-letter-queue' });
        return;
      } catch (sendError) {
        this.#emit({ type: 'error', operation: 'SendMessage (dead-letter queue)', error: sendError });
      }
    }
    if (this.#doomed.size >= MAX_DOOMED) this.#doomed.delete(this.#doomed.values().next().value!);
    this.#doomed.add(messageId);
    await this.#setVisibility(msg, 0, 'release');
    this.#emit({ type: 'dead', job, messageId, receiveCount, error, to: 'redrive-policy' });
  }

  async #delete(msg: Message): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#sqs.send(new DeleteMessageCommand({ QueueUrl: this.#o.queueUrl, ReceiptHandle: msg.ReceiptHandle }));
        return true;
      } catch (error) {
        if (attempt >= 2) {
          // The message comes back after its visibility timeout: a duplicate, never a loss.
          this.#emit({ type: 'error', operation: 'DeleteMessage', error });
          return false;
        }
        await sleep(backoffMs(attempt, { baseMs: 100, capMs: 1_000 }, this.#o.random));
      }
    }
  }

  async #setVisibility(msg: Message, seconds: number, why: string, abortSignal?: AbortSignal): Promise<boolean> {
    try {
      await this.#sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.#o.queueUrl,
          ReceiptHandle: msg.ReceiptHandle,
          VisibilityTimeout: Math.max(0, Math.min(MAX_VISIBILITY_SECONDS, seconds)),
        }),
        { abortSignal },
      );
      return true;
    } catch (error) {
      // The message still comes back when its current visibility timeout ends.
      this.#emit({ type: 'error', operation: `ChangeMessageVisibility (${why})`, error });
      return false;
    }
  }

  #wakeAll(): void {
    const waiting = this.#wake;
    this.#wake = [];
    for (const w of waiting) w();
  }

  #emit(event: WorkerEvent<P>): void {
    try {
      this.#o.onEvent?.(event);
    } catch {
      // a listener's error never stops the worker
    }
  }
}
