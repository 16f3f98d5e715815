/**
 * What the SDK sends and what the API answers: the request and reply types of `DyneinClient`,
 * restated from core's (the package's declarations must not pull core modules in).
 * test/unit/reply-types.test.ts ties each reply to core's, so `npm run typecheck` fails when one drifts.
 */
import type { DyneinApiError } from './errors.js';

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
  /**
   * Names for finding the job among the tenant's (`listJobs({ tag })`): up to 10 distinct strings
   * of 1 to 64 characters. Kept on its row: shown while it waits (`SCHEDULED`, `ACQUIRED`) or once
   * cancelled, not for a job sent straight to its queue.
   */
  readonly tags?: readonly string[];
  /**
   * Concurrency by key (docs/flow-control.md): jobs of the tenant with the same key run at most
   * `concurrencyLimit` at a time. A keyed job is dispatched only once it holds one of its key's
   * slots, and holds it until its worker reports its end (`SUCCEEDED`, `DEAD`, `CANCELLED`: the
   * Worker and `dyneinLambdaHandler` do so when given a client) or until the key lease
   * (`keyLeaseSeconds`, default 900) passes without an outcome or a heartbeat. 1 to 128
   * characters, no control characters. Not in workflow jobs yet.
   */
  readonly concurrencyKey?: string;
  /**
   * How many jobs of `concurrencyKey` may run at once: a whole number from 1 to 1,000; only with
   * `concurrencyKey`. The latest submitted value for a key applies. @default 1
   */
  readonly concurrencyLimit?: number;
  /**
   * Debounce (docs/flow-control.md#debounce): the tenant's pending job of `debounce.key` takes
   * this payload and moves to now + `periodSeconds` (never past its first submit +
   * `maxWaitSeconds`); without one, this job starts it. The job is due `periodSeconds` after its
   * latest submit, so give neither `runAt` nor `delaySeconds`; not with `idempotencyKey`,
   * `cancellable: false` or `concurrencyKey`. The reply's `debounced` says which happened.
   */
  readonly debounce?: JobDebounce;
}

/** A job's `debounce`: its key, its period and the longest its first submit may wait. */
export interface JobDebounce {
  /** 1 to 128 characters, no control characters. */
  readonly key: string;
  /** 1 to 86,400 seconds: the job is due this long after the latest submit of its key. */
  readonly periodSeconds: number;
  /** `periodSeconds` to 604,800: never due later than this after the pending job's first submit. */
  readonly maxWaitSeconds?: number;
}

/**
 * `DEAD_LETTERED`: ingest gave the job up to the inbound dead-letter queue (redrive it, or
 * cancel). `UNKNOWN`: the scheduler has no record of the job (not stored yet, a second or two
 * after submit; or its record expired, 7 days after runAt); `message` says which applies.
 */
export type JobState =
  // A workflow job waiting for its parents (docs/workflows.md): no runAt yet.
  | 'WAITING'
  | 'SCHEDULED'
  | 'ACQUIRED'
  | 'QUEUED'
  | 'CANCELLED'
  | 'DEAD_LETTERED'
  | 'UNKNOWN'
  // Tenants with history on (docs/history.md): delivered, and the latest reported outcome (a job
  // stopped while it ran, docs/flow-control.md, shows CANCELLED).
  | 'DELIVERED'
  | 'SUCCEEDED'
  | 'FAILED'
  | 'DEAD';

/** One event of a history tenant's job (docs/history.md). */
export interface TimelineEvent {
  readonly at: string;
  /**
   * `EDITED`: the job's dead letter was put back on its queue with a new payload (`editDeadLetter`).
   * `CANCEL_REQUESTED`: a `cancel` of the running job asked its worker to stop it; `CANCELLED`: its
   * worker reported it stopped so (docs/flow-control.md "Cancel a running job").
   */
  readonly event: 'SCHEDULED' | 'DELIVERED' | 'EDITED' | 'CANCEL_REQUESTED' | 'SUCCEEDED' | 'FAILED' | 'DEAD' | 'CANCELLED';
  readonly attempt?: number;
  readonly error?: string;
  readonly durationMs?: number;
  readonly result?: unknown;
  /** `EDITED`: who edited it: the caller's IAM principal ARN (locally `arn:aws:iam::000000000000:user/dynein-<tenant>`). */
  readonly by?: string;
  /** `EDITED`: SHA-256 (hex) of the payload's JSON text before the edit. */
  readonly oldPayloadSha256?: string;
  /** `EDITED`: SHA-256 (hex) of the payload's JSON text after the edit, as sent. */
  readonly newPayloadSha256?: string;
}

