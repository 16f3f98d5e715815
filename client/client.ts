import type { OutcomeReport, OutcomeResult } from './outcomes.js';
import { randomUUID } from 'node:crypto';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { backoffMs, cutText, describeSqsUnsafeChar, findSqsUnsafeChar, forEachLimit, isJson, sleep } from '../core/util/index.js';
import { packGreedy } from '../core/model/index.js';
import { type DyneinError, DyneinApiError, NetworkError, ValidationError, errorFromCode, errorFromResponse } from './errors.js';

/** Static keys, or a provider of (refreshable) keys, as the AWS SDK takes them. */
export type Credentials = ConstructorParameters<typeof SignatureV4>[0]['credentials'];

export interface RetryOptions {
  /** HTTP attempts per request, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Backoff base: attempt n waits a uniform delay in `[0, min(capMs, baseMs * 2^(n-1)))`. @default 100 */
  readonly baseMs?: number;
  /** @default 5_000 */
  readonly capMs?: number;
  /** No retry starts later than this after the first attempt. @default 30_000 */
  readonly maxElapsedMs?: number;
  /** Each attempt is abandoned (and retried) after this. @default 10_000 */
  readonly attemptTimeoutMs?: number;
}

export interface DyneinClientOptions {
  /** The HTTP API's URL, e.g. `https://abc123.execute-api.eu-west-1.amazonaws.com` or `http://127.0.0.1:8080`. */
  readonly endpoint: string;
  /** Region the API lives in (the SigV4 scope). */
  readonly region: string;
  /** @default the AWS default provider chain (environment, SSO, profile, container, instance) */
  readonly credentials?: Credentials;
  readonly retry?: RetryOptions;
  /** Clock and randomness, for tests. */
  readonly now?: () => number;
  readonly random?: () => number;
}

/** One job as the API takes it. Exactly one of `runAt` and `delaySeconds`; at most one of `payload` and `payloadJson`. */
export interface JobRequest<P = unknown> {
  /** Any JSON value, serialized with `JSON.stringify` (the worker gets an equal value). Omitted: `null`. */
  readonly payload?: P;
  /**
   * The payload as JSON text, delivered byte for byte (64-bit integers, `1.0`, key order,
   * duplicate keys, whitespace inside the value): what a worker's `payloadText` will be. Checked
   * before sending: one JSON value, and no raw U+FFFE / U+FFFF (write them as `\uFFFF`).
   */
  readonly payloadJson?: string;
  /** When it is due: a Date or an RFC 3339 time with an offset. */
  readonly runAt?: Date | string;
  /** Seconds from now (fractions allowed); the client turns it into an absolute `runAt` first. */
  readonly delaySeconds?: number;
  /**
   * Names the job for 24 hours: the same key with the same request answers the same job (also
   * when retried); with another payload, time or `cancellable` the API answers
   * `IdempotencyKeyReusedError`. @default a random UUID per call (so retries of this call are safe)
   */
  readonly idempotencyKey?: string;
  /** @default true */
  readonly cancellable?: boolean;
  /**
   * 1 (lowest) to 9 (highest): among the tenant's due jobs, higher goes first; it never makes a
   * job early, and a job due within the lookahead (sent straight to the queue) ignores it. @default 5
   */
  readonly priority?: number;
}

/**
 * `DEAD_LETTERED`: ingest gave the job up to the inbound dead-letter queue (redrive it, or
 * cancel). `UNKNOWN`: the scheduler has no record of the job (not stored yet, a second or two
 * after submit; or its record expired, 7 days after runAt); `message` says which applies.
 */
export type JobState =
  | 'SCHEDULED'
  | 'ACQUIRED'
  | 'QUEUED'
  | 'CANCELLED'
  | 'DEAD_LETTERED'
  | 'UNKNOWN'
  // Tenants with history on (docs/history.md): delivered, and the latest reported outcome.
  | 'DELIVERED'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'DEAD';

/** One event of a history tenant's job (docs/history.md). */
export interface TimelineEvent {
  readonly at: string;
  readonly event: 'SCHEDULED' | 'DELIVERED' | 'SUCCEEDED' | 'FAILED' | 'DEAD';
  readonly attempt?: number;
  readonly error?: string;
  readonly durationMs?: number;
  readonly result?: unknown;
}

/** Reply of `schedule`: `QUEUED` when the job went straight to its queue. */
export interface ScheduledJob {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: 'SCHEDULED' | 'QUEUED';
}

/** Reply of `get`. */
export interface JobStatus {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: JobState;
  /** `SCHEDULED` and `ACQUIRED`: the priority (1 to 9) of a job submitted with one other than 5. */
  readonly priority?: number;
  /** `QUEUED` through the table: when the dispatcher recorded the send (RFC 3339). */
  readonly deliveredAt?: string;
  /** `DEAD_LETTERED` and `UNKNOWN`: what the state means and what to do. */
  readonly message?: string;
  /** Tenants with history on: what happened to the job, oldest first. */
  readonly timeline?: TimelineEvent[];
}

