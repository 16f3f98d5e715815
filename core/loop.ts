import { sleep } from './backoff';
import { shardsOfGroup } from './config';
import { dispatchRound, type DispatchDeps, type RoundReport } from './dispatch';

/** Input of one dispatch step (the `dispatch` Lambda's event, one Map iteration's task). */
export interface DispatchStepInput {
  /** Shard group to dispatch. */
  readonly group: number;
  /** The tick execution that owns this step (its name or ARN). */
  readonly owner: string;
  /** When that execution started, epoch ms: a newer execution takes the group over. */
  readonly ownerStartMs: number;
  /** The execution dispatches this group until then, epoch ms. */
  readonly untilMs: number;
  /** Wait after an idle step, seconds (the state machine's Wait state reads it). */
  readonly idleWaitSeconds?: number;
}

export interface DispatchStepResult extends Omit<RoundReport, 'latenessMs'> {
  readonly group: number;
  /** The group lease was not ours (a newer execution has the group): stop this iteration. */
  readonly lostGroup: boolean;
  /** Stop this group's loop: the group was lost or the execution's time is up. */
  readonly done: boolean;
  /** Passed through for the next step. */
  readonly untilMs: number;
  readonly owner: string;
  readonly ownerStartMs: number;
  readonly idleWaitSeconds: number;
  /** Lateness summary of the rows sent. */
  readonly lateness: { count: number; p50Ms: number; p95Ms: number; p99Ms: number; maxMs: number };
}

/** How long a group lease lasts without renewal. */
export const GROUP_LEASE_MS = 15_000;
/** Longest single step (one Lambda invocation). */
export const MAX_STEP_MS = 60_000;
/** A group loop stops this close to its execution's end. */
const END_MARGIN_MS = 1_000;

export interface StepOptions {
  /** The step returns by then (e.g. the Lambda's remaining time); at most {@link MAX_STEP_MS} and `untilMs`. */
  readonly deadlineMs?: number;
  readonly signal?: AbortSignal;
  /** Receives the lateness of every row sent (for metrics). */
  readonly onLateness?: (latenessMs: readonly number[]) => void;
}

/**
 * One dispatch step: take (or renew) the group lease, then run a round over the group's shards,
 * renewing the lease every few seconds. This is what the `dispatch` Lambda does per invocation.
 */
export async function dispatchStep(deps: DispatchDeps, input: DispatchStepInput, opts: StepOptions = {}): Promise<DispatchStepResult> {
  const { store, clock, settings } = deps;
  const pass = {
    group: input.group,
    owner: input.owner,
    ownerStartMs: input.ownerStartMs,
    untilMs: input.untilMs,
    idleWaitSeconds: input.idleWaitSeconds ?? idleWaitSeconds(settings.lookaheadMs),
  };
  const start = clock.now();
  if (start >= input.untilMs - END_MARGIN_MS) {
    return { ...emptyReport(), ...pass, lostGroup: false, done: true, lateness: summarize([]) };
  }
  const takeLease = () => {
    const now = clock.now();
    return store.takeGroupLease(input.group, input.owner, input.ownerStartMs, now, now + GROUP_LEASE_MS);
  };
  if (!(await takeLease())) {
    return { ...emptyReport(), ...pass, lostGroup: true, done: true, lateness: summarize([]) };
  }
  const { latenessMs, ...report } = await dispatchRound(deps, {
    shards: shardsOfGroup(input.group, settings),
    deadlineMs: Math.min(input.untilMs, start + MAX_STEP_MS, opts.deadlineMs ?? Number.POSITIVE_INFINITY),
    stillOwner: takeLease,
    signal: opts.signal,
  });
  opts.onLateness?.(latenessMs);
  const done = report.lostGroup || clock.now() >= input.untilMs - END_MARGIN_MS;
  return { ...report, ...pass, done, lateness: summarize(latenessMs) };
}

/**
 * After a step found nothing due within the lookahead, the next look waits whole seconds (a Wait
 * state's `SecondsPath` takes integers): the lookahead less 2 s, at least 1. The 2 s are the
 * margin for a row that reaches the table after the look: jobs go through the table only when due
 * more than the lookahead ahead, and ingest's batching window (1 s) plus its work delay them.
 */
export function idleWaitSeconds(lookaheadMs: number): number {
  return Math.max(1, Math.floor(lookaheadMs / 1000) - 2);
}

/**
 * The tick's loop for one group, in process: dispatch steps until `untilMs`, waiting
 * `lookahead − 2 s` after an idle step. The state machine runs the same loop with a Choice and a
 * Wait state around the `dispatch` task; the local stack and tests run this one.
 */
export async function dispatchLoop(
  deps: DispatchDeps,
  opts: { group: number; owner: string; ownerStartMs: number; untilMs: number; signal?: AbortSignal; onStep?: (r: DispatchStepResult) => void },
): Promise<void> {
  const input: DispatchStepInput = { group: opts.group, owner: opts.owner, ownerStartMs: opts.ownerStartMs, untilMs: opts.untilMs };
  while (!opts.signal?.aborted) {
    const result = await dispatchStep(deps, input, { signal: opts.signal });
    opts.onStep?.(result);
    if (result.done) return;
    if (result.idle) await sleep(Math.min(result.idleWaitSeconds * 1000, opts.untilMs - deps.clock.now()), opts.signal);
  }
}

/** Percentiles (nearest rank) of a list of lateness values. */
export function summarize(values: readonly number[]): DispatchStepResult['lateness'] {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);
  return { count: sorted.length, p50Ms: at(50), p95Ms: at(95), p99Ms: at(99), maxMs: sorted.length ? sorted[sorted.length - 1]! : 0 };
}

function emptyReport(): Omit<RoundReport, 'latenessMs' | 'lostGroup'> {
  return {
    acquired: 0, recovered: 0, conflicts: 0, tombstonesMoved: 0, queries: 0, itemsRead: 0, throttled: 0, errors: 0,
    idle: false, abandoned: 0, durationMs: 0, sent: 0, deleted: 0, leaseLost: 0, renewed: 0, sendRetries: 0,
  };
}
