import type { TraceContext } from './traceContext.js';

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
  /** An occurrence of a recurring schedule: the schedule's name (delivered in the body and as an attribute). */
  readonly schedule?: string;
  /**
   * Job priority 1..9 (docs/tenant-controls.md#priority); absent means the default
   * ({@link DEFAULT_PRIORITY}), which is never stored (attribute `prio` only when ≠ 5).
   */
  readonly priority?: number;
  /** Its tags (attribute `tags`, a list), only when it has some. */
  readonly tags?: readonly string[];
  /**
   * Concurrency by key (docs/flow-control.md; attributes `ck`, `cl`): the dispatcher sends it only
   * with a slot of its key, which it holds until the worker reports its end.
   */
  readonly concurrency?: { readonly key: string; readonly limit: number };
  /**
   * A debounced job's row (docs/flow-control.md#debounce; attributes `dkey`, `dver`): its key, and
   * the version of the job this row holds. The dispatcher sends it only while the job's generation
   * item names this version (a replace writes a new row of a new version first).
   */
  readonly debounce?: RowDebounce;
  /** A job of a workflow: the workflow's id (delivered in the body and as the `workflow` attribute). */
  readonly workflow?: string;
  /** A workflow job with parents: their summary, the JSON array text delivered as `parents`. */
  readonly parents?: string;
  /**
   * When its inbound message was sent (SQS's `SentTimestamp`, attribute `sa`): a bulk cancel
   * reaches only jobs accepted before it (docs/flow-control.md). Absent: accepted before any.
   */
  readonly sentAtMs?: number;
  /** The trace its submit carried (attributes `tc`, `ts`: docs/tracing.md); absent: the trace its id derives. */
  readonly trace?: TraceContext;
}

/** A debounced job's row: its debounce key and the version (random) it holds. */
export interface RowDebounce {
  readonly key: string;
  readonly ver: string;
}

/** Priority of a job that names none: the middle of 1..9. */
export const DEFAULT_PRIORITY = 5;
export const MIN_PRIORITY = 1;
export const MAX_PRIORITY = 9;

/**
 * What the item at a job's key says. `SCHEDULED` and `ACQUIRED` are live rows; the others are
 * final records that stay at the key until their TTL: `QUEUED` (the delivered marker the
 * dispatcher writes in place of the row once its send succeeded), `CANCELLED` (a tombstone) and
 * `DEAD` (ingest gave the job up to the inbound dead-letter queue).
 */
export type RowState = 'SCHEDULED' | 'ACQUIRED' | 'CANCELLED' | 'QUEUED' | 'DEAD';

/** What a due-range read returns per item: keys and the two small attributes rounds act on. */
export interface DueKey {
  readonly shard: number;
  readonly dueMs: number;
  readonly jobId: string;
  readonly state: RowState;
  readonly leaseUntil: number;
  /** The job's priority (1..9, attribute `prio`), when not the default 5: higher goes first among a tenant's due rows. */
  readonly priority?: number;
}

/** A hold-lane pointer (`pk = p#<shard>`, `sk = <tenant>#<9 − priority>#<dueMs 13>#<jobId>`). */
export interface HeldPointer extends RowKey {
  readonly tenant: string;
  /** 1..9. */
  readonly priority: number;
}

export interface HeldPage {
  readonly pointers: HeldPointer[];
  /** The last pointer's sk, when there may be more. */
  readonly last?: string;
  readonly more: boolean;
}

/** One page of a shard's due range. */
export interface DuePage {
  readonly rows: DueKey[];
  /** Sort key of the last item read (whatever its state): where the next page starts. */
  readonly last?: string;
  /** The read stopped at its limit: items may remain in the range. */
  readonly more: boolean;
}

/** Per-shard low watermarks (epoch ms), kept in a group's lease item: see docs/design-dispatch.md. */
export type ShardMarks = Record<number, number>;

/** A row a round holds after its conditional acquire. */
export interface AcquiredRow extends JobRow {
  readonly leaseUntil: number;
}

export interface RowKey {
  readonly shard: number;
  readonly dueMs: number;
  readonly jobId: string;
}

/** A row or record as status, cancel and rounds read it by key. */
export interface StoredRow {
  readonly state: RowState;
  readonly tenant: string;
  /** Epoch ms; 0 when the item has none. */
  readonly leaseUntil: number;
  /** When the delivered marker was written (QUEUED), epoch ms. */
  readonly deliveredAtMs?: number;
  /** The item's TTL, epoch ms (DynamoDB deletes it some time after; readers ignore it from then). */
  readonly expiresAtMs?: number;
  /** A live row's priority when it is not the default 5. */
  readonly priority?: number;
  /** A row's tags, when it has some. */
  readonly tags?: readonly string[];
  /** A live row's concurrency key and limit, when it has one. */
  readonly concurrency?: { readonly key: string; readonly limit: number };
  /** A debounced job's row (or its delivered marker: the key only, `ver` empty). */
  readonly debounce?: RowDebounce;
  /** The trace its submit carried, when it carried one (docs/tracing.md). */
  readonly trace?: TraceContext;
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
  /** History on (docs/history.md): how long outcome records are kept, ms. Absent: history off. */
  readonly historyTtlMs?: number;
}

