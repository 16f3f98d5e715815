import type { ParentFailurePolicy, WorkflowTiming } from './request.js';

/**
 * When a job waiting for parents becomes due (issue #25): a pure decision over what its waiting
 * record holds, so that every report of every parent, repeated or retried in any order, reaches
 * the same answer. The record keeps the parents that ended as sets of their indexes and the latest
 * end time, never a counter a retried report could move twice.
 */

/**
 * Parents whose ends a child's record keeps itself; a child of more keeps them this many to an
 * item beside it (its record would otherwise grow by a dozen bytes a parent, and every end
 * recorded rewrites it whole: a write costs 1 KB units of the item's size, so a fan-in of 1,000
 * parents would pay about 6 units an end). Forty ends stay well within one unit.
 */
export const PARENT_ENDS_PER_ITEM = 40;

/** What a waiting child's record says about its parents. */
export interface WaitingChild {
  /** How many parents it has (`after`'s length). */
  readonly parents: number;
  /** Indexes (into `after`) of the parents reported `SUCCEEDED`. */
  readonly succeeded: ReadonlySet<number>;
  /** Indexes of the parents that failed: reported `DEAD`, or cancelled. */
  readonly failed: ReadonlySet<number>;
  /** The latest time a parent ended (its report accepted, or its cancel), epoch ms; 0 when none has. */
  readonly lastEndMs: number;
  readonly timing: WorkflowTiming;
  readonly onParentFailure: ParentFailurePolicy;
}

export type ChildDecision =
  /** Parents still to end: `remaining` of them. */
  | { readonly kind: 'wait'; readonly remaining: number }
  /** `onParentFailure: "cancel"` and a parent failed: the child (and what waits for it) is cancelled. */
  | { readonly kind: 'cancel'; readonly failedParent: number }
  /** Every parent ended as the policy needs: due at `dueMs` (never before the last end). */
  | { readonly kind: 'due'; readonly dueMs: number };

/**
 * The child's fate. With `cancel` (the default), the first failed parent cancels it at once (the
 * lowest index, whatever order the failures came in); otherwise it is due once every parent ended:
 * at the latest of the last end, the last end plus its delay, and its own `runAt`.
 */
export function decideChild(child: WaitingChild): ChildDecision {
  if (child.onParentFailure === 'cancel' && child.failed.size > 0) return { kind: 'cancel', failedParent: Math.min(...child.failed) };
  const ended = new Set([...child.succeeded, ...child.failed]).size;
  if (ended < child.parents) return { kind: 'wait', remaining: child.parents - ended };
  return { kind: 'due', dueMs: dueAfter(child.timing, child.lastEndMs) };
}

/** A child's due time once its last parent ended at `lastEndMs`. */
export function dueAfter(timing: WorkflowTiming, lastEndMs: number): number {
  if (timing.kind === 'at') return Math.max(timing.atMs, lastEndMs);
  if (timing.kind === 'delay') return lastEndMs + timing.delayMs;
  return lastEndMs;
}
