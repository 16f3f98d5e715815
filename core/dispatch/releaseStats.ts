/**
 * What a releaser (core/dispatch/releaser.ts) counts and tells its round, shared with its parts
 * (lease keeping, marker writing) and the round's report.
 */
import type { AcquiredRow, RowKey } from '../model/index.js';
import type { KeyTally } from './keyTally.js';
import type { TenantTally } from './tenantTally.js';

/** A row's identity in the round's maps: `<shard>|<dueMs>|<jobId>`. */
export function rowKeyString(k: RowKey): string {
  return `${k.shard}|${k.dueMs}|${k.jobId}`;
}

export interface ReleaseStats {
  /** Rows sent to their tenant queue. */
  sent: number;
  /** Sent rows replaced by their delivered marker. */
  recorded: number;
  /** Rows dropped unsent because their lease could not be renewed (another round has them). */
  leaseLost: number;
  /** Lease renewals that succeeded. */
  renewed: number;
  /** Batch entries sent again after a failure. */
  sendRetries: number;
  /** Per sent row: ms from its due time to the send's acknowledgement. */
  latenessMs: number[];
  /** The same per tenant (sent, failed sends, a lateness sample), made on the first send. */
  byTenant?: TenantTally;
  /** Per concurrency key (slots taken, asks refused, waits), made on the first keyed row. */
  byKey?: KeyTally;
  /** Sends put off by a tenant's delivery rate limit (a row counts each time). */
  deferred: number;
  /** Acquired rows given back unsent because their tenant was paused. */
  givenBack: number;
  /** Debounced rows deleted unsent: a later version replaced them, or their job was cancelled. */
  superseded?: number;
}

/** What the round learns from its releaser, to track the rows it read until they are final. */
export interface ReleaseHooks {
  /** These rows' delivered markers are written: they are final. */
  onRecorded?(rows: readonly AcquiredRow[]): void;
  /**
   * The releaser let go of a row it had acquired (its lease was lost to another round, its
   * tenant is unknown, or its marker could not be written): someone must look at it again from
   * `retryAtMs` on.
   */
  onDropped?(row: AcquiredRow, retryAtMs: number): void;
  /** These rows were just sent (their lateness, ms from due time to the send's acknowledgement): live metrics. */
  onSent?(latenessMs: readonly number[]): void;
}
