import type { RowKey, TraceContext } from '../model/index.js';
import type { WaitingChild } from './release.js';
import type { ParentFailurePolicy, WorkflowTiming } from './request.js';

/**
 * Where a job waiting for parents is kept (issue #25): one small record per child, updated once
 * per parent that ends, apart from the child's payload (so that each update costs one write unit).
 * `key` is the child's: its id's shard and time field, and its id.
 */

/**
 * A waiting child's state: `WAITING` for parents; `RELEASING` (its row is being written at
 * `dueMs`) or `QUEUING` (sent straight to the tenant queue: being sent, or sent; the hand-over
 * that made the move knows which, and notes it on the parent that released it, or on the submit's
 * claim) once released; `CANCELLED` by a failed parent or a cancel. `QUEUED` is what records
 * written before that note existed show once sent.
 */
export type WaitingState = 'WAITING' | 'RELEASING' | 'QUEUING' | 'QUEUED' | 'CANCELLED';

/** A waiting child as first written: no parent has ended. */
export interface NewWaitingChild {
  readonly key: RowKey;
  readonly tenant: string;
  readonly parents: number;
  readonly timing: WorkflowTiming;
  readonly onParentFailure: ParentFailurePolicy;
  /** A job without parents its submit hands to the table: written `RELEASING` already, at `dueMs`. */
  readonly moved?: { readonly to: 'RELEASING'; readonly dueMs: number };
  /**
   * A child of more parents than `PARENT_ENDS_PER_ITEM` (release.ts): its parents' ends are kept that many
   * to an item beside its record, each item summed up on the record once all its parents ended.
   */
  readonly endsPerItem?: number;
  /**
   * Its spec, when small enough to keep on its record ({@link WorkflowStore.putSpecs} writes the
   * others apart): one write at submit, not two, and read where the spec is read.
   */
  readonly spec?: WorkflowJobSpec;
  /** The trace its workflow's jobs carry (docs/tracing.md): GET shows its id before the job is handed over. */
  readonly trace?: TraceContext;
}

/** A waiting child's record as stored. */
export interface WaitingRecord extends WaitingChild {
  readonly key: RowKey;
  readonly tenant: string;
  readonly state: WaitingState;
  /** Its row's due time, once released. */
  readonly dueMs?: number;
  /** When its hand-over straight to its queue began (`QUEUING`), epoch ms. */
  readonly handedAtMs?: number;
  /**
   * The index (in its `after`) of the parent whose end's report handed it over, when a report of
   * one of several parents did: only that report, repeated, sends it again.
   */
  readonly releasedBy?: number;
  /** Its children were all told of its end ({@link WaitingChildren.markChildrenTold}). */
  readonly childrenTold?: boolean;
  /**
   * Children of it alone cancelled while it had not ended ({@link WaitingChildren.holdBack}), by
   * job id: its end releases every other child of it alone, and none of these.
   */
  readonly heldBack?: ReadonlySet<string>;
  /** When the report that recorded its end began releasing its children (epoch ms). */
  readonly releasingAtMs?: number;
  /** Its `result` (JSON text) as its report gave it, kept with its end. */
  readonly result?: string;
  /**
   * Its end was recorded with its result (absent: it had none). False for ends recorded before
   * results were kept here, whose result is in the job's outcome record.
   */
  readonly resultKept?: boolean;
  /** How the job itself ended, once it did: its outcome reported, or its cancel. */
  readonly end?: JobEnd;
  /** Why it was cancelled (a failed parent, or a cancel). */
  readonly message?: string;
  /** The trace its workflow's jobs carry, when its record keeps it (records written before do not). */
  readonly trace?: TraceContext;
}

/** How a workflow job ended: `SUCCEEDED` or `DEAD` reported by its worker, or `CANCELLED`; when (epoch ms). */
export interface JobEnd {
  readonly outcome: 'SUCCEEDED' | 'DEAD' | 'CANCELLED';
  readonly atMs: number;
}