/** Ingest's writes: a job's row and its late-lane pointer, the cancel records it claims or meets, and `DEAD` records. */
export interface JobWrites {
  /**
   * Put a new row unless something is at its key (row, tombstone, delivered marker); a `DEAD`
   * record is replaced (the job came back from the inbound dead-letter queue).
   */
  putJob(row: JobRow): Promise<'created' | 'exists'>;
  /** Notes a row that may sit behind a dispatcher's read position (the late lane; see docs/design-dispatch.md). */
  putLatePointer(key: RowKey): Promise<void>;
  /** Writes a `DEAD` record at the job's key unless something is there; true when written. */
  putDead(key: RowKey, tenant: string, atMs: number, expiresAtMs: number): Promise<boolean>;
  /**
   * Writes a cancel record or claim unless anything is at the cancel-record key. Rounds no
   * longer move tombstones (they stay at their key until their TTL); ingest still claims the
   * key before a late write, and status still reads cancel records that earlier releases wrote.
   */
  putCancelRecord(key: RowKey, record: CancelRecord, expiresAtMs: number): Promise<boolean>;
  getCancelRecord(key: RowKey): Promise<CancelRecord | undefined>;
}

/** Dispatch's reads of a shard: its due range, its late lane and its hold lane. */
export interface ShardReads {
  /**
   * One page of `shard`'s items with `after < sk <= through` (sort-key strings; no `after`: from
   * the shard's start), in sort-key order, at most `limit` of them, read strongly consistent: a
   * row written before the read began is in it. Final records (markers, tombstones) are
   * returned too: they count as read.
   */
  readDue(shard: number, range: { readonly after?: string; readonly through: string }, limit: number): Promise<DuePage>;
  /** Late-lane pointers of `shard` due up to `untilMs` (eventually consistent: read every round whole). */
  readLate(shard: number, untilMs: number, limit: number): Promise<RowKey[]>;
  /**
   * Hold-lane pointers of `shard` after `after` (a pointer's `sk`; none: from the start), in sk
   * order (tenant, then higher priority, then due time), at most `limit`; `tenant` keeps the read
   * to one tenant's pointers. Eventually consistent.
   */
  readHeld(shard: number, range: { readonly tenant?: string; readonly after?: string }, limit: number): Promise<HeldPage>;
}

/** The pointers dispatch keeps in the late and hold lanes. */
export interface LanePointers {
  /**
   * Notes rows held back for their tenant (paused) in the shard's hold lane (docs/tenant-controls.md),
   * so that a read position may pass them; returns those that could not be written.
   */
  putHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]>;
  /** Deletes late-lane pointers (once their row is final); returns those that could not be deleted. */
  deleteLatePointers(keys: readonly RowKey[]): Promise<RowKey[]>;
  /** Deletes hold-lane pointers (once their row is final); returns those that could not be deleted. */
  deleteHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]>;
}

/** A row's lease while dispatch holds it: acquire, renew, give back, replace by its delivered marker; and the lookup after a failed acquire. */
export interface RowLeases {
  /** SCHEDULED, or ACQUIRED with a lease that ended before `nowMs`, becomes ACQUIRED until `leaseUntil`. */
  acquire(key: RowKey, nowMs: number, leaseUntil: number): Promise<AcquiredRow | undefined>;
  /** Extends a lease this round still holds (its `leaseUntil` is unchanged since). */
  renew(key: RowKey, heldLeaseUntil: number, newLeaseUntil: number): Promise<boolean>;
  /** Gives back a row this round acquired and did not send (its tenant was paused): ACQUIRED with `heldLeaseUntil` becomes SCHEDULED. */
  unacquire(key: RowKey, heldLeaseUntil: number): Promise<boolean>;
  /**
   * Replaces sent rows by their delivered marker (`QUEUED`, no payload, TTL `expiresAtMs` of
   * each, the occurrence's `schedule` kept for listings): the same write units a delete costs. Returns the keys that could not be written.
   */
  markDelivered(
    rows: readonly (RowKey & {
      readonly tenant: string;
      readonly expiresAtMs: number;
      readonly schedule?: string;
      /** The job's tags: kept on its marker (GET and `tag=` listings of delivered jobs). */
      readonly tags?: readonly string[];
      /** A keyed job's key and limit: kept on its marker (a `DELETE` while it runs asks its worker to stop it). */
      readonly concurrency?: { readonly key: string; readonly limit: number };
      /** The trace its submit carried: kept on its marker (GET shows its id). */
      readonly trace?: TraceContext;
    })[],
    deliveredAtMs: number,
  ): Promise<RowKey[]>;
  /** The item at a job's key, strongly consistent. */
  getRow(key: RowKey): Promise<StoredRow | undefined>;
}

