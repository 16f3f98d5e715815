import { DIRECT_DELIVERY_SKEW_MS, type WorkflowOutcomes } from '../jobs/index.js';
import { isoMs, type JobLookups, type RowKey } from '../model/index.js';
import { jobEnded, type ProgressDeps, releasedDueMs } from './progress.js';

/**
 * The outcomes route's side of workflows (core/jobs' {@link WorkflowOutcomes}): whether a
 * workflow job was delivered, read from its waiting record (and, for a job handed to the table,
 * its row), and its end carried on to its children ({@link jobEnded}).
 */

export interface WorkflowOutcomesDeps extends ProgressDeps {
  readonly rows: Pick<JobLookups, 'getRow'>;
  /** How long a workflow job's outcome record is kept at least. */
  readonly retentionMs: number;
}

/**
 * How long a workflow job's outcome record is kept at least (its children's deliveries carry its
 * `result`, read when their last parent ends): 30 days.
 */
export const WORKFLOW_OUTCOME_RETENTION_MS = 30 * 86_400_000;

export function workflowOutcomes(deps: WorkflowOutcomesDeps): WorkflowOutcomes {
  return {
    retentionMs: deps.retentionMs,
    async undelivered(key: RowKey, nowMs: number): Promise<string | undefined> {
      const record = await deps.waiting.get(key);
      if (!record) return 'not a job of any stored workflow';
      if (record.state === 'WAITING') {
        // Its only parent's success may have sent it already, its record's move still to come.
        const dueMs = await releasedDueMs(deps, key);
        if (dueMs === undefined) return record.state;
        return nowMs < dueMs - DIRECT_DELIVERY_SKEW_MS ? `not due until ${isoMs(dueMs)}` : undefined;
      }
      if (record.state === 'CANCELLED' || record.dueMs === undefined) return record.state;
      if (record.state === 'RELEASING') {
        const row = await deps.rows.getRow({ shard: key.shard, dueMs: record.dueMs, jobId: key.jobId });
        if (row?.state === 'QUEUED' || row?.state === 'ACQUIRED') return undefined;
        if (row) return row.state === 'DEAD' ? 'DEAD_LETTERED' : row.state;
        return nowMs < record.dueMs ? `not due until ${isoMs(record.dueMs)}` : undefined;
      }
      // Handed straight to its queue: delivered by SQS at its due time.
      return nowMs < record.dueMs - DIRECT_DELIVERY_SKEW_MS ? `not due until ${isoMs(record.dueMs)}` : undefined;
    },
    async ended(tenant, jobId, outcome, atMs, result): Promise<void> {
      await jobEnded(deps, tenant, jobId, { outcome, atMs }, result);
    },
  };
}
