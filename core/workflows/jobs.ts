import type { WorkflowJobPlace, WorkflowJobs } from '../jobs/index.js';
import type { RowKey, TenantRecord } from '../model/index.js';
import type { WaitingRecord } from './ports.js';
import { cancelWhileWaiting, jobEnded, type ProgressDeps } from './progress.js';

/**
 * Status and cancel of a workflow job (core/jobs' {@link WorkflowJobs}): where it is, read from
 * its waiting record, and a cancel while it waits, carried on to its children.
 */
export function workflowJobs(deps: ProgressDeps): WorkflowJobs {
  return {
    async locate(key: RowKey): Promise<WorkflowJobPlace | undefined> {
      const record = await deps.waiting.get(key);
      return record && placeOf(record);
    },
    async cancellable(key: RowKey): Promise<boolean | undefined> {
      return (await deps.store.getSpec(key))?.cancellable;
    },
    async cancelWaiting(tenant: TenantRecord, key: RowKey, message: string): Promise<boolean> {
      const atMs = deps.clock.now();
      if (!(await cancelWhileWaiting(deps, tenant.name, key, message, atMs))) return false;
      await jobEnded(deps, tenant, key.jobId, { outcome: 'CANCELLED', atMs });
      return true;
    },
    async rowCancelled(tenant: TenantRecord, key: RowKey): Promise<void> {
      await jobEnded(deps, tenant, key.jobId, { outcome: 'CANCELLED', atMs: deps.clock.now() });
    },
  };
}

/**
 * A waiting record's place: its own end once it ended; `WAITING` or `CANCELLED` before release;
 * its row once handed to the table (`RELEASING`); `QUEUED` once handed straight to its queue
 * (`QUEUING`, and `QUEUED` of records written before).
 */
function placeOf(record: WaitingRecord): WorkflowJobPlace {
  const due = record.dueMs !== undefined ? { dueMs: record.dueMs } : {};
  const message = record.message !== undefined ? { message: record.message } : {};
  const trace = record.trace ? { traceId: record.trace.traceId } : {};
  if (record.end) {
    const result = record.resultKept ? { resultKept: true, ...(record.result !== undefined ? { result: record.result } : {}) } : {};
    return { kind: 'own', state: record.end.outcome, ...due, ...message, ...result, ...trace };
  }
  if (record.state === 'RELEASING' && record.dueMs !== undefined) return { kind: 'row', dueMs: record.dueMs };
  // Sent straight to its queue (or being sent: the send follows the move at once), as a job sent
  // straight from submit shows.
  if (record.state === 'QUEUING') return { kind: 'own', state: 'QUEUED', ...due, ...trace };
  if (record.state === 'WAITING' || record.state === 'CANCELLED' || record.state === 'QUEUED')
    return { kind: 'own', state: record.state, ...due, ...message, ...trace };
  throw new Error(`workflow job ${record.key.jobId}: waiting record in state ${record.state} without a due time`);
}
