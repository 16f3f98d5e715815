import { describe, expectTypeOf, it } from 'vitest';
import type * as Sdk from '../../client/index.js';
import type { OutcomeReport as SdkOutcomeReport, OutcomeResult as SdkOutcomeResult } from '../../client/outcomes.js';
import type { BatchReply as SdkBatchReply } from '../../client/resources/jobs.js';
import type { OperationReply, OperationsService } from '../../core/operations/index.js';
import type { AuditEntry, DeadLetter, DeadLetterService, EditReply, MoveTask, RedriveReply } from '../../core/deadLetters/index.js';
import type {
  CancelReply,
  HeartbeatsReply,
  JobPageReply,
  JobsService,
  JobState,
  ListedJob,
  Outcome,
  OutcomeResult,
  StatusReply,
  TimelineEvent,
} from '../../core/jobs/index.js';
import type { PutResult, ScheduleReply, SchedulesService, ScheduleState } from '../../core/recurring/index.js';
import type { JobReply, Submitter } from '../../core/submit/index.js';
import type { ControlChangeReply, ControlsReply, SettingsChange, TenantSettings } from '../../core/tenants/index.js';
import type { WorkflowCancelReply, WorkflowJobState, WorkflowSubmitReply, WorkflowView } from '../../core/workflows/index.js';

/**
 * The SDK restates the API's request and reply types (client/apiTypes.ts) rather than importing
 * core's: its declarations must not pull core modules into the package (nor its CommonJS types).
 * These ties make `npm run typecheck` fail when a restated type drifts from core's. Where the two
 * differ on purpose, the tie says what must still be equal, and why they differ:
 *
 * - arrays: core builds its replies in mutable arrays; the SDK hands them out read-only. {@link Sdkish}
 *   reads core's reply as the SDK types it (every field and array read-only), all else equal.
 * - a schedule's `payload`: core splices the stored JSON text into the reply (`RawJson`); the SDK
 *   parses the reply, so its `payload` is the value (`P | null`). Every other field is tied.
 * - `created` of `putSchedule`: the SDK's, from the reply's status (201), not a field of core's reply.
 * - a listed job's `state`: core's `JobState`, which the SDK widens to any string so that a state
 *   a newer service adds still type-checks in older callers (core's fits it).
 * - an outcome's `state`: core's `Outcome`; the SDK reads any string (core's fits it).
 * - an operation's `filter`: core's is a record of strings (`filterJson`); the SDK types it as the
 *   shapes `filterJson` writes (those of the request, its times as strings). Every other field is tied.
 */
type ReadonlyArray_<V> = V extends readonly (infer E)[] ? readonly E[] : V;
type Sdkish<T> = { readonly [K in keyof T]: ReadonlyArray_<T[K]> };
/** What a core method answers. */
type Answer<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;

