/**
 * Dynein client library: the HTTP API client (`DyneinClient`: one-off jobs and recurring schedules), the queue consumer (`Worker`)
 * and the typed errors. The Lambda wrapper for functions consuming a tenant queue is `dynein-serverless/lambda` (client/lambda.ts),
 * so that importing the client loads no Powertools. See docs/client.md.
 */
export { DyneinClient } from './client.js';
export {
  type BatchItemResult,
  type CancelledJob,
  type DeadLetter,
  type DeadLetterMoveTask,
  type DeadLetterPage,
  type DeadLetterRedrive,
  type DeadLettersDeleted,
  type DeletedSchedule,
  type JobPage,
  type JobRequest,
  type JobState,
  type JobStatus,
  type ListedJob,
  type PutScheduleResult,
  type Schedule,
  type ScheduleDefinition,
  type SchedulePage,
  type ScheduleState,
  type ScheduledJob,
  type TenantControls,
  type TenantSettings,
  type TenantSettingsUpdate,
  type TimelineEvent,
} from './apiTypes.js';
export {
  type BatchOptions,
  type CallOptions,
  type JobFilter,
  type ListJobsOptions,
  type ListSchedulesOptions,
  type PutScheduleOptions,
} from './callOptions.js';
export { parseRetryAfter, type Credentials, type DyneinClientOptions, type RetryOptions } from './transport.js';
export {
  OutcomeNotReportedError,
  OutcomeReporter,
  type OutcomeReport,
  type OutcomeReporterOptions,
  type OutcomeResult,
  type OutcomeSink,
  type ReportAnswer,
  type ReportNowOptions,
} from './outcomes.js';
export {
  AlreadyQueuedError,
  ConcurrentModificationError,
  DyneinApiError,
  DyneinError,
  ForbiddenError,
  IdempotencyKeyReusedError,
  InvalidJobIdError,
  JobNotFoundError,
  NetworkError,
  NotCancellableError,
  PayloadTooLargeError,
  RouteNotFoundError,
  ScheduleNotFoundError,
  ServerError,
  TenantNotFoundError,
  TenantPausedError,
  ThrottledError,
  ValidationError,
  errorFromCode,
  errorFromResponse,
  type ErrorSource,
} from './errors.js';
export {
  MalformedMessageError,
  UnrecoverableError,
  parseDelivery,
  retryDelaySeconds,
  type DeliveredJob,
  type JobContext,
  type JobHandler,
  type ParentOutcome,
  type RetryBackoff,
} from './delivery.js';
export { Worker, type WorkerEvent, type WorkerOptions } from './worker.js';
