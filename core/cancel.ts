import type { SchedulerSettings } from './config.js';
import { AlreadyQueuedError, JobNotFoundError, NotCancellableError } from './errors.js';
import { JobIdCodec, type ParsedJobId } from './jobId.js';
import { isoMs } from './messages.js';
import type { Clock, JobStore } from './ports.js';
import type { TenantRegistry } from './tenants.js';

export type JobState = 'SCHEDULED' | 'ACQUIRED' | 'QUEUED' | 'CANCELLED';

export interface StatusReply {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: JobState;
}

export interface CancelReply {
  readonly jobId: string;
  readonly state: 'CANCELLED';
}

export interface JobsDeps {
  readonly store: JobStore;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
}

/** Status and cancel: `GET` and `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. */
export class JobsService {
  constructor(private readonly deps: JobsDeps) {}

  /** The job's state, read with at most two key lookups (row, then cancel record once due). */
  async status(tenant: string, jobId: string): Promise<StatusReply> {
    const id = await this.#resolve(tenant, jobId);
    const reply = (state: JobState): StatusReply => ({ jobId: id.jobId, tenant: id.tenant, runAt: isoMs(id.dueMs), state });
    if (id.path === 'd') return reply('QUEUED');
    const row = await this.deps.store.getRow(id);
    if (row) return reply(row.state);
    // No row: still in the inbound queue if not yet due (rows are never sent early); once due,
    // either sent (row deleted) or cancelled with its tombstone moved to the cancel record.
    if (this.deps.clock.now() < id.dueMs) return reply('SCHEDULED');
    return reply((await this.#cancelledAfterDue(id)) ? 'CANCELLED' : 'QUEUED');
  }

  /**
   * Cancels a job that is still `SCHEDULED` (one conditional write), or answers 409 and writes
   * nothing. Repeating a successful cancel answers `CANCELLED` again.
   */
  async cancel(tenant: string, jobId: string): Promise<CancelReply> {
    const id = await this.#resolve(tenant, jobId);
    const done: CancelReply = { jobId: id.jobId, state: 'CANCELLED' };
    if (id.path === 'd') {
      throw new NotCancellableError('the job was sent straight to its queue (it was due within the lookahead, or submitted with cancellable: false) and cannot be cancelled');
    }
    if (id.path === 'u') throw new NotCancellableError('the job was submitted with cancellable: false');
    const { store, clock, settings } = this.deps;
    const now = clock.now();
    if (now >= id.dueMs - settings.lookaheadMs) {
      // Past the cut-off: write nothing; only a cancel that already happened answers CANCELLED.
      const row = await store.getRow(id);
      if (row?.state === 'CANCELLED') return done;
      if (!row && now >= id.dueMs && (await this.#cancelledAfterDue(id))) return done;
      throw new AlreadyQueuedError(`the cancel cut-off (${settings.lookaheadMs} ms before runAt ${isoMs(id.dueMs)}) has passed: the job is queued or being dispatched`);
    }
    // SCHEDULED (or not yet ingested: a tombstone) becomes CANCELLED; an ACQUIRED row answers 409.
    const expiresAt = id.dueMs + settings.tombstoneGraceMs + settings.cancelRecordRetentionMs;
    if ((await store.cancel(id, id.tenant, expiresAt)) === 'cancelled') return done;
    throw new AlreadyQueuedError();
  }

  async #cancelledAfterDue(id: ParsedJobId): Promise<boolean> {
    return (await this.deps.store.getCancelRecord(id))?.kind === 'CANCELLED';
  }

  async #resolve(tenant: string, jobId: string): Promise<ParsedJobId> {
    await this.deps.tenants.require(tenant);
    const id = this.deps.codec.parse(jobId);
    if (id.tenant !== tenant) throw new JobNotFoundError(tenant);
    return id;
  }
}
