/** The options of `DyneinClient`'s calls: cancellation, batches, the filters and pages of its listings, waiting for a bulk cancel. */
import type { Operation } from './apiTypes.js';

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface BatchOptions extends CallOptions {
  /** Called after each request with jobs done so far (succeeded or failed) and the total. */
  readonly onProgress?: (done: number, total: number) => void;
  /** Batch requests in flight at once. @default 4 */
  readonly concurrency?: number;
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
  /** Jobs whose tags hold this one (tags are kept on rows: jobs sent straight to their queue have none). */
  readonly tag?: string;
  /**
   * Jobs submitted with this concurrency key (1 to 128 characters, no control characters; the API
   * checks it: 400 `ValidationError` otherwise). Each listed keyed job shows `concurrencyKey` and `concurrencyLimit`.
   */
  readonly concurrencyKey?: string;
  /** Jobs submitted with this debounce key (`debounce.key`; docs/flow-control.md#debounce), pending or past. */
  readonly debounceKey?: string;
  /** @default 'asc' */
  readonly order?: 'asc' | 'desc';
  /**
   * The jobs of this workflow, in its order (docs/workflows.md): goes with `limit` and `cursor`
   * only (the API answers 400 with any other filter; 404 `WorkflowNotFoundError` for an unknown id).
   */
  readonly workflow?: string;
}

export interface ListJobsOptions extends JobFilter, CallOptions {
  /** Jobs per page, 1 to 1000. @default 100 */
  readonly limit?: number;
  /** The previous page's `nextCursor`. */
  readonly cursor?: string;
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

export interface CancelJobsWaitOptions extends CallOptions {
  /** Called with each reply of `operation` while waiting (the last one `DONE`). */
  readonly onProgress?: (operation: Operation) => void;
  /** How long to wait for `DONE` before throwing a `DyneinError` that names the operation (it runs on). @default 600000 (10 minutes) */
  readonly timeoutMs?: number;
  /** How often to read the operation. @default 1000 */
  readonly pollIntervalMs?: number;
}
