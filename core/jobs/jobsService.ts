import {
  AlreadyQueuedError,
  type ApiError,
  assertNoDuplicateFields,
  type Clock,
  isoMs,
  type JobIdCodec,
  JobNotFoundError,
  type JobLookups,
  type KeySlots,
  NotCancellableError,
  parseJsonBody,
  type ParsedJobId,
  type RowKey,
  type SchedulerSettings,
  type StoredRow,
  type TenantRecord,
  tombstoneExpiresAtMs,
  ValidationError,
} from '../model/index.js';
import { concurrencyKeyOf, type KeyedDeps, type KeyedEnd, settleKeys } from './keyedOutcomes.js';
import type { ControlsCache, TenantRegistry } from '../tenants/index.js';
import { RawJson } from '../util/index.js';
import type { Debounces } from '../debounce/index.js';
import { jobTraceId } from '../model/index.js';
import { type JobEdits, MAX_TIMELINE_ATTEMPTS, timelineOf, type HistoryStore } from './history.js';
import { DEAD_LETTERED_MESSAGE, type CancelReply, type HeartbeatsReply, type StatusReply, type TimelineEvent } from './replies.js';

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
      /** The trace id its workflow's jobs carry (docs/tracing.md), when its record keeps it. */
      readonly traceId?: string;
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

/**
 * Requests to stop running jobs (docs/flow-control.md), by the job's key (the one its id names:
 * a workflow job's is its waiting record's). Implemented by adapters/dynamoCancelRequests.ts.
 */
export interface CancelRequests {
  /** Records the request; a repeat keeps the first one's time. */
  request(key: RowKey, tenant: string, atMs: number, expiresAtMs: number): Promise<void>;
  /** When the job's stop was requested, if it was. */
  requestedAt(key: RowKey): Promise<number | undefined>;
  /** The ids of the jobs of `keys` (at most 100) whose stop was requested. */
  requested(keys: readonly RowKey[]): Promise<Set<string>>;
}

/** Most job ids in one heartbeat (`POST /v1/tenants/{tenant}/jobs/heartbeats`). */
export const MAX_HEARTBEAT_JOBS = 100;

