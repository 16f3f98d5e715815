import { isoMs } from '../model/index.js';
import type { WaitingRecord, WorkflowRecord } from './ports.js';

/**
 * What `GET /v1/tenants/{tenant}/workflows/{workflowId}` shows (issue #25): each job's state from
 * its waiting record, and the workflow's from its jobs'. A pure function over what was read.
 */

/** A workflow job's state as shown. */
export type WorkflowJobState = 'WAITING' | 'SCHEDULED' | 'QUEUED' | 'SUCCEEDED' | 'DEAD' | 'CANCELLED';

/** A workflow's state: `RUNNING` while a job may still run or report. */
export type WorkflowState = 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED';

export interface WorkflowJobView {
  readonly key: string;
  readonly jobId: string;
  readonly state: WorkflowJobState;
  /** The keys of the jobs it waits for, in its request's order; absent for a job without parents. */
  readonly after?: readonly string[];
  /** Its due time, once known (RFC 3339). */
  readonly runAt?: string;
  /** The outcome its worker reported, once it ended so (its state then). */
  readonly outcome?: 'SUCCEEDED' | 'DEAD';
  /** Why it was cancelled. */
  readonly message?: string;
}

export interface WorkflowView {
  readonly workflowId: string;
  readonly tenant: string;
  readonly state: WorkflowState;
  readonly createdAt: string;
  /** The trace its jobs carry (docs/tracing.md), when its records keep it. */
  readonly traceId?: string;
  readonly jobs: readonly WorkflowJobView[];
}

/**
 * The workflow as shown, its jobs in the request's order. A job's state: its own end once it
 * ended (`SUCCEEDED`, `DEAD`, `CANCELLED`); else `WAITING` for parents, `SCHEDULED` once handed to
 * the table, `QUEUED` once handed straight to its queue. `delivered` names the jobs handed to the
 * table whose row the caller found delivered: they show `QUEUED` too.
 *
 * The workflow: `SUCCEEDED` when every job succeeded; `FAILED` when a job ended `DEAD` (its
 * descendants cancelled or run as their policy says); `CANCELLED` when jobs were cancelled (by a
 * cancel of the workflow or of a job, and what waited for them) and none failed; each only once
 * no job is left to run or report, `RUNNING` until then.
 */
export function workflowView(
  workflow: WorkflowRecord,
  records: ReadonlyMap<string, WaitingRecord>,
  delivered: ReadonlySet<string> = new Set(),
  graph: ReadonlyMap<string, readonly string[]> = new Map(),
): WorkflowView {
  const jobs = [...workflow.jobs].map(([key, jobId]) => jobView(key, jobId, records.get(jobId), delivered.has(jobId), graph.get(key)));
  const trace = [...records.values()].find((r) => r.trace)?.trace;
  return {
    workflowId: workflow.workflowId,
    tenant: workflow.tenant,
    state: stateOf(jobs),
    createdAt: isoMs(workflow.createdMs),
    ...(trace ? { traceId: trace.traceId } : {}),
    jobs,
  };
}

function jobView(
  key: string,
  jobId: string,
  record: WaitingRecord | undefined,
  delivered: boolean,
  after: readonly string[] | undefined,
): WorkflowJobView {
  const [state, due, why] = shown(record, delivered);
  return {
    key,
    jobId,
    state,
    ...(after && after.length > 0 ? { after } : {}),
    ...(due && record?.dueMs !== undefined ? { runAt: isoMs(record.dueMs) } : {}),
    ...(record?.end && record.end.outcome !== 'CANCELLED' ? { outcome: record.end.outcome } : {}),
    ...(why && record?.message !== undefined ? { message: record.message } : {}),
  };
}

/** A job's state as shown, and whether its due time and its record's message show with it. */
function shown(record: WaitingRecord | undefined, delivered: boolean): [WorkflowJobState, boolean, boolean] {
  // A job the submit had not yet recorded when it died (a retry writes it): waiting.
  if (!record) return ['WAITING', false, false];
  if (record.end) return [record.end.outcome, true, true];
  if (record.state === 'CANCELLED') return ['CANCELLED', false, true];
  if (record.state === 'WAITING') return ['WAITING', false, false];
  if (record.state === 'RELEASING' && !delivered) return ['SCHEDULED', true, false];
  return ['QUEUED', true, false];
}

function stateOf(jobs: readonly WorkflowJobView[]): WorkflowState {
  const ended = jobs.every((j) => j.state === 'SUCCEEDED' || j.state === 'DEAD' || j.state === 'CANCELLED');
  if (!ended) return 'RUNNING';
  if (jobs.every((j) => j.state === 'SUCCEEDED')) return 'SUCCEEDED';
  return jobs.some((j) => j.state === 'DEAD') ? 'FAILED' : 'CANCELLED';
}
