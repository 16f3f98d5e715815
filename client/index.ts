/**
 * Dynein client library: the HTTP API client (`DyneinClient`), the queue consumer (`Worker`), a
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
  type DyneinClientOptions,
  type JobRequest,
  type JobState,
  type JobStatus,
  type RetryOptions,
  type ScheduledJob,
} from './client.js';
export {
  AlreadyQueuedError,
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
