/**
 * Dynein client library: the HTTP API client (`DyneinClient`: one-off jobs and recurring schedules), the queue consumer (`Worker`), a
 * Lambda wrapper for functions consuming a tenant queue, and the typed errors. See docs/client.md.
 */
export {
  DyneinClient,
  parseRetryAfter,
  type BatchItemResult,
  type BatchOptions,
  type CallOptions,
  type CancelledJob,
  type Credentials,
  type DeadLetter,
  type DeadLetterPage,
  type DeadLetterRedrive,
  type DeadLettersDeleted,
  type DeletedSchedule,
  type DyneinClientOptions,
  type JobRequest,
  type JobState,
  type JobStatus,
  type ListSchedulesOptions,
  type PutScheduleOptions,
  type PutScheduleResult,
  type RetryOptions,
  type Schedule,
  type ScheduleDefinition,
  type SchedulePage,
  type ScheduleState,
  type ScheduledJob,
  type TimelineEvent,
} from './client.js';
export { OutcomeReporter, type OutcomeReport, type OutcomeReporterOptions, type OutcomeResult, type OutcomeSink } from './outcomes.js';
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
  type RetryBackoff,
} from './delivery.js';
export { Worker, type WorkerEvent, type WorkerOptions } from './worker.js';
export { dyneinLambdaHandler, type LambdaConsumerOptions } from './lambda.js';