export interface WaitingChildren {
  /** Writes each record unless one is at its key already (a retried submit); returns those written. */
  create(children: readonly NewWaitingChild[]): Promise<number>;
  /**
   * Records that parent `parent` (its index in the child's `after`) ended at `atMs`, successfully
   * or not, unless that parent's end is recorded already (then the first one stands). Returns the
   * record after it, read strongly consistent; undefined when no child is at `key` (nothing is
   * written then).
   *
   * `bucketed`: the child keeps its parents' ends `perItem` to an item (its record was created with
   * `endsPerItem`): the end goes to its item (one small write, whatever the number of parents), and
   * the item's summary to the record once all of its parents ended (a failure at once, for a child
   * cancelled by its first failed parent). The record then counts a parent ended once its item is
   * summed up; a retried or repeated report completes a summary a crash left unwritten. A success
   * whose item still waits for other parents returns `'waiting'` without reading the record: the
   * child cannot be due yet, and a success cancels nothing. (Its item may be written for a key
   * where no child is: callers tell only children whose spec they read.)
   */
  recordParentEnd(
    key: RowKey,
    parent: number,
    ok: boolean,
    atMs: number,
    bucketed?: { readonly perItem: number; readonly parents: number },
  ): Promise<WaitingRecord | 'waiting' | undefined>;
  /** The record, strongly consistent. */
  get(key: RowKey): Promise<WaitingRecord | undefined>;
  /**
   * Moves the record from state `from` to `to`, with the row's `dueMs`, the time its hand-over
   * began and the parent whose end's report moves it (`releasedBy`) when given; false when it was
   * not in `from`.
   */
  transition(key: RowKey, from: WaitingState, to: WaitingState, dueMs?: number, handedAtMs?: number, releasedBy?: number): Promise<boolean>;
  /**
   * A child's only parent `parent` succeeded at `atMs`, and the child's due time follows from it:
   * records that end and moves the record from `WAITING` to `to` with `dueMs` (and `handedAtMs`,
   * for `QUEUING`) in one conditional write. False, nothing written, when the record is not
   * `WAITING` or that parent's end is recorded already (an earlier or concurrent report's: the
   * caller goes the long way, {@link recordParentEnd}, which finds what that report did).
   */
  moveOnParentEnd(
    key: RowKey,
    parent: number,
    atMs: number,
    to: 'QUEUING' | 'RELEASING',
    dueMs: number,
    handedAtMs?: number,
  ): Promise<boolean>;
  /** Cancels a `WAITING` record, saying why, and records its end; false when it was not `WAITING`. */
  cancelWaiting(key: RowKey, message: string, atMs: number): Promise<boolean>;
  /**
   * Records how the job itself ended, with its `result` (JSON text) when it has one, unless an end
   * is recorded already (the first one stands); returns the end that stands, whether its children
   * were all told of it ({@link markChildrenTold}) and those held back ({@link holdBack});
   * undefined when no record is at `key`. `releasingAtMs`: the caller goes on to release its
   * children now, sending before their records move (kept with the end: a concurrent report of
   * the same job then knows a release is under way).
   */
  recordEnd(key: RowKey, end: JobEnd, result?: string, releasingAtMs?: number): Promise<RecordedEnd | undefined>;
  /**
   * Cancels, on its only parent's record (`parent`), the child `childJobId` while that parent has
   * not succeeded: the parent's success (one write) then releases its other children and not this
   * one. False, nothing written, once the parent succeeded (its end released the child already)
   * or when no record is at `parent`. A parent that failed carries that on through each child's
   * own record, where the child's cancel races it.
   */
  holdBack(parent: RowKey, childJobId: string): Promise<boolean>;
  /**
   * Notes that every child of the job at `key` was told of its end and every child that end made
   * due was handed over (sent): a repeated report of the job then changes nothing, and its
   * children need no `QUEUED` mark each.
   */
  markChildrenTold(key: RowKey): Promise<void>;
  /** The records at `keys` (strongly consistent), by job id; keys with none are left out. */
  getMany(keys: readonly RowKey[]): Promise<Map<string, WaitingRecord>>;
}

/** A job's end as {@link WaitingChildren.recordEnd} leaves it. */
export interface RecordedEnd {
  /** The end that stands (the first recorded). */
  readonly end: JobEnd;
  /** This call recorded it (false: an earlier or concurrent report or cancel had). */
  readonly recordedNow: boolean;
  readonly childrenTold: boolean;
  /** Its children of it alone cancelled before it ended, by job id. */
  readonly heldBack: ReadonlySet<string>;
  /** When the report that recorded the end began releasing its children, when it said. */
  readonly releasingAtMs?: number;
}

/**
 * What a workflow job is, written once at submit and never changed (`wp#<shard>`, the sort key of
 * its waiting record): its payload and delivery fields, its parents in `after`'s order (a parent's
 * index there is the one its end is recorded under) and its children with the index this job has
 * in each child's `after` (whom to tell when it ends), all by key (at most 64 characters: a job
 * of 1,000 parents and 1,000 children with the largest payload stays within an item's 400 KB).
 * Kept apart from the waiting record, which is rewritten once per parent that ends: a write costs
 * the size of the item it rewrites.
 */
