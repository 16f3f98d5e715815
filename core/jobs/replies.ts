/**
 * What the jobs API answers (status, cancel, listing, history's timeline) and the states it
 * names: the types the SDK's replies (client/apiTypes.ts) are tied to.
 */

/**
 * What a worker reports for a delivery. `CANCELLED`: the job stopped on a cancel request while
 * it ran (docs/flow-control.md): final, as `SUCCEEDED` and `DEAD` are.
 */
export type Outcome = 'SUCCEEDED' | 'FAILED' | 'DEAD' | 'CANCELLED';

/**
 * The states a listing's `state=` reads from a history tenant's outcome records: `DELIVERED`
 * until an outcome is reported. (`CANCELLED` names the table's tombstones there; a job cancelled
 * while it ran lists as `CANCELLED` in a listing without `state`.)
 */
export type HistoryState = 'DELIVERED' | 'SUCCEEDED' | 'FAILED' | 'DEAD';

/** One event of a job's timeline, as `GET` of one job shows it. */
export interface TimelineEvent {
  readonly at: string;
  readonly event: 'SCHEDULED' | 'DELIVERED' | 'EDITED' | 'CANCEL_REQUESTED' | Outcome;
  readonly attempt?: number;
  readonly error?: string;
  readonly durationMs?: number;
  /** The reported result, as JSON (a raw JSON text when serialised by the handlers). */
  readonly result?: unknown;
  /** `EDITED` (a dead letter put back with a new payload, docs/dead-letters.md): who, and the payloads' SHA-256. */
  readonly by?: string;
  readonly oldPayloadSha256?: string;
  readonly newPayloadSha256?: string;
}

/**
 * What status answers. Every state but the direct path's `QUEUED` is read from the table:
 *
 * - `SCHEDULED`: the job's row waits for its time; `ACQUIRED`: a dispatcher is sending it now.
 * - `QUEUED`: handed to the tenant queue. For a job through the table, the dispatcher's delivered
 *   marker says so (`deliveredAt`); for a job sent straight to its queue at submit, the job id
 *   says so (its MAC proves this deployment issued it on that path, and submit issues such an id
 *   only once SQS has taken the message).
 * - `CANCELLED`: a tombstone (or a cancel record of an earlier release) says so.
 * - `DEAD_LETTERED`: ingest gave the job up to the inbound dead-letter queue (after the inbound
 *   queue's maxReceiveCount failed attempts); redriving that queue schedules it again.
 * - `WAITING`: a workflow job waiting for its parents (docs/workflows.md); its `runAt` is not known yet.
 * - `UNKNOWN`: nothing about the job is in the table: not yet stored (it waits in the inbound
 *   queue for a second or two after submit, longer if ingest is failing), or its record expired
 *   (records are kept `cancelRecordRetentionMs`, 7 days, after runAt). Never a guess.
 */
export type JobState = 'WAITING' | 'SCHEDULED' | 'ACQUIRED' | 'QUEUED' | 'CANCELLED' | 'DEAD_LETTERED' | 'UNKNOWN' | HistoryState;

/** What `DEAD_LETTERED` means and what to do about it (status and listing say it). */
export const DEAD_LETTERED_MESSAGE =
  'ingest could not store this job and gave its message up to the inbound dead-letter queue: fix the cause (see the ingest logs), then redrive that queue to schedule it again, or cancel it';

export interface StatusReply {
  readonly jobId: string;
  readonly tenant: string;
  /** When it is due (RFC 3339, ms); absent for a workflow job whose due time is not known: `WAITING` for its parents, cancelled while it waited, or `UNKNOWN`. */
  readonly runAt?: string;
  readonly state: JobState;
  /** `SCHEDULED` or `ACQUIRED`: the job's priority, when it is not the default 5. */
  readonly priority?: number;
  /** Through the table (`SCHEDULED`, `ACQUIRED`, `CANCELLED`, and once delivered): the job's tags, when it has some. */
  readonly tags?: string[];
  /** A keyed job (`SCHEDULED`, `ACQUIRED`, `CANCELLED`, and `QUEUED` once its marker is written): its concurrency key and the limit submitted with it. */
  readonly concurrencyKey?: string;
  readonly concurrencyLimit?: number;
  /** A debounced job (docs/flow-control.md#debounce): its debounce key; `runAt` is its current due time. */
  readonly debounceKey?: string;
  /** The job's trace id (docs/tracing.md): whatever the table holds of it (not for a job sent straight to its queue, nor one not stored). */
  readonly traceId?: string;
  /** `QUEUED` through the table: when the dispatcher recorded the send (RFC 3339, ms). */
  readonly deliveredAt?: string;
  /** `DEAD_LETTERED` and `UNKNOWN`: what the state means and what to do about it. */
  readonly message?: string;
  /** A workflow job that ended: the `result` its worker reported (docs/workflows.md). */
  readonly result?: unknown;
  /** Tenants with history on: what happened to the job, oldest first (docs/history.md). */
  readonly timeline?: TimelineEvent[];
  /** A delivered job without a final outcome that a `DELETE` asked to stop (docs/flow-control.md). */
  readonly cancelRequested?: true;
}

/**
 * `CANCELLED` (200): it will never be delivered. `CANCEL_REQUESTED` (202): it was delivered and
 * its outcomes are reported; its worker is told at its next heartbeat (docs/flow-control.md).
 */
export interface CancelReply {
  readonly jobId: string;
  readonly state: 'CANCELLED' | 'CANCEL_REQUESTED';
}

/** `POST /v1/tenants/{tenant}/jobs/heartbeats`: the jobs of the request a `DELETE` asked to stop. */
export interface HeartbeatsReply {
  readonly cancelRequested: string[];
}

/** A listed job: the fields of GET of one job, and the schedule of an occurrence. */
export type ListedJob = StatusReply & { readonly schedule?: string };

export interface JobPageReply {
  readonly jobs: ListedJob[];
  /** Absent on the last page. */
  readonly nextCursor?: string;
}
