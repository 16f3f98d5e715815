import { type KeySlots, type SchedulerSettings, tombstoneExpiresAtMs } from '../model/index.js';
import type { Debounces } from '../debounce/index.js';
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

/** What settling a row needs. */
export interface SettleDeps {
  readonly store: OperationStore;
  readonly settings: SchedulerSettings;
  readonly keySlots?: Pick<KeySlots, 'holds'>;
  /** Debounced jobs' generations: such a job is cancelled (and counted) through its generation. Absent: its rows count as not cancellable. */
  readonly debounces?: Pick<Debounces, 'generation' | 'markForOperation'>;
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
export async function settle(deps: SettleDeps, head: OperationHead, claimer: string, seen: SeenRow, nowMs: number): Promise<Settled> {
  const { store, settings } = deps;
  if (seen.key.jobId.split('.')[4] === 'b' && deps.debounces)
    return settleDebounced({ ...deps, debounces: deps.debounces }, head, claimer, seen, nowMs);
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

/**
 * A debounced job's row (docs/flow-control.md#debounce). The job, not the row, is what counts: its
 * rows share one generation item (a replace writes the next row before the old one goes), so the
 * generation carries the operation's mark, naming the row that counted it (`|<dueMs>`): a retried
 * part counts that row again, and the job's other rows count nothing. A job first submitted after
 * the request is not the operation's.
 */
async function settleDebounced(
  deps: SettleDeps & { readonly debounces: NonNullable<SettleDeps['debounces']> },
  head: OperationHead,
  claimer: string,
  seen: SeenRow,
  nowMs: number,
): Promise<Settled> {
  const { debounces, store, settings } = deps;
  const jobId = seen.key.jobId;
  const mine = (how: 'c' | 'q') => `${how}|${claimer}|${seen.key.dueMs}`;
  for (let tries = 0; tries < MAX_SETTLE_TRIES; tries++) {
    const gen = await debounces.generation(jobId);
    if (!gen || gen.tenant !== head.tenant) return 'none';
    const mark = gen.marks?.[head.operationId];
    if (mark !== undefined) return mark === mine('c') ? 'cancelled' : mark === mine('q') ? 'alreadyQueued' : 'none';
    if (gen.firstMs >= head.createdAtMs || gen.state === 'CANCELLED') return 'none';
    if (gen.state === 'OPEN') {
      // The mark names the job's current row, which takes its tombstone (the generation decided;
      // the tombstone serves listings and a retried part, which meets it marked).
      const current = `c|${claimer}|${gen.dueMs}`;
      if (await debounces.markForOperation(jobId, head.operationId, current, 'cancel', head.createdAtMs)) {
        const row = { ...seen.key, dueMs: gen.dueMs };
        await store.cancelRow(row, head, current, tombstoneExpiresAtMs(gen.dueMs, nowMs, settings)).catch(() => false);
        // Met through a replaced row: the current one counts it when the pass reaches it (later in
        // the shard's order), or this one does when the pass is past it.
        return gen.dueMs > seen.key.dueMs ? 'none' : 'cancelled';
      }
    } else if (await debounces.markForOperation(jobId, head.operationId, mine('q'), 'count', head.createdAtMs)) return 'alreadyQueued';
  }
  throw new Error(`job ${jobId} changed state under operation ${head.operationId} ${MAX_SETTLE_TRIES} times: its part is retried`);
}
