import type { HistoryStore } from '../jobs/index.js';
import { AlreadyQueuedError, type Clock, type JobIdCodec, type RowKey, type SchedulerSettings, type TenantRecord } from '../model/index.js';
import { limiter, sleep } from '../util/index.js';
import { heldNow, place } from '../submit/index.js';
import { handOff, type HandOffDeps, HandOffError, type ReadyJob, type Route, sendMoved, STALE_HANDOFF_MS } from './handOff.js';
import type { JobEnd, RecordedEnd, WaitingChildren, WaitingRecord, WorkflowJobSpec, WorkflowStore } from './ports.js';
import { decideChild, dueAfter } from './release.js';

/**
 * A workflow job ended (issue #25): its outcome `SUCCEEDED` or `DEAD` reported, or its cancel.
 * Its children learn of it, and each child whose parents have all ended as its policy needs is
 * handed over (or, a parent failed under `onParentFailure: "cancel"`, cancelled, and its own
 * children learn of that in turn, level by level).
 *
 * Every step is a conditional write whose first success stands (the job's own end, each parent's
 * end on each child, each child's move), so that running this again for the same report, after a
 * crash at any instruction or concurrently, reaches the same state and completes what was left:
 * the caller answers the report only once this returned, and the reporter retries until it does.
 */

export interface ProgressDeps {
  readonly store: Pick<WorkflowStore, 'getSpec' | 'getSpecs' | 'getWorkflow'>;
  readonly waiting: WaitingChildren;
  readonly codec: JobIdCodec;
  readonly settings: Pick<SchedulerSettings, 'lookaheadMs'>;
  readonly clock: Clock;
  readonly handOff: Omit<HandOffDeps, 'waiting' | 'clock' | 'settings'>;
  /** The parents' outcome records, for their `result`s in a child's summary. Absent: no results. */
  readonly outcomes?: Pick<HistoryStore, 'getOutcome'>;
}

/**
 * Room in a delivered message for the parents' results: SQS's 256 KiB, less the child's payload
 * and what the rest of the body and its attributes take (ids, keys, outcomes: under 120 bytes a
 * parent, counted apart).
 */
const MESSAGE_BYTES = 256 * 1024;
const ENVELOPE_BYTES = 2 * 1024;

/** Children told at once of a parent's end (a parent of 1,000 children). */
const CHILDREN_IN_FLIGHT = 32;

/**
 * Records that job `jobId` of `tenant` ended as `reported` (unless an end is recorded already:
 * the first stands) and carries it to its descendants. Does nothing for a job that is not a
 * workflow's, nor for one whose end was carried on already (a repeated report).
 *
 * `result`: the job's result as just stored (JSON text; undefined: none), so that a child whose only
 * parent it is needs no read of the parents' records for its summary.
 *
 * @throws when a write or a hand-over failed: run it again (the same report) to complete it.
 */
export async function jobEnded(deps: ProgressDeps, tenant: TenantRecord, jobId: string, reported: JobEnd, result?: string): Promise<void> {
  const key = keyOfId(deps.codec, jobId);
  // Its spec is read meanwhile: most reports go on to its children.
  const [recorded, first] = await Promise.all([deps.waiting.recordEnd(key, reported, result, deps.clock.now()), deps.store.getSpec(key)]);
  if (!recorded || recorded.childrenTold) return;
  let level: Ended[] = [{ key, end: recorded.end, ...(result !== undefined ? { result } : {}), recorded }];
  let ids: JobIds | undefined;
  while (level.length > 0) {
    const next: Ended[] = [];
    for (const ended of level) {
      const spec = ended.key === key ? first : await deps.store.getSpec(ended.key);
      if (!spec || spec.children.length === 0) continue;
      ids ??= await jobIds(deps, tenant.name, spec);
      // Every child told, every one made due sent: noted, so that a repeated report of it stops
      // at its end and sends none again. A report that handed no child over needs no note: its
      // repeat makes each of its writes again, each conditional, and sends nothing (a child
      // another parent's report handed over is that report's to send: ReadyJob.releasedBy).
      if (await tellChildren(deps, tenant, ids, spec, ended, next)) await deps.waiting.markChildrenTold(ended.key);
    }
    level = next;
  }
}

/**
 * A job that ended, its end carried on to its children: its result when in hand, and, for the job
 * a report or cancel ended, how its end was recorded (whether by this call: see {@link tellChildren}).
 */
interface Ended {
  readonly key: RowKey;
  readonly end: JobEnd;
  readonly result?: string;
  readonly recorded?: RecordedEnd;
}

