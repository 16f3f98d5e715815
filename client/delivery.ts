import { backoffMs, type JsonPath, parseJson, RawJson } from '../core/util/index.js';

/** A job as delivered to a tenant queue (docs/api.md, "The delivered message"). */
export interface DeliveredJob<P = unknown> {
  readonly jobId: string;
  readonly tenant: string;
  /** RFC 3339 with milliseconds. */
  readonly runAt: string;
  /** The payload, parsed (`JSON.parse` of {@link payloadText}). */
  readonly payload: P;
  /**
   * The payload as the JSON text the job was submitted with, byte for byte: parse it yourself
   * where `JSON.parse` would lose something (64-bit integers, `1.0`, duplicate keys).
   */
  readonly payloadText: string;
  /**
   * The recurring schedule this job is an occurrence of (the body's `"schedule"`, also the
   * `schedule` message attribute); absent for a one-off job. `runAt` is the occurrence's time.
   */
  readonly schedule?: string;
  /**
   * The workflow this job belongs to (the body's `"workflow"`, also the `workflow` message
   * attribute); absent for a job outside a workflow. A workflow job's outcome is reported before
   * its message is deleted, and what its handler returns is its `result` (docs/workflows.md).
   */
  readonly workflow?: string;
  /**
   * A workflow job's parents, in the order its `after` lists them, as they ended: absent for a job
   * without parents (a workflow's root, or a job outside a workflow).
   */
  readonly parents?: readonly ParentOutcome[];
  /**
   * A keyed job's concurrency key (the `concurrencyKey` message attribute; the body does not carry
   * it): absent for a job submitted without one. At most the key's `concurrencyLimit` jobs with it
   * run at a time; its slot is freed once its outcome is reported (docs/flow-control.md).
   */
  readonly concurrencyKey?: string;
  /**
   * The job's W3C trace context (the `traceparent` message attribute, and `tracestate` when the
   * submit sent one: docs/tracing.md): the trace of the service that scheduled the job, with the
   * scheduler's send as parent span. Start the handler's span from it (a child on the first
   * attempt, a new trace linked to it on a retry). Absent on messages of earlier releases.
   */
  readonly traceparent?: string;
  readonly tracestate?: string;
}

/**
 * How one parent of a workflow job ended (the body's `"parents"`). `result` is what the parent's
 * handler returned (JSON, parsed); when the results of all parents did not fit in SQS's 256 KiB,
 * the ones left out are `resultOmitted: true` (`GET` of the parent's `jobId` shows them).
 *
 * @example
 * const charged = job.parents?.find((p) => p.key === 'charge');
 * if (charged?.outcome === 'SUCCEEDED') await ship(charged.result as { invoice: string });
 */
export interface ParentOutcome {
  /** The parent's key in the workflow request. */
  readonly key: string;
  readonly jobId: string;
  readonly outcome: 'SUCCEEDED' | 'DEAD' | 'CANCELLED';
  readonly result?: unknown;
  readonly resultOmitted?: true;
}

/** What a handler gets besides the job. */
export interface JobContext {
  /**
   * Aborts when the worker shuts down past its grace period, loses the message (its visibility
   * could not be extended), or learns at a heartbeat that a `DELETE` of the job asked to stop it
   * (docs/flow-control.md "Cancel a running job"): then `signal.reason` is a
   * {@link JobCancelledError}, and whatever the handler returns or throws, the job ends `CANCELLED`.
   */
  readonly signal: AbortSignal;
  /** SQS's ApproximateReceiveCount: 1 on the first delivery. */
  readonly receiveCount: number;
  /** How late the delivery is: receive time minus `runAt`, in ms (≥ 0 unless clocks disagree). */
  readonly latenessMs: number;
  /** Local clock when the message was received, epoch ms. */
  readonly receivedAt: number;
  readonly messageId: string;
}

