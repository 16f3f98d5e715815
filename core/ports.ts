/**
 * The interfaces the core talks through. `adapters/` implements them with the AWS SDK v3; tests
 * wrap them to inject faults. The core imports no AWS SDK.
 */

/** A job row as ingest writes it (`pk = shard`, `sk = dueMs#jobId`). */
export interface JobRow {
  readonly shard: number;
  readonly dueMs: number;
  readonly jobId: string;
  readonly tenant: string;
  /** The payload as JSON text. */
  readonly payload: string;
}

export type RowState = 'SCHEDULED' | 'ACQUIRED' | 'CANCELLED';

/** What a due-range query returns per row: keys and the two small attributes rounds act on. */
export interface DueKey {
  readonly shard: number;
  readonly dueMs: number;
  readonly jobId: string;
  readonly state: RowState;
  readonly leaseUntil: number;
}

/** A row a round holds after its conditional acquire. */
export interface AcquiredRow extends JobRow {
  readonly leaseUntil: number;
}

export interface RowKey {
  readonly shard: number;
  readonly dueMs: number;
  readonly jobId: string;
}

/** A row as status and cancel read it. */
export interface StoredRow {
  readonly state: RowState;
  readonly tenant: string;
}

/** The cancel-record key: a cancel record (`CANCELLED`) or a late ingest's claim (`INGESTED`). */
export interface CancelRecord {
  readonly kind: 'CANCELLED' | 'INGESTED';
  /** When it was written, epoch ms. */
  readonly atMs: number;
}

export interface TenantRecord {
  readonly name: string;
  readonly queueUrl: string;
  readonly dlqUrl: string;
}

/** The scheduler table, in the operations the lifecycle needs (one conditional write each). */
export interface JobStore {
  /** Put a new row unless anything (row or tombstone) is at its key. */
  putJob(row: JobRow): Promise<'created' | 'exists'>;
  /** Read the keys, states and leases of rows in `shard` due up to `untilMs` (inclusive), in due order. */
  queryDue(shard: number, untilMs: number): Promise<DueKey[]>;
  /**
   * Due times of the rows in `shard` due before `untilMs` (from the shard's start), at most
   * `limit` of them (`more` when there are others): what the tick samples to size its plan.
   */
  dueTimes(shard: number, untilMs: number, limit: number): Promise<{ dueMs: number[]; more: boolean }>;
  /** SCHEDULED, or ACQUIRED with a lease that ended before `nowMs`, becomes ACQUIRED until `leaseUntil`. */
  acquire(key: RowKey, nowMs: number, leaseUntil: number): Promise<AcquiredRow | undefined>;
  /** Extends a lease this round still holds (its `leaseUntil` is unchanged since). */
  renew(key: RowKey, heldLeaseUntil: number, newLeaseUntil: number): Promise<boolean>;
  /** Deletes rows (after their send succeeded); returns the keys that could not be deleted. */
  deleteRows(keys: readonly RowKey[]): Promise<RowKey[]>;
  /** SCHEDULED row or no row becomes a tombstone; answers what was there when it could not. */
  cancel(key: RowKey, tenant: string, expiresAtMs: number): Promise<'cancelled' | 'acquired'>;
  getRow(key: RowKey): Promise<StoredRow | undefined>;
  /** Writes a cancel record or claim unless anything is at the cancel-record key. */
  putCancelRecord(key: RowKey, record: CancelRecord, expiresAtMs: number): Promise<boolean>;
  getCancelRecord(key: RowKey): Promise<CancelRecord | undefined>;
  /** Turns an old ingest claim (written at `claimAtMs`) into a cancel record. */
  convertClaim(key: RowKey, claimAtMs: number, nowMs: number): Promise<boolean>;
  /** Deletes a tombstone (only while it is one). */
  deleteTombstone(key: RowKey): Promise<void>;
  /**
   * Takes or renews the lease of a shard group for `owner`, an execution started at `ownerStartMs`:
   * granted when free, expired, already ours, or held by an older execution.
   */
  takeGroupLease(group: number, owner: string, ownerStartMs: number, nowMs: number, untilMs: number): Promise<boolean>;
}

export interface TenantStore {
  getTenant(name: string): Promise<TenantRecord | undefined>;
  putTenant(record: TenantRecord): Promise<void>;
}

export interface OutgoingMessage {
  /** Unique within the call. */
  readonly id: string;
  readonly body: string;
  readonly delaySeconds?: number;
  /** String message attributes. */
  readonly attributes?: Readonly<Record<string, string>>;
}

export interface SendFailure {
  readonly id: string;
  /** True when the failure was SQS's own (retry may help), false when the entry was refused. */
  readonly retryable: boolean;
  readonly message: string;
}

/** Sends to SQS queues. One call is at most 10 messages and 256 KiB (callers pack). */
export interface QueueSender {
  sendBatch(queueUrl: string, messages: readonly OutgoingMessage[]): Promise<SendFailure[]>;
}

/** Wall clock, injectable for tests. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
