import {
  type Clock,
  deliveryMessage,
  type InboundJob,
  inboundMessageBody,
  jobSpan,
  newSpanId,
  packInbound,
  type QueueSender,
  type SchedulerSettings,
  SPAN_KIND,
  type SpanSink,
  spanIdOfTraceparent,
  type TenantRecord,
  type TraceContext,
  workflowTrace,
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
 * `WAITING → QUEUING` (direct) or `WAITING → RELEASING` (table), with the due time (for a child
 * of one parent, the same write that records its parent's end: core/workflows/progress.ts). A
 * cancel races that write, never the send: a job cancelled first is never sent; a job in
 * `RELEASING` is cancelled by the ordinary tombstone at its row's key, which ingest's conditional
 * put meets; a job `QUEUING` is already in its queue's hands (409 `AlreadyQueued`). A hand-over
 * that finds the record already `RELEASING` (a retried report or submit, or a concurrent one)
 * sends again: ingest's put into an empty key makes the repeat a no-op. One that finds it
 * `QUEUING` sends again only when that hand-over is stale (its process died): at least once after
 * a crash, once otherwise. Whether every send of a report or submit completed is noted once for
 * all its jobs (the parent's `childrenTold`, the claim's `started`), not per job: a repeat that
 * finds the note sends nothing. A child of several parents records whose end's report moved it
 * (`releasedBy`): a repeated report of another parent (which leaves no note when it handed
 * nothing over) never sends it again.
 */

/** A workflow job whose due time is decided. */
export interface ReadyJob {
  readonly spec: WorkflowJobSpec;
  readonly dueMs: number;
  /** Its parents' summary, the JSON array text delivered as `parents` (none for a job without parents). */
  readonly parents?: string;
  /** The parent (its index in `after`) whose end's report hands it over; none for a submit's job. */
  readonly releasedBy?: number;
}

export interface HandOffDeps {
  readonly waiting: Pick<WaitingChildren, 'transition' | 'get'>;
  readonly sender: QueueSender;
  readonly inboundQueueUrl: string;
  readonly settings: Pick<SchedulerSettings, 'lookaheadMs'>;
  readonly clock: Clock;
  /** Tenant controls: a paused tenant's jobs never take the direct path. Absent: never paused. */
  readonly controls?: ControlsCache;
  /** Where the hand-overs' spans go (`dynein.workflow.release`, and `dynein.dispatch` of a job sent straight to its queue). */
  readonly spans?: SpanSink;
}

/** Why a hand-over did not complete; the caller answers 5xx, and a retry completes it. */
export class HandOffError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HandOffError';
  }
}

/**
 * How old a hand-over straight to a queue (`QUEUING`) must be before another request sends its job
 * again: longer than any request lives (API Gateway ends one at 29 s), so it is one whose process
 * died between its record's move and its send.
 */
export const STALE_HANDOFF_MS = 60_000;
/** A job whose record moved: the path it goes (straight to its queue, or to the table) and its due time. */
export interface Route {
  readonly job: ReadyJob;
  readonly direct: boolean;
  readonly dueMs: number;
}

/**
 * Hands `jobs` (all of `tenant`) over: moves each record, then sends. Returns the ids of the jobs
 * it did not send: cancelled before their record moved, or handed straight to their queue already
 * (by a request whose note says its sends completed, or records from before that note).
 *
 * @throws HandOffError when a job could not be handed to SQS (its record stays in its moved state),
 *   or is being handed to its queue by another request under way
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
  await sendMoved(
    deps,
    tenant,
    routes.filter((r): r is Route => r !== undefined),
    held,
  );
  return skipped;
}

/**
 * Sends jobs whose records moved (`routes`), `held` as their tenant's controls were read for the
 * move: direct ones to the tenant queue, the others packed into inbound messages.
 *
 * @throws HandOffError when a job could not be handed to SQS
 */
