import { sleep } from '../util/index.js';
import { type GroupRest, type ShardMarks, shardsOfGroup } from '../model/index.js';
import { dispatchRound, emptyRoundReport, type DispatchDeps, type RoundOptions, type RoundReport } from './round.js';
import { planRests, settleRests, sleepGroups } from './rest.js';
import type { KeyDispatch } from './keyTally.js';
import type { TenantDispatch } from './tenantTally.js';

/** Input of one dispatch step (the `dispatch` Lambda's event, one Map iteration's task). */
export interface DispatchStepInput {
  /** Shard groups to dispatch (the tick packs several into one dispatcher at low load). */
  readonly groups?: readonly number[];
  /** One group: what state machine definitions before packing passed. */
  readonly group?: number;
  /** The tick execution that owns this step (its name or ARN). */
  readonly owner: string;
  /** When that execution started, epoch ms: a newer execution takes the group over. */
  readonly ownerStartMs: number;
  /** The execution dispatches this group until then, epoch ms. */
  readonly untilMs: number;
  /** Wait after an idle step, seconds (the state machine's Wait state reads it). */
  readonly idleWaitSeconds?: number;
}

export interface DispatchStepResult extends Omit<RoundReport, 'latenessMs' | 'byTenant' | 'byKey'> {
  /** The groups still held, for the next step (those lost to a newer execution are dropped). */
  readonly groups: number[];
  /**
   * The one group of an input from an earlier definition (`group`), echoed: an execution that
   * started before a deploy selects `$.group` from the result, and keeps dispatching.
   */
  readonly group?: number;
  /** A group lease was not ours any more (a newer execution took it over). */
  readonly lostGroup: boolean;
  /** Stop this dispatcher's loop: every group was lost, or the execution's time is up. */
  readonly done: boolean;
  /** Passed through for the next step. */
  readonly untilMs: number;
  readonly owner: string;
  readonly ownerStartMs: number;
  readonly idleWaitSeconds: number;
  /** Lateness summary of the rows sent. */
  readonly lateness: { count: number; p50Ms: number; p95Ms: number; p99Ms: number; maxMs: number };
  /** Groups this step let sleep (docs/design-dispatch.md, "Sleep"): dropped from `groups`. */
  readonly slept?: readonly number[];
}

/** How long a group lease lasts without renewal. */
export const GROUP_LEASE_MS = 15_000;
/**
 * Longest single step (one Lambda invocation): Express's 5 minutes. A busy step runs to its
 * execution's `untilMs` (the dispatch Lambda's timeout covers the run), so that an execution
 * dispatches in one step: between two steps, rows falling due would wait for the next step's
 * leases, queries and acquires. Between executions there is no such gap: they overlap.
 */
export const MAX_STEP_MS = 300_000;
/** A group loop stops this close to its execution's end. */
const END_MARGIN_MS = 1_000;

export interface StepOptions {
  /** The step returns by then (e.g. the Lambda's remaining time); at most {@link MAX_STEP_MS} and `untilMs`. */
  readonly deadlineMs?: number;
  readonly signal?: AbortSignal;
  /** Receives the lateness of the rows sent, batch by batch as they are sent (for metrics: current during a long step). */
  readonly onLateness?: (latenessMs: readonly number[]) => void;
  /** Receives what the step did per tenant (for per-tenant metrics), once, when it sent anything or a send failed. */
  readonly onTenants?: (tenants: ReadonlyMap<string, TenantDispatch>) => void;
  /** Per concurrency key, the busiest keys of the step (core/dispatch/keyTally.ts), when any keyed row was dispatched. */
  readonly onKeys?: (keys: readonly KeyDispatch[]) => void;
  /** Caps and page size of the round (defaults otherwise). */
  readonly limits?: Pick<RoundOptions, 'maxHeldRows' | 'maxHeldBytes' | 'pageRows'>;
}

/** Conditional acquires in flight per group a step dispatches. */
const ACQUIRE_CONCURRENCY_PER_GROUP = 32;