/** Reply of `schedule`: `QUEUED` when the job went straight to its queue. */
export interface ScheduledJob {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: 'SCHEDULED' | 'QUEUED';
  /** A job with `debounce`: true when it replaced its key's pending job (whose id this is), false when it started one. */
  readonly debounced?: boolean;
}

/** Reply of `get`. */
export interface JobStatus {
  readonly jobId: string;
  readonly tenant: string;
  /** When it is due; absent for a workflow job whose due time is not known: `WAITING` for its parents, cancelled while it waited, or `UNKNOWN`. */
  readonly runAt?: string;
  readonly state: JobState;
  /** `SCHEDULED` and `ACQUIRED`: the priority (1 to 9) of a job submitted with one other than 5. */
  readonly priority?: number;
  /** Through the table (`SCHEDULED`, `ACQUIRED`, `CANCELLED`, and once delivered): the job's tags, when it has some. */
  readonly tags?: string[];
  /**
   * A keyed job through the table (`SCHEDULED`, `ACQUIRED`; `CANCELLED` while its tombstone keeps
   * them, best effort): its concurrency key and the limit it was submitted with.
   */
  readonly concurrencyKey?: string;
  readonly concurrencyLimit?: number;
  /** A debounced job: its debounce key; `runAt` is its current due time (each replace moves it). */
  readonly debounceKey?: string;
  /**
   * The job's trace id (docs/tracing.md): the trace of the `traceparent` its submit carried, or the
   * one the scheduler started for it. Shown for a job the table holds (not one sent straight to its
   * queue: its message's `traceparent` attribute carries it).
   */
  readonly traceId?: string;
  /** `QUEUED` through the table: when the dispatcher recorded the send (RFC 3339). */
  readonly deliveredAt?: string;
  /** `DEAD_LETTERED` and `UNKNOWN`: what the state means and what to do. */
  readonly message?: string;
  /** A workflow job that ended: the result its worker reported. */
  readonly result?: unknown;
  /** Tenants with history on: what happened to the job, oldest first. */
  readonly timeline?: TimelineEvent[];
  /**
   * A delivered job without a final outcome that a `cancel` asked to stop (docs/flow-control.md
   * "Cancel a running job"): its worker is told at its next heartbeat.
   */
  readonly cancelRequested?: true;
}

/**
 * One job of `listJobs`: the fields of `get` (a keyed job's `concurrencyKey` and `concurrencyLimit`
 * among them), and the schedule of a recurring schedule's occurrence.
 */
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

/**
 * The new payload of `editDeadLetter`: at most one of `payload` and `payloadJson` (neither: `null`).
 */
export interface DeadLetterEditRequest<P = unknown> {
  /** Any JSON value, serialized with `JSON.stringify`. */
  readonly payload?: P;
  /** The payload as JSON text, delivered byte for byte (see {@link JobRequest.payloadJson}). */
  readonly payloadJson?: string;
}

/**
 * Reply of `editDeadLetter`: the job put back on the queue with its new payload, and the SHA-256
 * (hex) of the payload's JSON text before and after. `sentNotDeleted`: sent, but its delete from
 * the DLQ failed, so it is in both: delete it with `deleteDeadLetters` and its handle, never edit
 * or redrive it again (it would be delivered twice).
 */
export interface DeadLetterEdit {
  readonly jobId: string;
  readonly editedAt: string;
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  readonly sentNotDeleted?: true;
}

/** One edit of a dead letter, as `deadLetterAudit` lists it (kept a year). */
export interface DeadLetterAuditEntry {
  /** When the edit was made (RFC 3339). */
  readonly at: string;
  readonly jobId: string;
  /** The caller: its IAM principal ARN (locally `arn:aws:iam::000000000000:user/dynein-<tenant>`). */
  readonly by: string;
  /** SHA-256 (hex) of the payload's JSON text before and after the edit. */
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  /** The SQS message id of the dead letter edited. */
  readonly messageId: string;
}