export async function sendMoved(
  deps: Pick<HandOffDeps, 'sender' | 'inboundQueueUrl' | 'clock' | 'spans'>,
  tenant: TenantRecord,
  routes: readonly Route[],
  held: boolean,
): Promise<void> {
  if (routes.length === 0) return;
  const startMs = deps.clock.now();
  const traces = routes.map((r) => tracesOf(r.job, deps.spans !== undefined));
  const sends = new Map<number, { spanId: string; startMs: number; messageId?: string }>();
  const onSent = (jobs: readonly number[], messageId: string) => {
    for (const j of jobs) {
      const send = sends.get(j);
      if (send) send.messageId = messageId;
    }
  };
  const problems = await sendParcels(deps.sender, parcels(deps, tenant, routes, traces, held, sends), deps.spans ? { onSent } : {});
  if (deps.spans) recordSpans(deps.spans, tenant, routes, traces, problems, sends, { startMs, endMs: deps.clock.now() });
  if (problems.size === 0) return;
  const [first] = problems.values();
  throw new HandOffError(`${problems.size} of ${routes.length} workflow jobs were not handed to SQS: ${first!.message}`);
}

/**
 * The record's move for one job: `WAITING` to `QUEUING` or `RELEASING`; a record found moved
 * already by an earlier attempt keeps its path and due time (sent again); a `QUEUED` or
 * `CANCELLED` one sends nothing.
 *
 * A record found `QUEUING` is another hand-over's: under way (two reports of one parent at once),
 * done (a repeat whose first attempt's note it did not see), or dead with its process. Sent again
 * at once, the first two cases would deliver the job twice without any crash, so it is sent again
 * only once that hand-over is older than any request lives ({@link STALE_HANDOFF_MS}); before,
 * this one fails for its caller to try again later, when the note of the one under way answers it.
 */
async function moveRecord(deps: HandOffDeps, job: ReadyJob, now: number, held: boolean): Promise<Route | undefined> {
  // A keyed job goes through the table, always: only a dispatcher holding a slot of its key sends it.
  const direct =
    place(
      { dueMs: job.dueMs, cancellable: job.spec.cancellable },
      now,
      deps.settings.lookaheadMs,
      held || job.spec.concurrency !== undefined,
    ).path === 'd';
  const to: WaitingState = direct ? 'QUEUING' : 'RELEASING';
  if (await deps.waiting.transition(job.spec.key, 'WAITING', to, job.dueMs, direct ? now : undefined, job.releasedBy))
    return { job, direct, dueMs: job.dueMs };
  const record = await deps.waiting.get(job.spec.key);
  if (record?.dueMs === undefined) return undefined;
  // Another parent's report handed it over: that report (repeated, if it died) sends it, not this one.
  if (job.releasedBy !== undefined && record.releasedBy !== undefined && record.releasedBy !== job.releasedBy) return undefined;
  // The table path: sent again, ingest's put into an empty key stores it once.
  if (record.state === 'RELEASING') return { job, direct: false, dueMs: record.dueMs };
  if (record.state !== 'QUEUING') return undefined;
  if (deps.clock.now() - (record.handedAtMs ?? 0) > STALE_HANDOFF_MS) return { job, direct: true, dueMs: record.dueMs };
  throw new HandOffError(`workflow job ${job.spec.key.jobId} is being handed to its queue by another request: report again shortly`);
}

/**
 * A handed-over job's traces (docs/tracing.md): its workflow's (`workflow`: the caller's of its
 * submit, else the one the workflow's id derives; its span the workflow's submit), and the one it
 * carries on: a child released by a parent's end under its `dynein.workflow.release` span (a new
 * span id, when spans are recorded), a job of the submit under the submit's.
 */
interface JobTraces {
  readonly workflow: TraceContext;
  readonly carried: TraceContext;
}

