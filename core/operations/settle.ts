import { type KeySlots, type SchedulerSettings, tombstoneExpiresAtMs } from '../model/index.js';
import type { OperationCounts, OperationHead, OperationStore, SeenRow } from './ports.js';

/** How a matching job counts for an operation; `none` when another part counts it, or it is not pending. */
export type Settled = keyof OperationCounts | 'none';

/**
 * Whether a bulk cancel may cancel the job: a table job submitted cancellable (id path `t`). A
 * `cancellable: false` job (`u`) is counted, not cancelled; so is a workflow's job (`w`): its
 * children wait for it, so it is cancelled through its workflow (DELETE of the job or workflow).
 */
export function bulkCancellable(jobId: string): boolean {
  return jobId.split('.')[4] === 't';
}

/** How many times a row that changed under a claim is looked at again before the part fails (and is retried). */
const MAX_SETTLE_TRIES = 4;

/**
 * Settles one matching row for `claimer` (a shard's pass, `s<shard>`, or an inbound message's
 * ingest, `m<messageId>`): cancels it if it is still SCHEDULED (or DEAD: a job in the inbound
 * dead-letter queue, which a redrive then meets cancelled), else marks it counted. The mark
 * written with the change makes the count exact however many times a part is retried, and
 * whichever of the pass and ingest reaches the row first: the row counts for the claimer whose
 * mark it carries. `seen` is the row as read, or a guess (ingest tries the cancel first).
 */
export async function settle(
  deps: { readonly store: OperationStore; readonly settings: SchedulerSettings; readonly keySlots?: Pick<KeySlots, 'holds'> },
  head: OperationHead,
  claimer: string,
  seen: SeenRow,
  nowMs: number,
): Promise<Settled> {
  const { store, settings } = deps;
  const cancellable = bulkCancellable(seen.key.jobId);
  const counted = cancellable ? 'alreadyQueued' : 'notCancellable';
  let row: SeenRow | undefined = seen;
  for (let tries = 0; tries < MAX_SETTLE_TRIES && row; tries++) {
    if (row.mark !== undefined) {
      if (row.mark === `c|${claimer}`) return 'cancelled';
      return row.mark === `q|${claimer}` ? counted : 'none';
    }
    const pending = row.state === 'SCHEDULED' || row.state === 'ACQUIRED' || row.state === 'DEAD';
    if (!pending) return 'none';
    if (cancellable && row.state !== 'ACQUIRED') {
      const expiresAt = tombstoneExpiresAtMs(row.key.dueMs, nowMs, settings);
      if (await store.cancelRow(row.key, head, `c|${claimer}`, expiresAt)) return 'cancelled';
    } else if (cancellable && (await waitingForSlot(deps, head, row))) {
      // A keyed row waiting for its key's slot is not being sent: cancelled on the lease read.
      const expiresAt = tombstoneExpiresAtMs(row.key.dueMs, nowMs, settings);
      if (await store.cancelWaitingRow(row.key, head, `c|${claimer}`, row.leaseUntil!, expiresAt)) return 'cancelled';
    } else if (await store.markRow(row.key, head, `q|${claimer}`, row.state)) return counted;
    row = await store.getRow(row.key, head);
  }
  if (!row) return 'none';
  throw new Error(`job ${seen.key.jobId} changed state under operation ${head.operationId} ${MAX_SETTLE_TRIES} times: its part is retried`);
}

/** Whether `row` is a keyed row a dispatcher holds while it waits for its key's slot (it holds none). */
async function waitingForSlot(deps: { readonly keySlots?: Pick<KeySlots, 'holds'> }, head: OperationHead, row: SeenRow): Promise<boolean> {
  if (!deps.keySlots || row.state !== 'ACQUIRED' || row.concurrencyKey === undefined || row.leaseUntil === undefined) return false;
  return !(await deps.keySlots.holds(head.tenant, row.concurrencyKey, row.key.jobId));
}

/** `counts` plus one job settled as `how`. */
export function tally(counts: OperationCounts, how: Settled): OperationCounts {
  return how === 'none' ? counts : { ...counts, [how]: counts[how] + 1 };
}
