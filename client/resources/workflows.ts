/** Workflows: submit, get and cancel (docs/workflows.md). */
import { randomUUID } from 'node:crypto';
import type { CancelledWorkflow, SubmittedWorkflow, Workflow, WorkflowJobRequest, WorkflowRequest } from '../apiTypes.js';
import type { CallOptions } from '../callOptions.js';
import { ValidationError } from '../errors.js';
import type { ApiTransport } from '../transport.js';
import { enc, payloadText, tenantPath } from './encode.js';

export async function submitWorkflow<P>(
  api: ApiTransport,
  tenant: string,
  workflow: WorkflowRequest<P>,
  opts: CallOptions,
): Promise<SubmittedWorkflow> {
  const { status, value } = await api.call<Omit<SubmittedWorkflow, 'created'>>(
    'POST',
    `${tenantPath(tenant)}/workflows`,
    workflowBody(workflow),
    opts.signal,
  );
  return { ...value, created: status === 201 };
}

export function getWorkflow(api: ApiTransport, tenant: string, workflowId: string, opts: CallOptions): Promise<Workflow> {
  return api.request<Workflow>('GET', `${tenantPath(tenant)}/workflows/${enc(workflowId)}`, undefined, opts.signal);
}

export function cancelWorkflow(api: ApiTransport, tenant: string, workflowId: string, opts: CallOptions): Promise<CancelledWorkflow> {
  return api.request<CancelledWorkflow>('DELETE', `${tenantPath(tenant)}/workflows/${enc(workflowId)}`, undefined, opts.signal);
}

/**
 * The body sent, as JSON text, fixed before the first attempt (every attempt sends the same
 * bytes): an idempotency key (the caller's or a new one), each job's fields as given (a Date as
 * RFC 3339; a delay stays a delay: a child's counts from its last parent's end) and its payload
 * spliced in as text. The API checks the rest (keys, cycles, limits) and names what is wrong.
 */
function workflowBody<P>(workflow: WorkflowRequest<P>): string {
  if (typeof workflow !== 'object' || workflow === null || !Array.isArray(workflow.jobs))
    throw new ValidationError({ source: 'client', message: 'a workflow is { idempotencyKey?, jobs: [...] }' });
  refuseUnknown(workflow, WORKFLOW_FIELDS, 'the workflow');
  const jobs = workflow.jobs.map((job, i) => jobText(job, i));
  return `{"idempotencyKey":${JSON.stringify(workflow.idempotencyKey ?? `sdk-${randomUUID()}`)},"jobs":[${jobs.join(',')}]}`;
}

function jobText<P>(job: WorkflowJobRequest<P>, i: number): string {
  if (typeof job !== 'object' || job === null) throw new ValidationError({ source: 'client', message: `jobs[${i}] must be an object` });
  refuseUnknown(job, JOB_FIELDS, `jobs[${i}]`);
  const runAt = job.runAt instanceof Date ? isoOf(job.runAt, i) : job.runAt;
  const fields = JSON.stringify({
    key: job.key,
    ...(runAt !== undefined ? { runAt } : {}),
    ...(job.delaySeconds !== undefined ? { delaySeconds: job.delaySeconds } : {}),
    ...(job.after !== undefined ? { after: job.after } : {}),
    ...(job.onParentFailure !== undefined ? { onParentFailure: job.onParentFailure } : {}),
    ...(job.priority !== undefined ? { priority: job.priority } : {}),
    ...(job.tags !== undefined ? { tags: job.tags } : {}),
    ...(job.concurrencyKey !== undefined ? { concurrencyKey: job.concurrencyKey } : {}),
    ...(job.concurrencyLimit !== undefined ? { concurrencyLimit: job.concurrencyLimit } : {}),
    ...(job.cancellable !== undefined ? { cancellable: job.cancellable } : {}),
  });
  return `{"payload":${payloadText(job)},${fields.slice(1)}`;
}

const WORKFLOW_FIELDS = new Set(['idempotencyKey', 'jobs']);
const JOB_FIELDS = new Set([
  'key',
  'payload',
  'payloadJson',
  'runAt',
  'delaySeconds',
  'after',
  'onParentFailure',
  'priority',
  'tags',
  'concurrencyKey',
  'concurrencyLimit',
  'cancellable',
]);

/** A field the API takes none of would be dropped here, silently: refused instead (a misspelt `afterr` is not a job without parents). */
function refuseUnknown(value: object, known: ReadonlySet<string>, where: string): void {
  const unknown = Object.keys(value).find((k) => !known.has(k));
  if (unknown !== undefined)
    throw new ValidationError({
      source: 'client',
      message: `${where} has an unknown field ${JSON.stringify(unknown)}: it takes ${[...known].join(', ')}`,
    });
}

function isoOf(date: Date, i: number): string {
  if (Number.isNaN(date.getTime())) throw new ValidationError({ source: 'client', message: `jobs[${i}].runAt is an invalid Date` });
  return date.toISOString();
}