describe('the SDK reply types are tied to core’s', () => {
  it('jobs: status, cancel, listing, timeline, states (core/jobs/replies.ts)', () => {
    expectTypeOf<Sdk.JobState>().toEqualTypeOf<JobState>();
    expectTypeOf<Sdk.TimelineEvent>().toEqualTypeOf<TimelineEvent>();
    expectTypeOf<Sdk.JobStatus>().toEqualTypeOf<StatusReply>();
    expectTypeOf<Sdk.CancelledJob>().toEqualTypeOf<CancelReply>();
    // A listed job's state is widened in the SDK (see above): every other field is core's.
    expectTypeOf<Omit<Sdk.ListedJob, 'state'>>().toEqualTypeOf<Omit<ListedJob, 'state'>>();
    expectTypeOf<keyof Sdk.ListedJob>().toEqualTypeOf<keyof ListedJob>();
    expectTypeOf<ListedJob['state']>().toExtend<Sdk.ListedJob['state']>();
    expectTypeOf<keyof Sdk.JobPage>().toEqualTypeOf<keyof JobPageReply>();
    expectTypeOf<Sdk.JobPage['nextCursor']>().toEqualTypeOf<JobPageReply['nextCursor']>();
    expectTypeOf<Omit<Sdk.JobPage['jobs'][number], 'state'>>().toEqualTypeOf<Omit<JobPageReply['jobs'][number], 'state'>>();
    expectTypeOf<JobPageReply>().toExtend<Sdk.JobPage>();
  });

  it('submit: one job and a batch (core/submit)', () => {
    expectTypeOf<Sdk.ScheduledJob>().toEqualTypeOf<JobReply>();
    // The batch reply is read, never handed out: core's must fit what the SDK reads.
    expectTypeOf<Answer<Submitter['submitBatch']>>().toExtend<SdkBatchReply>();
    expectTypeOf<keyof SdkBatchReply['results'][number]>().toEqualTypeOf<keyof Answer<Submitter['submitBatch']>['results'][number]>();
  });

  it('heartbeats (core/jobs/jobsService.ts): a running job’s stop requested', () => {
    expectTypeOf<Sdk.JobHeartbeats>().toEqualTypeOf<Sdkish<HeartbeatsReply>>();
    expectTypeOf<Answer<JobsService['heartbeats']>>().toEqualTypeOf<HeartbeatsReply>();
    expectTypeOf<Answer<Sdk.DyneinClient['heartbeats']>>().toEqualTypeOf<Sdk.JobHeartbeats>();
    expectTypeOf<Answer<JobsService['cancel']>>().toEqualTypeOf<CancelReply>();
  });

  it('outcome reports (core/jobs/history.ts)', () => {
    // What the SDK reports is what the route takes.
    expectTypeOf<SdkOutcomeReport['outcome']>().toEqualTypeOf<Outcome>();
    expectTypeOf<OutcomeResult>().toExtend<SdkOutcomeResult>();
    expectTypeOf<Exclude<SdkOutcomeResult, { state: string }>>().toEqualTypeOf<Exclude<OutcomeResult, { state: string }>>();
  });

  it('tenant controls (core/tenants/admin.ts)', () => {
    expectTypeOf<Sdk.TenantControls>().toEqualTypeOf<ControlsReply>();
    expectTypeOf<Sdk.TenantControls['changes'][number]>().toEqualTypeOf<ControlChangeReply>();
    expectTypeOf<Sdk.TenantSettings>().toEqualTypeOf<TenantSettings>();
    expectTypeOf<Sdk.TenantSettingsUpdate>().toEqualTypeOf<SettingsChange>();
  });

  it('dead letters (core/deadLetters)', () => {
    expectTypeOf<Sdk.DeadLetter>().toEqualTypeOf<DeadLetter>();
    expectTypeOf<Sdk.DeadLetterMoveTask>().toEqualTypeOf<MoveTask>();
    expectTypeOf<Sdk.DeadLetterPage>().toEqualTypeOf<Sdkish<Answer<DeadLetterService['peek']>>>();
    expectTypeOf<Sdkish<Sdk.DeadLetterRedrive>>().toEqualTypeOf<Sdkish<RedriveReply>>();
    expectTypeOf<Sdk.DeadLettersDeleted>().toEqualTypeOf<Sdkish<Answer<DeadLetterService['delete']>>>();
    expectTypeOf<Sdkish<Answer<Sdk.DyneinClient['deadLetterMoves']>>>().toEqualTypeOf<Sdkish<Answer<DeadLetterService['redriveStatus']>>>();
    expectTypeOf<Sdk.DeadLetterEdit>().toEqualTypeOf<Answer<DeadLetterService['edit']>>();
    expectTypeOf<Sdk.DeadLetterEdit>().toEqualTypeOf<EditReply>();
    expectTypeOf<Sdk.DeadLetterAuditEntry>().toEqualTypeOf<AuditEntry>();
    expectTypeOf<Sdk.DeadLetterAuditPage>().toEqualTypeOf<Sdkish<Answer<DeadLetterService['audit']>>>();
    expectTypeOf<Answer<Sdk.DyneinClient['deadLetterAudit']>>().toEqualTypeOf<Sdk.DeadLetterAuditPage>();
  });

  it('bulk cancel (core/operations/operations.ts): `filter` typed by the SDK as the request’s shapes (see above)', () => {
    expectTypeOf<Sdk.CancelJobsStarted>().toEqualTypeOf<Sdkish<Answer<OperationsService['cancel']>>>();
    expectTypeOf<Omit<Sdk.Operation, 'filter'>>().toEqualTypeOf<Omit<OperationReply, 'filter'>>();
    expectTypeOf<keyof Sdk.Operation>().toEqualTypeOf<keyof OperationReply>();
    expectTypeOf<Sdk.OperationFilter>().toExtend<OperationReply['filter']>();
    expectTypeOf<Answer<OperationsService['get']>>().toEqualTypeOf<OperationReply>();
    expectTypeOf<Answer<Sdk.DyneinClient['operation']>>().toEqualTypeOf<Sdk.Operation>();
    expectTypeOf<Answer<Sdk.DyneinClient['cancelJobsAndWait']>>().toEqualTypeOf<Sdk.Operation>();
  });

  it('workflows (core/workflows/service.ts, view.ts): `created` of submitWorkflow is the SDK’s, from the status (201)', () => {
    expectTypeOf<Omit<Sdk.SubmittedWorkflow, 'created'>>().toEqualTypeOf<WorkflowSubmitReply>();
    expectTypeOf<Sdk.Workflow>().toEqualTypeOf<WorkflowView>();
    expectTypeOf<Sdk.WorkflowJobState>().toEqualTypeOf<WorkflowJobState>();
    expectTypeOf<Sdk.CancelledWorkflow>().toEqualTypeOf<WorkflowCancelReply>();
  });

  it('schedules (core/recurring/model.ts, service.ts)', () => {
    expectTypeOf<Sdk.ScheduleState>().toEqualTypeOf<ScheduleState>();
    // `payload`: parsed by the SDK, raw JSON text in core (see above); every other field is core's.
    expectTypeOf<Omit<Sdk.Schedule, 'payload'>>().toEqualTypeOf<Omit<Sdkish<ScheduleReply>, 'payload'>>();
    expectTypeOf<keyof Sdk.Schedule>().toEqualTypeOf<keyof ScheduleReply>();
    expectTypeOf<Sdk.Schedule<{ n: number }>['payload']>().toEqualTypeOf<{ n: number } | null>();
    // `created`: the SDK's, from the status core answers beside the reply.
    expectTypeOf<Omit<Sdk.PutScheduleResult, 'payload' | 'created'>>().toEqualTypeOf<Omit<Sdkish<PutResult['schedule']>, 'payload'>>();
    expectTypeOf<Sdk.PutScheduleResult['created']>().toEqualTypeOf<boolean>();
    expectTypeOf<Omit<Sdk.SchedulePage, 'schedules'>>().toEqualTypeOf<Omit<Sdkish<Answer<SchedulesService['list']>>, 'schedules'>>();
    expectTypeOf<keyof Sdk.SchedulePage>().toEqualTypeOf<keyof Answer<SchedulesService['list']>>();
    expectTypeOf<Sdk.DeletedSchedule>().toEqualTypeOf<Sdkish<Answer<SchedulesService['delete']>>>();
  });
});
