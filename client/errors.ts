/**
 * Typed errors of the Dynein client. Every error the API can answer maps to one class, whether it
 * comes from the handlers (`{"error": {"code", "message"}}`) or from API Gateway itself
 * (`{"message"}`: 403 on a failed IAM check, 404 on an unknown route, 413, 429 when throttled),
 * so callers branch with `instanceof` and never parse messages.
 *
 * @example
 * try {
 *   await client.cancel('billing', jobId);
 * } catch (err) {
 *   if (err instanceof AlreadyQueuedError) console.log('too late: the job is on its way');
 *   else throw err;
 * }
 */

import { cutText } from '../core/util/index.js';

/** Where an API error came from: a Dynein handler, the gateway in front of it, or the client itself (a request that cannot be valid, never sent). */
export type ErrorSource = 'api' | 'gateway' | 'client';

/** Root of every error the client throws. */
export class DyneinError extends Error {
  /** Whether the client retries this error (429, 5xx, network). */
  readonly retryable: boolean;
  /** HTTP attempts made before the error was thrown (set by the client). */
  attempts = 1;

  constructor(message: string, opts: { retryable?: boolean; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'DyneinError';
    this.retryable = opts.retryable ?? false;
  }
}

/** An HTTP error reply of the API or of its gateway. */
export class DyneinApiError extends DyneinError {
  /** HTTP status. */
  readonly status: number;
  /** Machine-readable code: the handler's (`ValidationError`, `JobNotFound`, `ScheduleNotFound`...) or, for gateway replies, `Forbidden`, `NotFound`, `RequestEntityTooLarge`, `TooManyRequests`, `GatewayError`. */
  readonly code: string;
  /** `apigw-requestid` (or `x-request-id`): quote it when asking for help. */
  readonly requestId: string | undefined;
  readonly source: ErrorSource;

  constructor(init: { status: number; code: string; message: string; requestId?: string; source?: ErrorSource; retryable?: boolean }) {
    super(init.message, { retryable: init.retryable ?? false });
    this.name = 'DyneinApiError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.source = init.source ?? 'api';
  }
}

type Init = ConstructorParameters<typeof DyneinApiError>[0];
type SubInit = Omit<Init, 'status' | 'code'> & { status?: number; code?: string };

/** Declares a subclass with a fixed name, default status and code. */
function kind(name: string, status: number, code: string, retryable = false) {
  return class extends DyneinApiError {
    constructor(init: SubInit) {
      super({ retryable, ...init, status: init.status ?? status, code: init.code ?? code });
      this.name = name;
    }
  };
}

/** 400 `ValidationError`: the request is malformed; nothing was written. Also thrown before sending when a request cannot be valid. */
export class ValidationError extends kind('ValidationError', 400, 'ValidationError') {}
/** 400 `InvalidJobId`: the id does not parse or its signature does not verify. */
export class InvalidJobIdError extends kind('InvalidJobIdError', 400, 'InvalidJobId') {}
/** 413 `PayloadTooLarge` (payload above 240 KiB, batch above 5 MiB), or the gateway's 413 (body above 10 MB). */
export class PayloadTooLargeError extends kind('PayloadTooLargeError', 413, 'PayloadTooLarge') {}
/** 404 `TenantNotFound`: the tenant is not registered with the scheduler. */
export class TenantNotFoundError extends kind('TenantNotFoundError', 404, 'TenantNotFound') {}
/** 404 `JobNotFound`: a valid id of another tenant. */
export class JobNotFoundError extends kind('JobNotFoundError', 404, 'JobNotFound') {}
/** 404 `ScheduleNotFound`: the tenant has no schedule of that name (never created, or deleted). */
export class ScheduleNotFoundError extends kind('ScheduleNotFoundError', 404, 'ScheduleNotFound') {}
/** 404 `WorkflowNotFound`: the tenant has no workflow of that id (an unknown id, or another tenant's). */
export class WorkflowNotFoundError extends kind('WorkflowNotFoundError', 404, 'WorkflowNotFound') {}
/** 409 `AlreadyQueued`: the job is (being) handed to its queue and can no longer be cancelled. */
export class AlreadyQueuedError extends kind('AlreadyQueuedError', 409, 'AlreadyQueued') {}
/** 409 `NotCancellable`: the job was submitted with `cancellable: false` or went straight to its queue. */
export class NotCancellableError extends kind('NotCancellableError', 409, 'NotCancellable') {}
/** 409 `IdempotencyKeyReused`: the key names a job created by another request (payload, time or `cancellable` differ) in the last 24 hours; nothing was written. */
export class IdempotencyKeyReusedError extends kind('IdempotencyKeyReusedError', 409, 'IdempotencyKeyReused') {}
/** 409 `TenantPaused`: the tenant is paused (tenant controls). */
export class TenantPausedError extends kind('TenantPausedError', 409, 'TenantPaused') {}
/**
 * 409 `ConcurrentModification`: another change to the same schedule won the race; nothing of this
 * call was written. Not retried by the client: read the schedule again and decide (a put, pause,
 * resume or delete may simply be sent again).
 */
export class ConcurrentModificationError extends kind('ConcurrentModificationError', 409, 'ConcurrentModification') {}
/** 403 from the gateway: missing or wrong signature, unknown key, expired signature, or another tenant's path. */
export class ForbiddenError extends kind('ForbiddenError', 403, 'Forbidden') {}
/** 404 from the gateway: no such route (check the endpoint and its stage path). */
export class RouteNotFoundError extends kind('RouteNotFoundError', 404, 'NotFound') {}
/** 429: the gateway's throttling, or the tenant's rate limit (`Throttled`). Retried. */
export class ThrottledError extends kind('ThrottledError', 429, 'TooManyRequests', true) {}
/** 5xx: the handler's `InternalError`, or a gateway or proxy failure. Retried. */
export class ServerError extends kind('ServerError', 500, 'InternalError', true) {}

/** The request never got an HTTP reply: connection refused or reset, DNS, timeout. Retried. */
export class NetworkError extends DyneinError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: true, cause });
    this.name = 'NetworkError';
  }
}