/**
 * A job's handler. What it returns is the job's `result`: for a workflow job, JSON of at most
 * 64 KiB, which its children receive in `parents`; for a tenant with history on, JSON of at most
 * 1 KB (docs/history.md). Anything else is left out of the report (the Worker emits an `error`
 * event for a workflow job's); the job still succeeded.
 */
export type JobHandler<P = unknown> = (job: DeliveredJob<P>, ctx: JobContext) => unknown;

/**
 * Thrown by a handler when retrying cannot help (bad payload, a deleted account): the message
 * skips its remaining retries and goes to the dead-letter queue at once.
 *
 * @example
 * if (!invoice) throw new UnrecoverableError(`invoice ${job.payload.invoiceId} no longer exists`);
 */
export class UnrecoverableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnrecoverableError';
  }
}

/**
 * The reason of a handler's `signal` when a `DELETE` of its job asked to stop it while it ran
 * (docs/flow-control.md "Cancel a running job"; jobs whose outcomes are reported: history on, or a
 * workflow's job). The Worker reports the outcome `CANCELLED` once the handler settles, whatever it
 * returns or throws, and deletes the message: no retry, no dead-letter queue. Shutdown and a lost
 * message abort the signal with other reasons, so a handler can tell them apart.
 *
 * @example
 * const handler: JobHandler = async (job, { signal }) => {
 *   for (const page of pages(job.payload)) {
 *     if (signal.aborted && signal.reason instanceof JobCancelledError) return; // stop here: nothing to roll back
 *     await copy(page, signal);
 *   }
 * };
 */
export class JobCancelledError extends Error {
  readonly jobId: string;

  constructor(jobId: string) {
    super(`job ${jobId} was cancelled while it ran: a DELETE of the job asked its worker to stop it`);
    this.name = 'JobCancelledError';
    this.jobId = jobId;
  }
}

/** A message body that is not a Dynein delivery: it can never succeed, so it is unrecoverable. */
export class MalformedMessageError extends UnrecoverableError {
  constructor(detail: string) {
    super(`not a Dynein job message (${detail}): expected {"jobId", "tenant", "runAt", "payload"}`);
    this.name = 'MalformedMessageError';
  }
}

const PAYLOAD = (path: JsonPath) => path.length === 1 && path[0] === 'payload';

/**
 * Parses a delivered message body, keeping the payload's text; `attributes` are the message's
 * string attributes the job takes (`concurrencyKey`, `traceparent`, `tracestate`), when it has
 * them. Throws {@link MalformedMessageError}.
 */
export function parseDelivery<P>(
  body: string | undefined,
  attributes: {
    readonly concurrencyKey?: string | undefined;
    readonly traceparent?: string | undefined;
    readonly tracestate?: string | undefined;
  } = {},
): DeliveredJob<P> {
  let m: unknown;
  try {
    m = parseJson(body ?? '', { raw: PAYLOAD });
  } catch {
    throw new MalformedMessageError('the body is not JSON');
  }
  const o = m as Record<string, unknown> | null;
  if (
    typeof o !== 'object' ||
    o === null ||
    typeof o.jobId !== 'string' ||
    typeof o.tenant !== 'string' ||
    typeof o.runAt !== 'string' ||
    Number.isNaN(Date.parse(o.runAt))
  ) {
    throw new MalformedMessageError('jobId, tenant or runAt is missing');
  }
  if (o.schedule !== undefined && typeof o.schedule !== 'string') throw new MalformedMessageError('schedule is not a string');
  if (o.workflow !== undefined && typeof o.workflow !== 'string') throw new MalformedMessageError('workflow is not a string');
  const parents = o.parents === undefined ? undefined : parentsOf(o.parents);
  const payloadText = o.payload instanceof RawJson ? o.payload.text : 'null';
  return {
    jobId: o.jobId,
    tenant: o.tenant,
    runAt: o.runAt,
    payload: JSON.parse(payloadText) as P,
    payloadText,
    ...(typeof o.schedule === 'string' ? { schedule: o.schedule } : {}),
    ...(typeof o.workflow === 'string' ? { workflow: o.workflow } : {}),
    ...(parents !== undefined ? { parents } : {}),
    ...(attributes.concurrencyKey !== undefined ? { concurrencyKey: attributes.concurrencyKey } : {}),
    ...(attributes.traceparent !== undefined ? { traceparent: attributes.traceparent } : {}),
    ...(attributes.tracestate !== undefined ? { tracestate: attributes.tracestate } : {}),
  };
}

