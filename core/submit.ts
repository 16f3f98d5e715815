import type { SchedulerSettings } from './config.js';
import { ApiError, ValidationError } from './errors.js';
import { JobIdCodec, type JobPath } from './jobId.js';
import { deliveryMessage, isoMs, packBatches, packInbound, type InboundJob } from './messages.js';
import type { Clock, OutgoingMessage, QueueSender, TenantRecord } from './ports.js';
import type { TenantRegistry } from './tenants.js';
import { parseJsonBody, validateJob, type JobRequest } from './validate.js';

export interface JobReply {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: 'SCHEDULED' | 'QUEUED';
}

export interface ErrorReply {
  readonly error: { readonly code: string; readonly message: string };
}

export interface SubmitDeps {
  readonly settings: SchedulerSettings;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly sender: QueueSender;
  readonly inboundQueueUrl: string;
  readonly clock: Clock;
}

/** Where a job goes: straight to its queue with a delay, or through the inbound queue to the table. */
export interface Placement {
  readonly path: JobPath;
  /** For `d`: the SQS delay, rounded up so that the job is never early. */
  readonly delaySeconds?: number;
}

/**
 * Direct path for jobs due within the lookahead, and for `cancellable: false` jobs due within
 * 900 s (SQS's largest delay) after rounding up; the table for the rest.
 */
export function place(job: Pick<JobRequest, 'dueMs' | 'cancellable'>, nowMs: number, lookaheadMs: number): Placement {
  const delayMs = job.dueMs - nowMs;
  const delaySeconds = Math.max(0, Math.ceil(delayMs / 1000));
  if (delayMs <= lookaheadMs) return { path: 'd', delaySeconds };
  if (!job.cancellable && delaySeconds <= 900) return { path: 'd', delaySeconds };
  return { path: job.cancellable ? 't' : 'u' };
}

/** Submits jobs: `POST /v1/tenants/{tenant}/jobs` and `.../jobs/batch`. */
export class Submitter {
  constructor(private readonly deps: SubmitDeps) {}

  /** One job; the raw request body. Throws an {@link ApiError} for bad input. */
  async submit(tenantName: string, rawBody: string | undefined): Promise<JobReply> {
    const tenant = await this.deps.tenants.require(tenantName);
    const body = parseJsonBody(rawBody, this.deps.settings.maxBatchBytes);
    const [result] = await this.#submitValid(tenant, [validateJob(body, this.deps.settings, this.deps.clock.now())]);
    if (result === undefined || 'error' in result) throw new SubmitFailedError(result?.error.message ?? 'no result');
    return result;
  }

  /** Up to 100 jobs; per-job results in request order. Throws for a bad request as a whole. */
  async submitBatch(tenantName: string, rawBody: string | undefined): Promise<{ results: (JobReply | ErrorReply)[] }> {
    const tenant = await this.deps.tenants.require(tenantName);
    const body = parseJsonBody(rawBody, this.deps.settings.maxBatchBytes);
    if (typeof body !== 'object' || body === null || Array.isArray(body) || !Array.isArray((body as { jobs?: unknown }).jobs)) {
      throw new ValidationError('a batch must be a JSON object like {"jobs": [{"payload": ..., "delaySeconds": 30}]}');
    }
    const extra = Object.keys(body).filter((k) => k !== 'jobs');
    if (extra.length > 0) throw new ValidationError(`unknown field ${extra.map((k) => `'${k}'`).join(', ')} in batch: only 'jobs' is allowed`);
    const jobs = (body as { jobs: unknown[] }).jobs;
    const max = this.deps.settings.maxBatchJobs;
    if (jobs.length === 0 || jobs.length > max) throw new ValidationError(`a batch holds 1 to ${max} jobs, got ${jobs.length}: split it into several requests`);

    const now = this.deps.clock.now();
    const results: (JobReply | ErrorReply | undefined)[] = new Array(jobs.length);
    const valid: JobRequest[] = [];
    const validIndex: number[] = [];
    jobs.forEach((job, i) => {
      try {
        valid.push(validateJob(job, this.deps.settings, now));
        validIndex.push(i);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        results[i] = { error: { code: err.code, message: `jobs[${i}]: ${err.message}` } };
      }
    });
    const sent = await this.#submitValid(tenant, valid);
    sent.forEach((r, k) => (results[validIndex[k]!] = r));
    return { results: results as (JobReply | ErrorReply)[] };
  }

  async #submitValid(tenant: TenantRecord, jobs: readonly JobRequest[]): Promise<(JobReply | ErrorReply)[]> {
    const { settings, codec, clock } = this.deps;
    const now = clock.now();
    const replies: JobReply[] = [];
    const direct: OutgoingMessage[] = [];
    const tableJobs: InboundJob[] = [];
    const tableIndex: number[] = [];
    jobs.forEach((job, i) => {
      const placement = place(job, now, settings.lookaheadMs);
      const { shard, random } = codec.placement(tenant.name, settings.shardCount, job.idempotencyKey);
      const jobId = codec.encode({ tenant: tenant.name, shard, dueMs: job.dueMs, path: placement.path, random });
      const row = { jobId, tenant: tenant.name, shard, dueMs: job.dueMs, payload: job.payloadText };
      if (placement.path === 'd') direct.push(deliveryMessage(String(i), row, placement.delaySeconds));
      else {
        tableJobs.push(row);
        tableIndex.push(i);
      }
      replies.push({ jobId, tenant: tenant.name, runAt: isoMs(job.dueMs), state: placement.path === 'd' ? 'QUEUED' : 'SCHEDULED' });
    });
    // Table-path jobs share inbound messages: a message that fails fails all of its jobs.
    const carried = new Map<string, number[]>();
    const inbound: OutgoingMessage[] = packInbound(tableJobs).map(({ body, indexes }, k) => {
      carried.set(`m${k}`, indexes.map((j) => tableIndex[j]!));
      return { id: `m${k}`, body };
    });
    const failures = new Map<string, string>();
    const fail = (id: string, message: string) => {
      for (const i of carried.get(id) ?? [Number(id)]) failures.set(String(i), message);
    };
    const sends = [
      ...packBatches(direct).map((b) => ({ url: tenant.queueUrl, batch: b })),
      ...packBatches(inbound).map((b) => ({ url: this.deps.inboundQueueUrl, batch: b })),
    ];
    await Promise.all(
      sends.map(async ({ url, batch }) => {
        try {
          for (const f of await this.deps.sender.sendBatch(url, batch)) fail(f.id, f.message);
        } catch (err) {
          for (const m of batch) fail(m.id, (err as Error).message);
        }
      }),
    );
    return replies.map((r, i) => {
      const failure = failures.get(String(i));
      return failure === undefined ? r : { error: { code: 'InternalError', message: `the job was not accepted (${failure}): retry the request` } };
    });
  }
}

/** 500: the job could not be handed to SQS; the client retries. */
export class SubmitFailedError extends ApiError {
  readonly status = 500;
  readonly code = 'InternalError';
  constructor(detail: string) {
    super(`the job was not accepted (${detail}): retry the request`);
    this.name = 'SubmitFailedError';
  }
}