const BY_CODE: Record<string, new (init: SubInit) => DyneinApiError> = {
  ValidationError,
  InvalidJobId: InvalidJobIdError,
  PayloadTooLarge: PayloadTooLargeError,
  TenantNotFound: TenantNotFoundError,
  JobNotFound: JobNotFoundError,
  AlreadyQueued: AlreadyQueuedError,
  NotCancellable: NotCancellableError,
  IdempotencyKeyReused: IdempotencyKeyReusedError,
  TenantPaused: TenantPausedError,
  ScheduleNotFound: ScheduleNotFoundError,
  WorkflowNotFound: WorkflowNotFoundError,
  ConcurrentModification: ConcurrentModificationError,
  Throttled: ThrottledError,
};

/** The typed error of one handler error `{code, message}` (also used for batch items). */
export function errorFromCode(code: string, message: string, status?: number, requestId?: string): DyneinApiError {
  const Known = BY_CODE[code];
  if (Known) return new Known({ code, message, requestId, ...(status !== undefined ? { status } : {}) });
  if (code === 'InternalError' || (status !== undefined && status >= 500))
    return new ServerError({ code, message, requestId, ...(status !== undefined ? { status } : {}) });
  return new DyneinApiError({ status: status ?? 400, code, message, requestId });
}

/**
 * The typed error of an HTTP error reply, from its status, body and headers. Handler bodies carry
 * a code; gateway bodies only a message, so the status decides.
 */
export function errorFromResponse(status: number, bodyText: string, requestId?: string): DyneinApiError {
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch {
    body = undefined;
  }
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (error && typeof error.code === 'string') return errorFromCode(error.code, String(error.message ?? error.code), status, requestId);

  const given = (body as { message?: unknown } | undefined)?.message;
  const message = typeof given === 'string' ? given : cutText(bodyText.trim(), 200) || `HTTP ${status}`;
  const init = { status, message, requestId, source: 'gateway' as const };
  if (status === 403) return new ForbiddenError(init);
  if (status === 404) return new RouteNotFoundError(init);
  if (status === 413) return new PayloadTooLargeError({ ...init, code: 'RequestEntityTooLarge' });
  if (status === 429) return new ThrottledError(init);
  if (status >= 500) return new ServerError({ ...init, code: 'GatewayError' });
  return new DyneinApiError({ ...init, code: 'GatewayError' });
}