/** One job of `listJobs`: the fields of `get`, and the schedule of a recurring schedule's occurrence. */
export interface ListedJob extends Omit<JobStatus, 'state'> {
  /** `SCHEDULED`, `ACQUIRED`, `QUEUED`, `CANCELLED`, `DEAD_LETTERED`, or a history state where history is on. */
  readonly state: JobState | (string & {});
  readonly schedule?: string;
}

/** One page of `listJobs`, in runAt order (then job id), descending with `order: 'desc'`. */
export interface JobPage {
  readonly jobs: readonly ListedJob[];
  /** Pass it as `cursor` (with the same filters) for the next page; absent on the last page. */
  readonly nextCursor?: string;
}

/** What `listJobs` and `jobs` list (docs/listing.md). */
export interface JobFilter {
  /**
   * `SCHEDULED` (includes `ACQUIRED`), `QUEUED`, `CANCELLED`, `DEAD_LETTERED`; all of them when
   * omitted. Tenants with history on (docs/history.md): also `DELIVERED`, `SUCCEEDED`, `FAILED`, `DEAD`.
   */
  readonly state?: string;
  /** Jobs with runAt at or after this time (RFC 3339 or a Date). */
  readonly from?: string | Date;
  /** Jobs with runAt at or before this time (RFC 3339 or a Date). */
  readonly to?: string | Date;
  /** Occurrences of this recurring schedule only. */
  readonly schedule?: string;
  /** @default 'asc' */
  readonly order?: 'asc' | 'desc';
}

export interface ListJobsOptions extends JobFilter, CallOptions {
  /** Jobs per page, 1 to 1000. @default 100 */
  readonly limit?: number;
  /** The previous page's `nextCursor`. */
  readonly cursor?: string;
}

/** A message of a tenant's dead-letter queue, as `peekDeadLetters` shows it. */
export interface DeadLetter {
  /** Names the message in `redriveDeadLetters` and `deleteDeadLetters` (this tenant only). */
  readonly handle: string;
  readonly messageId: string;
  readonly body: string;
  /** Message attributes: `runAt`, `schedule`, `dyneinError` (a worker's UnrecoverableError), others as sent. */
  readonly attributes: Readonly<Record<string, string>>;
  /** Receives in the tenant queue and in the DLQ (peeks included). */
  readonly receiveCount: number;
  /** When the message was first sent to the tenant queue (RFC 3339). */
  readonly sentAt?: string;
  /** Its first delivery to a worker: the first attempt that failed (RFC 3339). */
  readonly firstReceivedAt?: string;
  /** From the body, when it is a Dynein delivery. */
  readonly jobId?: string;
  readonly runAt?: string;
  readonly schedule?: string;
}

/** Reply of `peekDeadLetters`. */
export interface DeadLetterPage {
  readonly messages: readonly DeadLetter[];
  /** Messages in the DLQ (SQS's approximate count). */
  readonly approximateDepth: number;
}

/** A move of the DLQ back to the queue (`redriveDeadLetters({ all: true })` on AWS), as SQS reports it; counts are approximate. */
export interface DeadLetterMoveTask {
  /** While `RUNNING` only. */
  readonly taskHandle?: string;
  readonly status: 'RUNNING' | 'COMPLETED' | 'CANCELLING' | 'CANCELLED' | 'FAILED';
  readonly moved: number;
  /** The messages it found to move when it started. */
  readonly toMove?: number;
  readonly startedAt: string;
  readonly failureReason?: string;
}

/**
 * Reply of `redriveDeadLetters`: for `all`, the move task started (AWS) or the messages copied
 * (the local stack; `moved` counts messages sent and deleted from the DLQ; `complete: false` when
 * the time ran out or a message could not be moved: call again, after deleting any
 * `sentNotDeleted`); for `handles`, those moved, those no longer in the DLQ, those not sent
 * (`failed`: left in the DLQ, redrive them again), and those sent whose delete from the DLQ failed
 * (`sentNotDeleted`: in the queue and still in the DLQ; delete them with `deleteDeadLetters` and
 * these handles, never redrive them again: they would be delivered twice).
 */
export type DeadLetterRedrive =
  | { readonly method: 'StartMessageMoveTask'; readonly taskHandle: string }
  | { readonly method: 'copy'; readonly moved: number; readonly complete: boolean; readonly sentNotDeleted?: readonly string[] }
  | {
      readonly redriven: readonly string[];
      readonly notFound: readonly string[];
      readonly failed?: readonly string[];
      readonly sentNotDeleted?: readonly string[];
    };

/** Reply of `deleteDeadLetters`. */
export interface DeadLettersDeleted {
  readonly deleted: readonly string[];
  readonly notFound: readonly string[];
  readonly failed?: readonly string[];
}

/** A tenant's limits and weight (tenant controls, docs/tenant-controls.md). */
export interface TenantSettings {
  /** Most deliveries per second to the tenant's queue; absent: no limit. */
  readonly maxDeliveriesPerSecond?: number;
  /** Most jobs submitted per second (excess: 429 Throttled); absent: no limit. */
  readonly maxSubmitsPerSecond?: number;
  /** Share of dispatch relative to other tenants' (default 1). */
  readonly weight: number;
}

