/** One-off jobs: schedule (one, or many in batches), status, cancel, listing, outcome reports, heartbeats. */
import { randomUUID } from 'node:crypto';
import { backoffMs, forEachLimit, sleep } from '../../core/util/index.js';
import { packGreedy } from '../../core/model/index.js';
import type { BatchItemResult, CancelledJob, JobHeartbeats, JobPage, JobRequest, JobStatus, ScheduledJob } from '../apiTypes.js';
import type { BatchOptions, CallOptions, ListJobsOptions } from '../callOptions.js';
import { ValidationError, errorFromCode } from '../errors.js';
import { MAX_CONCURRENCY_KEY_LENGTH, MAX_HEARTBEAT_JOBS, type OutcomeReport, type OutcomeResult } from '../outcomes.js';
import type { ApiTransport } from '../transport.js';
import { enc, payloadText, tenantPath, wholeNumber, withQuery } from './encode.js';

const MAX_BATCH_JOBS = 100;
/** Under the API's 5 MiB, leaving room for the envelope. */
const MAX_BATCH_BYTES = 5 * 1024 * 1024 - 1024;

/** A batch request's answer: per job, the job or its error (test/unit/reply-types.test.ts ties it to core's). */
export interface BatchReply {
  results: (ScheduledJob | { error: { code: string; message: string } })[];
}

export function scheduleJob<P>(api: ApiTransport, tenant: string, job: JobRequest<P>, opts: CallOptions): Promise<ScheduledJob> {
  return api.request<ScheduledJob>('POST', `${tenantPath(tenant)}/jobs`, jobBody(api, job), opts.signal);
}

/** `scheduleBatch`: the jobs' bodies, then requests of ≤ 100 jobs and ≤ 5 MiB, `concurrency` at once. */
export async function scheduleBatch<P>(
  api: ApiTransport,
  tenant: string,
  jobs: readonly JobRequest<P>[],
  opts: BatchOptions,
): Promise<BatchItemResult[]> {
  const results: BatchItemResult[] = new Array(jobs.length);
  const bodies: string[] = new Array(jobs.length);
  const valid: number[] = [];
  jobs.forEach((job, i) => {
    try {
      bodies[i] = jobBody(api, job);
      valid.push(i);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      results[i] = { ok: false, error: new ValidationError({ source: 'client', message: `jobs[${i}]: ${err.message}` }) };
    }
  });
  const progress = { done: jobs.length - valid.length, total: jobs.length };
  const requests = packGreedy(valid, (i) => Buffer.byteLength(bodies[i]!) + 1, MAX_BATCH_JOBS, MAX_BATCH_BYTES);
  await forEachLimit(requests, opts.concurrency ?? 4, (indexes) => sendBatch(api, tenant, { indexes, bodies, results, progress }, opts));
  return results;
}

/**
 * One batch request, sent again for the jobs that failed with a server error alone (same keys,
 * same `runAt`) while attempts remain; every other job's result is settled in `results`.
 */
async function sendBatch(
  api: ApiTransport,
  tenant: string,
  batch: { indexes: number[]; bodies: readonly string[]; results: BatchItemResult[]; progress: { done: number; total: number } },
  opts: BatchOptions,
): Promise<void> {
  const { bodies, results, progress } = batch;
  let pending = batch.indexes;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const body = `{"jobs":[${pending.map((i) => bodies[i]).join(',')}]}`;
    const reply = await api.request<BatchReply>('POST', `${tenantPath(tenant)}/jobs/batch`, body, opts.signal);
    const retry: number[] = [];
    pending.forEach((index, k) => {
      const r = reply.results[k];
      if (r && 'jobId' in r) return void (results[index] = { ok: true, job: r });
      // Messages say jobs[k] of this request: name the caller's index instead.
      const message = (r?.error.message ?? 'no result for this job').replace(/^jobs\[\d+\]/, `jobs[${index}]`);
      const error = errorFromCode(r?.error.code ?? 'InternalError', message);
      if (error.retryable && attempt < api.retry.maxAttempts) retry.push(index);
      else results[index] = { ok: false, error: Object.assign(error, { attempts: attempt }) };
    });
    progress.done += pending.length - retry.length;
    opts.onProgress?.(progress.done, progress.total);
    pending = retry;
    if (retry.length > 0) await sleep(backoffMs(attempt - 1, api.retry, api.random), opts.signal);
    if (opts.signal?.aborted) throw opts.signal.reason;
  }
}

