import type { RowKey } from '../model/index.js';
import type { CancelFilter } from './filter.js';

/** What a bulk cancel found: each matching job counted once, in one of three ways. */
export interface OperationCounts {
  /** Cancelled by this operation: never delivered. */
  readonly cancelled: number;
  /** Being dispatched or delivered when the operation reached it. */
  readonly alreadyQueued: number;
  /** Submitted with `cancellable: false`, or a workflow's job (cancel the workflow instead). */
  readonly notCancellable: number;
}

export const NO_COUNTS: OperationCounts = { cancelled: 0, alreadyQueued: 0, notCancellable: 0 };

/** A bulk cancel as it was requested. */
export interface OperationHead {
  readonly operationId: string;
  readonly tenant: string;
  readonly filter: CancelFilter;
  /** When the request arrived, epoch ms: jobs accepted before it are the operation's. */
  readonly createdAtMs: number;
  /** Shards `0..shardCount-1` each get a pass. */
  readonly shardCount: number;
}

/**
 * One part's counts: a shard's pass (`s#<shard>`, resumable after `afterSk`, `done` when it read
 * the whole shard) or an inbound message's jobs ingest wrote after the request (`m#<messageId>`).
 */
export interface PartProgress extends OperationCounts {
  readonly afterSk?: string;
  readonly done: boolean;
}

/** A matching row as an operation sees it: its state, and the operation's mark on it, if any. */
export interface SeenRow {
  readonly key: RowKey;
  readonly state: string;
  /**
   * `c|<claimer>` (the claimer cancelled it) or `q|<claimer>` (the claimer counted it as
   * already queued or not cancellable): whoever marks a row counts it, exactly once.
   */
  readonly mark?: string;
  /** The row's tags, schedule and sent time as read (a pass rewrites far rows whole: {@link OperationStore.cancelFar}). */
  readonly tags?: readonly string[];
  readonly schedule?: string;
  readonly sentAtMs?: number;
  /** An ACQUIRED row's lease and a keyed row's key, as read: a keyed row waiting for its slot can still be cancelled. */
  readonly leaseUntil?: number;
  readonly concurrencyKey?: string;
  readonly concurrencyLimit?: number;
}

/** The table as a bulk cancel uses it (DynamoOperationStore implements it). */
export interface OperationStore {
  /**
   * Cancels (with the mark) a keyed row a dispatcher holds while it waits for its key's slot, if
   * it is still held with the lease read (core/jobs/jobsService.ts does the same for one job).
   */
  cancelWaitingRow(key: RowKey, head: OperationHead, mark: string, heldLeaseUntil: number, expiresAtMs: number): Promise<boolean>;
  /** Stores the operation and its entry in the tenant's index that ingest reads. */
  create(head: OperationHead, expiresAtMs: number): Promise<void>;
  /** Removes what {@link create} wrote (its passes could not be started). */
  remove(head: OperationHead): Promise<void>;
  /** The operation and its parts' progress, or undefined. */
  read(operationId: string): Promise<{ head: OperationHead; parts: ReadonlyMap<string, PartProgress> } | undefined>;
  /** Whether the tenant has any operation created after `afterMs` (a consistent read of one item). */
  hasOperations(tenant: string, afterMs: number): Promise<boolean>;
  /** The tenant's operations created after `afterMs` (a consistent read). */
  createdAfter(tenant: string, afterMs: number): Promise<OperationHead[]>;
  saveProgress(operationId: string, part: string, progress: PartProgress, expiresAtMs: number): Promise<void>;
  /**
   * One page of shard `shard`'s rows of the tenant that the filter names and that are pending
   * (SCHEDULED, ACQUIRED, DEAD) or carry the operation's mark, after `afterSk`.
   */
  readShard(
    shard: number,
    head: OperationHead,
    afterSk: string | undefined,
  ): Promise<{ readonly rows: SeenRow[]; readonly last?: string; readonly more: boolean }>;
  /** The row at `key` (a consistent read), or undefined when there is none of the tenant. */
  getRow(key: RowKey, head: OperationHead): Promise<SeenRow | undefined>;
  /** SCHEDULED or DEAD → CANCELLED, marked `mark`: false when the row was neither. */
  cancelRow(key: RowKey, head: OperationHead, mark: string, expiresAtMs: number): Promise<boolean>;
  /** Marks the row while it is still in `state` and unmarked (or marked `mark`): false otherwise. */
  markRow(key: RowKey, head: OperationHead, mark: string, state: string): Promise<boolean>;
  /**
   * Writes the tombstones of `rows` whole, marked `mark`, 25 a request, without conditions: only
   * for SCHEDULED rows read so far from their due time that nothing but a cancel can write them
   * before `untilMs` (see {@link farFromDue}). Stops sending at `untilMs`; answers the rows it
   * did not write (the caller settles those one by one).
   */
  cancelFar(
    rows: readonly SeenRow[],
    head: OperationHead,
    mark: string,
    expiresAtMs: (row: SeenRow) => number,
    untilMs: number,
  ): Promise<SeenRow[]>;
}