/**
 * Reply of the operator methods (`getTenantControls`, `pauseTenant`, `resumeTenant`,
 * `setTenantSettings`): the tenant's controls after the call, with the last 20 changes (oldest first).
 */
export interface TenantControls {
  readonly tenant: string;
  readonly paused: boolean;
  /** When the current pause began (RFC 3339); only while paused. */
  readonly pausedAt?: string;
  readonly settings: TenantSettings;
  /** Bumped by every change (0: never changed). */
  readonly rev: number;
  readonly changes: readonly {
    readonly at: string;
    /** The caller: an IAM principal ARN on AWS, the operator's access key id locally. */
    readonly by: string;
    readonly action: 'pause' | 'resume' | 'settings';
    readonly settings?: TenantSettings;
  }[];
}

/** What `setTenantSettings` changes: only the fields given; `null` clears a limit. */
export interface TenantSettingsUpdate {
  /** 1 to 100,000 jobs per second, or null for no limit. */
  readonly maxDeliveriesPerSecond?: number | null;
  /** 1 to 100,000 jobs per second, or null for no limit. */
  readonly maxSubmitsPerSecond?: number | null;
  /** 1 to 1,000 (default 1). */
  readonly weight?: number;
}

/** Reply of `cancel` (repeatable). */
export interface CancelledJob {
  readonly jobId: string;
  readonly state: 'CANCELLED';
}

/** One job's outcome in `scheduleBatch`, in request order. */
export type BatchItemResult = { readonly ok: true; readonly job: ScheduledJob } | { readonly ok: false; readonly error: DyneinApiError };

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface BatchOptions extends CallOptions {
  /** Called after each request with jobs done so far (succeeded or failed) and the total. */
  readonly onProgress?: (done: number, total: number) => void;
  /** Batch requests in flight at once. @default 4 */
  readonly concurrency?: number;
}

/** A recurring schedule's state: `DISABLED` runs nothing until resumed. */
export type ScheduleState = 'ENABLED' | 'DISABLED';

/**
 * A recurring schedule as `putSchedule` takes it (docs/schedules.md has the expression grammar).
 * At most one of `payload` and `payloadJson`.
 */
export interface ScheduleDefinition<P = unknown> {
  /** `cron(min hour day-of-month month day-of-week year)`, `rate(n minute|minutes|hour|hours|day|days)` or `at(yyyy-mm-ddThh:mm:ss)`. */
  readonly expression: string;
  /** IANA time zone the expression reads in. @default 'UTC' */
  readonly timezone?: string;
  /** No occurrence before this (a Date or an RFC 3339 time); a `rate()` counts from it. */
  readonly startAt?: Date | string;
  /** No occurrence at or after this (exclusive). */
  readonly endAt?: Date | string;
  /** Any JSON value, delivered with every occurrence (`JSON.stringify`). Omitted: `null`. */
  readonly payload?: P;
  /** The payload as JSON text, delivered byte for byte (as {@link JobRequest.payloadJson}). */
  readonly payloadJson?: string;
  /** @default 'ENABLED' */
  readonly state?: ScheduleState;
}

/** A stored schedule: the reply of `getSchedule`, `putSchedule`, `pauseSchedule`, `resumeSchedule`, and the items of `listSchedules`. */
export interface Schedule<P = unknown> {
  readonly tenant: string;
  readonly name: string;
  readonly expression: string;
  readonly timezone: string;
  readonly startAt?: string;
  readonly endAt?: string;
  /** The payload as defined; `null` when none. */
  readonly payload: P | null;
  readonly state: ScheduleState;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** The next occurrences (5; up to `count` in a dry run), RFC 3339 UTC with milliseconds; `[]` while `DISABLED` or past `endAt`. */
  readonly nextRuns: readonly string[];
}

/** Reply of `putSchedule`. */
export interface PutScheduleResult<P = unknown> extends Schedule<P> {
  /** `true` when the call created the schedule (201), `false` when it replaced one (200) or was a dry run. */
  readonly created: boolean;
  /** Set on a dry run: nothing was stored. */
  readonly dryRun?: true;
}

/** One page of `listSchedules`, in name order. */
export interface SchedulePage<P = unknown> {
  readonly schedules: readonly Schedule<P>[];
  /** Pass it as `cursor` for the next page; absent on the last page. */
  readonly nextCursor?: string;
}

/** Reply of `deleteSchedule`. */
export interface DeletedSchedule {
  readonly tenant: string;
  readonly name: string;
  readonly deleted: true;
}

export interface PutScheduleOptions extends CallOptions {
  /** Validate and answer the next runs without storing anything. */
  readonly dryRun?: boolean;
  /** With `dryRun`: how many next runs to answer, 1 to 100. @default 100 */
  readonly count?: number;
}

export interface ListSchedulesOptions extends CallOptions {
  /** Schedules per page, 1 to 100. @default 50 */
  readonly limit?: number;
  /** The previous page's `nextCursor`. */
  readonly cursor?: string;
}

const MAX_BATCH_JOBS = 100;
/** Under the API's 5 MiB, leaving room for the envelope. */
const MAX_BATCH_BYTES = 5 * 1024 * 1024 - 1024;

