/**
 * `DyneinClient`: the Dynein HTTP API's calls, one method per call. Each goes through the
 * transport (transport.ts: signing, timeouts, retries, typed errors) by way of its resource's
 * module (resources/jobs.ts, operations.ts, schedules.ts, deadLetters.ts, tenants.ts). The request and reply
 * types are in apiTypes.ts and callOptions.ts, the transport's options in transport.ts; index.ts
 * lists what the package exports.
 */
import type {
  BatchItemResult,
  CancelJobsFilter,
  CancelJobsStarted,
  CancelledJob,
  DeadLetterAuditEntry,
  DeadLetterAuditPage,
  DeadLetterEdit,
  DeadLetterEditRequest,
  DeadLetterMoveTask,
  DeadLetterPage,
  DeadLetterRedrive,
  DeadLettersDeleted,
  DeletedSchedule,
  JobHeartbeats,
  JobPage,
  JobRequest,
  JobStatus,
  ListedJob,
  Operation,
  PutScheduleResult,
  Schedule,
  ScheduleDefinition,
  SchedulePage,
  ScheduledJob,
  CancelledWorkflow,
  SubmittedWorkflow,
  TenantControls,
  TenantSettingsUpdate,
  Workflow,
  WorkflowRequest,
} from './apiTypes.js';
import type {
  BatchOptions,
  CallOptions,
  CancelJobsWaitOptions,
  ListJobsOptions,
  ListSchedulesOptions,
  PutScheduleOptions,
} from './callOptions.js';
import type { OutcomeReport, OutcomeResult } from './outcomes.js';
import * as dlqCalls from './resources/deadLetters.js';
import * as jobCalls from './resources/jobs.js';
import * as operationCalls from './resources/operations.js';
import * as scheduleCalls from './resources/schedules.js';
import * as tenantCalls from './resources/tenants.js';
import * as workflowCalls from './resources/workflows.js';
import { ApiTransport, type DyneinClientOptions } from './transport.js';

/**
 * The Dynein HTTP API, signed with SigV4 (service `execute-api`), with typed replies and errors.
 *
 * Retries 429 (the gateway's, and `Throttled`: the tenant's `maxSubmitsPerSecond`), 5xx and
 * network errors with exponential backoff and full jitter, waiting at least `Retry-After` when
 * the reply has one (its wait plus the jittered backoff), bounded in attempts and total time;
 * then throws the typed error (`ThrottledError`, `code` `Throttled` for the limit). A retried `schedule` never schedules twice:
 * a delay becomes an absolute `runAt` before the first attempt, and every job carries an
 * idempotency key (the caller's, or one the client makes), so each attempt sends the same bytes
 * and the API answers the job the first attempt created.
 *
 * @example
 * const client = new DyneinClient({ endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com', region: 'eu-west-1' });
 * const { jobId } = await client.schedule('billing', { payload: { invoice: 42 }, delaySeconds: 3600 });
 */
export class DyneinClient {
  readonly #api: ApiTransport;

  constructor(opts: DyneinClientOptions) {
    this.#api = new ApiTransport(opts);
  }

