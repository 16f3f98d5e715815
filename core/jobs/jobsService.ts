import {
  AlreadyQueuedError,
  type Clock,
  isoMs,
  type JobIdCodec,
  JobNotFoundError,
  type JobLookups,
  NotCancellableError,
  type ParsedJobId,
  type RowKey,
  type SchedulerSettings,
  type StoredRow,
  type TenantRecord,
  tombstoneExpiresAtMs,
} from '../model/index.js';
import type { ControlsCache, TenantRegistry } from '../tenants/index.js';
import { RawJson } from '../util/index.js';
import { type JobEdits, MAX_TIMELINE_ATTEMPTS, timelineOf, type HistoryStore } from './history.js';
import { DEAD_LETTERED_MESSAGE, type CancelReply, type StatusReply } from './replies.js';

/**
 * Where a workflow job is (core/workflows answers, from its waiting record): handed to the table,
 * its row at `dueMs` tells the rest; or a state of its own.
 */
export type WorkflowJobPlace =
  | { readonly kind: 'row'; readonly dueMs: number }
  | {
      readonly kind: 'own';
      readonly state: 'WAITING' | 'QUEUED' | 'CANCELLED' | 'SUCCEEDED' | 'DEAD';
      /** Its due time, once known. */
      readonly dueMs?: number;
      /** Why it was cancelled. */
      readonly message?: string;
      /** Ended: its `result` (JSON text), when `resultKept`; else its outcome record holds it. */
      readonly result?: string;
      readonly resultKept?: boolean;
    };

/** Workflow jobs (job id path `w`) as status and cancel see them (core/workflows implements it). */
export interface WorkflowJobs {
  /** Where the job is; undefined when no stored workflow holds it (a submit that has not completed). */
  locate(key: RowKey): Promise<WorkflowJobPlace | undefined>;
  /** Whether the job was submitted cancellable (undefined as for {@link locate}). */
  cancellable(key: RowKey): Promise<boolean | undefined>;
  /**
   * Cancels the job while it waits for parents, and carries the cancel on to its children: true;
   * false when it was not waiting (it was handed over meanwhile: {@link locate} again).
   */
  cancelWaiting(tenant: TenantRecord, key: RowKey, message: string): Promise<boolean>;
  /** The job's row was cancelled (a tombstone stands at its key): its end recorded and carried on. */
  rowCancelled(tenant: TenantRecord, key: RowKey): Promise<void>;
}

export interface JobsDeps {
  readonly store: JobLookups;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Outcome records (history tenants' status shows their timeline). */
  readonly history?: HistoryStore;
  /** Dead-letter edits (core/deadLetters' audit trail): a history tenant's timeline shows its job's. */
  readonly edits?: JobEdits;
  /** Tenant controls: a paused tenant's held jobs stay cancellable past the cut-off. */
  readonly controls?: ControlsCache;
  /** Workflow jobs (ids of path `w`). Absent: such an id is answered as a job the table has no record of. */
  readonly workflows?: WorkflowJobs;
}

/** Status and cancel: `GET` and `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. */
export class JobsService {
  constructor(private readonly deps: JobsDeps) {}

  /**
   * The job's state, read with at most two key lookups (the job's key, then the cancel record an
   * earlier release may have left). Nothing is derived from the id beyond what its MAC proves.
   */
  async status(tenant: string, jobId: string): Promise<StatusReply> {
    const record = await this.deps.tenants.require(tenant);
    const id = await this.#resolve(tenant, jobId);
    if (id.path === 'w') return this.#workflowJobStatus(id);
    if (record.historyTtlMs !== undefined && this.deps.history) return this.#withHistory(id, this.deps.history);
    return this.#status(id);
  }

  /**
   * A workflow job's state: its waiting record (one lookup), and once it was handed to the table
   * its row (a second), as for any job. An ended job shows its outcome and `result`.
   */
  async #workflowJobStatus(id: ParsedJobId): Promise<StatusReply> {
    const key = { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    const place = await this.deps.workflows?.locate(key);
    const base = { jobId: id.jobId, tenant: id.tenant };
    if (!place)
      return {
        ...base,
        state: 'UNKNOWN',
        message:
          'no stored workflow holds this job: its workflow submit did not complete (send it again with the same idempotencyKey), or its records expired',
      };
    if (place.kind === 'row') return this.#status({ ...id, dueMs: place.dueMs, path: 't' });
    const runAt = place.dueMs !== undefined ? { runAt: isoMs(place.dueMs) } : {};
    const message = place.message !== undefined ? { message: place.message } : {};
    if (place.state !== 'SUCCEEDED' && place.state !== 'DEAD') return { ...base, ...runAt, state: place.state, ...message };
    const text = place.resultKept ? place.result : (await this.deps.history?.getOutcome(key))?.result;
    const result = text !== undefined ? { result: new RawJson(text, 0, 0) } : {};
    return { ...base, ...runAt, state: place.state, ...result };
  }