/** The groups a step input names, checked: a malformed input is a bug in the caller. */
export function stepGroups(input: Pick<DispatchStepInput, 'groups' | 'group'>, groupCount: number): number[] {
  const groups = input.groups ?? (input.group !== undefined ? [input.group] : []);
  if (
    !Array.isArray(groups) ||
    groups.length === 0 ||
    new Set(groups).size !== groups.length ||
    !groups.every((g) => Number.isInteger(g) && g >= 0 && g < groupCount)
  ) {
    throw new TypeError(
      `a dispatch step needs 'groups': distinct integers from 0 to ${groupCount - 1}, got ${JSON.stringify(input.groups ?? input.group)}`,
    );
  }
  return [...groups];
}

/**
 * One dispatch step: take (or renew) the leases of its groups, then run one round over the
 * shards of the groups it holds, renewing the leases every few seconds. This is what the
 * `dispatch` Lambda does per invocation. A group whose lease a newer execution took is dropped;
 * the round then ends and the next step goes on with the others.
 */
export async function dispatchStep(deps: DispatchDeps, input: DispatchStepInput, opts: StepOptions = {}): Promise<DispatchStepResult> {
  const { store, clock, settings } = deps;
  const wanted = stepGroups(input, settings.groupCount);
  const pass = {
    ...(input.groups === undefined && input.group !== undefined ? { group: input.group } : {}),
    owner: input.owner,
    ownerStartMs: input.ownerStartMs,
    untilMs: input.untilMs,
    idleWaitSeconds: input.idleWaitSeconds ?? idleWaitSeconds(settings.lookaheadMs),
  };
  const start = clock.now();
  if (start >= input.untilMs - END_MARGIN_MS) {
    return { ...emptyReport(), ...pass, groups: wanted, lostGroup: false, done: true, lateness: summarize([]) };
  }
  /** The marks the lease items held when the step began: kept for the groups its round does not read (at rest). */
  let kept: ShardMarks = {};
  /**
   * Takes or renews the leases of `groups`, storing `marks` (each group its own shards'); returns
   * the groups now held, the marks their lease items hold, and their rests.
   */
  const takeLeases = async (groups: readonly number[], marks?: ShardMarks) => {
    const now = clock.now();
    const res = await Promise.all(
      groups.map((g) =>
        store.takeGroupLease(
          g,
          input.owner,
          input.ownerStartMs,
          now,
          now + GROUP_LEASE_MS,
          marks && pick({ ...kept, ...marks }, shardsOfGroup(g, settings)),
        ),
      ),
    );
    const rests = new Map<number, GroupRest>();
    groups.forEach((g, i) => res[i]!.held && res[i]!.rest && rests.set(g, res[i]!.rest!));
    return {
      held: groups.filter((_, i) => res[i]!.held),
      marks: Object.assign({}, ...res.filter((r) => r.held).map((r) => r.marks)) as ShardMarks,
      rests,
    };
  };
  const taken = await takeLeases(wanted);
  kept = taken.marks;
  let held = taken.held;
  if (held.length === 0) {
    return { ...emptyReport(), ...pass, groups: [], lostGroup: true, done: true, lateness: summarize([]) };
  }
  const lostAtStart = held.length < wanted.length;
  const rests = planRests(deps, held, taken.rests, clock.now());
  if (rests.awake.length === 0) return restingStep(deps, input, held, taken.rests, { ...pass, lostGroup: lostAtStart });
  const { latenessMs, byTenant, byKey, ...report } = await dispatchRound(deps, {
    // Every group held, those at rest too: a round runs until its execution's end, and one that
    // read only the awake groups would pass the others' wake-ups meanwhile (a resting group's rest
    // stands: its rows are read, and sent when due, like any other).
    shards: held.flatMap((g) => shardsOfGroup(g, settings)).sort((a, b) => a - b),
    marks: taken.marks,
    confirmRest: rests.confirming.length > 0,
    deadlineMs: Math.min(input.untilMs, start + MAX_STEP_MS, opts.deadlineMs ?? Number.POSITIVE_INFINITY),
    acquireConcurrency: ACQUIRE_CONCURRENCY_PER_GROUP * held.length,
    ...opts.limits,
    stillOwner: async (marks) => {
      const still = (await takeLeases(held, marks)).held;
      const kept = still.length === held.length;
      held = still;
      return kept;
    },
    signal: opts.signal,
    ...(opts.onLateness ? { onSent: opts.onLateness } : {}),
  });
  // Keep where the round got to, so that the next step (or execution) does not read again what
  // this one read. A round that read nothing has nothing to keep (an idle step writes nothing more).
  if (!report.lostGroup && held.length > 0 && report.itemsRead > 0 && !opts.signal?.aborted) {
    held = (await takeLeases(held, report.marks).catch(() => ({ held }))).held;
  }
  if (!report.lostGroup && !opts.signal?.aborted) {
    const stillHeld = { ...rests, awake: rests.awake.filter((g) => held.includes(g)) };
    await settleRests(deps, input.owner, stillHeld, taken.rests, report).catch((err: unknown) =>
      deps.log?.('dispatch could not settle its groups’ rests', { error: (err as Error).message }),
    );
  }
  if (byTenant && byTenant.tenants.size > 0) opts.onTenants?.(byTenant.tenants);
  if (byKey && byKey.size > 0) opts.onKeys?.(byKey.busiest());
  const lostGroup = lostAtStart || report.lostGroup;
  const done = held.length === 0 || clock.now() >= input.untilMs - END_MARGIN_MS;
  return { ...report, ...pass, groups: held, lostGroup, done, lateness: summarize(latenessMs) };
}