/** One page of `deadLetterAudit`, newest first. */
export interface DeadLetterAuditPage {
  readonly edits: readonly DeadLetterAuditEntry[];
  /** Pass it as `cursor` for the next page; absent on the last page. */
  readonly cursor?: string;
}

/** A tenant's limits and weight (tenant controls, docs/tenant-controls.md). */
export interface TenantSettings {
  /** Most deliveries per second to the tenant's queue; absent: no limit. */
  readonly maxDeliveriesPerSecond?: number;
  /** Most jobs submitted per second (excess: 429 Throttled); absent: no limit. */
  readonly maxSubmitsPerSecond?: number;
  /** Share of dispatch relative to other tenants' (default 1). */
  readonly weight: number;
  /**
   * Seconds a concurrency key's slot stays held after its job's send, last heartbeat or `FAILED`
   * report with no final outcome (docs/flow-control.md "Concurrency by key"); then the next job of
   * the key takes it over. Absent: the default, 900.
   */
  readonly keyLeaseSeconds?: number;
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
  /** 10 to 86,400 seconds, or null for the default (900): how long a silent worker's key slot stays held. */
  readonly keyLeaseSeconds?: number | null;
}

/**
 * Reply of `cancel` (repeatable). `CANCELLED` (200): the job will never be delivered.
 * `CANCEL_REQUESTED` (202): the job was delivered and its outcomes are reported (history on, or a
 * workflow's job), and it has no final outcome yet: its worker is asked to stop it at its next
 * heartbeat, and reports `CANCELLED` once it did (docs/flow-control.md "Cancel a running job").
 */
export interface CancelledJob {
  readonly jobId: string;
  readonly state: 'CANCELLED' | 'CANCEL_REQUESTED';
}

/** Reply of `heartbeats`: the jobs among those sent whose stop a `cancel` requested. */
export interface JobHeartbeats {
  readonly cancelRequested: readonly string[];
}

/**
 * What `cancelJobs` cancels (docs/flow-control.md "Bulk cancel"): exactly one selector. `tag`: the
 * jobs submitted with that tag; `concurrencyKey` / `debounceKey`: the jobs submitted with that key
 * (those fields are not built yet: nothing matches them today); `state: 'SCHEDULED'`: every pending
 * job of the tenant, or those due within `[from, to]` (inclusive; a Date or an RFC 3339 time).
 */
export type CancelJobsFilter =
  | { readonly tag: string }
  | { readonly concurrencyKey: string }
  | { readonly debounceKey: string }
  | { readonly state: 'SCHEDULED'; readonly from?: Date | string; readonly to?: Date | string };

/** An operation's filter as the API shows it: the request's, its times RFC 3339 with milliseconds. */
export type OperationFilter =
  | { readonly tag: string }
  | { readonly concurrencyKey: string }
  | { readonly debounceKey: string }
  | { readonly state: 'SCHEDULED'; readonly from?: string; readonly to?: string };

/** Reply of `cancelJobs` (202): the operation started; `operation` reports its progress. */
export interface CancelJobsStarted {
  readonly operationId: string;
  readonly state: 'RUNNING';
}

/**
 * Reply of `operation`: a bulk cancel's progress and counts. Each matching job accepted before the
 * request counts once, in `cancelled` (never delivered), `alreadyQueued` (being dispatched when
 * reached) or `notCancellable` (`cancellable: false`, or a workflow's job); `matched` is their sum.
 * `DONE` once every shard of the table was read whole; jobs still in the inbound queue at the
 * request are counted as ingest writes them, so the counts may still grow a moment after `DONE`.
 */
export interface Operation {
  readonly operationId: string;
  readonly tenant: string;
  readonly kind: 'cancel';
  readonly filter: OperationFilter;
  /** When the request arrived (RFC 3339): jobs accepted before it are the operation's. */
  readonly createdAt: string;
  readonly state: 'RUNNING' | 'DONE';
  readonly matched: number;
  readonly cancelled: number;
  readonly alreadyQueued: number;
  readonly notCancellable: number;
}