  /**
   * A history tenant's job: the row (or marker) and the outcome record, read at once. The latest
   * reported outcome is the state; a delivered marker without one is `DELIVERED`.
   */
  async #withHistory(id: ParsedJobId, history: HistoryStore): Promise<StatusReply> {
    let row: StoredRow | undefined;
    const [reply, outcome] = await Promise.all([this.#status(id, (r) => (row = r)), history.getOutcome(id)]);
    // An outcome shows only over a delivered job (a marker, or no row: sent straight from submit,
    // or its marker expired): never over a row still SCHEDULED, ACQUIRED, CANCELLED or DEAD.
    const delivered = reply.state === 'QUEUED' || reply.state === 'UNKNOWN';
    const live = delivered && outcome && outcome.expiresAtMs > this.deps.clock.now() ? outcome : undefined;
    // Earlier attempts only when there were some (a job done on its first attempt costs no query);
    // its edits (a Query) with them: an edited dead letter was delivered, so has an outcome.
    const [attempts, edits] = await Promise.all([
      live && live.attempt > 1 ? history.getFailedAttempts(id, MAX_TIMELINE_ATTEMPTS) : [],
      live && this.deps.edits ? this.deps.edits.ofJob(id) : [],
    ]);
    const timeline = timelineOf(id.dueMs, row, live, attempts, edits);
    if (live) {
      // The outcome replaces the row's answer: UNKNOWN's explanation (the row is gone) does not apply.
      const { message: _unknown, ...known } = reply;
      return { ...known, state: live.outcome, timeline };
    }
    if (reply.state === 'QUEUED') return { ...reply, state: 'DELIVERED', timeline };
    return { ...reply, timeline };
  }

  /** The table's answer; `seen` receives the item at the job's key. */
  async #status(id: ParsedJobId, seen?: (row: StoredRow | undefined) => void): Promise<StatusReply> {
    const base = { jobId: id.jobId, tenant: id.tenant, runAt: isoMs(id.dueMs) };
    if (id.path === 'd') return { ...base, state: 'QUEUED' };
    const row = await this.#row(id);
    seen?.(row);
    switch (row?.state) {
      case 'SCHEDULED':
      case 'ACQUIRED':
        // The row is read anyway: its priority (only stored when ≠ 5) and tags cost nothing to show.
        return { ...base, state: row.state, ...(row.priority !== undefined ? { priority: row.priority } : {}), ...tagsOf(row) };
      case 'CANCELLED':
        return { ...base, state: row.state, ...tagsOf(row) };
      case 'QUEUED':
        return { ...base, state: 'QUEUED', ...(row.deliveredAtMs ? { deliveredAt: isoMs(row.deliveredAtMs) } : {}) };
      case 'DEAD':
        return {
          ...base,
          state: 'DEAD_LETTERED',
          message: DEAD_LETTERED_MESSAGE,
        };
    }
    if (await this.#cancelledBefore(id)) return { ...base, state: 'CANCELLED' };
    const retentionDays = Math.round(this.deps.settings.cancelRecordRetentionMs / 86_400_000);
    return {
      ...base,
      state: 'UNKNOWN',
      message:
        this.deps.clock.now() < id.dueMs
          ? "the scheduler has no record of this job yet: a job is stored a second or two after submit (it waits in the inbound queue meanwhile; a paused tenant's job due within seconds, 6 s); if this lasts, ingest is failing (see the InboundBacklog alarm and the inbound dead-letter queue)"
          : `the scheduler has no record of this job: it was never stored (its message may still wait in the inbound queue or its dead-letter queue), or its record expired (records are kept ${retentionDays} days after runAt)`,
    };
  }

  /**
   * Cancels a job that is still `SCHEDULED`, not yet stored, or dead-lettered (one conditional
   * write), or answers 409 and writes nothing. Repeating a successful cancel answers `CANCELLED`
   * again.
   */
  async cancel(tenant: string, jobId: string): Promise<CancelReply> {
    const id = await this.#resolve(tenant, jobId);
    if (id.path === 'w') return this.#cancelWorkflowJob(id);
    return this.#cancel(id);
  }

  /**
   * A workflow job: while it waits for parents, its waiting record is cancelled (one conditional
   * write a release races: the first stands) and its children learn of it; once handed to the
   * table, its row is cancelled as any job's, with the same cut-off; handed to its queue or
   * ended, 409. Cancelling a job cancels (or, `onParentFailure: "run"`, releases) its children.
   */
  async #cancelWorkflowJob(id: ParsedJobId): Promise<CancelReply> {
    const workflows = this.deps.workflows;
    const key = { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    const done: CancelReply = { jobId: id.jobId, state: 'CANCELLED' };
    const [record, cancellable] = await Promise.all([this.deps.tenants.require(id.tenant), workflows?.cancellable(key)]);
    if (!workflows || cancellable === undefined) throw new JobNotFoundError(id.tenant);
    if (!cancellable) throw new NotCancellableError('the job was submitted with cancellable: false');
    // A cancel that loses its race to the job's release (its last parent ended) cancels where the
    // job went, once: a record leaves WAITING for good.
    for (let attempt = 0; attempt < 2; attempt++) {
      const place = await workflows.locate(key);
      if (!place) throw new JobNotFoundError(id.tenant);
      if (place.kind === 'row') {
        const reply = await this.#cancel({ ...id, dueMs: place.dueMs, path: 't' });
        await workflows.rowCancelled(record, key);
        return reply;
      }
      if (place.state === 'CANCELLED') return done;
      if (place.state !== 'WAITING')
        throw new AlreadyQueuedError(
          place.state === 'SUCCEEDED' || place.state === 'DEAD'
            ? `the job was delivered and ended ${place.state}: it can no longer be cancelled`
            : 'the job was handed to its queue: it can no longer be cancelled',
        );
      if (await workflows.cancelWaiting(record, key, 'cancelled (DELETE of the job)')) return done;
    }
    throw new Error(`workflow job ${id.jobId}: its waiting record is neither WAITING nor moved on after a cancel lost its race`);
  }

  async #cancel(id: ParsedJobId): Promise<CancelReply> {
    const done: CancelReply = { jobId: id.jobId, state: 'CANCELLED' };
    if (id.path === 'd') {
      throw new NotCancellableError(
        'the job was sent straight to its queue (it was due within the lookahead, or submitted with cancellable: false) and cannot be cancelled',
      );
    }
    if (id.path === 'u') throw new NotCancellableError('the job was submitted with cancellable: false');
    const { store, clock, settings } = this.deps;
    const now = clock.now();
    // The tombstone outlives every copy of the job's message (tombstoneExpiresAtMs).
    const expiresAt = tombstoneExpiresAtMs(id.dueMs, now, settings);
    if (now >= id.dueMs - settings.lookaheadMs) {
      // Past the cut-off: only a cancel that already happened answers CANCELLED, and only a job
      // no dispatcher can take (in the inbound dead-letter queue) is still cancelled.
      const row = await this.#row(id);
      if (row?.state === 'CANCELLED') return done;
      if (row?.state === 'DEAD' && (await store.cancel(id, id.tenant, expiresAt)) === 'cancelled') return done;
      if (!row && now >= id.dueMs && (await this.#cancelledBefore(id))) return done;
      // A paused tenant's job is held, not dispatched: still SCHEDULED (or not yet stored: a
      // held request's jobs reach ingest seconds late), it can be cancelled. The write is
      // conditional on SCHEDULED or no item, so a row a dispatcher took meanwhile is refused,
      // and a tombstone keeps a job not yet stored from ever being stored.
      if (
        (row === undefined || row.state === 'SCHEDULED') &&
        this.deps.controls &&
        (await this.deps.controls.get(id.tenant)).paused &&
        (await store.cancel(id, id.tenant, expiresAt)) === 'cancelled'
      )
        return done;
      if (row?.state === 'QUEUED')
        throw new AlreadyQueuedError(
          `the job was delivered to its queue${row.deliveredAtMs ? ` at ${isoMs(row.deliveredAtMs)}` : ''}: it can no longer be cancelled`,
        );
      throw new AlreadyQueuedError(
        `the cancel cut-off (${settings.lookaheadMs} ms before runAt ${isoMs(id.dueMs)}) has passed: the job is queued or being dispatched`,
      );
    }
    // SCHEDULED, DEAD or not yet ingested (a tombstone) becomes CANCELLED; ACQUIRED or a
    // delivered marker answers 409.
    if ((await store.cancel(id, id.tenant, expiresAt)) === 'cancelled') return done;
    throw new AlreadyQueuedError();
  }

  /** The item at the job's key, unless its TTL has passed (DynamoDB deletes expired items late, or never on emulators). */
  async #row(id: ParsedJobId): Promise<StoredRow | undefined> {
    const row = await this.deps.store.getRow(id);
    if (row?.expiresAtMs !== undefined && row.expiresAtMs <= this.deps.clock.now()) return undefined;
    return row;
  }

  /** A cancel record written by an earlier release (which moved due tombstones out of the due range). */
  async #cancelledBefore(id: ParsedJobId): Promise<boolean> {
    return (await this.deps.store.getCancelRecord(id))?.kind === 'CANCELLED';
  }

  async #resolve(tenant: string, jobId: string): Promise<ParsedJobId> {
    await this.deps.tenants.require(tenant);
    const id = this.deps.codec.parse(jobId);
    if (id.tenant !== tenant) throw new JobNotFoundError(tenant);
    return id;
  }
}

/** A row's tags as GET shows them: only when it has some. */
function tagsOf(row: StoredRow): { tags?: string[] } {
  return row.tags !== undefined && row.tags.length > 0 ? { tags: [...row.tags] } : {};
}