/**
 * Tells every child of `parent` that it ended, their specs read a hundred a request. The others
 * record the end, then decide ({@link tellChild}); a child whose only parent it is and that
 * succeeded is released by that parent's end:
 *
 * - when this call recorded the end, that write was the release: a cancel of such a child
 *   registers on its parent's record while the parent has not ended ({@link cancelWhileWaiting}),
 *   so the end's write read the children held back, and every other one is sent at once, its
 *   record moved meanwhile (its parent's end and its move in one write), not first;
 * - when an earlier or concurrent call recorded it and is releasing them still (within
 *   {@link STALE_HANDOFF_MS} of its start, no note yet that they were all told), this one fails
 *   for its caller to try again later (sending them as well would deliver them twice);
 * - otherwise (a release that died, or ends recorded before releases were stamped) each is moved,
 *   then sent, as any hand-over ({@link moveWithEnd}).
 *
 * Returns once every child made due was handed over: whether any was.
 */
async function tellChildren(
  deps: ProgressDeps,
  tenant: TenantRecord,
  ids: JobIds,
  parent: WorkflowJobSpec,
  ended: Ended,
  next: Ended[],
): Promise<boolean> {
  const keys = parent.children.map((c) => keyOfId(deps.codec, ids.get(c.jobKey)!));
  const specs = await deps.store.getSpecs(keys);
  const now = deps.clock.now();
  const released = (child: WorkflowJobSpec | undefined) =>
    child?.release && child.parents.length === 1 && ended.end.outcome === 'SUCCEEDED'
      ? { spec: child, dueMs: dueAfter(child.release.timing, ended.end.atMs) }
      : undefined;
  const quick = keys.map((k) => released(specs.get(k.jobId)));
  const due = quick.filter((q) => q !== undefined).map((q) => ({ dueMs: q.dueMs, cancellable: q.spec.cancellable }));
  const release = ended.recorded;
  if (due.length > 0 && release && !release.recordedNow && !release.childrenTold) {
    const since = release.releasingAtMs;
    if (since !== undefined && now - since <= STALE_HANDOFF_MS)
      throw new HandOffError(`the children of ${ended.key.jobId} are being released by another request: report again shortly`);
  }
  const sendFirst = release?.recordedNow === true;
  const held = await heldNow(deps.handOff.controls, tenant.name, due, now, deps.settings.lookaheadMs);
  const ready = handOverStream(deps, tenant, held);
  // Released by this end: every one sent now, before any of their writes.
  const after = parent.children.map((c, i) => {
    const q = quick[i];
    return q && sendFirst ? releaseNow(deps, ids, q, c.index, ended, now, held, ready.addMoved, next) : undefined;
  });
  const limit = limiter(CHILDREN_IN_FLIGHT);
  await Promise.all(
    parent.children.map((c, i) =>
      limit(async () => {
        const spec = specs.get(keys[i]!.jobId);
        // No spec: no child was stored at that key (its records are written before any parent is handed over).
        if (!spec) return;
        const q = quick[i];
        const then = after[i];
        if (then) return then();
        if (q && (await moveWithEnd(deps, ids, q, c.index, ended, now, held, ready.addMoved))) return;
        await tellChild(deps, ids, spec, c, ended, ready.add, next);
      }),
    ),
  );
  await ready.done();
  return ready.handed();
}

/**
 * A child of one parent whose end this call recorded: sent now (queued for sending, at once)
 * unless its cancel was registered on the parent first. Returns what follows, to run with its
 * siblings': its record moved (its parent's end and its move, one write), or, held back, its
 * cancel completed (it may have died before the child's own record said so) and carried on.
 */
function releaseNow(
  deps: ProgressDeps,
  ids: JobIds,
  child: { readonly spec: WorkflowJobSpec; readonly dueMs: number },
  index: number,
  ended: Ended,
  now: number,
  held: boolean,
  send: (route: Route) => void,
  next: Ended[],
): () => Promise<void> {
  const { spec, dueMs } = child;
  if (ended.recorded?.heldBack.has(spec.key.jobId))
    return async () => {
      await deps.waiting.cancelWaiting(spec.key, HELD_BACK_MESSAGE, ended.end.atMs);
      await carryCancelOn(deps, spec.key, ended.end.atMs, next);
    };
  const route = onlyParentRoute(deps, ids, child, ended, now, held);
  send(route);
  // False only when an earlier attempt of this release moved it: nothing else moves it now.
  return async () =>
    void (await deps.waiting.moveOnParentEnd(
      spec.key,
      index,
      ended.end.atMs,
      route.direct ? 'QUEUING' : 'RELEASING',
      dueMs,
      route.direct ? now : undefined,
    ));
}