/**
 * A step whose groups all rest: nothing to read until the first wakes (or a writer wakes it).
 * Those resting past the execution's end sleep; when all do, the dispatcher ends.
 */
async function restingStep(
  deps: DispatchDeps,
  input: DispatchStepInput,
  held: readonly number[],
  rests: ReadonlyMap<number, GroupRest>,
  pass: Pick<DispatchStepResult, 'group' | 'owner' | 'ownerStartMs' | 'untilMs' | 'idleWaitSeconds' | 'lostGroup'>,
): Promise<DispatchStepResult> {
  const slept = await sleepGroups(deps, input.owner, input.untilMs, held, rests).catch((err: unknown) => {
    deps.log?.('dispatch could not let its groups sleep', { error: (err as Error).message });
    return [] as number[];
  });
  const groups = held.filter((g) => !slept.includes(g));
  const done = groups.length === 0 || deps.clock.now() >= input.untilMs - END_MARGIN_MS;
  return { ...emptyReport(), idle: true, ...pass, groups, done, lateness: summarize([]), ...(slept.length > 0 ? { slept } : {}) };
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
 * One dispatcher of the tick, in process: dispatch steps over `groups` until `untilMs`, waiting
 * `lookahead − 2 s` after an idle step. The state machine runs the same loop with a Choice and a
 * Wait state around the `dispatch` task; the local stack and tests run this one.
 */
export async function dispatchLoop(
  deps: DispatchDeps,
  opts: {
    groups: readonly number[];
    owner: string;
    ownerStartMs: number;
    untilMs: number;
    signal?: AbortSignal;
    onStep?: (r: DispatchStepResult) => void;
    limits?: StepOptions['limits'];
  },
): Promise<void> {
  let input: DispatchStepInput = { groups: opts.groups, owner: opts.owner, ownerStartMs: opts.ownerStartMs, untilMs: opts.untilMs };
  while (!opts.signal?.aborted) {
    const result = await dispatchStep(deps, input, { signal: opts.signal, limits: opts.limits });
    opts.onStep?.(result);
    if (result.done) return;
    input = { ...input, groups: result.groups };
    if (result.idle) await sleep(Math.min(result.idleWaitSeconds * 1000, opts.untilMs - deps.clock.now()), opts.signal);
  }
}

/** Percentiles (nearest rank) of a list of lateness values. */
export function summarize(values: readonly number[]): DispatchStepResult['lateness'] {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);
  return { count: sorted.length, p50Ms: at(50), p95Ms: at(95), p99Ms: at(99), maxMs: sorted.length ? sorted[sorted.length - 1]! : 0 };
}

/** The marks of `shards` among `marks`. */
function pick(marks: ShardMarks, shards: readonly number[]): ShardMarks {
  const out: ShardMarks = {};
  for (const s of shards) if (marks[s] !== undefined) out[s] = marks[s];
  return out;
}

function emptyReport(): Omit<RoundReport, 'latenessMs' | 'lostGroup'> {
  const { latenessMs: _latenessMs, lostGroup: _lostGroup, ...report } = emptyRoundReport();
  return report;
}