export function getJob(api: ApiTransport, tenant: string, jobId: string, opts: CallOptions): Promise<JobStatus> {
  return api.request<JobStatus>('GET', `${tenantPath(tenant)}/jobs/${enc(jobId)}`, undefined, opts.signal);
}

export function reportOutcomes(
  api: ApiTransport,
  tenant: string,
  outcomes: readonly OutcomeReport[],
  opts: CallOptions,
): Promise<{ results: OutcomeResult[] }> {
  return api.request<{ results: OutcomeResult[] }>(
    'POST',
    `${tenantPath(tenant)}/jobs/outcomes`,
    JSON.stringify({ outcomes }),
    opts.signal,
  );
}

/**
 * `POST .../jobs/heartbeats`: `{"jobIds": [...], "concurrencyKeys"?: {jobId: key}}`. Checked before
 * sending: 1 to 100 job ids (strings), and each key of `concurrencyKeys` one of them with a key of
 * 1 to 128 characters; the server checks that each id is one of the tenant's.
 */
export function jobHeartbeats(
  api: ApiTransport,
  tenant: string,
  jobIds: readonly string[],
  opts: CallOptions & { readonly concurrencyKeys?: Readonly<Record<string, string>> },
): Promise<JobHeartbeats> {
  if (!Array.isArray(jobIds) || jobIds.length < 1 || jobIds.length > MAX_HEARTBEAT_JOBS)
    throw new ValidationError({
      source: 'client',
      message: `jobIds must be an array of 1 to ${MAX_HEARTBEAT_JOBS} job ids, got ${Array.isArray(jobIds) ? `${jobIds.length} ids` : typeof jobIds}`,
    });
  const bad = jobIds.findIndex((id) => typeof id !== 'string');
  if (bad >= 0)
    throw new ValidationError({ source: 'client', message: `jobIds[${bad}] must be a job id (a string), got ${typeof jobIds[bad]}` });
  const keys = opts.concurrencyKeys;
  if (keys !== undefined) checkHeartbeatKeys(jobIds, keys);
  const body = keys !== undefined && Object.keys(keys).length > 0 ? { jobIds, concurrencyKeys: keys } : { jobIds };
  return api.request<JobHeartbeats>('POST', `${tenantPath(tenant)}/jobs/heartbeats`, JSON.stringify(body), opts.signal);
}

/** The route's rule for `concurrencyKeys`: job ids of the request, each to a key of 1 to 128 characters. */
function checkHeartbeatKeys(jobIds: readonly string[], keys: Readonly<Record<string, string>>): void {
  if (typeof keys !== 'object' || keys === null || Array.isArray(keys))
    throw new ValidationError({ source: 'client', message: 'concurrencyKeys must be an object of job id to concurrency key' });
  const ids = new Set(jobIds);
  for (const [jobId, key] of Object.entries(keys)) {
    if (!ids.has(jobId))
      throw new ValidationError({ source: 'client', message: `concurrencyKeys names job ${jobId}, which is not one of jobIds` });
    if (typeof key !== 'string' || key.length < 1 || key.length > MAX_CONCURRENCY_KEY_LENGTH)
      throw new ValidationError({
        source: 'client',
        message: `concurrencyKeys[${JSON.stringify(jobId)}] must be a concurrency key of 1 to ${MAX_CONCURRENCY_KEY_LENGTH} characters`,
      });
  }
}

export function cancelJob(api: ApiTransport, tenant: string, jobId: string, opts: CallOptions): Promise<CancelledJob> {
  return api.request<CancelledJob>('DELETE', `${tenantPath(tenant)}/jobs/${enc(jobId)}`, undefined, opts.signal);
}

