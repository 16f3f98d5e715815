import {
  AlreadyQueuedError,
  type Clock,
  isoMs,
  type JobIdCodec,
  JobNotFoundError,
  type JobLookups,
  NotCancellableError,
  type ParsedJobId,
  type SchedulerSettings,
  type StoredRow,
  tombstoneExpiresAtMs,
} from '../model/index.js';
import type { ControlsCache, TenantRegistry } from '../tenants/index.js';
import { MAX_TIMELINE_ATTEMPTS, timelineOf, type HistoryStore } from './history.js';
import { DEAD_LETTERED_MESSAGE, type CancelReply, type StatusReply } from './replies.js';

export interface JobsDeps {
  readonly store: JobLookups;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Outcome records (history tenants' status shows their timeline). */
  readonly history?: HistoryStore;
  /** Tenant controls: a paused tenant's held jobs stay cancellable past the cut-off. */
  readonly controls?: ControlsCache;
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
    if (record.historyTtlMs !== undefined && this.deps.history) return this.#withHistory(tenant, jobId, this.deps.history);
    return this.#status(tenant, jobId);
  }

  /**
   * A history tenant's job: the row (or marker) and the outcome record, read at once. The latest
   * reported outcome is the state; a delivered marker without one is `DELIVERED`.
   */
  async #withHistory(tenant: string, jobId: string, history: HistoryStore): Promise<StatusReply> {
    const id = await this.#resolve(tenant, jobId);
    let row: StoredRow | undefined;
    const [reply, outcome] = await Promise.all([this.#status(tenant, jobId, (r) => (row = r)), history.getOutcome(id)]);
    // An outcome shows only over a delivered job (a marker, or no row: sent straight from submit,
    // or its marker expired): never over a row still SCHEDULED, ACQUIRED, CANCELLED or DEAD.
    const delivered = reply.state === 'QUEUED' || reply.state === 'UNKNOWN';
    const live = delivered && outcome && outcome.expiresAtMs > this.deps.clock.now() ? outcome : undefined;
    // Earlier attempts only when there were some: a job done on its first attempt costs no query.
    const attempts = live && live.attempt > 1 ? await history.getFailedAttempts(id, MAX_TIMELINE_ATTEMPTS) : [];
    const timeline = timelineOf(id.dueMs, row, live, attempts);
    if (live) {
      // The outcome replaces the row's answer: UNKNOWN's explanation (the row is gone) does not apply.
      const { message: _unknown, ...known } = reply;
      return { ...known, state: live.outcome, timeline };
    }
    if (reply.state === 'QUEUED') return { ...reply, state: 'DELIVERED', timeline };
    return { ...reply, timeline };
  }

  /** The table's answer; `seen` receives the item at the job's key. */
  async #status(tenant: string, jobId: string, seen?: (row: StoredRow | undefined) => void): Promise<StatusReply> {
    const id = await this.#resolve(tenant, jobId);
    const base = { jobId: id.jobId, tenant: id.tenant, runAt: isoMs(id.dueMs) };
    if (id.path === 'd') return { ...base, state: 'QUEUED' };
    const row = await this.#row(id);
    seen?.(row);
    switch (row?.state) {
      case 'SCHEDULED':
      case 'ACQUIRED':
        // The row is read anyway: its priority (only stored when ≠ 5) costs nothing to show.
        return { ...base, state: row.state, ...(row.priority !== undefined ? { priority: row.priority } : {}) };
      case 'CANCELLED':
        return { ...base, state: row.state };
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