/**
 * The Dynein HTTP API, signed with SigV4 (service `execute-api`), with typed replies and errors.
 *
 * Retries 429 (the gateway's, and `Throttled`: the tenant's `maxSubmitsPerSecond`), 5xx and
 * network errors with exponential backoff and full jitter, waiting at least `Retry-After` when
 * the reply has one (its wait plus the jittered backoff), bounded in attempts and total time;
 * then throws the typed error (`ThrottledError`, `code` `Throttled` for the limit). A retried `schedule` never schedules twice:
 * a delay becomes an absolute `runAt` before the first attempt, and every job carries an
 * idempotency key (the caller's, or one the client makes), so each attempt sends the same bytes
 * and the API answers the job the first attempt created.
 *
 * @example
 * const client = new DyneinClient({ endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com', region: 'eu-west-1' });
 * const { jobId } = await client.schedule('billing', { payload: { invoice: 42 }, delaySeconds: 3600 });
 */
export class DyneinClient {
  readonly #base: URL;
  readonly #signer: SignatureV4;
  readonly #retry: Required<RetryOptions>;
  readonly #now: () => number;
  readonly #random: () => number;

  constructor(opts: DyneinClientOptions) {
    this.#base = new URL(opts.endpoint.endsWith('/') ? opts.endpoint : `${opts.endpoint}/`);
    this.#signer = new SignatureV4({
      service: 'execute-api',
      region: opts.region,
      credentials: opts.credentials ?? fromNodeProviderChain(),
      sha256: Hash.bind(null, 'sha256'),
    });
    this.#retry = { maxAttempts: 5, baseMs: 100, capMs: 5_000, maxElapsedMs: 30_000, attemptTimeoutMs: 10_000, ...opts.retry };
    this.#now = opts.now ?? Date.now;
    this.#random = opts.random ?? Math.random;
  }

  /**
   * Schedules one job.
   * @throws ValidationError, PayloadTooLargeError, TenantNotFoundError, ForbiddenError, and the retried kinds once retries run out
   */
  async schedule<P>(tenant: string, job: JobRequest<P>, opts: CallOptions = {}): Promise<ScheduledJob> {
    return this.#request<ScheduledJob>('POST', `v1/tenants/${enc(tenant)}/jobs`, this.#absolute(job), opts.signal);
  }

  /**
   * Schedules many jobs in requests of at most 100 jobs and 5 MiB, and returns one result per
   * job in order. Jobs that failed with a server error alone are sent again (same keys, same
   * `runAt`); a job the API refused (e.g. `ValidationError`) is reported, not retried.
   * @throws for a request refused as a whole (ForbiddenError, TenantNotFoundError...)
   */
  async scheduleBatch<P>(tenant: string, jobs: readonly JobRequest<P>[], opts: BatchOptions = {}): Promise<BatchItemResult[]> {
    const results: BatchItemResult[] = new Array(jobs.length);
    const bodies: string[] = new Array(jobs.length);
    const valid: number[] = [];
    jobs.forEach((job, i) => {
      try {
        bodies[i] = this.#absolute(job);
        valid.push(i);
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        results[i] = { ok: false, error: new ValidationError({ source: 'client', message: `jobs[${i}]: ${err.message}` }) };
      }
    });
    let done = jobs.length - valid.length;
    const requests = chunk(valid, (i) => Buffer.byteLength(bodies[i]!) + 1);
    await forEachLimit(requests, opts.concurrency ?? 4, async (indexes) => {
      let pending = indexes;
      for (let attempt = 1; pending.length > 0; attempt++) {
        const reply = await this.#request<{ results: (ScheduledJob | { error: { code: string; message: string } })[] }>(
          'POST',
          `v1/tenants/${enc(tenant)}/jobs/batch`,
          `{"jobs":[${pending.map((i) => bodies[i]).join(',')}]}`,
          opts.signal,
        );
        const retry: number[] = [];
        pending.forEach((index, k) => {
          const r = reply.results[k];
          if (r && 'jobId' in r) return void (results[index] = { ok: true, job: r });
          // Messages say jobs[k] of this request: name the caller's index instead.
          const message = (r?.error.message ?? 'no result for this job').replace(/^jobs\[\d+\]/, `jobs[${index}]`);
          const error = errorFromCode(r?.error.code ?? 'InternalError', message);
          if (error.retryable && attempt < this.#retry.maxAttempts) retry.push(index);
          else results[index] = { ok: false, error: Object.assign(error, { attempts: attempt }) };
        });
        done += pending.length - retry.length;
        opts.onProgress?.(done, jobs.length);
        pending = retry;
        if (retry.length > 0) await sleep(backoffMs(attempt - 1, this.#retry, this.#random), opts.signal);
        if (opts.signal?.aborted) throw opts.signal.reason;
      }
    });
    return results;
  }

  /**
   * A job's state.
   * @throws InvalidJobIdError (malformed or forged id), JobNotFoundError (another tenant's)
   */
  get(tenant: string, jobId: string, opts: CallOptions = {}): Promise<JobStatus> {
    return this.#request<JobStatus>('GET', `v1/tenants/${enc(tenant)}/jobs/${enc(jobId)}`, undefined, opts.signal);
  }

  /**
   * Reports delivery outcomes (tenants with history on; at most 100 per call). The Worker and
   * `dyneinLambdaHandler` call it for you when given this client. Answers per entry, in order.
   * @throws HistoryOff (409: the tenant keeps no history), ValidationError (a malformed batch)
   */
  reportOutcomes(tenant: string, outcomes: readonly OutcomeReport[], opts: CallOptions = {}): Promise<{ results: OutcomeResult[] }> {
    return this.#request<{ results: OutcomeResult[] }>(
      'POST',
      `v1/tenants/${enc(tenant)}/jobs/outcomes`,
      JSON.stringify({ outcomes }),
      opts.signal,
    );
  }

  /**
   * Cancels a job; repeating a successful cancel answers `CANCELLED` again.
   * @throws AlreadyQueuedError or NotCancellableError (409: too late, nothing written), InvalidJobIdError, JobNotFoundError
   */
  cancel(tenant: string, jobId: string, opts: CallOptions = {}): Promise<CancelledJob> {
    return this.#request<CancelledJob>('DELETE', `v1/tenants/${enc(tenant)}/jobs/${enc(jobId)}`, undefined, opts.signal);
  }

  /**
   * One page of the tenant's jobs matching `filter`; {@link jobs} walks every page.
   * @example const { jobs, nextCursor } = await client.listJobs('billing', { state: 'SCHEDULED', to: new Date(Date.now() + 86_400_000) });
   * @throws ValidationError (the message names the bad parameter or the cursor), TenantNotFoundError
   */
  async listJobs(tenant: string, filter: ListJobsOptions = {}): Promise<JobPage> {
    const query: string[] = [];
    const time = (t: string | Date) => (t instanceof Date ? t.toISOString() : t);
    if (filter.state !== undefined) query.push(`state=${enc(filter.state)}`);
    if (filter.from !== undefined) query.push(`from=${enc(time(filter.from))}`);
    if (filter.to !== undefined) query.push(`to=${enc(time(filter.to))}`);
    if (filter.schedule !== undefined) query.push(`schedule=${enc(filter.schedule)}`);
    if (filter.order !== undefined) query.push(`order=${enc(filter.order)}`);
    if (filter.limit !== undefined) query.push(`limit=${wholeNumber('limit', filter.limit, 1, 1000)}`);
    if (filter.cursor !== undefined) query.push(`cursor=${enc(filter.cursor)}`);
    const path = `v1/tenants/${enc(tenant)}/jobs${query.length > 0 ? `?${query.join('&')}` : ''}`;
    return this.#request<JobPage>('GET', path, undefined, filter.signal);
  }

  /**
   * Every job of the tenant matching `filter`, in order, fetching pages of `limit` as it goes.
   * @example for await (const j of client.jobs('billing', { state: 'CANCELLED' })) console.log(j.jobId, j.runAt);
   */
  async *jobs(tenant: string, filter: Omit<ListJobsOptions, 'cursor'> = {}): AsyncGenerator<ListedJob, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: JobPage = await this.listJobs(tenant, { ...filter, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.jobs;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /**
   * Creates or replaces a recurring schedule. With `dryRun`, validates the definition and answers
   * up to `count` next runs, storing nothing. Safe to retry: the same definition replaces itself.
   * @throws ValidationError (the message names the field), TenantNotFoundError, ConcurrentModificationError
   */
  async putSchedule<P>(
    tenant: string,
    name: string,
    definition: ScheduleDefinition<P>,
    opts: PutScheduleOptions = {},
  ): Promise<PutScheduleResult<P>> {
    const query: string[] = [];
    if (opts.dryRun) query.push('dryRun=true');
    if (opts.count !== undefined) {
      if (!opts.dryRun) throw new ValidationError({ source: 'client', message: 'count applies to a dry run only: give dryRun: true' });
      query.push(`count=${wholeNumber('count', opts.count, 1, 100)}`);
    }
    const body = scheduleBody(definition);
    const path = `${schedulePath(tenant, name)}${query.length > 0 ? `?${query.join('&')}` : ''}`;
    const { status, value } = await this.#call<Schedule<P> & { dryRun?: true }>('PUT', path, body, opts.signal);
    return { ...value, created: status === 201 && !value.dryRun };
  }

  /**
   * A schedule's definition and its next runs.
   * @throws ScheduleNotFoundError, TenantNotFoundError
   */
  async getSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return this.#request<Schedule<P>>('GET', schedulePath(tenant, name), undefined, opts.signal);
  }

  /**
   * One page of the tenant's schedules, in name order; {@link schedules} walks every page.
   * @throws ValidationError (a bad `limit` or `cursor`), TenantNotFoundError
   */
  async listSchedules<P = unknown>(tenant: string, opts: ListSchedulesOptions = {}): Promise<SchedulePage<P>> {
    const query: string[] = [];
    if (opts.limit !== undefined) query.push(`limit=${wholeNumber('limit', opts.limit, 1, 100)}`);
    if (opts.cursor !== undefined) query.push(`cursor=${enc(opts.cursor)}`);
    const path = `v1/tenants/${enc(tenant)}/schedules${query.length > 0 ? `?${query.join('&')}` : ''}`;
    return this.#request<SchedulePage<P>>('GET', path, undefined, opts.signal);
  }

  /**
   * Every schedule of the tenant, in name order, fetching pages of `limit` as it goes.
   * @example for await (const s of client.schedules('billing')) console.log(s.name, s.nextRuns[0]);
   */
  async *schedules<P = unknown>(
    tenant: string,
    opts: Omit<ListSchedulesOptions, 'cursor'> = {},
  ): AsyncGenerator<Schedule<P>, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: SchedulePage<P> = await this.listSchedules<P>(tenant, { ...opts, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.schedules;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /**
   * Deletes a schedule; occurrences due more than 5 s later are cancelled. A second delete answers `ScheduleNotFoundError`.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async deleteSchedule(tenant: string, name: string, opts: CallOptions = {}): Promise<DeletedSchedule> {
    return this.#request<DeletedSchedule>('DELETE', schedulePath(tenant, name), undefined, opts.signal);
  }

  /**
   * Pauses a schedule (state `DISABLED`): occurrences due more than 5 s later are cancelled. Pausing a paused schedule changes nothing.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async pauseSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return this.#request<Schedule<P>>('POST', `${schedulePath(tenant, name)}/pause`, undefined, opts.signal);
  }

  /**
   * Resumes a paused schedule from now on: the occurrences that fell while it was paused are never delivered.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async resumeSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return this.#request<Schedule<P>>('POST', `${schedulePath(tenant, name)}/resume`, undefined, opts.signal);
  }

  /**
   * Up to `max` messages (1 to 10, default 10) of the tenant's dead-letter queue, left in it: each
   * with its body, attributes, receive count, first send and first receive, the job id and runAt
   * when it is a Dynein delivery, and the `handle` that names it in {@link redriveDeadLetters} and
   * {@link deleteDeadLetters}. Every peek counts in the messages' receive counts.
   * @throws ValidationError (max), TenantNotFoundError
   */
  async peekDeadLetters(tenant: string, opts: CallOptions & { readonly max?: number } = {}): Promise<DeadLetterPage> {
    const query = opts.max !== undefined ? `?max=${wholeNumber('max', opts.max, 1, 10)}` : '';
    return this.#request<DeadLetterPage>('GET', `v1/tenants/${enc(tenant)}/dlq${query}`, undefined, opts.signal);
  }

  /**
   * Moves dead letters back to the tenant queue: `{ all: true }` every message (on AWS a message
   * move task, which runs on after the reply), or `{ handles }` those messages (from
   * {@link peekDeadLetters}), each deleted from the DLQ once its copy was sent.
   * @throws ValidationError (a handle not issued for this tenant: nothing is moved), TenantNotFoundError
   */
  async redriveDeadLetters(
    tenant: string,
    what: { readonly all: true } | { readonly handles: readonly string[] },
    opts: CallOptions = {},
  ): Promise<DeadLetterRedrive> {
    return this.#request<DeadLetterRedrive>('POST', `v1/tenants/${enc(tenant)}/dlq/redrive`, JSON.stringify(what), opts.signal);
  }

  /**
   * The latest moves of the tenant's DLQ back to its queue, newest first: the progress of the move
   * task `redriveDeadLetters({ all: true })` started. Empty on the local stack (it copies within the request).
   * @throws TenantNotFoundError
   */
  async deadLetterMoves(tenant: string, opts: CallOptions = {}): Promise<{ tasks: readonly DeadLetterMoveTask[] }> {
    return this.#request<{ tasks: readonly DeadLetterMoveTask[] }>('GET', `v1/tenants/${enc(tenant)}/dlq/redrive`, undefined, opts.signal);
  }

  /**
   * Deletes dead letters named by their handles (from {@link peekDeadLetters}).
   * @throws ValidationError (a handle not issued for this tenant: nothing is deleted), TenantNotFoundError
   */
  async deleteDeadLetters(tenant: string, handles: readonly string[], opts: CallOptions = {}): Promise<DeadLettersDeleted> {
    return this.#request<DeadLettersDeleted>('POST', `v1/tenants/${enc(tenant)}/dlq/delete`, JSON.stringify({ handles }), opts.signal);
  }

  /**
   * A tenant's controls (operator API; IAM: `DyneinScheduler.grantAdmin`, locally local.json's
   * `admin` key): paused or not, its limits and weight, the last 20 changes.
   * @throws TenantNotFoundError, ForbiddenError (not an operator's credentials)
   */
  getTenantControls(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return this.#request<TenantControls>('GET', adminPath(tenant), undefined, opts.signal);
  }

  /**
   * Pauses a tenant: its jobs are still accepted and stored, none is delivered until
   * {@link resumeTenant}. Pausing a paused tenant changes nothing (its `pausedAt` stays).
   * @throws TenantNotFoundError, ForbiddenError, ConcurrentModificationError
   */
  pauseTenant(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return this.#request<TenantControls>('POST', `${adminPath(tenant)}/pause`, undefined, opts.signal);
  }

  /** Resumes a paused tenant (its held jobs are delivered, in due order). @throws TenantNotFoundError, ForbiddenError, ConcurrentModificationError */
  resumeTenant(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return this.#request<TenantControls>('POST', `${adminPath(tenant)}/resume`, undefined, opts.signal);
  }

  /**
   * Changes a tenant's limits and weight: only the fields given; `null` clears a limit.
   * @example await client.setTenantSettings('billing', { maxDeliveriesPerSecond: 50, weight: 2 })
   * @throws ValidationError (naming the field; nothing written), TenantNotFoundError, ForbiddenError, ConcurrentModificationError
   */
  setTenantSettings(tenant: string, settings: TenantSettingsUpdate, opts: CallOptions = {}): Promise<TenantControls> {
    return this.#request<TenantControls>('PUT', `${adminPath(tenant)}/settings`, JSON.stringify(settings), opts.signal);
  }

  /**
   * The body sent for a job, as JSON text: an absolute `runAt` and an idempotency key, fixed
   * before the first attempt, so that every attempt sends the same bytes. The payload is spliced
   * in as text (`payloadJson` as given).
   */
  #absolute<P>(job: JobRequest<P>): string {
    if ((job.runAt === undefined) === (job.delaySeconds === undefined)) {
      throw new ValidationError({ source: 'client', message: 'give exactly one of runAt (a Date or RFC 3339 time) or delaySeconds' });
    }
    let runAt: string;
    if (job.delaySeconds !== undefined) {
      if (typeof job.delaySeconds !== 'number' || !Number.isFinite(job.delaySeconds) || job.delaySeconds < 0) {
        throw new ValidationError({
          source: 'client',
          message: `delaySeconds must be a number of seconds ≥ 0, got ${JSON.stringify(job.delaySeconds)}`,
        });
      }
      runAt = new Date(this.#now() + Math.ceil(job.delaySeconds * 1000)).toISOString();
    } else if (job.runAt instanceof Date) {
      if (Number.isNaN(job.runAt.getTime())) throw new ValidationError({ source: 'client', message: 'runAt is an invalid Date' });
      runAt = job.runAt.toISOString();
    } else {
      runAt = job.runAt!;
    }
    const envelope = JSON.stringify({
      runAt,
      idempotencyKey: job.idempotencyKey ?? `sdk-${randomUUID()}`,
      ...(job.cancellable !== undefined ? { cancellable: job.cancellable } : {}),
      ...(job.priority !== undefined ? { priority: job.priority } : {}),
    });
    return `{"payload":${payloadText(job)},${envelope.slice(1)}`;
  }

  /** One API call with retries; resolves with the parsed 2xx body or throws a typed error. */
  async #request<T>(method: string, path: string, body: string | undefined, signal: AbortSignal | undefined): Promise<T> {
    return (await this.#call<T>(method, path, body, signal)).value;
  }

  /** {@link #request}, with the reply's HTTP status. */
  async #call<T>(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; value: T }> {
    const { maxAttempts, maxElapsedMs } = this.#retry;
    const started = this.#now();
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#once<T>(method, path, body, signal);
      if (outcome.ok) return { status: outcome.status, value: outcome.value };
      const { error, retryAfterMs } = outcome;
      error.attempts = attempt;
      if (!error.retryable || attempt >= maxAttempts) throw error;
      // After `Retry-After` (never before it), plus the jittered backoff: clients throttled in
      // the same second (a tenant's maxSubmitsPerSecond) do not all come back at once.
      const jitter = backoffMs(attempt - 1, this.#retry, this.#random);
      const delay = retryAfterMs === undefined ? jitter : retryAfterMs + jitter;
      if (this.#now() + delay - started > maxElapsedMs) throw error;
      await sleep(delay, signal);
      if (signal?.aborted) throw signal.reason;
    }
  }

  /** One attempt: the parsed reply, or the typed error (and the server's `Retry-After`). */
  async #once<T>(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ ok: true; status: number; value: T } | { ok: false; error: DyneinError; retryAfterMs?: number }> {
    let res: Response;
    let text: string;
    try {
      res = await this.#attempt(method, path, body, signal);
      text = await res.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      return { ok: false, error: new NetworkError(`${method} ${new URL(path, this.#base).href} failed: ${describe(err)}`, err) };
    }
    const requestId = res.headers.get('apigw-requestid') ?? res.headers.get('x-request-id') ?? undefined;
    if (!res.ok)
      return {
        ok: false,
        error: errorFromResponse(res.status, text, requestId),
        retryAfterMs: parseRetryAfter(res.headers.get('retry-after'), this.#now()),
      };
    try {
      return { ok: true, status: res.status, value: JSON.parse(text) as T };
    } catch {
      throw new DyneinApiError({
        status: res.status,
        code: 'InvalidResponse',
        message: `the API answered ${res.status} with a body that is not JSON (${cutText(text, 100)}): check the endpoint`,
        requestId,
        source: 'gateway',
      });
    }
  }

  /** Signs (afresh: each attempt has its own date) and sends one HTTP request. */
  async #attempt(method: string, path: string, body: string | undefined, signal: AbortSignal | undefined): Promise<Response> {
    const url = new URL(path, this.#base);
    const headers: Record<string, string> = {
      host: url.host,
      accept: 'application/json',
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    };
    const signed = await this.#signer.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      body,
    });
    const sent = { ...(signed.headers as Record<string, string>) };
    delete sent.host; // fetch sets it from the URL
    const timeout = AbortSignal.timeout(this.#retry.attemptTimeoutMs);
    return fetch(url, { method, headers: sent, body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  }
}

/**
 * A job's payload as JSON text: `payloadJson` checked and kept as given, or `payload` through
 * `JSON.stringify` with U+FFFE and U+FFFF escaped (SQS refuses them raw; the value is the same).
 */
function payloadText(job: Pick<JobRequest<unknown>, 'payload' | 'payloadJson'>): string {
  if (job.payloadJson !== undefined) {
    if (job.payload !== undefined)
      throw new ValidationError({ source: 'client', message: 'give payload (a value) or payloadJson (JSON text), not both' });
    if (typeof job.payloadJson !== 'string' || !isJson(job.payloadJson)) {
      throw new ValidationError({
        source: 'client',
        message: 'payloadJson must be JSON text holding one value, e.g. \'{"id": 9007199254740993}\'',
      });
    }
    const bad = findSqsUnsafeChar(job.payloadJson);
    if (bad) {
      throw new ValidationError({
        source: 'client',
        message: `payloadJson holds ${describeSqsUnsafeChar(bad.codePoint)} at character ${bad.index}: write it as a JSON escape (\\u${bad.codePoint.toString(16).toUpperCase().padStart(4, '0')})`,
      });
    }
    return job.payloadJson.trim();
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(job.payload === undefined ? null : job.payload);
  } catch (err) {
    throw new ValidationError({ source: 'client', message: `payload cannot be serialized as JSON: ${(err as Error).message}` });
  }
  if (text === undefined)
    throw new ValidationError({ source: 'client', message: 'payload cannot be serialized as JSON (a function or a symbol)' });
  return text.replace(/[\uFFFE\uFFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Schedule names the API accepts; `.` and `..` also match the pattern but no URL can address them. */
const SCHEDULE_NAME = /^[0-9A-Za-z_.-]{1,64}$/;

/** Why `name` cannot be a schedule name, or undefined when it can (for the CLI; not exported from the package). */
export function scheduleNameProblem(name: unknown): string | undefined {
  if (typeof name === 'string' && SCHEDULE_NAME.test(name) && name !== '.' && name !== '..') return undefined;
  return `name ${JSON.stringify(name)} is not a schedule name: 1 to 64 characters of A-Z a-z 0-9 _ . - (not . or ..)`;
}

/** The path of one schedule; refuses a name the API would refuse or no URL could address, before sending. */
function schedulePath(tenant: string, name: string): string {
  const problem = scheduleNameProblem(name);
  if (problem) throw new ValidationError({ source: 'client', message: problem });
  return `v1/tenants/${enc(tenant)}/schedules/${name}`;
}

/** The PUT body of a definition, as JSON text: times as RFC 3339, the payload spliced in as text. */
function scheduleBody<P>(d: ScheduleDefinition<P>): string {
  if (typeof d !== 'object' || d === null)
    throw new ValidationError({ source: 'client', message: 'the schedule definition must be an object' });
  const time = (field: 'startAt' | 'endAt'): string | undefined => {
    const v = d[field];
    if (!(v instanceof Date)) return v;
    if (Number.isNaN(v.getTime())) throw new ValidationError({ source: 'client', message: `${field} is an invalid Date` });
    return v.toISOString();
  };
  const [startAt, endAt] = [time('startAt'), time('endAt')];
  const fields = JSON.stringify({
    expression: d.expression,
    ...(d.timezone !== undefined ? { timezone: d.timezone } : {}),
    ...(startAt !== undefined ? { startAt } : {}),
    ...(endAt !== undefined ? { endAt } : {}),
    ...(d.state !== undefined ? { state: d.state } : {}),
  });
  if (d.payload === undefined && d.payloadJson === undefined) return fields;
  return `${fields.slice(0, -1)},"payload":${payloadText(d)}}`;
}

/** A whole number in [min, max] for a query parameter, or a client-side ValidationError naming it. */
function wholeNumber(field: string, n: number, min: number, max: number): number {
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ValidationError({
      source: 'client',
      message: `${field} must be a whole number from ${min} to ${max}, got ${JSON.stringify(n)}`,
    });
  return n;
}

/** Splits indexes into batch requests of ≤ 100 jobs and ≤ 5 MiB. */
function chunk(indexes: readonly number[], bytes: (i: number) => number): number[][] {
  return packGreedy(indexes, bytes, MAX_BATCH_JOBS, MAX_BATCH_BYTES);
}

/** `Retry-After` as milliseconds from now: delay-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.ceil(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

const enc = encodeURIComponent;

function describe(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timed out';
  return [e?.message ?? String(err), e?.cause?.code ?? e?.cause?.message].filter(Boolean).join(': ');
}

/** The operator API's path of a tenant. */
const adminPath = (tenant: string) => `v1/admin/tenants/${enc(tenant)}`;