/** One job's outcome in `scheduleBatch`, in request order. */
export type BatchItemResult = { readonly ok: true; readonly job: ScheduledJob } | { readonly ok: false; readonly error: DyneinApiError };

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

/**
 * One job of a workflow as the API takes it (docs/workflows.md): a one-off job's fields (no
 * `idempotencyKey`: it names the workflow), its `key` in the workflow and the keys it waits for.
 */
export interface WorkflowJobRequest<P = unknown> {
  /** 1 to 64 characters of `A-Z a-z 0-9 _ . -`, unique in the workflow. */
  readonly key: string;
  /** Any JSON value (see {@link JobRequest.payload}). Omitted: `null`. */
  readonly payload?: P;
  /** The payload as JSON text, delivered byte for byte (see {@link JobRequest.payloadJson}). */
  readonly payloadJson?: string;
  /** Never before this time. A job without `after` needs it or `delaySeconds`. */
  readonly runAt?: Date | string;
  /** Seconds after the job's last parent succeeded (from now for a job without `after`). */
  readonly delaySeconds?: number;
  /** Keys of the jobs it waits for (at most 1,000). */
  readonly after?: readonly string[];
  /** When a parent fails or is cancelled: `cancel` this job and what waits for it, or `run` it once every parent ended. @default 'cancel' */
  readonly onParentFailure?: 'cancel' | 'run';
  /** 1 to 9. @default 5 */
  readonly priority?: number;
  /** Up to 10 names to find it by once it is handed to the table (`listJobs({ tag })`). */
  readonly tags?: readonly string[];
  /** Jobs of the tenant with this key (of workflows or not) run at most `concurrencyLimit` at a time (see {@link JobRequest.concurrencyKey}). */
  readonly concurrencyKey?: string;
  /** With `concurrencyKey`: 1 to 1,000. @default 1 */
  readonly concurrencyLimit?: number;
  /** @default true */
  readonly cancellable?: boolean;
}

/** A workflow as `submitWorkflow` sends it: 1 to 1,000 jobs. */
export interface WorkflowRequest<P = unknown> {
  /**
   * Names the workflow: the same key with the same jobs answers the same workflow (also when
   * retried); with other jobs, `IdempotencyKeyReusedError`. @default a random UUID per call (retries of this call are safe)
   */
  readonly idempotencyKey?: string;
  readonly jobs: readonly WorkflowJobRequest<P>[];
}

/** Reply of `submitWorkflow`: each job's id by its key; `created` false for a repeat of an earlier request. */
export interface SubmittedWorkflow {
  readonly workflowId: string;
  readonly tenant: string;
  readonly state: 'RUNNING';
  readonly jobs: Readonly<Record<string, string>>;
  readonly created: boolean;
}

/** A workflow job's state as `getWorkflow` shows it. */
export type WorkflowJobState = 'WAITING' | 'SCHEDULED' | 'QUEUED' | 'SUCCEEDED' | 'DEAD' | 'CANCELLED';

/** Reply of `getWorkflow`. `RUNNING` while a job may still run or report. */
export interface Workflow {
  readonly workflowId: string;
  readonly tenant: string;
  readonly state: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
  readonly createdAt: string;
  /** The trace every job of the workflow carries (docs/tracing.md). */
  readonly traceId?: string;
  readonly jobs: readonly {
    readonly key: string;
    readonly jobId: string;
    readonly state: WorkflowJobState;
    /** The keys of the jobs it waits for; absent for a job without parents. */
    readonly after?: readonly string[];
    /** Its due time, once known. */
    readonly runAt?: string;
    /** The outcome its worker reported, once it ended so. */
    readonly outcome?: 'SUCCEEDED' | 'DEAD';
    /** Why it was cancelled. */
    readonly message?: string;
  }[];
}

/** Reply of `cancelWorkflow`: jobs cancelled (now or before), and those already handed to their queue. */
export interface CancelledWorkflow {
  readonly workflowId: string;
  readonly state: 'CANCELLED';
  readonly cancelled: number;
  readonly alreadyQueued: number;
}
