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
}

/** What a handler gets besides the job. */
export interface JobContext {
  /** Aborts when the worker shuts down past its grace period, or loses the message (its visibility could not be extended). */
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
 * A job's handler. For a tenant with history on, what it returns (JSON of at most 1 KB) is kept
 * as the job's `result` (docs/history.md); anything else is ignored.
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

/** A message body that is not a Dynein delivery: it can never succeed, so it is unrecoverable. */
export class MalformedMessageError extends UnrecoverableError {
  constructor(detail: string) {
    super(`not a Dynein job message (${detail}): expected {"jobId", "tenant", "runAt", "payload"}`);
    this.name = 'MalformedMessageError';
  }
}

const PAYLOAD = (path: JsonPath) => path.length === 1 && path[0] === 'payload';

/** Parses a delivered message body, keeping the payload's text; throws {@link MalformedMessageError}. */
export function parseDelivery<P>(body: string | undefined): DeliveredJob<P> {
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
  const payloadText = o.payload instanceof RawJson ? o.payload.text : 'null';
  const job = { jobId: o.jobId, tenant: o.tenant, runAt: o.runAt, payload: JSON.parse(payloadText) as P, payloadText };
  return typeof o.schedule === 'string' ? { ...job, schedule: o.schedule } : job;
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