/** How long a cancel request is kept: a day past the job's retention of outcomes, at least 7 days. */
const CANCEL_REQUEST_RETENTION_MS = 7 * 86_400_000;

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
  /** Requests to stop running jobs. Absent: a delivered job's `DELETE` is a 409, as before. */
  readonly cancelRequests?: CancelRequests;
  /** Concurrency keys' slots: a heartbeat naming a job's key renews its slot's lease. Absent: keys are ignored. */
  readonly keySlots?: KeyedDeps['keySlots'] & Pick<KeySlots, 'holds'>;
  /** Debounced jobs' generations (ids of path `b`). Absent: such an id is answered as a job the table has no record of. */
  readonly debounces?: Pick<Debounces, 'generation' | 'cancel'>;
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
    if (id.path === 'b') return this.#debouncedStatus(record, id);
    if (record.historyTtlMs !== undefined && this.deps.history) return this.#withHistory(id, this.deps.history);
    const reply = await this.#status(id);
    return reply.concurrencyKey !== undefined && reply.state === 'QUEUED' ? this.#withKeyedStop(id, reply.concurrencyKey, reply) : reply;
  }

  /**
   * A debounced job (docs/flow-control.md#debounce): its generation item says where its row is
   * now and whether it was cancelled; the row (or its delivered marker) at that due time, the rest.
   */
  async #debouncedStatus(record: TenantRecord, id: ParsedJobId): Promise<StatusReply> {
    const gen = await this.deps.debounces?.generation(id.jobId);
    if (!gen || gen.tenant !== id.tenant)
      return {
        jobId: id.jobId,
        tenant: id.tenant,
        state: 'UNKNOWN',
        message:
          'the scheduler has no record of this debounced job: its submit did not complete (a 5xx answered it), or its records expired',
      };
    const key = { debounceKey: gen.key };
    if (gen.state === 'CANCELLED') return { jobId: id.jobId, tenant: id.tenant, runAt: isoMs(gen.dueMs), state: 'CANCELLED', ...key };
    const reply =
      record.historyTtlMs !== undefined && this.deps.history
        ? await this.#withHistory(id, this.deps.history, gen.dueMs)
        : await this.#status({ ...id, dueMs: gen.dueMs });
    return { ...reply, ...key };
  }

  /**
   * A keyed job delivered (no history): `cancelRequested` while it runs (holds its key's slot)
   * after a `DELETE` asked its worker to stop it. Two more reads, for keyed jobs only.
   */
  async #withKeyedStop(id: ParsedJobId, key: string, reply: StatusReply): Promise<StatusReply> {
    const { cancelRequests, keySlots } = this.deps;
    if (!cancelRequests || !keySlots) return reply;
    const [asked, running] = await Promise.all([cancelRequests.requestedAt(id), keySlots.holds(id.tenant, key, id.jobId)]);
    return asked !== undefined && running ? { ...reply, cancelRequested: true } : reply;
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
    if (place.kind === 'row') return this.#withStop(key, await this.#status({ ...id, dueMs: place.dueMs, path: 't' }));
    const runAt = place.dueMs !== undefined ? { runAt: isoMs(place.dueMs) } : {};
    const message = place.message !== undefined ? { message: place.message } : {};
    const traceId = place.traceId !== undefined ? { traceId: place.traceId } : {};
    if (place.state !== 'SUCCEEDED' && place.state !== 'DEAD')
      return this.#withStop(key, { ...base, ...runAt, state: place.state, ...message, ...traceId });
    const text = place.resultKept ? place.result : (await this.deps.history?.getOutcome(key))?.result;
    const result = text !== undefined ? { result: new RawJson(text, 0, 0) } : {};
    return { ...base, ...runAt, state: place.state, ...result, ...traceId };
  }

  /** A workflow job handed to its queue (`QUEUED` or `ACQUIRED`): whether a `DELETE` asked its worker to stop it. */
  async #withStop(key: RowKey, reply: StatusReply): Promise<StatusReply> {
    if ((reply.state !== 'QUEUED' && reply.state !== 'ACQUIRED') || !this.deps.cancelRequests) return reply;
    return (await this.deps.cancelRequests.requestedAt(key)) !== undefined ? { ...reply, cancelRequested: true } : reply;
  }

  /**
   * A history tenant's job: the row (or marker) and the outcome record, read at once. The latest
   * reported outcome is the state; a delivered marker without one is `DELIVERED`.
   */
  async #withHistory(id: ParsedJobId, history: HistoryStore, rowDueMs = id.dueMs): Promise<StatusReply> {
    let row: StoredRow | undefined;
    // A debounced job's row moved (rowDueMs); its outcome records stay under the key its id names.
    const [reply, outcome] = await Promise.all([this.#status({ ...id, dueMs: rowDueMs }, (r) => (row = r)), history.getOutcome(id)]);
    // An outcome shows only over a delivered job (a marker, or no row: sent straight from submit,
    // or its marker expired): never over a row still SCHEDULED, ACQUIRED, CANCELLED or DEAD.
    const delivered = reply.state === 'QUEUED' || reply.state === 'UNKNOWN';
    const live = delivered && outcome && outcome.expiresAtMs > this.deps.clock.now() ? outcome : undefined;
    // Earlier attempts only when there were some (a job done on its first attempt costs no query);
    // its edits (a Query) with them: an edited dead letter was delivered, so has an outcome.
    // A delivered job without a final outcome may have been asked to stop (one more read); one
    // that stopped on such a request shows when it was asked, in its timeline.
    const running = (delivered || reply.state === 'ACQUIRED') && (!live || live.outcome === 'FAILED');
    const stopped = live?.outcome === 'CANCELLED';
    const [attempts, edits, stopAt] = await Promise.all([
      live && live.attempt > 1 ? history.getFailedAttempts(id, MAX_TIMELINE_ATTEMPTS) : [],
      live && this.deps.edits ? this.deps.edits.ofJob(id) : [],
      running || stopped ? this.deps.cancelRequests?.requestedAt(id) : undefined,
    ]);
    const timeline = withStopRequest(timelineOf(rowDueMs, row, live, attempts, edits), stopAt);
    const stop = running && stopAt !== undefined ? { cancelRequested: true as const } : {};
    if (live) {
      // The outcome replaces the row's answer: UNKNOWN's explanation (the row is gone) does not apply.
      const { message: _unknown, ...known } = reply;
      return { ...known, state: live.outcome, timeline, ...stop };
    }
    if (reply.state === 'QUEUED') return { ...reply, state: 'DELIVERED', timeline, ...stop };
    return { ...reply, timeline, ...stop };
  }

  /** The table's answer; `seen` receives the item at the job's key. */
  async #status(id: ParsedJobId, seen?: (row: StoredRow | undefined) => void): Promise<StatusReply> {
    const base = { jobId: id.jobId, tenant: id.tenant, runAt: isoMs(id.dueMs) };
    if (id.path === 'd') return { ...base, state: 'QUEUED' };
    const row = await this.#row(id);
    seen?.(row);
    if (!row) return this.#statusWithoutRow(id, base);
    // The job's trace (docs/tracing.md): the one its submit carried, kept on its row, tombstone and
    // marker; else the one its id derives.
    return { ...this.#statusOfRow(row, base), traceId: jobTraceId({ jobId: id.jobId, trace: row.trace }) };
  }

  /** What the item at the job's key says. */
  #statusOfRow(row: StoredRow, base: { jobId: string; tenant: string; runAt: string }): StatusReply {
    switch (row.state) {
      case 'SCHEDULED':
      case 'ACQUIRED':
        // The row is read anyway: its priority (only stored when ≠ 5) and tags cost nothing to show.
        return {
          ...base,
          state: row.state,
          ...(row.priority !== undefined ? { priority: row.priority } : {}),
          ...tagsOf(row),
          ...(row.concurrency ? { concurrencyKey: row.concurrency.key, concurrencyLimit: row.concurrency.limit } : {}),
        };
      case 'CANCELLED':
        return {
          ...base,
          state: row.state,
          ...tagsOf(row),
          ...(row.concurrency ? { concurrencyKey: row.concurrency.key, concurrencyLimit: row.concurrency.limit } : {}),
        };
      case 'QUEUED':
        return {
          ...base,
          state: 'QUEUED',
          ...(row.deliveredAtMs ? { deliveredAt: isoMs(row.deliveredAtMs) } : {}),
          ...tagsOf(row),
          // The marker keeps a keyed job's key: its worker frees the slot, and a DELETE asks it to stop.
          ...(row.concurrency ? { concurrencyKey: row.concurrency.key, concurrencyLimit: row.concurrency.limit } : {}),
        };
      case 'DEAD':
        return {
          ...base,
          state: 'DEAD_LETTERED',
          message: DEAD_LETTERED_MESSAGE,
        };
    }
  }

  /** No item at the job's key: cancelled by an earlier release's record, or not stored (yet, or any more). */
  async #statusWithoutRow(id: ParsedJobId, base: { jobId: string; tenant: string; runAt: string }): Promise<StatusReply> {
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
    try {
      if (id.path === 'w') return await this.#cancelWorkflowJob(id);
      if (id.path === 'b') return await this.#cancelDebounced(id);
      return await this.#cancel(id);
    } catch (err) {
      // Delivered (or on its way): a job whose outcomes are reported can still be asked to stop.
      const delivered = err instanceof AlreadyQueuedError || (err instanceof NotCancellableError && id.path === 'd');
      if (!delivered) throw err;
      return this.#requestStop(id, err);
    }
  }

  /**
   * Asks a delivered job's worker to stop it (202 `CANCEL_REQUESTED`): for a job whose outcomes
   * are reported (a history tenant's, a workflow's), until it has a final one. Any other job
   * gets `refusal`, the 409 it always had.
   */
  async #requestStop(id: ParsedJobId, refusal: ApiError): Promise<CancelReply> {
    const { cancelRequests, tenants, clock } = this.deps;
    const record = await tenants.require(id.tenant);
    const key = { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    if (cancelRequests && id.path !== 'w' && record.historyTtlMs === undefined) return this.#requestKeyedStop(id, key, refusal);
    if (!cancelRequests || (id.path !== 'w' && record.historyTtlMs === undefined)) throw refusal;
    const ended = await this.#finalOutcome(id, key);
    if (ended !== undefined) throw new AlreadyQueuedError(`the job was delivered and ended ${ended}: there is nothing left to cancel`);
    const now = clock.now();
    const keepMs = Math.max(CANCEL_REQUEST_RETENTION_MS, record.historyTtlMs ?? 0);
    await cancelRequests.request(key, id.tenant, now, Math.max(now, id.dueMs) + keepMs);
    return { jobId: id.jobId, state: 'CANCEL_REQUESTED' };
  }

  /**
   * A keyed job of a tenant without history (docs/flow-control.md): it runs while it holds its
   * key's slot (its worker frees it with the outcome), so it can be asked to stop until then.
   * Its marker (or its row, while the dispatcher writes the marker) names its key.
   */
  async #requestKeyedStop(id: ParsedJobId, key: RowKey, refusal: ApiError): Promise<CancelReply> {
    const { cancelRequests, keySlots, store, clock } = this.deps;
    const row = keySlots ? await store.getRow(key) : undefined;
    const c = row?.concurrency;
    if (!cancelRequests || !keySlots || !c) throw refusal;
    if (!(await keySlots.holds(id.tenant, c.key, id.jobId))) {
      // Not holding its slot: waiting for one (past the cut-off, a dispatcher has it), or ended.
      if (row.state !== 'QUEUED') throw refusal;
      throw new AlreadyQueuedError('the job was delivered and its worker reported its end: there is nothing left to cancel');
    }
    const now = clock.now();
    await cancelRequests.request(key, id.tenant, now, Math.max(now, id.dueMs) + CANCEL_REQUEST_RETENTION_MS);
    return { jobId: id.jobId, state: 'CANCEL_REQUESTED' };
  }

  /** The job's final outcome (`SUCCEEDED`, `DEAD`, `CANCELLED`), if it has one. */
  async #finalOutcome(id: ParsedJobId, key: RowKey): Promise<string | undefined> {
    const [outcome, place] = await Promise.all([
      this.deps.history?.getOutcome(key),
      id.path === 'w' ? this.deps.workflows?.locate(key) : undefined,
    ]);
    if (place?.kind === 'own' && (place.state === 'SUCCEEDED' || place.state === 'DEAD' || place.state === 'CANCELLED')) return place.state;
    const live = outcome && outcome.expiresAtMs > this.deps.clock.now() ? outcome : undefined;
    return live && live.outcome !== 'FAILED' ? live.outcome : undefined;
  }

  /**
   * `POST /v1/tenants/{tenant}/jobs/heartbeats` `{"jobIds": [...]}` (1 to 100 of the tenant's
   * ids): the ones a `DELETE` asked to stop. Workers send it with their visibility heartbeat.
   * @throws ValidationError (400: nothing read)
   */
  async heartbeats(tenant: string, body: string | undefined): Promise<HeartbeatsReply> {
    await this.deps.tenants.require(tenant);
    const shape = `{"jobIds": ["<jobId>", ...], "concurrencyKeys"?: {"<jobId>": "<key>", ...}} with 1 to ${MAX_HEARTBEAT_JOBS} job ids`;
    const v = parseJsonBody(body, Number.POSITIVE_INFINITY, undefined, shape);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(`the body must be a JSON object: ${shape}`);
    assertNoDuplicateFields(v, 'the body');
    const o = v as Record<string, unknown>;
    const unknown = Object.keys(o).find((k) => k !== 'jobIds' && k !== 'concurrencyKeys');
    if (unknown !== undefined) throw new ValidationError(`unknown field ${unknown}: send ${shape}`);
    if (!Array.isArray(o.jobIds) || o.jobIds.length === 0 || o.jobIds.length > MAX_HEARTBEAT_JOBS)
      throw new ValidationError(`jobIds must be an array of 1 to ${MAX_HEARTBEAT_JOBS} job ids: send ${shape}`);
    const keys = o.jobIds.map((jobId: unknown, i) => {
      let id: ParsedJobId;
      try {
        id = this.deps.codec.parse(jobId as string);
      } catch {
        throw new ValidationError(
          `jobIds[${i}] is not a job id this scheduler issued: pass each jobId exactly as the submit reply returned it`,
        );
      }
      if (id.tenant !== tenant) throw new ValidationError(`jobIds[${i}] is not a job of tenant '${tenant}'`);
      return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    });
    const beats = keyedBeats(o.concurrencyKeys, new Set(keys.map((k) => k.jobId)));
    const [requested] = await Promise.all([
      this.deps.cancelRequests ? this.deps.cancelRequests.requested(keys) : new Set<string>(),
      this.deps.keySlots && beats.length > 0
        ? settleKeys({ keySlots: this.deps.keySlots, controls: this.deps.controls, clock: this.deps.clock }, tenant, beats)
        : undefined,
    ]);
    return { cancelRequested: [...new Set(keys.map((k) => k.jobId).filter((j) => requested.has(j)))] };
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

  /**
   * A debounced job (docs/flow-control.md#debounce): cancelled while its generation is `OPEN`,
   * up to the moment a dispatcher claims it to send it (at its due time). The generation's write
   * decides (the dispatcher's claim is conditional on `OPEN`); the row's tombstone follows, best
   * effort (a row a dispatcher holds is deleted by it when its claim fails).
   */
  async #cancelDebounced(id: ParsedJobId): Promise<CancelReply> {
    const gen = await this.deps.debounces?.cancel(id.jobId);
    if (!gen || gen.tenant !== id.tenant) throw new JobNotFoundError(id.tenant);
    if (gen.state === 'SENDING')
      throw new AlreadyQueuedError(`the job was taken to be sent at its due time (${isoMs(gen.dueMs)}): it can no longer be cancelled`);
    const { store, clock, settings } = this.deps;
    const now = clock.now();
    await store.cancel({ ...id, dueMs: gen.dueMs }, id.tenant, tombstoneExpiresAtMs(gen.dueMs, now, settings)).catch(() => undefined);
    return { jobId: id.jobId, state: 'CANCELLED' };
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
      if (row?.state === 'ACQUIRED' && row.concurrency && (await this.#cancelWaiting(id, row, expiresAt))) return done;
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

  /**
   * A keyed job past its cut-off that a dispatcher holds while it waits for a slot of its key
   * (docs/flow-control.md): not delivered, so still cancelled, with a write conditional on the
   * lease read. Its dispatcher renews that lease after taking the slot and before the send, so
   * either the cancel or the send fails; a renewal meanwhile makes the cancel read the row again.
   */
  async #cancelWaiting(id: ParsedJobId, seen: StoredRow, expiresAt: number): Promise<boolean> {
    const { keySlots, store } = this.deps;
    if (!keySlots) return false;
    let row: StoredRow | undefined = seen;
    for (let attempt = 0; attempt < 3 && row?.state === 'ACQUIRED' && row.concurrency; attempt++) {
      if (await keySlots.holds(id.tenant, row.concurrency.key, id.jobId)) return false; // it has its slot: being sent
      if (await store.cancelWaiting(id, id.tenant, row.leaseUntil, expiresAt)) return true;
      row = await this.#row(id);
    }
    return row?.state === 'CANCELLED';
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

/** The timeline with the stop request (`CANCEL_REQUESTED`) in its place by time, when there was one. */
function withStopRequest(timeline: TimelineEvent[], atMs: number | undefined): TimelineEvent[] {
  if (atMs === undefined) return timeline;
  const at = isoMs(atMs);
  const i = timeline.findIndex((e, n) => n > 0 && e.at > at);
  const event: TimelineEvent = { at, event: 'CANCEL_REQUESTED' };
  return i < 0 ? [...timeline, event] : [...timeline.slice(0, i), event, ...timeline.slice(i)];
}

/** A row's tags as GET shows them: only when it has some. */
function tagsOf(row: StoredRow): { tags?: string[] } {
  return row.tags !== undefined && row.tags.length > 0 ? { tags: [...row.tags] } : {};
}

/**
 * A heartbeat's `concurrencyKeys`: an object of the request's job ids to their keys (the
 * `concurrencyKey` attribute their messages carried).
 * @throws ValidationError naming the entry at fault
 */
function keyedBeats(value: unknown, jobIds: ReadonlySet<string>): KeyedEnd[] {
  if (value === undefined) return [];
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError('concurrencyKeys must be an object of job ids to their concurrency keys, like {"<jobId>": "customer-42"}');
  return Object.entries(value).map(([jobId, key]) => {
    if (!jobIds.has(jobId))
      throw new ValidationError(
        `concurrencyKeys names ${JSON.stringify(jobId).slice(0, 80)}, which is not in jobIds: list each job in jobIds`,
      );
    return { jobId, key: concurrencyKeyOf(key, `concurrencyKeys[${JSON.stringify(jobId)}]`)!, action: 'extend' as const };
  });
}
