import type { RowKey } from '../model/index.js';
import type { WaitingChild } from './release.js';
import type { ParentFailurePolicy, WorkflowTiming } from './request.js';

/**
 * Where a job waiting for parents is kept (issue #25): one small record per child, updated once
 * per parent that ends, apart from the child's payload (so that each update costs one write unit).
 * `key` is the child's: its id's shard and time field, and its id.
 */

/**
 * A waiting child's state: `WAITING` for parents; `RELEASING` (its row is being written at
 * `dueMs`), `QUEUING` (being sent straight to the tenant queue) and `QUEUED` once released;
 * `CANCELLED` by a failed parent or a cancel.
 */
export type WaitingState = 'WAITING' | 'RELEASING' | 'QUEUING' | 'QUEUED' | 'CANCELLED';

/** A waiting child as first written: no parent has ended. */
export interface NewWaitingChild {
  readonly key: RowKey;
  readonly tenant: string;
  readonly parents: number;
  readonly timing: WorkflowTiming;
  readonly onParentFailure: ParentFailurePolicy;
}

/** A waiting child's record as stored. */
export interface WaitingRecord extends WaitingChild {
  readonly key: RowKey;
  readonly tenant: string;
  readonly state: WaitingState;
  /** Its row's due time, once released. */
  readonly dueMs?: number;
}

export interface WaitingChildren {
  /** Writes each record unless one is at its key already (a retried submit); returns those written. */
  create(children: readonly NewWaitingChild[]): Promise<number>;
  /**
   * Records that parent `parent` (its index in the child's `after`) ended at `atMs`, successfully
   * or not, unless that parent's end is recorded already (then the first one stands). Returns the
   * record after it, read strongly consistent; undefined when no child is at `key` (nothing is
   * written then).
   */
  recordParentEnd(key: RowKey, parent: number, ok: boolean, atMs: number): Promise<WaitingRecord | undefined>;
  /** The record, strongly consistent. */
  get(key: RowKey): Promise<WaitingRecord | undefined>;
  /** Moves the record from state `from` to `to` (with the row's `dueMs` when given); false when it was not in `from`. */
  transition(key: RowKey, from: WaitingState, to: WaitingState, dueMs?: number): Promise<boolean>;
}