  /**
   * Schedules one job.
   * @throws ValidationError, PayloadTooLargeError, TenantNotFoundError, ForbiddenError, and the retried kinds once retries run out
   */
  async schedule<P>(tenant: string, job: JobRequest<P>, opts: CallOptions = {}): Promise<ScheduledJob> {
    return jobCalls.scheduleJob(this.#api, tenant, job, opts);
  }

  /**
   * Schedules many jobs in requests of at most 100 jobs and 5 MiB, and returns one result per
   * job in order. Jobs that failed with a server error alone are sent again (same keys, same
   * `runAt`); a job the API refused (e.g. `ValidationError`) is reported, not retried.
   * @throws for a request refused as a whole (ForbiddenError, TenantNotFoundError...)
   */
  async scheduleBatch<P>(tenant: string, jobs: readonly JobRequest<P>[], opts: BatchOptions = {}): Promise<BatchItemResult[]> {
    return jobCalls.scheduleBatch(this.#api, tenant, jobs, opts);
  }

  /**
   * A job's state.
   * @throws InvalidJobIdError (malformed or forged id), JobNotFoundError (another tenant's)
   */
  get(tenant: string, jobId: string, opts: CallOptions = {}): Promise<JobStatus> {
    return jobCalls.getJob(this.#api, tenant, jobId, opts);
  }

  /**
   * Reports delivery outcomes (tenants with history on, and keyed jobs: an entry with its
   * `concurrencyKey` is taken whatever the history setting; at most 100 per call). The Worker and
   * `dyneinLambdaHandler` call it for you when given this client. Answers per entry, in order.
   * @throws HistoryOff (409: the tenant keeps no history, for entries without a key), ValidationError (a malformed batch)
   */
  reportOutcomes(tenant: string, outcomes: readonly OutcomeReport[], opts: CallOptions = {}): Promise<{ results: OutcomeResult[] }> {
    return jobCalls.reportOutcomes(this.#api, tenant, outcomes, opts);
  }

  /**
   * Cancels a job; repeating a successful cancel answers `CANCELLED` again. A job already delivered
   * whose outcomes are reported (history on, or a workflow's job) and that has no final outcome yet
   * answers `CANCEL_REQUESTED` (202, repeatable): its worker is asked to stop it at its next
   * heartbeat and reports `CANCELLED` once it did (docs/flow-control.md "Cancel a running job").
   * @throws AlreadyQueuedError (409: delivered and not stoppable, or already ended; nothing written), NotCancellableError (409), InvalidJobIdError, JobNotFoundError
   */
  cancel(tenant: string, jobId: string, opts: CallOptions = {}): Promise<CancelledJob> {
    return jobCalls.cancelJob(this.#api, tenant, jobId, opts);
  }

  /**
   * Which of 1 to 100 running jobs of the tenant a `cancel` asked to stop
   * (`POST .../jobs/heartbeats`, docs/flow-control.md "Cancel a running job"). With
   * `concurrencyKeys` (job id to the job's `concurrencyKey` message attribute), each keyed job's
   * slot lease is renewed too (docs/flow-control.md "Concurrency by key"). The Worker and
   * `dyneinLambdaHandler` call it for you when given this client.
   * @example const { cancelRequested } = await client.heartbeats('billing', [jobId], { concurrencyKeys: { [jobId]: 'customer-42' } });
   * @throws ValidationError (not 1 to 100 strings, or a key of `concurrencyKeys` not among them: before sending; an id this scheduler did not issue, or another tenant's), TenantNotFoundError
   */
  async heartbeats(
    tenant: string,
    jobIds: readonly string[],
    opts: CallOptions & { readonly concurrencyKeys?: Readonly<Record<string, string>> } = {},
  ): Promise<JobHeartbeats> {
    return jobCalls.jobHeartbeats(this.#api, tenant, jobIds, opts);
  }

  /**
   * Starts a bulk cancel (docs/flow-control.md "Bulk cancel"): every job of the tenant matching
   * `filter` (exactly one of `{ tag }`, `{ concurrencyKey }`, `{ debounceKey }` or
   * `{ state: 'SCHEDULED', from?, to? }`) and accepted before this request, stored or still on its
   * way to the table. Answers at once with the operation's id; {@link operation} reports its
   * progress, {@link cancelJobsAndWait} waits for it. Jobs accepted after the request are never touched.
   * @example const { operationId } = await client.cancelJobs('billing', { tag: 'order-42' });
   * @throws ValidationError (the message names the problem; nothing was written), TenantNotFoundError
   */
  async cancelJobs(tenant: string, filter: CancelJobsFilter, opts: CallOptions = {}): Promise<CancelJobsStarted> {
    return operationCalls.cancelJobs(this.#api, tenant, filter, opts);
  }

  /**
   * A bulk cancel's progress and counts: `DONE` once the whole table was read; each matching job
   * counted once as `cancelled`, `alreadyQueued` or `notCancellable` (`matched` is their sum).
   * Operations are kept 21 days.
   * @throws ValidationError (a malformed id), DyneinApiError `OperationNotFound` (404: unknown, expired, or another tenant's), TenantNotFoundError
   */
  async operation(tenant: string, operationId: string, opts: CallOptions = {}): Promise<Operation> {
    return operationCalls.getOperation(this.#api, tenant, operationId, opts);
  }

  /**
   * {@link cancelJobs}, then reads the operation every `pollIntervalMs` (default 1 s) until it is
   * `DONE`, handing each reply to `onProgress`; answers the `DONE` reply. Jobs that were still in
   * the inbound queue at the request are counted as ingest writes them, so a cancel sent right
   * after their submit may see its counts grow a moment after `DONE` ({@link operation} shows them).
   * @example
   * const done = await client.cancelJobsAndWait('billing', { tag: 'order-42' }, {
   *   onProgress: (op) => console.log(`matched ${op.matched}, cancelled ${op.cancelled}`),
   * });
   * @throws as {@link cancelJobs}; DyneinError when not `DONE` within `timeoutMs` (default 10 minutes: the operation runs on)
   */
  async cancelJobsAndWait(tenant: string, filter: CancelJobsFilter, opts: CancelJobsWaitOptions = {}): Promise<Operation> {
    const { operationId } = await this.cancelJobs(tenant, filter, opts);
    return operationCalls.waitForOperation(this.#api, tenant, operationId, opts);
  }

  /**
   * One page of the tenant's jobs matching `filter`; {@link jobs} walks every page.
   * @example const { jobs, nextCursor } = await client.listJobs('billing', { state: 'SCHEDULED', to: new Date(Date.now() + 86_400_000) });
   * @throws ValidationError (the message names the bad parameter or the cursor), TenantNotFoundError
   */
  async listJobs(tenant: string, filter: ListJobsOptions = {}): Promise<JobPage> {
    return jobCalls.listJobs(this.#api, tenant, filter);
  }

  /**
   * Every job of the tenant matching `filter`, in order, fetching pages of `limit` as it goes.
   * @example for await (const j of client.jobs('billing', { state: 'CANCELLED' })) console.log(j.jobId, j.runAt);
   */
  async *jobs(tenant: string, filter: Omit<ListJobsOptions, 'cursor'> = {}): AsyncGenerator<ListedJob, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: JobPage = await this.listJobs(tenant, { ...filter, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.jobs;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /**
   * Submits a workflow: jobs that wait for other jobs (docs/workflows.md). Safe to retry: the
   * idempotency key (the caller's, or one the client makes) answers the same workflow.
   * @example
   * const { jobs } = await client.submitWorkflow('billing', { jobs: [
   *   { key: 'extract', payload: { day }, delaySeconds: 0 },
   *   { key: 'load', payload: {}, after: ['extract'] },
   * ] });
   * @throws ValidationError (the message names the job and field), PayloadTooLargeError, IdempotencyKeyReusedError, TenantNotFoundError
   */
  submitWorkflow<P>(tenant: string, workflow: WorkflowRequest<P>, opts: CallOptions = {}): Promise<SubmittedWorkflow> {
    return workflowCalls.submitWorkflow(this.#api, tenant, workflow, opts);
  }

  /**
   * A workflow and each job's state.
   * @throws WorkflowNotFoundError (an unknown id, or another tenant's)
   */
  getWorkflow(tenant: string, workflowId: string, opts: CallOptions = {}): Promise<Workflow> {
    return workflowCalls.getWorkflow(this.#api, tenant, workflowId, opts);
  }

  /**
   * Cancels every job of the workflow not yet handed to its queue; repeatable.
   * @throws WorkflowNotFoundError
   */
  cancelWorkflow(tenant: string, workflowId: string, opts: CallOptions = {}): Promise<CancelledWorkflow> {
    return workflowCalls.cancelWorkflow(this.#api, tenant, workflowId, opts);
  }

  /**
   * Creates or replaces a recurring schedule. With `dryRun`, validates the definition and answers
   * up to `count` next runs, storing nothing. Safe to retry: the same definition replaces itself.
   * @throws ValidationError (the message names the field), TenantNotFoundError, ConcurrentModificationError
   */
  async putSchedule<P>(
    tenant: string,
    name: string,
    definition: ScheduleDefinition<P>,
    opts: PutScheduleOptions = {},
  ): Promise<PutScheduleResult<P>> {
    return scheduleCalls.putSchedule(this.#api, tenant, name, definition, opts);
  }

  /**
   * A schedule's definition and its next runs.
   * @throws ScheduleNotFoundError, TenantNotFoundError
   */
  async getSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return scheduleCalls.getSchedule<P>(this.#api, tenant, name, opts);
  }

  /**
   * One page of the tenant's schedules, in name order; {@link schedules} walks every page.
   * @throws ValidationError (a bad `limit` or `cursor`), TenantNotFoundError
   */
  async listSchedules<P = unknown>(tenant: string, opts: ListSchedulesOptions = {}): Promise<SchedulePage<P>> {
    return scheduleCalls.listSchedules<P>(this.#api, tenant, opts);
  }

  /**
   * Every schedule of the tenant, in name order, fetching pages of `limit` as it goes.
   * @example for await (const s of client.schedules('billing')) console.log(s.name, s.nextRuns[0]);
   */
  async *schedules<P = unknown>(
    tenant: string,
    opts: Omit<ListSchedulesOptions, 'cursor'> = {},
  ): AsyncGenerator<Schedule<P>, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: SchedulePage<P> = await this.listSchedules<P>(tenant, { ...opts, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.schedules;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /**
   * Deletes a schedule; occurrences due more than 5 s later are cancelled. A second delete answers `ScheduleNotFoundError`.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async deleteSchedule(tenant: string, name: string, opts: CallOptions = {}): Promise<DeletedSchedule> {
    return scheduleCalls.deleteSchedule(this.#api, tenant, name, opts);
  }

  /**
   * Pauses a schedule (state `DISABLED`): occurrences due more than 5 s later are cancelled. Pausing a paused schedule changes nothing.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async pauseSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return scheduleCalls.setScheduleState<P>(this.#api, tenant, name, 'pause', opts);
  }

  /**
   * Resumes a paused schedule from now on: the occurrences that fell while it was paused are never delivered.
   * @throws ScheduleNotFoundError, ConcurrentModificationError
   */
  async resumeSchedule<P = unknown>(tenant: string, name: string, opts: CallOptions = {}): Promise<Schedule<P>> {
    return scheduleCalls.setScheduleState<P>(this.#api, tenant, name, 'resume', opts);
  }

  /**
   * Up to `max` messages (1 to 10, default 10) of the tenant's dead-letter queue, left in it: each
   * with its body, attributes, receive count, first send and first receive, the job id and runAt
   * when it is a Dynein delivery, and the `handle` that names it in {@link redriveDeadLetters},
   * {@link deleteDeadLetters} and {@link editDeadLetter}. Every peek counts in the messages' receive counts.
   * @throws ValidationError (max), TenantNotFoundError
   */
  async peekDeadLetters(tenant: string, opts: CallOptions & { readonly max?: number } = {}): Promise<DeadLetterPage> {
    return dlqCalls.peekDeadLetters(this.#api, tenant, opts);
  }

  /**
   * Moves dead letters back to the tenant queue: `{ all: true }` every message (on AWS a message
   * move task, which runs on after the reply), or `{ handles }` those messages (from
   * {@link peekDeadLetters}), each deleted from the DLQ once its copy was sent.
   * @throws ValidationError (a handle not issued for this tenant: nothing is moved), TenantNotFoundError
   */
  async redriveDeadLetters(
    tenant: string,
    what: { readonly all: true } | { readonly handles: readonly string[] },
    opts: CallOptions = {},
  ): Promise<DeadLetterRedrive> {
    return dlqCalls.redriveDeadLetters(this.#api, tenant, what, opts);
  }

  /**
   * The latest moves of the tenant's DLQ back to its queue, newest first: the progress of the move
   * task `redriveDeadLetters({ all: true })` started. Empty on the local stack (it copies within the request).
   * @throws TenantNotFoundError
   */
  async deadLetterMoves(tenant: string, opts: CallOptions = {}): Promise<{ tasks: readonly DeadLetterMoveTask[] }> {
    return dlqCalls.deadLetterMoves(this.#api, tenant, opts);
  }

  /**
   * Deletes dead letters named by their handles (from {@link peekDeadLetters}).
   * @throws ValidationError (a handle not issued for this tenant: nothing is deleted), TenantNotFoundError
   */
  async deleteDeadLetters(tenant: string, handles: readonly string[], opts: CallOptions = {}): Promise<DeadLettersDeleted> {
    return dlqCalls.deleteDeadLetters(this.#api, tenant, handles, opts);
  }

  /**
   * Puts a dead letter (named by its handle, from {@link peekDeadLetters}) back on the tenant queue
   * with a new payload: `{ payload }` (any JSON value, `JSON.stringify`) or `{ payloadJson }` (JSON
   * text, delivered byte for byte); every other part of the message is kept, and it is deleted from
   * the DLQ. Each edit leaves an audit entry (the caller, the payloads' SHA-256: {@link deadLetterAudit})
   * and an `EDITED` event in the job's timeline. Only a Dynein delivery of the tenant can be edited.
   * @example await client.editDeadLetter('billing', handle, { payload: { invoice: 42, retry: true } });
   * @throws ValidationError (a bad handle or payload), PayloadTooLargeError, DyneinApiError `DeadLetterNotFound` (404: redriven,
   *   deleted, edited or expired) or `NotADelivery` (409), ServerError (nothing sent: it is still in the DLQ), TenantNotFoundError
   */
  async editDeadLetter<P>(tenant: string, handle: string, edit: DeadLetterEditRequest<P>, opts: CallOptions = {}): Promise<DeadLetterEdit> {
    return dlqCalls.editDeadLetter(this.#api, tenant, handle, edit, opts);
  }

  /**
   * One page of the tenant's dead-letter edits, newest first (`limit` 1 to 100, default 50);
   * {@link deadLetterEdits} walks every page.
   * @throws ValidationError (a bad `limit` or `cursor`), TenantNotFoundError
   */
  async deadLetterAudit(
    tenant: string,
    opts: CallOptions & { readonly limit?: number; readonly cursor?: string } = {},
  ): Promise<DeadLetterAuditPage> {
    return dlqCalls.deadLetterAudit(this.#api, tenant, opts);
  }

  /**
   * Every dead-letter edit of the tenant, newest first, fetching pages of `limit` as it goes.
   * @example for await (const e of client.deadLetterEdits('billing')) console.log(e.at, e.jobId, e.by);
   */
  async *deadLetterEdits(
    tenant: string,
    opts: CallOptions & { readonly limit?: number } = {},
  ): AsyncGenerator<DeadLetterAuditEntry, void, undefined> {
    let cursor: string | undefined;
    do {
      const page: DeadLetterAuditPage = await this.deadLetterAudit(tenant, { ...opts, ...(cursor !== undefined ? { cursor } : {}) });
      yield* page.edits;
      cursor = page.cursor;
    } while (cursor !== undefined);
  }

  /**
   * A tenant's controls (operator API; IAM: `DyneinScheduler.grantAdmin`, locally local.json's
   * `admin` key): paused or not, its limits and weight, the last 20 changes.
   * @throws TenantNotFoundError, ForbiddenError (not an operator's credentials)
   */
  getTenantControls(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return tenantCalls.getTenantControls(this.#api, tenant, opts);
  }

  /**
   * Pauses a tenant: its jobs are still accepted and stored, none is delivered until
   * {@link resumeTenant}. Pausing a paused tenant changes nothing (its `pausedAt` stays).
   * @throws TenantNotFoundError, ForbiddenError, ConcurrentModificationError
   */
  pauseTenant(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return tenantCalls.setTenantPaused(this.#api, tenant, 'pause', opts);
  }

  /** Resumes a paused tenant (its held jobs are delivered, in due order). @throws TenantNotFoundError, ForbiddenError, ConcurrentModificationError */
  resumeTenant(tenant: string, opts: CallOptions = {}): Promise<TenantControls> {
    return tenantCalls.setTenantPaused(this.#api, tenant, 'resume', opts);
  }

  /**
   * Changes a tenant's limits and weight: only the fields given; `null` clears a limit.
   * @example await client.setTenantSettings('billing', { maxDeliveriesPerSecond: 50, weight: 2 })
   * @throws ValidationError (naming the field; nothing written), TenantNotFoundError, ForbiddenError, ConcurrentModificationError
   */
  setTenantSettings(tenant: string, settings: TenantSettingsUpdate, opts: CallOptions = {}): Promise<TenantControls> {
    return tenantCalls.setTenantSettings(this.#api, tenant, settings, opts);
  }
}
