import { randomBytes } from 'node:crypto';
import {
  type Clock,
  isLateRow,
  isoMs,
  type JobIdCodec,
  type JobRequest,
  type JobWrites,
  type RowKey,
  type RowWakes,
  type SchedulerSettings,
  tombstoneExpiresAtMs,
} from '../model/index.js';
import type { TraceContext } from '../model/index.js';
import type { Debounces, Generation } from './ports.js';

export interface DebounceDeps {
  readonly debounces: Debounces;
  /** The job rows: debounced rows are written by submit itself (its reply names the new due time). */
  readonly rows: Pick<JobWrites, 'putJob' | 'putLatePointer'>;
  /** Wakes the group of each row written if it rests (docs/design-dispatch.md, "Rest"). */
  readonly wakes: Pick<RowWakes, 'written'>;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
}

/** A debounced submit's answer: the pending job, its due time, and whether it replaced one (200) or started it (201). */
export interface DebouncedReply {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: 'SCHEDULED';
  readonly debounced: boolean;
}

/** Times a submit reads its key again after another submit (or a dispatcher) changed it first. */
const MAX_TRIES = 8;
/**
 * A pointer whose job has no generation item yet is another submit's first write, or the trace
 * of one that died between its two writes: for this long a submit completes that job (under its
 * id), then starts a job of its own.
 */
const UNFINISHED_POINTER_MS = 60_000;
/** How far a row's due time moves off when its millisecond already holds a row of the job (two replaces in one ms). */
const SAME_MS_OFFSETS = [0, 1, -1, 2, -2, 3, -3];
/** A first row's group is woken this much before the row's due time: its millisecond may move ({@link SAME_MS_OFFSETS}). */
const EARLY_WAKE_MS = 10;
/** A pointer outlives any pending job's generation: replaced when its job has ended, not expired. */
const POINTER_TTL_MS = 400 * 86_400_000;

/**
 * A submit with `debounce` (docs/flow-control.md#debounce). The key's pending job (`OPEN`) takes
 * the payload and moves to `now + periodSeconds` (never past its first submit + `maxWaitSeconds`);
 * without one, a new pending job starts. Every step is a conditional write, and a replace writes
 * the new row (a new version) before it moves the generation to it, then deletes the old row:
 * a crash at any point leaves either the old version or the new one as the job, never both, and
 * only the version the generation names is ever sent (the dispatcher claims it first).
 *
 * `notBeforeMs`: a paused tenant's (or one whose controls were unreadable) row is not due before
 * every dispatcher's copy of the controls shows the pause (as a held request's inbound delay does); 0 otherwise.
 *
 * @throws Error when the key kept changing under it (the caller answers 500: retry)
 */
export async function submitDebounced(
  deps: DebounceDeps,
  tenant: string,
  job: JobRequest,
  notBeforeMs: number,
  trace?: TraceContext,
): Promise<DebouncedReply> {
  const debounce = job.debounce!;
  const { debounces, clock } = deps;
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const now = clock.now();
    const pointer = await debounces.pointer(tenant, debounce.key);
    const gen = pointer ? await debounces.generation(pointer.jobId) : undefined;
    if (gen?.state === 'OPEN') {
      const moved = await replace(deps, gen, job, notBeforeMs, trace);
      if (moved) return moved;
      continue;
    }
    const unfinished = pointer !== undefined && !gen && now - pointer.atMs < UNFINISHED_POINTER_MS;
    const jobId = unfinished ? pointer.jobId : newJobId(deps, tenant, now + debounce.periodMs);
    // The row's group awake by its due time before the race for the key (the look after the
    // write then goes by what this one found, without a call between the key's writes).
    await deps.wakes.written(deps.codec.parse(jobId).shard, dueOf(now, debounce.periodMs, undefined, notBeforeMs) - EARLY_WAKE_MS);
    if (!unfinished && !(await debounces.setPointer(tenant, debounce.key, jobId, pointer?.jobId, now, now + POINTER_TTL_MS))) continue;
    const started = await start(deps, tenant, jobId, job, notBeforeMs, trace);
    if (started) return started;
  }
  throw new Error(`debounce key ${JSON.stringify(debounce.key.slice(0, 40))} kept changing under the submit`);
}

/** A new pending job `jobId`: its first row, then its generation item (unless another submit wrote it first: undefined). */
async function start(
  deps: DebounceDeps,
  tenant: string,
  jobId: string,
  job: JobRequest,
  notBeforeMs: number,
  trace: TraceContext | undefined,
): Promise<DebouncedReply | undefined> {
  const { codec, clock, debounces, settings } = deps;
  const debounce = job.debounce!;
  const now = clock.now();
  const { shard } = codec.parse(jobId);
  const capMs = debounce.maxWaitMs !== undefined ? now + debounce.maxWaitMs : undefined;
  const ver = newVersion();
  const dueMs = await putRow(deps, tenant, jobId, shard, dueOf(now, debounce.periodMs, capMs, notBeforeMs), capMs, ver, job, trace);
  const gen: Generation = {
    jobId,
    tenant,
    key: debounce.key,
    shard,
    state: 'OPEN',
    ver,
    dueMs,
    firstMs: now,
    ...(capMs !== undefined ? { capMs } : {}),
  };
  if (!(await debounces.create(gen, tombstoneExpiresAtMs(dueMs, now, settings)))) {
    await debounces.deleteRow({ shard, dueMs, jobId }, ver).catch(() => undefined);
    return undefined;
  }
  return { jobId, tenant, runAt: isoMs(dueMs), state: 'SCHEDULED', debounced: false };
}