const PARENT_OUTCOMES: ReadonlySet<unknown> = new Set(['SUCCEEDED', 'DEAD', 'CANCELLED']);

/** The body's `"parents"` (core/workflows/progress.ts writes it); throws {@link MalformedMessageError}. */
function parentsOf(value: unknown): ParentOutcome[] {
  if (!Array.isArray(value)) throw new MalformedMessageError('parents is not an array');
  return value.map((p: unknown, i) => {
    const e = p as Record<string, unknown> | null;
    if (
      typeof e !== 'object' ||
      e === null ||
      typeof e.key !== 'string' ||
      typeof e.jobId !== 'string' ||
      !PARENT_OUTCOMES.has(e.outcome) ||
      (e.resultOmitted !== undefined && e.resultOmitted !== true)
    ) {
      throw new MalformedMessageError(`parents[${i}] is not {"key", "jobId", "outcome"}`);
    }
    return {
      key: e.key,
      jobId: e.jobId,
      outcome: e.outcome as ParentOutcome['outcome'],
      ...('result' in e ? { result: e.result } : {}),
      ...(e.resultOmitted === true ? { resultOmitted: true as const } : {}),
    };
  });
}

/** Receive time minus `runAt` (the message attribute when present, else the body's). */
export function latenessMs(runAt: string, receivedAt: number): number {
  return receivedAt - Date.parse(runAt);
}

export interface RetryBackoff {
  /** The first retry waits a uniform delay in `[0, baseMs)`, rounded up to whole seconds (at least 1). @default 10_000 */
  readonly baseMs: number;
  /** @default 900_000 (15 minutes) */
  readonly capMs: number;
}

export const DEFAULT_RETRY_BACKOFF: RetryBackoff = { baseMs: 10_000, capMs: 900_000 };

/** SQS's largest visibility timeout (12 hours). */
export const MAX_VISIBILITY_SECONDS = 43_200;

/**
 * The visibility timeout (whole seconds) after the `receiveCount`-th delivery failed:
 * exponential backoff with full jitter, `ceil(uniform[0, min(cap, base * 2^(receiveCount-1))) / 1000)`,
 * at least 1 s and at most 12 h. Calls `random` exactly once.
 *
 * @example retryDelaySeconds(3, { baseMs: 1_000, capMs: 60_000 }) // 1..4
 */
export function retryDelaySeconds(
  receiveCount: number,
  backoff: RetryBackoff = DEFAULT_RETRY_BACKOFF,
  random: () => number = Math.random,
): number {
  const ms = backoffMs(Math.max(0, receiveCount - 1), backoff, random);
  return Math.min(MAX_VISIBILITY_SECONDS, Math.max(1, Math.ceil(ms / 1000)));
}

/** The receive count of an SQS message's attributes (1 when absent). */
export function receiveCountOf(attributes: Partial<Record<string, string>> | undefined): number {
  const n = Number(attributes?.ApproximateReceiveCount ?? 1);
  return Number.isFinite(n) && n >= 1 ? n : 1;
}

/** The queue URL of an SQS queue ARN (`arn:aws:sqs:<region>:<account>:<name>`). */
export function queueUrlOfArn(arn: string): string {
  const [, partition, , region, account, name] = arn.split(':');
  const domain = partition === 'aws-cn' ? 'amazonaws.com.cn' : 'amazonaws.com';
  return `https://sqs.${region}.${domain}/${account}/${name}`;
}