export interface WorkflowJobSpec {
  readonly key: RowKey;
  readonly tenant: string;
  readonly workflowId: string;
  readonly jobKey: string;
  /** The payload's JSON text, byte for byte as submitted. */
  readonly payload: string;
  readonly priority: number;
  /** Its tags, when it has some (on its row once handed to the table). */
  readonly tags?: readonly string[];
  /** Its concurrency key and limit, when it has one: handed over through the table, always (docs/flow-control.md). */
  readonly concurrency?: { readonly key: string; readonly limit: number };
  readonly cancellable: boolean;
  /** The parents' keys, in `after`'s order (their ids are the workflow's: {@link WorkflowRecord}). */
  readonly parents: readonly string[];
  readonly children: readonly WorkflowChildLink[];
  /**
   * Its timing and failure policy (as its waiting record holds them), so that a child of one
   * parent is released by one write once the spec is read. Absent on specs written before.
   */
  readonly release?: { readonly timing: WorkflowTiming; readonly onParentFailure: ParentFailurePolicy };
  /** Its parents' ends are kept this many to an item ({@link NewWaitingChild.endsPerItem}); absent: on its record. */
  readonly endsPerItem?: number;
  /**
   * The shard count its workflow's job ids were derived with: any job's id follows from its key
   * (JobIdCodec.workflowJobId), so carrying an end on reads no workflow record. Absent on specs
   * written before it was kept (their ids are read from the workflow record).
   */
  readonly shardCount?: number;
  /**
   * The trace its workflow's submit carried (docs/tracing.md), its span that submit's; absent:
   * the trace the workflow's id derives (`workflowTrace`). Every job of a workflow is in one trace.
   */
  readonly trace?: TraceContext;
}

/** A child of a workflow job: its key, and the index the parent has in the child's `after`. */
export interface WorkflowChildLink {
  readonly jobKey: string;
  readonly index: number;
}

/** A workflow as stored (`wf#<tenant>`, sort key its id): its jobs by key. */
export interface WorkflowRecord {
  readonly workflowId: string;
  readonly tenant: string;
  readonly createdMs: number;
  /** Each job's id by its key, in the request's order. */
  readonly jobs: ReadonlyMap<string, string>;
}

/** What an idempotency key of a workflow stands for: the first request's fingerprint and ids. */
export interface WorkflowClaim {
  readonly workflowId: string;
  readonly createdMs: number;
  /** A hash of the request's body: a retry with another body is refused. */
  readonly fingerprint: string;
  /** The shard count the jobs' ids were derived with (it may grow between a request and its retry). */
  readonly shardCount: number;
  /** Its jobs without parents were all handed over ({@link WorkflowStore.markStarted}): a retry sends none again. */
  readonly started?: boolean;
}

export interface WorkflowStore {
  /**
   * Claims `idempotencyKey` of `tenant` for `claim` unless it is claimed; returns the claim that
   * stands (`claim` itself when this call made it).
   */
  claim(tenant: string, idempotencyKey: string, claim: WorkflowClaim): Promise<WorkflowClaim>;
  /** Notes on the claim of `idempotencyKey` that its workflow's jobs without parents were all handed over. */
  markStarted(tenant: string, idempotencyKey: string): Promise<void>;
  /**
   * Writes the specs apart from their waiting records (a spec at the same key is overwritten with
   * the same content: retries are safe). A small one goes on its record instead ({@link NewWaitingChild.spec}).
   */
  putSpecs(specs: readonly WorkflowJobSpec[]): Promise<void>;
  /**
   * A job's spec, strongly consistent, wherever it is kept (on its waiting record, or apart);
   * undefined when none is at `key`.
   */
  getSpec(key: RowKey): Promise<WorkflowJobSpec | undefined>;
  /** The specs at `keys` (strongly consistent, a hundred a request, kept as for {@link getSpec}), by job id; keys with none are left out. */
  getSpecs(keys: readonly RowKey[]): Promise<Map<string, WorkflowJobSpec>>;
  /**
   * Writes the workflow's graph: each job's parents by key, for jobs with parents (what GET of
   * the workflow shows; kept apart from the record, which every report reads).
   */
  putGraph(tenant: string, workflowId: string, after: ReadonlyMap<string, readonly string[]>): Promise<void>;
  /** The workflow's graph, strongly consistent; an empty map when none was written. */
  getGraph(tenant: string, workflowId: string): Promise<ReadonlyMap<string, readonly string[]>>;
  /** Writes the workflow (the last write of a submit: a workflow that reads back is whole). */
  putWorkflow(record: WorkflowRecord): Promise<void>;
  /** The workflow, strongly consistent; undefined when `tenant` has none of that id. */
  getWorkflow(tenant: string, workflowId: string): Promise<WorkflowRecord | undefined>;
}