function tracesOf(job: ReadyJob, recording: boolean): JobTraces {
  const workflow = job.spec.trace ?? workflowTrace(job.spec.workflowId);
  // A child released by its parents' end carries their summary; a job of the submit has none.
  const released = recording && job.parents !== undefined;
  return { workflow, carried: released ? { ...workflow, spanId: newSpanId() } : workflow };
}

/**
 * The spans of the jobs handed over without a problem: a released child's `dynein.workflow.release`
 * (from the hand-over's start to its sends' answers), and the `dynein.dispatch` span of a job sent
 * straight to its queue (the span its message's `traceparent` names).
 */
function recordSpans(
  spans: SpanSink,
  tenant: TenantRecord,
  routes: readonly Route[],
  traces: readonly JobTraces[],
  problems: ReadonlyMap<number, unknown>,
  sends: ReadonlyMap<number, { readonly spanId: string; readonly startMs: number; readonly messageId?: string }>,
  at: { readonly startMs: number; readonly endMs: number },
): void {
  const queue = tenant.queueUrl.slice(tenant.queueUrl.lastIndexOf('/') + 1);
  routes.forEach((r, i) => {
    if (problems.has(i)) return;
    const { spec, releasedBy } = r.job;
    const { workflow, carried } = traces[i]!;
    const job = { jobId: spec.key.jobId, tenant: tenant.name };
    if (carried !== workflow) {
      const release = jobSpan(
        'dynein.workflow.release',
        SPAN_KIND.internal,
        { ...job, trace: workflow },
        at,
        {
          'dynein.workflow_id': spec.workflowId,
          'dynein.workflow.job_key': spec.jobKey,
          // The parent whose end released it (a child of one parent: that one).
          'dynein.workflow.released_by': spec.parents[releasedBy ?? 0] ?? '',
          'dynein.path': r.direct ? 'queue' : 'table',
        },
        carried.spanId,
      );
      if (release) spans.record(release);
    }
    const send = sends.get(i);
    if (!send) return;
    const attributes = {
      'messaging.system': 'aws_sqs',
      'messaging.operation': 'publish',
      'messaging.destination.name': queue,
      ...(send.messageId !== undefined ? { 'messaging.message.id': send.messageId } : {}),
      'dynein.workflow_id': spec.workflowId,
      'dynein.lateness_ms': Math.max(0, at.endMs - r.dueMs),
    };
    const dispatch = jobSpan(
      'dynein.dispatch',
      SPAN_KIND.producer,
      { ...job, trace: carried },
      { startMs: send.startMs, endMs: at.endMs },
      attributes,
      send.spanId,
    );
    if (dispatch) spans.record(dispatch);
  });
}

/** Direct jobs to the tenant queue (each with its delay); table-path jobs packed into inbound messages. */
function parcels(
  deps: Pick<HandOffDeps, 'inboundQueueUrl' | 'clock'>,
  tenant: TenantRecord,
  routes: readonly Route[],
  traces: readonly JobTraces[],
  held: boolean,
  sends: Map<number, { spanId: string; startMs: number; messageId?: string }>,
): Parcel[] {
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
      ...(spec.tags && spec.tags.length > 0 ? { tags: spec.tags } : {}),
      ...(spec.concurrency ? { concurrency: spec.concurrency } : {}),
      workflow: spec.workflowId,
      ...(r.job.parents !== undefined ? { parents: r.job.parents } : {}),
      trace: traces[i]!.carried,
    };
    if (r.direct) {
      out.push({
        queueUrl: tenant.queueUrl,
        jobs: [i],
        // The delay as of each attempt, rounded up: never early.
        build: () => {
          const m = deliveryMessage('', job, Math.max(0, Math.ceil((r.dueMs - deps.clock.now()) / 1000)), {
            history: tenant.historyTtlMs !== undefined,
          });
          sends.set(i, { spanId: spanIdOfTraceparent(m.attributes!.traceparent!), startMs: deps.clock.now() });
          return m;
        },
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