/** One page of `listJobs`: the filter as query parameters (each checked or encoded). */
export function listJobs(api: ApiTransport, tenant: string, filter: ListJobsOptions): Promise<JobPage> {
  const query: string[] = [];
  const time = (t: string | Date) => (t instanceof Date ? t.toISOString() : t);
  if (filter.state !== undefined) query.push(`state=${enc(filter.state)}`);
  if (filter.from !== undefined) query.push(`from=${enc(time(filter.from))}`);
  if (filter.to !== undefined) query.push(`to=${enc(time(filter.to))}`);
  if (filter.schedule !== undefined) query.push(`schedule=${enc(filter.schedule)}`);
  if (filter.tag !== undefined) query.push(`tag=${enc(filter.tag)}`);
  if (filter.concurrencyKey !== undefined) query.push(`concurrencyKey=${enc(filter.concurrencyKey)}`);
  if (filter.debounceKey !== undefined) query.push(`debounceKey=${enc(filter.debounceKey)}`);
  if (filter.order !== undefined) query.push(`order=${enc(filter.order)}`);
  if (filter.workflow !== undefined) query.push(`workflow=${enc(filter.workflow)}`);
  if (filter.limit !== undefined) query.push(`limit=${wholeNumber('limit', filter.limit, 1, 1000)}`);
  if (filter.cursor !== undefined) query.push(`cursor=${enc(filter.cursor)}`);
  return api.request<JobPage>('GET', withQuery(`${tenantPath(tenant)}/jobs`, query), undefined, filter.signal);
}

/**
 * The body sent for a job, as JSON text: an absolute `runAt` and an idempotency key, fixed
 * before the first attempt, so that every attempt sends the same bytes. The payload is spliced
 * in as text (`payloadJson` as given).
 */
function jobBody<P>(api: ApiTransport, job: JobRequest<P>): string {
  // A debounced job is due periodSeconds after its latest submit and needs no idempotency key (a
  // retry replaces the pending job with the same payload): the server refuses either with it.
  const envelope = JSON.stringify({
    ...(job.debounce !== undefined
      ? {
          debounce: job.debounce,
          ...(job.runAt !== undefined || job.delaySeconds !== undefined ? { runAt: absoluteRunAt(api, job) } : {}),
          ...(job.idempotencyKey !== undefined ? { idempotencyKey: job.idempotencyKey } : {}),
        }
      : { runAt: absoluteRunAt(api, job), idempotencyKey: job.idempotencyKey ?? `sdk-${randomUUID()}` }),
    ...(job.cancellable !== undefined ? { cancellable: job.cancellable } : {}),
    ...(job.priority !== undefined ? { priority: job.priority } : {}),
    ...(job.tags !== undefined ? { tags: job.tags } : {}),
    ...(job.concurrencyKey !== undefined ? { concurrencyKey: job.concurrencyKey } : {}),
    ...(job.concurrencyLimit !== undefined ? { concurrencyLimit: job.concurrencyLimit } : {}),
  });
  return `{"payload":${payloadText(job)},${envelope.slice(1)}`;
}

/** The job's `runAt` as given (a Date as RFC 3339), or `delaySeconds` from now. */
function absoluteRunAt(api: ApiTransport, job: JobRequest<unknown>): string {
  if ((job.runAt === undefined) === (job.delaySeconds === undefined)) {
    throw new ValidationError({ source: 'client', message: 'give exactly one of runAt (a Date or RFC 3339 time) or delaySeconds' });
  }
  if (job.delaySeconds !== undefined) {
    if (typeof job.delaySeconds !== 'number' || !Number.isFinite(job.delaySeconds) || job.delaySeconds < 0) {
      throw new ValidationError({
        source: 'client',
        message: `delaySeconds must be a number of seconds ≥ 0, got ${JSON.stringify(job.delaySeconds)}`,
      });
    }
    return new Date(api.now() + Math.ceil(job.delaySeconds * 1000)).toISOString();
  }
  if (job.runAt instanceof Date) {
    if (Number.isNaN(job.runAt.getTime())) throw new ValidationError({ source: 'client', message: 'runAt is an invalid Date' });
    return job.runAt.toISOString();
  }
  return job.runAt!;
}
