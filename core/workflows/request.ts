import {
  assertNoDuplicateFields,
  type JobConcurrency,
  parseConcurrency,
  parseDelaySeconds,
  parseIdempotencyKey,
  parsePriority,
  parseRunAt,
  parseTags,
  payloadTextOf,
  PayloadTooLargeError,
  type SchedulerSettings,
  ValidationError,
} from '../model/index.js';
import { type JsonPath, RawJson } from '../util/index.js';

/**
 * A workflow's submit request (`POST /v1/tenants/{tenant}/workflows`, issue #25): up to 1,000 jobs
 * named by keys, each due once its parents (`after`) have succeeded. This module only reads and
 * checks the request: every refusal is a 400 `ValidationError` naming the job (its index and key)
 * and the field, and nothing is stored before the whole request passed.
 */

/** Most jobs in one workflow, and most parents of one job. */
export const MAX_WORKFLOW_JOBS = 1_000;
export const MAX_PARENTS = 1_000;
/**
 * Most parent links (`after` entries) in one workflow. Each is a write when its parent ends and
 * about 70 bytes of stored links; without a bound, a dense graph of 1,000 jobs (half a million
 * links, within the body limit when keys are short) would cost that many writes and a report of a
 * parent would have to reach hundreds of children. A fan-in of 1,000 and a fan-out of 1,000 in one
 * workflow take 2,000.
 */
export const MAX_WORKFLOW_LINKS = 20_000;
/** A job's key: 1 to 64 of these characters. */
export const WORKFLOW_KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/** Where a workflow body's payloads sit: kept as their source text, byte for byte. */
export const WORKFLOW_PAYLOADS = (path: JsonPath): boolean =>
  path.length === 3 && path[0] === 'jobs' && typeof path[1] === 'number' && path[2] === 'payload';

/** What a job waiting for parents does when one of them fails (ends `DEAD` or is cancelled). */
export type ParentFailurePolicy = 'cancel' | 'run';

/**
 * When a job is due. A root job (no `after`): at `atMs`. A job with parents: at the later of the
 * moment its last parent succeeded (plus `delayMs`) and `atMs`; `at` alone or `now` mean no delay.
 */
export type WorkflowTiming =
  { readonly kind: 'at'; readonly atMs: number } | { readonly kind: 'delay'; readonly delayMs: number } | { readonly kind: 'now' };

/** One job of a workflow request, checked. */
export interface WorkflowJob {
  readonly key: string;
  /** The parents' keys, as given (distinct, each a key of the request, never the job's own). */
  readonly after: readonly string[];
  readonly timing: WorkflowTiming;
  /**
   * How the time was given, for telling a retry of the request from another request: `r<ms>`
   * (`runAt`, the instant it names), `d<ms>` (`delaySeconds`, not the moment it moves with), `-`.
   */
  readonly timingGiven: string;
  /** The payload's JSON text as the client sent it (`null` when omitted). */
  readonly payloadText: string;
  readonly priority: number;
  /** Its tags (docs/flow-control.md), on its row once handed to the table; empty when none. */
  readonly tags: readonly string[];
  /** Concurrency by key (docs/flow-control.md): its key and limit, when it has one. */
  readonly concurrency?: JobConcurrency;
  readonly cancellable: boolean;
  readonly onParentFailure: ParentFailurePolicy;
}

/** A workflow request, checked: its jobs in an order where every parent comes before its children. */
export interface WorkflowRequest {
  readonly idempotencyKey?: string;
  readonly jobs: readonly WorkflowJob[];
  /** Each job's index in the request as sent, by key. */
  readonly sentOrder: ReadonlyMap<string, number>;
}

const TOP_FIELDS = new Set(['idempotencyKey', 'jobs']);
const JOB_FIELDS = new Set([
  'key',
  'after',
  'payload',
  'runAt',
  'delaySeconds',
  'priority',
  'tags',
  'concurrencyKey',
  'concurrencyLimit',
  'cancellable',
  'onParentFailure',
]);
const EXAMPLE = '{"jobs": [{"key": "extract", "payload": {...}, "runAt": "2030-02-01T02:00:00Z"}, {"key": "load", "after": ["extract"]}]}';

/**
 * Checks a workflow body as {@link parseJsonBody} read it (payloads as {@link RawJson}, with
 * {@link WORKFLOW_PAYLOADS}). `source` is the body's text, for the payloads' error positions.
 *
 * @throws ValidationError, PayloadTooLargeError
 */
