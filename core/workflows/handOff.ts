import {
  type Clock,
  deliveryMessage,
  type InboundJob,
  inboundMessageBody,
  packInbound,
  type QueueSender,
  type SchedulerSettings,
  type TenantRecord,
} from '../model/index.js';
import { HELD_INBOUND_DELAY_SECONDS, heldNow, type Parcel, place, sendParcels } from '../submit/index.js';
import type { ControlsCache } from '../tenants/index.js';
import type { WaitingChildren, WaitingState, WorkflowJobSpec } from './ports.js';

/**
 * Handing workflow jobs over once their due time is known (issue #25): the jobs of a submit that
 * wait for nothing, and a child whose last parent ended. The same two paths a one-off job takes
 * (core/submit's `place`): a job due within the lookahead (or a job not cancellable due within
 * SQS's 900 s), its tenant not paused, straight to the tenant queue with a delay, never early; the
 * rest through the inbound queue to the table, where ingest writes its row at its due time.
 *
 * Each hand-over is a state change of the job's waiting record first, one conditional write:
 * `WAITING → QUEUING` (direct) or `WAITING → RELEASING` (table), with the due time. A cancel
 * races that write, never the send: a job cancelled first is never sent; a job in `RELEASING` is
 * cancelled by the ordinary tombstone at its row's key, which ingest's conditional put meets; a
 * job `QUEUING` or `QUEUED` is already in its queue's hands (409 `AlreadyQueued`). A hand-over that
 * finds the record already `QUEUING` or `RELEASING` (a retried report or submit after a crash)
 * sends again: at least once, and ingest's put into an empty key makes the table path's repeat a
 * no-op.
 */

/** A workflow job whose due time is decided. */
export interface ReadyJob {
  readonly spec: WorkflowJobSpec;
  readonly dueMs: number;
  /** Its parents' summary, the JSON array text delivered as `parents` (none for a job without parents). */
  readonly parents?: string;
}

export interface HandOffDeps {
  readonly waiting: Pick<WaitingChildren, 'transition' | 'get'>;
  readonly sender: QueueSender;
  readonly inboundQueueUrl: string;
  readonly settings: Pick<SchedulerSettings, 'lookaheadMs'>;
  readonly clock: Clock;
  /** Tenant controls: a paused tenant's jobs never take the direct path. Absent: never paused. */
  readonly controls?: ControlsCache;
}

/** Why a hand-over did not complete; the caller answers 5xx, and a retry completes it. */
export class HandOffError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HandOffError';
  }
}

/** What one job's hand-over comes to once its record moved: the path it goes, or nothing to send. */
type Route = { readonly job: ReadyJob; readonly direct: boolean; readonly dueMs: number } | undefined;

/**
 * Hands `jobs` (all of `tenant`) over: moves each record, sends, and marks the direct ones
 * `QUEUED`. Returns the ids of the jobs it did not send: cancelled before their record moved, or
 * handed straight to their queue already (`QUEUED`).
 *
 * @throws HandOffError when a job could not be handed to SQS (its record stays in its moved state).
 */
export async function handOff(deps: HandOffDeps, tenant: TenantRecord, jobs: readonly ReadyJob[]): Promise<string[]> {
  if (jobs.length === 0) return [];
  const now = deps.clock.now();
  const held = await heldNow(
    deps.controls,
    tenant.name,
    jobs.map((j) => ({ dueMs: j.dueMs, cancellable: j.spec.cancellable })),
    now,
    deps.settings.lookaheadMs,
  );
  const routes = await Promise.all(jobs.map((job) => moveRecord(deps, job, now, held)));
  const skipped = jobs.filter((_, i) => routes[i] === undefined).map((j) => j.spec.key.jobId);
  const going = routes.filter((r): r is NonNullable<Route> => r !== undefined);
  const problems = await sendParcels(deps.sender, parcels(deps, tenant, going, held));
  if (problems.size > 0) {
    const [first] = problems.values();
    throw new HandOffError(`${problems.size} of ${going.length} workflow jobs were not handed to SQS: ${first!.message}`);
  }
  await Promise.all(going.filter((r) => r.direct).map((r) => deps.waiting.transition(r.job.spec.key, 'QUEUING', 'QUEUED', r.dueMs)));
  return skipped;
}

/**
 * The record's move for one job: `WAITING` to `QUEUING` or `RELEASING`; a record found moved
 * already by an earlier attempt keeps its path and due time (sent again); a `QUEUED` or
 * `CANCELLED` one sends nothing.
 */
async function moveRecord(deps: HandOffDeps, job: ReadyJob, now: number, held: boolean): Promise<Route> {
  const direct = place({ dueMs: job.dueMs, cancellable: job.spec.cancellable }, now, deps.settings.lookaheadMs, held).path === 'd';
  const to: WaitingState = direct ? 'QUEUING' : 'RELEASING';
  if (await deps.waiting.transition(job.spec.key, 'WAITING', to, job.dueMs)) return { job, direct, dueMs: job.dueMs };
  const record = await deps.waiting.get(job.spec.key);
  if (record?.dueMs === undefined || (record.state !== 'QUEUING' && record.state !== 'RELEASING')) return undefined;
  return { job, direct: record.state === 'QUEUING', dueMs: record.dueMs };
}

/** Direct jobs to the tenant queue (each with its delay); table-path jobs packed into inbound messages. */
function parcels(deps: HandOffDeps, tenant: TenantRecord, routes: readonly NonNullable<Route>[], held: boolean): Parcel[] {
  const out: Parcel[] = [];
  const inbound: InboundJob[] = [];
  const inboundIndex: number[] = [];
  routes.forEach((r, i) => {
    const { spec } = r.job;
    const job: InboundJob = {
      jobId: spec.key.jobId,
      tenant: tenant.name,
      shard: spec.key.shard,
      dueMs: r.dueMs,
      payload: spec.payload,
      priority: spec.priority,
      workflow: spec.workflowId,
      ...(r.job.parents !== undefined ? { parents: r.job.parents } : {}),
    };
    if (r.direct) {
      out.push({
        queueUrl: tenant.queueUrl,
        jobs: [i],
        // The delay as of each attempt, rounded up: never early.
        build: () =>
          deliveryMessage('', job, Math.max(0, Math.ceil((r.dueMs - deps.clock.now()) / 1000)), {
            history: tenant.historyTtlMs !== undefined,
          }),
      });
    } else {
      inbound.push(job);
      inboundIndex.push(i);
    }
  });
  for (const { indexes } of packInbound(inbound)) {
    const byRoute = new Map(indexes.map((k) => [inboundIndex[k]!, inbound[k]!]));
    out.push({
      queueUrl: deps.inboundQueueUrl,
      jobs: indexes.map((k) => inboundIndex[k]!),
      build: (js) => ({
        body: inboundMessageBody(js.map((i) => byRoute.get(i)!)),
        ...(held ? { delaySeconds: HELD_INBOUND_DELAY_SECONDS } : {}),
      }),
    });
  }
  return out;
}