/** Where a child whose only parent `ended` goes (straight to its queue, or the table), with that parent in its summary. */
function onlyParentRoute(
  deps: ProgressDeps,
  ids: JobIds,
  { spec, dueMs }: { readonly spec: WorkflowJobSpec; readonly dueMs: number },
  ended: Ended,
  now: number,
  held: boolean,
): Route {
  // A keyed job goes through the table, always (docs/flow-control.md).
  const direct =
    place({ dueMs, cancellable: spec.cancellable }, now, deps.settings.lookaheadMs, held || spec.concurrency !== undefined).path === 'd';
  const parentId = ended.key.jobId;
  const results = new Map(ended.result !== undefined ? [[parentId, ended.result]] : []);
  const parents = summary(spec, ids, new Map([[parentId, { end: ended.end }]]), results);
  return { job: { spec, dueMs, parents }, direct, dueMs };
}

/** Why a child is cancelled whose cancel registered on its parent and died before its record said so. */
const HELD_BACK_MESSAGE = 'cancelled (DELETE of the job)';

/**
 * A child of one parent that succeeded: its parent's end recorded and its record moved in one
 * conditional write, then queued for sending. False when the write found the record moved or the
 * end recorded (a repeated report, or a cancel first): {@link tellChild} then finds out what.
 */
async function moveWithEnd(
  deps: ProgressDeps,
  ids: JobIds,
  child: { readonly spec: WorkflowJobSpec; readonly dueMs: number },
  index: number,
  ended: Ended,
  now: number,
  held: boolean,
  send: (route: Route) => void,
): Promise<boolean> {
  const route = onlyParentRoute(deps, ids, child, ended, now, held);
  const to = route.direct ? 'QUEUING' : 'RELEASING';
  if (!(await deps.waiting.moveOnParentEnd(child.spec.key, index, ended.end.atMs, to, child.dueMs, route.direct ? now : undefined)))
    return false;
  send(route);
  return true;
}

/** Children handed over together: one SendMessageBatch's worth. */
const HAND_OVER_BATCH = 10;

/**
 * Hands children over as they become ready: those due within the lookahead (straight to their
 * queue) ten at a time, while their siblings are still being told, so that the first children of
 * a fan-out of 1,000 do not wait for the last; those due later all together at the end (packed
 * into as few inbound messages as they fill). `add` takes a child whose record is still to move
 * ({@link handOff}); `addMoved` one whose record moved, with the tenant's controls read as
 * `held`. `done` hands over the rest and waits for every hand-over; it throws the first failure
 * (the report is answered `Throttled`, and its repeat completes what was left). `handed`: whether
 * any child was taken.
 */
function handOverStream(
  deps: ProgressDeps,
  tenant: TenantRecord,
  held: boolean,
): { add: (job: ReadyJob) => void; addMoved: (route: Route) => void; done: () => Promise<void>; handed: () => boolean } {
  const handOffDeps = { ...deps.handOff, waiting: deps.waiting, clock: deps.clock, settings: deps.settings };
  const toMove = batches<ReadyJob>((jobs) => handOff(handOffDeps, tenant, jobs));
  const moved = batches<Route>((routes) => sendMoved(handOffDeps, tenant, routes, held));
  const soon = (dueMs: number) => dueMs <= deps.clock.now() + deps.settings.lookaheadMs;
  let handed = false;
  return {
    add: (job) => {
      handed = true;
      toMove.add(job, soon(job.dueMs));
    },
    addMoved: (route) => {
      handed = true;
      moved.add(route, route.direct);
    },
    handed: () => handed,
    done: async () => {
      const failed = (await Promise.allSettled([toMove.done(), moved.done()])).find(
        (r): r is PromiseRejectedResult => r.status === 'rejected',
      );
      if (failed) throw failed.reason;
    },
  };
}

/**
 * Items sent `HAND_OVER_BATCH` at a time as they come (`now`), or all together at the end; `done`
 * sends the rest and throws the first failure once every send ended.
 */
