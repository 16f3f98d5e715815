/**
 * Errors the API answers with. Each carries the HTTP status and the machine-readable code of
 * DESIGN.md; handlers turn them into `{"error": {"code", "message"}}`. Messages say what is wrong
 * and how to fix it.
 */
export abstract class ApiError extends Error {
  abstract readonly status: number;
  abstract readonly code: string;
  /** Headers the reply carries besides the body (a 429's `retry-after`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** 400: the request is malformed; nothing was written. */
export class ValidationError extends ApiError {
  readonly status = 400;
  readonly code = 'ValidationError';
  constructor(message: string) {
    super(message);
    this.name = 'ValidationError';
  }
}

/** 400: a job id that does not parse or whose HMAC does not verify. */
export class InvalidJobIdError extends ApiError {
  readonly status = 400;
  readonly code = 'InvalidJobId';
  constructor(message = 'jobId is not a job id issued by this scheduler: pass the jobId exactly as the submit reply returned it') {
    super(message);
    this.name = 'InvalidJobIdError';
  }
}

/** 413: payload above 240 KiB, or a batch request above 5 MiB. */
export class PayloadTooLargeError extends ApiError {
  readonly status = 413;
  readonly code = 'PayloadTooLarge';
  constructor(message: string) {
    super(message);
    this.name = 'PayloadTooLargeError';
  }
}

/** 404: the tenant is not registered. */
export class TenantNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'TenantNotFound';
  constructor(tenant: string) {
    super(`tenant '${tenant}' is not registered with this scheduler: add it with scheduler.addTenant('${tenant}') or check the spelling`);
    this.name = 'TenantNotFoundError';
  }
}

/** 404: a valid job id of another tenant (never says more than "not found"). */
export class JobNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'JobNotFound';
  constructor(tenant: string) {
    super(`no such job for tenant '${tenant}': job ids are only valid under the tenant that created them`);
    this.name = 'JobNotFoundError';
  }
}

/** 409: the job was handed (or is being handed) to its tenant queue; nothing was written. */
export class AlreadyQueuedError extends ApiError {
  readonly status = 409;
  readonly code = 'AlreadyQueued';
  constructor(
    message = 'the job is already queued for delivery (or being dispatched) and can no longer be cancelled: cancel at least 5 s before runAt',
  ) {
    super(message);
    this.name = 'AlreadyQueuedError';
  }
}

/** 409: the job was submitted with `cancellable: false` or went straight to its queue. */
export class NotCancellableError extends ApiError {
  readonly status = 409;
  readonly code = 'NotCancellable';
  constructor(message: string) {
    super(message);
    this.name = 'NotCancellableError';
  }
}

/**
 * 409: the idempotency key already names a job created by a different request (another payload,
 * schedule or `cancellable`) within the idempotency window; nothing was written.
 */
export class IdempotencyKeyReusedError extends ApiError {
  readonly status = 409;
  readonly code = 'IdempotencyKeyReused';
  constructor(message: string) {
    super(message);
    this.name = 'IdempotencyKeyReusedError';
  }
}

/** 404: no workflow of that id for the tenant (another tenant's id answers the same). */
export class WorkflowNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'WorkflowNotFound';
  constructor(tenant: string) {
    super(`tenant '${tenant}' has no such workflow: workflow ids are only valid under the tenant that created them`);
    this.name = 'WorkflowNotFoundError';
  }
}

/** 404: no recurring schedule of that name for the tenant. */
export class ScheduleNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'ScheduleNotFound';
  constructor(tenant: string, name: string) {
    super(`tenant '${tenant}' has no schedule named '${name}': list them with GET /v1/tenants/${tenant}/schedules`);
    this.name = 'ScheduleNotFoundError';
  }
}

/** 409: another change to the same schedule won the race; nothing of this request was applied. */
export class ConcurrentModificationError extends ApiError {
  readonly status = 409;
  readonly code = 'ConcurrentModification';
  constructor(what: string) {
    super(`${what} was changed by another request at the same time: read it again and retry`);
    this.name = 'ConcurrentModificationError';
  }
}

/**
 * 503: a change to a schedule whose firings are behind first writes the occurrences missed up to
 * its cut-off, in passes that each move the watermark; this call ran out of time before the last
 * one. Nothing of the change is applied yet; repeating the request goes on from the watermark.
 */
export class ScheduleCatchingUpError extends ApiError {
  readonly status = 503;
  readonly code = 'CatchingUp';
  override readonly headers = { 'retry-after': '1' };
  constructor(name: string, throughIso: string, untilIso: string) {
    super(
      `schedule '${name}' is behind: the occurrences it missed are written before the change (done up to ${throughIso} of ${untilIso}); the change is not applied yet: send the same request again to continue`,
    );
    this.name = 'ScheduleCatchingUpError';
  }
}

/** A storage or queue call was throttled; the caller backs off and retries. */
export class ThrottledError extends Error {
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
    this.name = 'ThrottledError';
  }
}

/** A configuration value is missing or invalid (cold start fails with this). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