/** The pending job `gen` takes this payload at its new due time (undefined: it changed first; read it again). */
async function replace(
  deps: DebounceDeps,
  gen: Generation,
  job: JobRequest,
  notBeforeMs: number,
  trace: TraceContext | undefined,
): Promise<DebouncedReply | undefined> {
  const { clock, debounces, settings } = deps;
  const now = clock.now();
  const ver = newVersion();
  const dueMs = await putRow(
    deps,
    gen.tenant,
    gen.jobId,
    gen.shard,
    dueOf(now, job.debounce!.periodMs, gen.capMs, notBeforeMs),
    gen.capMs,
    ver,
    job,
    trace,
    gen.dueMs,
  );
  const row: RowKey = { shard: gen.shard, dueMs, jobId: gen.jobId };
  if (!(await debounces.move(gen.jobId, gen.ver, { ver, dueMs }, tombstoneExpiresAtMs(dueMs, now, settings)))) {
    await debounces.deleteRow(row, ver).catch(() => undefined);
    // Another submit replaced the job after this one read it, and it is still pending: the two
    // overlapped, so this one counts as taking effect just before the other's move, which replaced
    // it in turn (the job keeps the other's payload, as if this one had come first); the reply
    // names the job's due time now. Without this, a burst of concurrent submits of a key moves
    // the job one submit per round, and the last ones run out of tries.
    const after = await debounces.generation(gen.jobId);
    if (after?.state === 'OPEN' && after.ver !== gen.ver) {
      return { jobId: gen.jobId, tenant: gen.tenant, runAt: isoMs(after.dueMs), state: 'SCHEDULED', debounced: true };
    }
    return undefined;
  }
  // The old version is never sent now (the dispatcher claims the version the generation names);
  // deleting its row keeps listings and the dispatcher's reads clean. A row a dispatcher holds is
  // left to it: it drops it when its claim fails.
  await debounces.deleteRow({ shard: gen.shard, dueMs: gen.dueMs, jobId: gen.jobId }, gen.ver).catch(() => undefined);
  return { jobId: gen.jobId, tenant: gen.tenant, runAt: isoMs(dueMs), state: 'SCHEDULED', debounced: true };
}

/** `now + period`, not past the cap; a held tenant's not before `notBeforeMs`. */
function dueOf(now: number, periodMs: number, capMs: number | undefined, notBeforeMs: number): number {
  return Math.max(Math.min(now + periodMs, capMs ?? Number.POSITIVE_INFINITY), notBeforeMs);
}

/**
 * Writes the job's row of version `ver` at `dueMs`, or at a millisecond beside it when a row of
 * the job is there already (two replaces in the same millisecond, or a row a crash left): answers
 * the due time written. A row due soon is noted in its shard's late lane before the generation
 * names it, as ingest does; its group is made awake by then (docs/design-dispatch.md#rest) unless
 * a row of the job due no later (`coveredByMs`: the version it replaces, in the same shard until
 * the move) already holds it so: every rest decided while that row is there ends by its due time,
 * and one decided after it is gone saw this row. No call then widens the race with other submits.
 */
async function putRow(
  deps: DebounceDeps,
  tenant: string,
  jobId: string,
  shard: number,
  dueMs: number,
  capMs: number | undefined,
  ver: string,
  job: JobRequest,
  trace: TraceContext | undefined,
  coveredByMs = Number.POSITIVE_INFINITY,
): Promise<number> {
  for (const offset of SAME_MS_OFFSETS) {
    const due = dueMs + offset;
    if (capMs !== undefined && due > capMs) continue;
    const created = await deps.rows.putJob({
      shard,
      dueMs: due,
      jobId,
      tenant,
      payload: job.payloadText,
      priority: job.priority,
      ...(job.tags.length > 0 ? { tags: job.tags } : {}),
      debounce: { key: job.debounce!.key, ver },
      ...(trace ? { trace } : {}),
    });
    if (created !== 'created') continue;
    if (isLateRow(due, deps.clock.now(), deps.settings)) await deps.rows.putLatePointer({ shard, dueMs: due, jobId });
    if (due < coveredByMs) await deps.wakes.written(shard, due);
    return due;
  }
  throw new Error(`job ${jobId}: no free millisecond near ${isoMs(dueMs)} for its row`);
}

function newJobId(deps: Pick<DebounceDeps, 'codec' | 'settings'>, tenant: string, dueMs: number): string {
  const { shard, random } = deps.codec.placement(tenant, deps.settings.shardCount);
  return deps.codec.encode({ tenant, shard, dueMs, path: 'b', random });
}

function newVersion(): string {
  return randomBytes(9).toString('base64url');
}
