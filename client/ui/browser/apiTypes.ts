/**
 * The shapes of the replies the page reads, as docs/api.md gives them: the fields it shows, no more.
 *
 * They mirror the SDK's, client/apiTypes.ts (`JobStatus`, `ListedJob`, `JobPage`, `Schedule`, `SchedulePage`,
 * `DeadLetter`, `DeadLetterPage`, `DeadLetterRedrive`, `DeadLettersDeleted`, `DeadLetterEdit`,
 * `DeadLetterAuditEntry`, `DeadLetterAuditPage`, `CancelJobsStarted`, `Operation`) rather than import
 * them: the SDK's entry loads Node modules (node:crypto, the SigV4 signer), which tsconfig.browser.json,
 * with the DOM library and no Node types, cannot check. test/client/ui-browser.test.ts asserts at
 * compile time that each client type fits its mirror here, so the two cannot drift apart.
 */

/** The body of an error reply: the API's `{"error": {code, message}}`, or API Gateway's own `{"message"}`. */
export interface ApiErrorBody {
  readonly error?: { readonly code?: string; readonly message?: string };
  readonly message?: string;
}

/** One event of a history tenant's job (docs/history.md). */
export interface TimelineEvent {
  readonly at: string;
  readonly event: string;
  readonly attempt?: number;
  readonly error?: string;
  readonly durationMs?: number;
  readonly result?: unknown;
  /** `EDITED`: who edited the dead letter: the caller's IAM principal ARN. */
  readonly by?: string;
  /** `EDITED`: SHA-256 (hex) of the payload's JSON text before the edit. */
  readonly oldPayloadSha256?: string;
  /** `EDITED`: SHA-256 (hex) of the payload's JSON text after the edit. */
  readonly newPayloadSha256?: string;
}

/** `GET .../jobs/{jobId}`: the page shows every field, the timeline apart. */
export interface JobStatus {
  readonly jobId: string;
  /** Absent for a workflow job still waiting for its parents. */
  readonly runAt?: string;
  readonly state: string;
  /** Its trace (docs/tracing.md): the job panel draws the local stack's spans of it. */
  readonly traceId?: string;
  readonly deliveredAt?: string;
  /** A keyed job through the table (docs/flow-control.md "Concurrency by key"). */
  readonly concurrencyKey?: string;
  readonly concurrencyLimit?: number;
  /** A delivered job a `DELETE` asked to stop, until its worker reports its end. */
  readonly cancelRequested?: true;
  readonly timeline?: readonly TimelineEvent[];
}

/** One row of `GET .../jobs`. */
export interface ListedJob {
  readonly jobId: string;
  /** Absent for a workflow job still waiting for its parents. */
  readonly runAt?: string;
  readonly state: string;
  readonly deliveredAt?: string;
  readonly schedule?: string;
  readonly tags?: readonly string[];
  /** A keyed job (docs/flow-control.md "Concurrency by key"): its key and the limit it was submitted with. */
  readonly concurrencyKey?: string;
  readonly concurrencyLimit?: number;
}

/** `POST .../jobs/cancel`'s reply (docs/flow-control.md). */
export interface CancelJobsStarted {
  readonly operationId: string;
  readonly state: string;
}

/** `GET .../operations/{operationId}`: a bulk cancel's progress. */
export interface Operation {
  readonly operationId: string;
  readonly state: string;
  readonly matched: number;
  readonly cancelled: number;
  readonly alreadyQueued: number;
  readonly notCancellable: number;
}

export interface JobPage {
  readonly jobs: readonly ListedJob[];
  readonly nextCursor?: string;
}

/** One recurring schedule of `GET .../schedules`. */
export interface Schedule {
  readonly name: string;
  readonly state: string;
  readonly expression: string;
  readonly timezone: string;
  /** Empty while `DISABLED` or past its end. */
  readonly nextRuns: readonly string[];
}

export interface SchedulePage {
  readonly schedules: readonly Schedule[];
  readonly nextCursor?: string;
}

/** A message of `GET .../dlq`. */
export interface DeadLetter {
  /** Names the message in redrive and delete. */
  readonly handle: string;
  readonly messageId: string;
  readonly body: string;
  /** `dyneinError`: the error a worker gave up with. */
  readonly attributes: Readonly<Record<string, string>>;
  readonly receiveCount: number;
  readonly sentAt?: string;
  readonly firstReceivedAt?: string;
  readonly jobId?: string;
}

export interface DeadLetterPage {
  readonly messages: readonly DeadLetter[];
  readonly approximateDepth: number;
}

/**
 * `POST .../dlq/redrive`: with `all`, a move task started (AWS) or the messages copied (the local
 * stack); with `handles`, what became of each.
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

/** `POST .../dlq/delete`. */
export interface DeadLettersDeleted {
  readonly deleted: readonly string[];
  readonly notFound: readonly string[];
  readonly failed?: readonly string[];
}

/**
 * `POST .../dlq/edit`: the job put back on its queue with the new payload. `sentNotDeleted`: sent,
 * but its delete from the DLQ failed: it is in both (delete it, never edit or redrive it again).
 */
export interface DeadLetterEdit {
  readonly jobId: string;
  readonly editedAt: string;
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  readonly sentNotDeleted?: true;
}

/** One edit of `GET .../dlq/audit`. */
export interface DeadLetterAuditEntry {
  readonly at: string;
  readonly jobId: string;
  /** The caller's IAM principal ARN. */
  readonly by: string;
  /** SHA-256 (hex) of the payload's JSON text before and after the edit. */
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  readonly messageId: string;
}

/** `GET .../dlq/audit`: newest first; `cursor` when older edits follow. */
export interface DeadLetterAuditPage {
  readonly edits: readonly DeadLetterAuditEntry[];
  readonly cursor?: string;
}

/** `GET .../workflows/{workflowId}`. */
export interface Workflow {
  readonly workflowId: string;
  readonly state: string;
  readonly createdAt: string;
  readonly jobs: readonly {
    readonly key: string;
    readonly jobId: string;
    readonly state: string;
    readonly after?: readonly string[];
    readonly runAt?: string;
    readonly message?: string;
  }[];
}