export function validateWorkflow(body: unknown, settings: SchedulerSettings, nowMs: number, source?: string): WorkflowRequest {
  if (!isObject(body)) throw new ValidationError(`a workflow must be a JSON object like ${EXAMPLE}`);
  assertNoDuplicateFields(body, 'the workflow');
  refuseUnknown(Object.keys(body), TOP_FIELDS, 'the workflow');
  const idempotencyKey = parseIdempotencyKey(body.idempotencyKey);
  const list = body.jobs;
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_WORKFLOW_JOBS)
    throw new ValidationError(`jobs must be an array of 1 to ${MAX_WORKFLOW_JOBS} jobs, like ${EXAMPLE}`);
  const jobs = list.map((job: unknown, i) => inJob(i, job, () => validateWorkflowJob(job, settings, nowMs, source)));
  const index = new Map<string, number>();
  jobs.forEach((job, i) => {
    const first = index.get(job.key);
    if (first !== undefined)
      throw new ValidationError(`jobs[${i}] has the key '${job.key}' of jobs[${first}]: give each job of a workflow its own key`);
    index.set(job.key, i);
  });
  const links = jobs.reduce((n, job) => n + job.after.length, 0);
  if (links > MAX_WORKFLOW_LINKS)
    throw new ValidationError(
      `the jobs' after lists name ${links} parents in all, above the ${MAX_WORKFLOW_LINKS} a workflow may have: split it into workflows, or let a job wait for one that waits for many`,
    );
  jobs.forEach((job, i) => {
    for (const parent of job.after)
      if (!index.has(parent))
        throw new ValidationError(
          `${jobName(i, job.key)}: after names '${parent}', which is no job of this workflow: name keys of the same request`,
        );
  });
  return { ...(idempotencyKey !== undefined ? { idempotencyKey } : {}), jobs: parentsFirst(jobs), sentOrder: index };
}

/** One job's fields; the cross-job rules (keys unique, parents known, no cycle) come after. */
function validateWorkflowJob(job: unknown, settings: SchedulerSettings, nowMs: number, source: string | undefined): WorkflowJob {
  if (!isObject(job)) throw new ValidationError(`must be a JSON object like {"key": "extract", "payload": {...}}`);
  assertNoDuplicateFields(job, 'it');
  if (job.debounce !== undefined)
    throw new ValidationError(
      'debounce is for single and batch submits: a workflow job runs once its parents end, so it is not replaced by later submits; leave debounce out',
    );
  refuseUnknown(Object.keys(job), JOB_FIELDS, 'it');
  const key = job.key;
  if (typeof key !== 'string' || !WORKFLOW_KEY.test(key))
    throw new ValidationError(`key must be 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-', got ${JSON.stringify(key)}`);
  return {
    key,
    after: parseAfter(job.after, key),
    timing: parseTiming(job, settings, nowMs),
    timingGiven:
      job.runAt !== undefined
        ? `r${parseRunAt(job.runAt)}`
        : job.delaySeconds !== undefined
          ? `d${parseDelaySeconds(job.delaySeconds)}`
          : '-',
    payloadText: payloadTextOf(job.payload, settings, source),
    priority: parsePriority(job.priority),
    tags: parseTags(job.tags),
    ...concurrencyOf(job),
    cancellable: parseCancellable(job.cancellable),
    onParentFailure: parseParentFailure(job.onParentFailure, job.after !== undefined),
  };
}

function concurrencyOf(job: Record<string, unknown>): { concurrency?: JobConcurrency } {
  const concurrency = parseConcurrency(job.concurrencyKey, job.concurrencyLimit);
  return concurrency ? { concurrency } : {};
}

function parseAfter(value: unknown, key: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length < 1 || value.length > MAX_PARENTS || !value.every((p) => typeof p === 'string'))
    throw new ValidationError(`after must be an array of 1 to ${MAX_PARENTS} keys of this workflow's jobs, like ["extract"]`);
  const seen = new Set<string>();
  for (const parent of value as string[]) {
    if (parent === key) throw new ValidationError(`after names the job itself ('${key}'): a job cannot wait for itself`);
    if (seen.has(parent)) throw new ValidationError(`after names '${parent}' more than once: name each parent once`);
    seen.add(parent);
  }
  return [...seen];
}

/**
 * A root job needs exactly one of `runAt` and `delaySeconds` (as a one-off job); a job with parents
 * takes at most one (`delaySeconds` then counts from its last parent's success), neither meaning
 * "as soon as the parents succeeded".
 */