/** Status and cancel: what is at a job's key, its cancel record, and the cancel itself. */
export interface JobLookups {
  /** The item at a job's key, strongly consistent. */
  getRow(key: RowKey): Promise<StoredRow | undefined>;
  getCancelRecord(key: RowKey): Promise<CancelRecord | undefined>;
  /**
   * SCHEDULED row, DEAD record or no row becomes a tombstone; answers what was there when it could
   * not. `occurrence`: a recurring schedule's occurrence retired by a change; the tombstone also
   * records what was at the key before (`priorState`, `NONE` when the occurrence was never
   * materialised: a blocker, not a job, which listings leave out).
   */
  cancel(key: RowKey, tenant: string, expiresAtMs: number, opts?: { readonly occurrence?: boolean }): Promise<'cancelled' | 'acquired'>;
  /**
   * A keyed row a dispatcher holds while it waits for a slot of its key becomes a tombstone, if
   * it is still held with the lease `heldLeaseUntil` the caller read: the dispatcher renews the
   * lease of such a row after it takes the slot and before it sends it, so one of the two fails.
   */
  cancelWaiting(key: RowKey, tenant: string, heldLeaseUntil: number, expiresAtMs: number): Promise<boolean>;
}

/** The tick's plan and the dispatch loop: samples of due times, shard groups' leases and their marks. */
export interface GroupLeases {
  /**
   * Due times of the live rows in `shard` due from `fromMs` (the shard's start when omitted) up
   * to `untilMs`, reading at most `limit` items (`more` when there are others): what the tick
   * samples to size its plan.
   */
  dueTimes(shard: number, untilMs: number, limit: number, fromMs?: number): Promise<{ dueMs: number[]; more: boolean }>;
  /**
   * Takes or renews the lease of a shard group for `owner`, an execution started at `ownerStartMs`:
   * granted when free, expired, already ours, or held by an older execution. `marks` (when
   * given) are stored with it; the answer carries the marks the item holds afterwards.
   */
  takeGroupLease(
    group: number,
    owner: string,
    ownerStartMs: number,
    nowMs: number,
    untilMs: number,
    marks?: ShardMarks,
  ): Promise<{ held: boolean; marks: ShardMarks; rest?: GroupRest }>;
  /** The marks in a group's lease item (empty when none), read with a query. */
  groupMarks(group: number): Promise<ShardMarks>;
}

/**
 * A shard group at rest, or about to be (docs/design-dispatch.md, "Rest"): kept in the group's
 * lease item. A dispatcher whose round found nothing to do writes its intent (a new `epoch`,
 * pending); a later round that again finds nothing, at least {@link REST_NOTICE_MS} after, turns it
 * into a rest until `wakeAtMs` (the first row of the group's shards). Meanwhile every writer of a
 * row brings `wakeAtMs` forward to the row's due time.
 */
export interface GroupRest {
  readonly epoch: string;
  /** When the intent was written (the dispatcher's clock, epoch ms). */
  readonly pendingAtMs: number;
  /**
   * Wake by then (epoch ms): set when the rest is decided, and brought forward by writers, who
   * also set it on a pending intent (which can then never be decided). Absent while pending.
   */
  readonly wakeAtMs?: number;
  /** When the rest was decided (the dispatcher's clock); absent while pending: only a decided rest is slept through. */
  readonly restingSinceMs?: number;
  /**
   * When its dispatcher let it sleep (a decided rest past its execution's end; its lease given up):
   * no dispatcher runs for it until the tick plans one for its wake-up, or a writer of a row due
   * sooner starts one (docs/design-dispatch.md, "Sleep").
   */
  readonly asleepSinceMs?: number;
}

/** What a writer's {@link GroupWakes.wakeBy} found and did. */
export interface WakeBy {
  /** The wake-up was brought forward to the row's due time. */
  readonly moved: boolean;
  /** The group sleeps (no dispatcher runs for it): see {@link GroupWakes.rouse}. */
  readonly asleep: boolean;
}

/** What a writer of rows needs of the groups' rests: see where they stand, and wake them. */
export interface GroupWakes {
  /** The group's rest as the table holds it now (a strongly consistent read); undefined: awake. */
  readRest(group: number): Promise<GroupRest | undefined>;
  /**
   * Brings a resting (or pending) group's wake-up forward to `dueMs`: `moved` when it did (not
   * when the group is awake or wakes by then already), and whether the group sleeps.
   */
  wakeBy(group: number, dueMs: number): Promise<WakeBy>;
  /**
   * Ends a sleeping group's sleep (it rests on, for a dispatcher to take): true when this call
   * ended it, false when it was not asleep (another writer ended it, or it woke). The one that
   * ends it starts a dispatcher ({@link DispatchStarter}).
   */
  rouse(group: number): Promise<boolean>;
}