function batches<T>(send: (items: T[]) => Promise<unknown>): { add: (item: T, now: boolean) => void; done: () => Promise<void> } {
  let soon: T[] = [];
  const later: T[] = [];
  const started: Promise<unknown>[] = [];
  const flush = (items: T[]) => void (items.length > 0 && started.push(send(items)));
  return {
    add: (item, now) => {
      if (!now) return void later.push(item);
      soon.push(item);
      if (soon.length < HAND_OVER_BATCH) return;
      flush(soon);
      soon = [];
    },
    done: async () => {
      flush(soon);
      flush(later);
      const failed = (await Promise.allSettled(started)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}

/**
 * A child just cancelled (or found cancelled) joins `next`, the jobs whose end goes on down,
 * unless its children were all told of it already: a retry, or another report, finds it cancelled
 * and carries the end on again only when that may not have completed (telling them twice would
 * hand a child that runs on failure over twice).
 */
async function carryCancelOn(deps: ProgressDeps, key: RowKey, atMs: number, next: Ended[]): Promise<void> {
  const record = await deps.waiting.get(key);
  if (record?.state !== 'CANCELLED' || record.childrenTold) return;
  next.push({ key, end: record.end ?? { outcome: 'CANCELLED', atMs } });
}

/**
 * The due time of job `key` when it is a child of one parent whose success released it (its
 * record may not have moved yet: such a release sends before it writes, {@link tellChildren});
 * undefined for any other job, or one its cancel held back.
 */
export async function releasedDueMs(deps: ProgressDeps, key: RowKey): Promise<number | undefined> {
  const spec = await deps.store.getSpec(key);
  if (!spec?.release || spec.parents.length !== 1) return undefined;
  const ids = await jobIds(deps, spec.tenant, spec);
  const parent = await deps.waiting.get(keyOfId(deps.codec, ids.get(spec.parents[0]!)!));
  if (parent?.end?.outcome !== 'SUCCEEDED' || parent.heldBack?.has(key.jobId)) return undefined;
  return dueAfter(spec.release.timing, parent.end.atMs);
}

/** How long a cancel that lost its race to its parent's end waits for that release to move its record. */
const RELEASE_WAIT_MS = 2_000;

/**
 * Cancels job `key` of `tenant` while it waits for its parents (`message` says why), unless its
 * release got there first: false then, once its record has moved (the caller goes where it went).
 * A child of one parent is released by that parent's end, one write that sends it before its
 * record moves, so its cancel registers on the parent first ({@link WaitingChildren.holdBack}),
 * which only succeeds while the parent has not ended; the parent's end then never sends it.
 *
 * @throws AlreadyQueuedError when its parent ended and its release has not moved its record
 *   within {@link RELEASE_WAIT_MS} (sent, or owed by a report that will be repeated)
 */
export async function cancelWhileWaiting(deps: ProgressDeps, tenant: string, key: RowKey, message: string, atMs: number): Promise<boolean> {
  const spec = await deps.store.getSpec(key);
  if (spec?.release && spec.parents.length === 1) {
    const ids = await jobIds(deps, tenant, spec);
    const parent = keyOfId(deps.codec, ids.get(spec.parents[0]!)!);
    if (!(await deps.waiting.holdBack(parent, key.jobId))) {
      for (let waited = 0; waited < RELEASE_WAIT_MS; waited += 50) {
        if ((await deps.waiting.get(key))?.state !== 'WAITING') return false;
        await sleep(50);
      }
      throw new AlreadyQueuedError('its parent ended and the job is being handed to its queue: it can no longer be cancelled');
    }
  }
  return deps.waiting.cancelWaiting(key, message, atMs);
}

/**
 * One child learns that its parent `parent` ended: waits on, is cancelled (and joins `next`, the
 * jobs whose end goes on down), or is ready (handed to `ready`) with its parents' summary.
 */
async function tellChild(
  deps: ProgressDeps,
  ids: JobIds,
  spec: WorkflowJobSpec,
  child: { readonly jobKey: string; readonly index: number },
  ended: Ended,
  ready: (job: ReadyJob) => void,
  next: Ended[],
): Promise<void> {
  const { end } = ended;
  const key = spec.key;
  const bucketed = spec.endsPerItem !== undefined ? { perItem: spec.endsPerItem, parents: spec.parents.length } : undefined;
  const record = await deps.waiting.recordParentEnd(key, child.index, end.outcome === 'SUCCEEDED', end.atMs, bucketed);
  if (!record || record === 'waiting') return;
  const decision = decideChild(record);
  if (decision.kind === 'wait') return;
  // A child of one parent: that parent is the one that ended (its end and result are in hand).
  const only = spec.parents.length === 1 ? ids.get(spec.parents[0]!)! : undefined;
  const parents: ReadonlyMap<string, Pick<WaitingRecord, 'end' | 'result' | 'resultKept'>> = only !== undefined
    ? new Map([[only, { end }]])
    : await deps.waiting.getMany(spec.parents.map((p) => keyOfId(deps.codec, ids.get(p)!)));
  if (decision.kind === 'cancel') {
    const failed = spec.parents[decision.failedParent]!;
    const how = parents.get(ids.get(failed)!)?.end?.outcome === 'CANCELLED' ? 'was cancelled' : 'failed (DEAD)';
    const message = `cancelled: its parent '${failed}' ${how} (onParentFailure "cancel")`;
    await deps.waiting.cancelWaiting(key, message, end.atMs);
    await carryCancelOn(deps, key, end.atMs, next);
    return;
  }
  const results =
    only !== undefined
      ? new Map(ended.result !== undefined && end.outcome !== 'CANCELLED' ? [[only, ended.result]] : [])
      : await resultsOf(deps, spec, ids, parents);
  ready({ spec, dueMs: decision.dueMs, parents: summary(spec, ids, parents, results), releasedBy: child.index });
}

/**
 * The parents' results (JSON text), by job id: kept with each parent's end, or, for an end recorded
 * before results were kept there, read from its outcome record (none without an outcome store).
 */
async function resultsOf(
  deps: ProgressDeps,
  spec: WorkflowJobSpec,
  ids: JobIds,
  parents: ReadonlyMap<string, Pick<WaitingRecord, 'end' | 'result' | 'resultKept'>>,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const limit = limiter(CHILDREN_IN_FLIGHT);
  await Promise.all(
    spec.parents.map((key) =>
      limit(async () => {
        const jobId = ids.get(key)!;
        const parent = parents.get(jobId);
        if (parent?.end?.outcome === 'CANCELLED') return;
        const result = parent?.resultKept ? parent.result : (await deps.outcomes?.getOutcome(keyOfId(deps.codec, jobId)))?.result;
        if (result !== undefined) out.set(jobId, result);
      }),
    ),
  );
  return out;
}

/**
 * The `parents` a child's delivery carries: each parent's key, id, outcome and `result` (its JSON
 * text, spliced in), in `after`'s order. Results are taken in that order while the message stays
 * within SQS's limit; a result that does not fit is `"resultOmitted": true` (GET of the parent
 * shows it).
 */
function summary(
  spec: WorkflowJobSpec,
  ids: JobIds,
  parents: ReadonlyMap<string, Pick<WaitingRecord, 'end'>>,
  results: ReadonlyMap<string, string>,
): string {
  const heads = spec.parents.map((key) => {
    const jobId = ids.get(key)!;
    const outcome = parents.get(jobId)?.end?.outcome ?? 'DEAD';
    return { jobId, head: `{"key":${JSON.stringify(key)},"jobId":${JSON.stringify(jobId)},"outcome":"${outcome}"` };
  });
  let room = MESSAGE_BYTES - ENVELOPE_BYTES - Buffer.byteLength(spec.payload) - heads.reduce((n, h) => n + h.head.length + 24, 0);
  const entries = heads.map(({ jobId, head }) => {
    const result = results.get(jobId);
    if (result === undefined) return `${head}}`;
    const bytes = Buffer.byteLength(result) + 10;
    if (bytes > room) return `${head},"resultOmitted":true}`;
    room -= bytes;
    return `${head},"result":${result}}`;
  });
  return `[${entries.join(',')}]`;
}

/** A workflow's job ids by key. */
interface JobIds {
  get(key: string): string | undefined;
}

/**
 * The ids of `spec`'s workflow's jobs: derived from their keys (no read), or, for a spec written
 * before specs kept their shard count, read from the workflow record.
 */
async function jobIds(deps: ProgressDeps, tenant: string, spec: WorkflowJobSpec): Promise<JobIds> {
  const parsed = spec.shardCount !== undefined ? deps.codec.parseWorkflowId(spec.workflowId) : undefined;
  if (parsed && spec.shardCount !== undefined) {
    const shardCount = spec.shardCount;
    return { get: (key) => deps.codec.workflowJobId(parsed, key, shardCount) };
  }
  const workflow = await deps.store.getWorkflow(tenant, spec.workflowId);
  if (!workflow) throw new Error(`workflow ${spec.workflowId} of job ${spec.key.jobId} has no record`);
  return workflow.jobs;
}

/** A workflow job's key in the table (its waiting record's and spec's): its id's shard and time field. */
export function keyOfId(codec: JobIdCodec, jobId: string): RowKey {
  const id = codec.parse(jobId);
  return { shard: id.shard, dueMs: id.dueMs, jobId };
}