function parseTiming(job: Record<string, unknown>, settings: SchedulerSettings, nowMs: number): WorkflowTiming {
  const hasRunAt = job.runAt !== undefined;
  const hasDelay = job.delaySeconds !== undefined;
  const root = job.after === undefined;
  if (hasRunAt && hasDelay) throw new ValidationError('give either runAt or delaySeconds, not both');
  if (root && !hasRunAt && !hasDelay)
    throw new ValidationError(
      'a job without after needs exactly one of runAt (RFC 3339 time) or delaySeconds (number of seconds from now)',
    );
  if (!hasRunAt && !hasDelay) return { kind: 'now' };
  const delayMs = hasDelay ? parseDelaySeconds(job.delaySeconds) : 0;
  const atMs = hasRunAt ? parseRunAt(job.runAt) : nowMs + delayMs;
  // A child's delay counts from a success still to come: its horizon is checked from now, as a root's.
  if (!(atMs - nowMs <= settings.horizonMs)) {
    const when = Number.isFinite(atMs) && atMs < 8.64e15 ? new Date(atMs).toISOString() : 'too far ahead';
    throw new ValidationError(
      `the job is due ${when}, beyond the horizon of ${Math.round(settings.horizonMs / 86_400_000)} days from now: schedule it nearer`,
    );
  }
  if (hasRunAt || root) return { kind: 'at', atMs };
  return { kind: 'delay', delayMs };
}

function parseCancellable(value: unknown): boolean {
  if (value !== undefined && typeof value !== 'boolean') throw new ValidationError('cancellable must be true or false');
  return value !== false;
}

function parseParentFailure(value: unknown, hasParents: boolean): ParentFailurePolicy {
  if (value === undefined) return 'cancel';
  if (value !== 'cancel' && value !== 'run')
    throw new ValidationError(`onParentFailure must be "cancel" (the default) or "run", got ${JSON.stringify(value)}`);
  if (!hasParents) throw new ValidationError('onParentFailure applies to a job with after: give after, or leave it out');
  return value;
}

/**
 * The jobs in an order where each parent comes before its children (Kahn's algorithm, stable:
 * the request's order where the edges leave it free); a cycle is refused, naming its keys.
 */
function parentsFirst(jobs: readonly WorkflowJob[]): WorkflowJob[] {
  const byKey = new Map(jobs.map((j) => [j.key, j]));
  const waiting = new Map(jobs.map((j) => [j.key, j.after.length]));
  const children = new Map<string, string[]>(jobs.map((j) => [j.key, []]));
  for (const job of jobs) for (const parent of job.after) children.get(parent)!.push(job.key);
  const ready = jobs.filter((j) => j.after.length === 0).map((j) => j.key);
  const order: WorkflowJob[] = [];
  for (let i = 0; i < ready.length; i++) {
    const key = ready[i]!;
    order.push(byKey.get(key)!);
    for (const child of children.get(key)!) {
      const left = waiting.get(child)! - 1;
      waiting.set(child, left);
      if (left === 0) ready.push(child);
    }
  }
  if (order.length < jobs.length) {
    const cycle = findCycle(
      jobs.filter((j) => waiting.get(j.key)! > 0),
      byKey,
    );
    throw new ValidationError(
      `the jobs ${cycle.map((k) => `'${k}'`).join(' → ')} wait for each other in a cycle (after): a workflow's jobs must not loop`,
    );
  }
  return order;
}

/** A cycle among `stuck` (the jobs Kahn's algorithm could not order): from one of them, follow parents until a key repeats. */
function findCycle(stuck: readonly WorkflowJob[], byKey: ReadonlyMap<string, WorkflowJob>): string[] {
  const stuckKeys = new Set(stuck.map((j) => j.key));
  const path: string[] = [];
  const at = new Map<string, number>();
  let key = stuck[0]!.key;
  while (!at.has(key)) {
    at.set(key, path.length);
    path.push(key);
    // A stuck job has a stuck parent (else it would have been ordered).
    key = byKey.get(key)!.after.find((p) => stuckKeys.has(p))!;
  }
  const loop = path.slice(at.get(key)).reverse();
  return [...loop, loop[0]!];
}

function refuseUnknown(keys: readonly string[], allowed: ReadonlySet<string>, where: string): void {
  const unknown = keys.filter((k) => !allowed.has(k));
  if (unknown.length > 0)
    throw new ValidationError(
      `${where} has the unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}: allowed are ${[...allowed].join(', ')}`,
    );
}

/** Runs `check` for `jobs[i]`, its errors naming the job. */
function inJob<T>(i: number, job: unknown, check: () => T): T {
  try {
    return check();
  } catch (err) {
    const key = isObject(job) && typeof job.key === 'string' && WORKFLOW_KEY.test(job.key) ? job.key : undefined;
    if (err instanceof ValidationError) throw new ValidationError(`${jobName(i, key)}: ${err.message}`);
    if (err instanceof PayloadTooLargeError) throw new PayloadTooLargeError(`${jobName(i, key)}: ${err.message}`);
    throw err;
  }
}

function jobName(i: number, key: string | undefined): string {
  return key === undefined ? `jobs[${i}]` : `jobs[${i}] (key '${key}')`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof RawJson);
}