/**
 * Starts a tick execution of a cell now (on AWS, `StartExecution` of its state machine): what a
 * writer does when it wrote a row due soon into a sleeping group (docs/design-dispatch.md, "Sleep").
 */
export interface DispatchStarter {
  start(cell: number): Promise<void>;
}

/** What a dispatcher needs to rest its groups (the writers' side, {@link GroupWakes}, besides). */
export interface GroupResting extends GroupWakes {
  /** `owner` (holding the group's lease) intends to rest it: `epoch`, pending since `nowMs`. False: the lease is not its. */
  intendRest(group: number, owner: string, epoch: string, nowMs: number): Promise<boolean>;
  /** The pending intent `epoch` becomes a rest until `wakeAtMs` (decided at `nowMs`), unless a writer set a wake-up first or the lease moved (false). */
  rest(group: number, owner: string, epoch: string, wakeAtMs: number, nowMs: number): Promise<boolean>;
  /** The group is awake again (its rest removed), while `owner` holds its lease. */
  wake(group: number, owner: string): Promise<void>;
  /**
   * `owner` lets the group sleep: its decided rest `epoch` stands with the wake-up `wakeAtMs` it
   * read (no writer moved it since), and its lease is given up (expires at `nowMs`). False: any of
   * that changed.
   */
  sleep(group: number, owner: string, epoch: string, wakeAtMs: number, nowMs: number): Promise<boolean>;
  /**
   * Due time of the first item of `shard` at or after `fromMs` (its start without), whatever its
   * state, or of the first pointer of its late lane if that is sooner (strongly consistent reads);
   * undefined: none.
   */
  firstDue(shard: number, fromMs: number | undefined): Promise<number | undefined>;
}

/**
 * The scheduler table, in the operations the lifecycle needs (one conditional write each): every
 * role above, which one adapter class implements. A consumer depends on the roles it uses.
 */
export interface JobStore extends JobWrites, ShardReads, LanePointers, RowLeases, JobLookups, GroupLeases {}

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
  /**
   * One `SendMessageBatch`; answers the entries that failed. `onSent` hears each entry SQS
   * accepted, with the message id it gave (a dispatch span's `messaging.message.id`).
   */
  sendBatch(
    queueUrl: string,
    messages: readonly OutgoingMessage[],
    onSent?: (id: string, messageId: string) => void,
  ): Promise<SendFailure[]>;
}

/** Wall clock, injectable for tests. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A key's default lease (the tenant setting `keyLeaseSeconds`, docs/flow-control.md): 15 minutes. */
export const DEFAULT_KEY_LEASE_SECONDS = 900;

/** A failed take of a key's slot: who holds its slots (job id → lease end, epoch ms), and its limit. */
export interface KeyFull {
  readonly holders: ReadonlyMap<string, number>;
  readonly limit: number;
}

/**
 * Concurrency by key (docs/flow-control.md): each key of a tenant has one item (`pk =
 * ck#<tenant>#<key>`, `sk = k`) holding its limit (the latest submitted) and its slots, a map of
 * the jobs that hold one to the end of their lease. Every change is one conditional write, so no
 * two dispatchers ever give out more slots than the limit.
 */
export interface KeySlots {
  /** The limit submitted with a job at `atMs` (its inbound message's send time): kept unless a later one was. */
  setLimit(tenant: string, key: string, limit: number, atMs: number): Promise<void>;
  /**
   * A slot for `jobId` until `untilMs`, unless the key's slots are all held: `true` (also when
   * the job holds one already, which keeps its lease), or who holds them. `limit` stands for a key
   * whose item is gone (expired with no slot held for a day).
   */
  take(tenant: string, key: string, jobId: string, untilMs: number, limit: number, nowMs: number): Promise<true | KeyFull>;
  /** Frees the slots of `holders` (job id → the lease end read) still held with that lease: how many were freed. */
  evict(tenant: string, key: string, holders: ReadonlyMap<string, number>): Promise<number>;
  /** Frees `jobId`'s slot (nothing when it holds none). */
  release(tenant: string, key: string, jobId: string): Promise<void>;
  /** Moves the lease of `jobId`'s slot to `untilMs`: false when it holds none. */
  extend(tenant: string, key: string, jobId: string, untilMs: number): Promise<boolean>;
  /** Whether `jobId` holds a slot of its key (strongly consistent): a delivered keyed job runs until it frees it. */
  holds(tenant: string, key: string, jobId: string): Promise<boolean>;
}
