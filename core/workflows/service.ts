import { createHash } from 'node:crypto';
import { type JobPageReply, type JobsService, listLimit, type ListedJob } from '../jobs/index.js';
import {
  AlreadyQueuedError,
  type Clock,
  IdempotencyKeyReusedError,
  type JobIdCodec,
  type JobLookups,
  NotCancellableError,
  parseJsonBody,
  type ParsedWorkflowId,
  type RowKey,
  type SchedulerSettings,
  SPAN_KIND,
  type SpanSink,
  type TraceContext,
  ValidationError,
  sampled,
  workflowTrace,
} from '../model/index.js';
import { limiter } from '../util/index.js';
import type { TenantRegistry } from '../tenants/index.js';
import { heldNow, place } from '../submit/index.js';
import { handOff, type HandOffDeps, type ReadyJob, type Route, sendMoved } from './handOff.js';
import type { NewWaitingChild, WaitingChildren, WorkflowJobSpec, WorkflowStore } from './ports.js';
import { cancelWhileWaiting, jobEnded, keyOfId, type ProgressDeps } from './progress.js';
import { dueAfter, PARENT_ENDS_PER_ITEM } from './release.js';
import { validateWorkflow, WORKFLOW_PAYLOADS, type WorkflowJob, type WorkflowRequest } from './request.js';
import { workflowView, type WorkflowView } from './view.js';

/** Row reads in flight at once for GET of a workflow. */
const ROW_READS_IN_FLIGHT = 16;

/**
 * `POST /v1/tenants/{tenant}/workflows` (issue #25): a workflow's jobs stored, and those that wait
 * for nothing handed over. Single-item writes only (the same code runs on DynamoDB and on the
 * local stack's emulator, which has no transactions), ordered so that a request that dies at any
 * point leaves nothing that runs by itself and a retry with its idempotency key completes it:
 *
 * 1. the idempotency claim (the first request's id, creation time, fingerprint and shard count:
 *    a retry derives the same job ids);
 * 2. every job's spec (payload, links), then every job's waiting record (`WAITING`, conditional:
 *    a retry never resets a record a parent's end or a hand-over has moved);
 * 3. the workflow's graph (what GET shows), then the workflow record, last: a workflow that reads
 *    back is whole;
 * 4. the jobs without parents handed over (core/workflows/handOff.ts), then, with an
 *    idempotency key, that noted on its claim: a retry sends none of them again.
 *
 * A job that waits for parents is handed over when its last parent ends (the outcomes route).
 */

/** The reply to a workflow's submit. */
export interface WorkflowSubmitReply {
  readonly workflowId: string;
  readonly tenant: string;
  readonly state: 'RUNNING';
  /** Each job's id by its key, in the request's order. */
  readonly jobs: Readonly<Record<string, string>>;
}

/** The reply to a workflow's cancel. */
export interface WorkflowCancelReply {
  readonly workflowId: string;
  readonly state: 'CANCELLED';
  /** Jobs cancelled (by this request or an earlier one). */
  readonly cancelled: number;
  /** Jobs already handed to their queue (delivered, running or ended): not cancelled. */
  readonly alreadyQueued: number;
}

export interface WorkflowServiceDeps {
  /** The job rows: GET tells a job handed to the table that was delivered from one still scheduled. */
  readonly rows: Pick<JobLookups, 'getRow'>;
  readonly store: WorkflowStore;
  readonly waiting: WaitingChildren;
  readonly codec: JobIdCodec;
  readonly tenants: Pick<TenantRegistry, 'require'>;
  readonly settings: SchedulerSettings;
  readonly clock: Clock;
  readonly handOff: Omit<HandOffDeps, 'waiting' | 'clock' | 'settings'>;
  /** The parents' outcome records (their results in a child's summary, should a cancel release one). */
  readonly outcomes?: ProgressDeps['outcomes'];
  /**
   * Status and cancel of one job: a workflow's cancel cancels its jobs handed to the table as any
   * job's, and its listing shows each job as GET of it does.
   */
  readonly jobs: Pick<JobsService, 'cancel' | 'status'>;
  /** Where the workflow's `dynein.submit` span goes (docs/tracing.md); absent: none. */
  readonly spans?: SpanSink;
}

export class WorkflowService {
  constructor(private readonly deps: WorkflowServiceDeps) {}

  /**
   * Stores and starts a workflow. **201** for a new one; **200** with the same ids for a retry with
   * the same idempotency key and body (which completes what the first request left undone).
   *
   * @throws ValidationError, PayloadTooLargeError (nothing stored), TenantNotFoundError,
   *   IdempotencyKeyReusedError, HandOffError (stored; a retry with the key completes it)
   */
  async submit(
    tenant: string,
    body: string | undefined,
    caller?: TraceContext,
  ): Promise<{ status: 200 | 201; reply: WorkflowSubmitReply }> {
    const { codec, settings, clock } = this.deps;
    const startMs = clock.now();
    const record = await this.deps.tenants.require(tenant);
    const now = clock.now();
    const request = validateWorkflow(parseJsonBody(body, settings.maxBatchBytes, WORKFLOW_PAYLOADS), settings, now, body);
    const { workflow, shardCount, replayed, started } = await this.#claim(tenant, request, now);
    const ids = new Map(request.jobs.map((j) => [j.key, codec.workflowJobId(workflow, j.key, shardCount)]));
    // Every job in one trace: the caller's, else the one the workflow's id derives; their parent
    // span is the workflow's submit, its id derived from the workflow's, so that a retry of the
    // request (same trace) writes the same specs as the first.
    const trace = caller ? { ...caller, spanId: workflowTrace(workflow.workflowId).spanId } : undefined;
    const specs = specsOf(tenant, workflow.workflowId, request.jobs, ids, (jobId) => keyOfId(codec, jobId), shardCount, trace);
    // Small specs go on their waiting records (one write a job); the others apart, first.
    const onRecord = specs.map(fitsOnRecord);
    await this.deps.store.putSpecs(specs.filter((_, i) => !onRecord[i]));
    const roots: ReadyJob[] = request.jobs.flatMap((job, i) =>
      job.after.length === 0 ? [{ spec: specs[i]!, dueMs: dueAfter(job.timing, now) }] : [],
    );
    // The first request writes the records of its roots due past the lookahead moved to the table
    // path already (one write, not two: sent again by a retry, ingest's conditional put stores each
    // once). Those due sooner go straight to their queue, moved as they are sent (handOff), so that a
    // retry soon after a request that died resends them rather than waiting for it to go stale.
    const first = !replayed && !started ? await this.#routes(tenant, roots, now) : undefined;
    await this.deps.waiting.create(
      request.jobs.map((job, i) => ({
        ...waitingOf(tenant, job, specs[i]!.key, first?.routes.get(specs[i]!.key.jobId), trace ?? workflowTrace(workflow.workflowId)),
        ...(onRecord[i] ? { spec: specs[i]! } : {}),
      })),
    );
    const inOrder = new Map([...ids].sort(([a], [b]) => order(request, a) - order(request, b)));
    const after = new Map(request.jobs.flatMap((j) => (j.after.length > 0 ? [[j.key, j.after] as const] : [])));
    await this.deps.store.putGraph(tenant, workflow.workflowId, after);
    await this.deps.store.putWorkflow({ workflowId: workflow.workflowId, tenant, createdMs: workflow.createdMs, jobs: inOrder });
    if (!started) {
      const handOffDeps = { ...this.deps.handOff, waiting: this.deps.waiting, clock, settings };
      const moved = first?.routes ?? new Map<string, Route>();
      await Promise.all([
        sendMoved(handOffDeps, record, [...moved.values()], first?.held ?? false),
        handOff(
          handOffDeps,
          record,
          roots.filter((r) => !moved.has(r.spec.key.jobId)),
        ),
      ]);
      // A retry (the answer lost) then sends none of them again.
      if (request.idempotencyKey !== undefined) await this.deps.store.markStarted(tenant, request.idempotencyKey);
    }
    // The submit that started the jobs records the span (a retry answered again does not).
    if (!started) this.#span(tenant, workflow.workflowId, request.jobs.length, trace, caller, startMs);
    return {
      status: replayed ? 200 : 201,
      reply: { workflowId: workflow.workflowId, tenant, state: 'RUNNING', jobs: Object.fromEntries(inOrder) },
    };
  }

  /**
   * The workflow's `dynein.submit` span (docs/tracing.md): the parent of its jobs' spans, in the
   * caller's trace (its span the parent) or as the root of the trace the workflow's id derives.
   */
  #span(
    tenant: string,
    workflowId: string,
    jobs: number,
    trace: TraceContext | undefined,
    caller: TraceContext | undefined,
    startMs: number,
  ): void {
    const { spans, clock } = this.deps;
    const t = trace ?? workflowTrace(workflowId);
    if (!spans || !sampled(t)) return;
    spans.record({
      traceId: t.traceId,
      spanId: t.spanId,
      ...(caller ? { parentSpanId: caller.spanId } : {}),
      name: 'dynein.submit',
      kind: SPAN_KIND.server,
      startMs,
      endMs: clock.now(),
      attributes: { 'dynein.tenant': tenant, 'dynein.workflow_id': workflowId, 'dynein.jobs': jobs },
    });
  }

  /**
   * `GET /v1/tenants/{tenant}/workflows/{workflowId}`: the workflow and its jobs' states
   * ({@link workflowView}); undefined for another tenant's id, a forged one (both without a read)
   * or an unknown one, which the route answers alike (404).
   *
   * @throws TenantNotFoundError
   */
  async get(tenant: string, workflowId: string): Promise<WorkflowView | undefined> {
    await this.deps.tenants.require(tenant);
    const id = this.deps.codec.parseWorkflowId(workflowId);
    if (!id || id.tenant !== tenant) return undefined;
    const workflow = await this.deps.store.getWorkflow(tenant, workflowId);
    if (!workflow) return undefined;
    const [records, graph] = await Promise.all([
      this.deps.waiting.getMany([...workflow.jobs.values()].map((jobId) => keyOfId(this.deps.codec, jobId))),
      this.deps.store.getGraph(tenant, workflowId),
    ]);
    const now = this.deps.clock.now();
    const inTable = [...records.values()].filter((r) => r.state === 'RELEASING' && !r.end && r.dueMs !== undefined && r.dueMs <= now);
    const delivered = new Set<string>();
    const limit = limiter(ROW_READS_IN_FLIGHT);
    await Promise.all(
      inTable.map((r) =>
        limit(async () => {
          const row = await this.deps.rows.getRow({ shard: r.key.shard, dueMs: r.dueMs!, jobId: r.key.jobId });
          if (row?.state === 'QUEUED') delivered.add(r.key.jobId);
        }),
      ),
    );
    return workflowView(workflow, records, delivered, graph);
  }

  /**
   * `DELETE /v1/tenants/{tenant}/workflows/{workflowId}`: cancels every job not yet handed to its
   * queue, as a cancel of each would (a job submitted `cancellable: false` is not cancelled), in
   * three passes. First every cancellable job still waiting for parents is cancelled where it
   * waits, nothing carried on yet, so that no child of policy "run" is released by its parent's
   * cancel; then every other job not ended through the ordinary cancel of a job (its row, with the
   * same cut-off); then the cancels are told to the children (a job left waiting, not cancellable,
   * follows its policy). The counts are read last: `cancelled`, by this request or an earlier one;
   * `alreadyQueued`, every other job (handed to its queue, running, ended, or not cancellable).
   * Repeatable. Undefined as for {@link get}.
   *
   * @throws TenantNotFoundError
   */
  async cancel(tenant: string, workflowId: string): Promise<WorkflowCancelReply | undefined> {
    const { codec, waiting, clock } = this.deps;
    const record = await this.deps.tenants.require(tenant);
    const id = codec.parseWorkflowId(workflowId);
    if (!id || id.tenant !== tenant) return undefined;
    const workflow = await this.deps.store.getWorkflow(tenant, workflowId);
    if (!workflow) return undefined;
    const keys = [...workflow.jobs.values()].map((jobId) => keyOfId(codec, jobId));
    const limit = limiter(ROW_READS_IN_FLIGHT);
    const before = await waiting.getMany(keys);
    const message = 'cancelled with its workflow (DELETE of the workflow)';
    const held = await Promise.all(
      keys.map((key) =>
        limit(async () => {
          if (before.get(key.jobId)?.state !== 'WAITING' || !(await this.deps.store.getSpec(key))?.cancellable) return false;
          // Lost to its release (its last parent ended meanwhile): counted where it went.
          return cancelWhileWaiting(this.#progress(), tenant, key, message, clock.now()).catch((err: unknown) => {
            if (err instanceof AlreadyQueuedError) return false;
            throw err;
          });
        }),
      ),
    );
    await Promise.all(
      keys.map((key, i) =>
        limit(async () => {
          const now = held[i] ? undefined : await waiting.get(key);
          if (held[i] || !now || now.end || now.state === 'CANCELLED' || now.state === 'WAITING') return;
          await this.deps.jobs.cancel(tenant, key.jobId).catch((err: unknown) => {
            if (!(err instanceof AlreadyQueuedError || err instanceof NotCancellableError)) throw err;
          });
        }),
      ),
    );
    const progress = this.#progress();
    await Promise.all(
      keys.map((key, i) =>
        limit(async () => void (held[i] && (await jobEnded(progress, record, key.jobId, { outcome: 'CANCELLED', atMs: clock.now() })))),
      ),
    );
    const after = await waiting.getMany(keys);
    const cancelled = keys.filter((k) => {
      const r = after.get(k.jobId);
      return r?.state === 'CANCELLED' || r?.end?.outcome === 'CANCELLED';
    }).length;
    return { workflowId, state: 'CANCELLED', cancelled, alreadyQueued: keys.length - cancelled };
  }

  /**
   * `GET /v1/tenants/{tenant}/jobs?workflow={workflowId}`: one page of the workflow's jobs in its
   * order (the request's), each as `GET` of it answers; `limit` (1 to 1,000, default 100) and
   * `cursor` only. Undefined as for {@link get}.
   *
   * @throws ValidationError (another parameter, a bad limit or cursor), TenantNotFoundError
   */
  async listJobs(tenant: string, query: Readonly<Record<string, string | undefined>>): Promise<JobPageReply | undefined> {
    const workflowId = query.workflow ?? '';
    const other = Object.keys(query).find((k) => k !== 'workflow' && k !== 'limit' && k !== 'cursor' && query[k] !== undefined);
    if (other !== undefined)
      throw new ValidationError(
        `${other} does not go with workflow: a workflow's jobs are listed in its order, with limit and cursor only`,
      );
    const limit = listLimit(query.limit);
    const from = query.cursor === undefined ? 0 : this.#readCursor(tenant, workflowId, query.cursor);
    await this.deps.tenants.require(tenant);
    const id = this.deps.codec.parseWorkflowId(workflowId);
    if (!id || id.tenant !== tenant) return undefined;
    const workflow = await this.deps.store.getWorkflow(tenant, workflowId);
    if (!workflow) return undefined;
    const ids = [...workflow.jobs.values()];
    const page = ids.slice(from, from + limit);
    const reads = limiter(ROW_READS_IN_FLIGHT);
    const jobs: ListedJob[] = await Promise.all(page.map((jobId) => reads(() => this.deps.jobs.status(tenant, jobId))));
    const next = from + page.length;
    return { jobs, ...(next < ids.length ? { nextCursor: this.#cursor(tenant, workflowId, next) } : {}) };
  }

  #cursor(tenant: string, workflowId: string, index: number): string {
    return `${index}.${this.deps.codec.tag(`workflow-jobs\n${tenant}\n${workflowId}`, String(index))}`;
  }

  #readCursor(tenant: string, workflowId: string, cursor: string): number {
    const m = /^(\d{1,5})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
    if (!m || this.#cursor(tenant, workflowId, Number(m[1])) !== cursor)
      throw new ValidationError(
        'cursor is not one this API issued for this workflow: pass nextCursor from the previous page unchanged, with the same workflow',
      );
    return Number(m[1]);
  }

  /**
   * The roots that go through the table, decided now (`held`: the tenant's controls as read for
   * it), by job id.
   */
  async #routes(tenant: string, roots: readonly ReadyJob[], now: number): Promise<{ routes: Map<string, Route>; held: boolean }> {
    const { lookaheadMs } = this.deps.settings;
    const due = roots.map((r) => ({ dueMs: r.dueMs, cancellable: r.spec.cancellable }));
    const held = await heldNow(this.deps.handOff.controls, tenant, due, now, lookaheadMs);
    const routes = new Map(
      roots.flatMap((job, i) =>
        // A keyed job goes through the table, always (docs/flow-control.md).
        place(due[i]!, now, lookaheadMs, held || job.spec.concurrency !== undefined).path === 'd'
          ? []
          : [[job.spec.key.jobId, { job, direct: false, dueMs: job.dueMs }] as const],
      ),
    );
    return { routes, held };
  }

  #progress(): ProgressDeps {
    const { store, waiting, codec, settings, clock, handOff, outcomes } = this.deps;
    return { store, waiting, codec, settings, clock, handOff, ...(outcomes ? { outcomes } : {}) };
  }

  /** The workflow this request names: a new one, or (same key, same body) the one its key claimed first. */
  async #claim(
    tenant: string,
    request: WorkflowRequest,
    now: number,
  ): Promise<{ workflow: ParsedWorkflowId; shardCount: number; replayed: boolean; started: boolean }> {
    const { codec, settings } = this.deps;
    const fresh = codec.parseWorkflowId(codec.workflowId(tenant, now))!;
    if (request.idempotencyKey === undefined) return { workflow: fresh, shardCount: settings.shardCount, replayed: false, started: false };
    const fp = workflowFingerprint(request);
    const claim = await this.deps.store.claim(tenant, request.idempotencyKey, {
      workflowId: fresh.workflowId,
      createdMs: fresh.createdMs,
      fingerprint: fp,
      shardCount: settings.shardCount,
    });
    if (claim.fingerprint !== fp)
      throw new IdempotencyKeyReusedError(
        `idempotency key '${request.idempotencyKey}' named another workflow request (${claim.workflowId}): use a new key for a different request`,
      );
    const workflow = codec.parseWorkflowId(claim.workflowId);
    if (!workflow) throw new Error(`the claim of idempotency key '${request.idempotencyKey}' names no workflow id of this deployment`);
    return { workflow, shardCount: claim.shardCount, replayed: claim.workflowId !== fresh.workflowId, started: claim.started === true };
  }
}

/** The jobs' specs in the request's (parents-first) order, each with its children and the index it has in theirs. */
function specsOf(
  tenant: string,
  workflowId: string,
  jobs: readonly WorkflowJob[],
  ids: ReadonlyMap<string, string>,
  key: (jobId: string) => RowKey,
  shardCount: number,
  trace: TraceContext | undefined,
): WorkflowJobSpec[] {
  const children = new Map<string, { jobKey: string; index: number }[]>(jobs.map((j) => [j.key, []]));
  for (const job of jobs) job.after.forEach((parent, index) => children.get(parent)!.push({ jobKey: job.key, index }));
  return jobs.map((job) => ({
    key: key(ids.get(job.key)!),
    tenant,
    workflowId,
    jobKey: job.key,
    payload: job.payloadText,
    priority: job.priority,
    ...(job.tags.length > 0 ? { tags: job.tags } : {}),
    ...(job.concurrency ? { concurrency: job.concurrency } : {}),
    cancellable: job.cancellable,
    parents: job.after,
    children: children.get(job.key)!,
    shardCount,
    release: { timing: job.timing, onParentFailure: job.onParentFailure },
    ...endsPerItemOf(job),
    ...(trace ? { trace } : {}),
  }));
}

/**
 * A spec kept on its job's waiting record: its payload, links and the parents' ends the record
 * may gather (a dozen bytes each) within this many bytes, so that the record, rewritten at each
 * parent's end, its move and its own end, stays within one write unit (1 KB) with its own fields.
 * A larger spec goes apart (written once, never rewritten).
 */
const SPEC_ON_RECORD_BYTES = 600;

function fitsOnRecord(spec: WorkflowJobSpec): boolean {
  const keys = (list: readonly string[]) => list.reduce((n, k) => n + k.length + 3, 0);
  const ends = spec.endsPerItem === undefined ? 12 * spec.parents.length : 0;
  const bytes =
    Buffer.byteLength(spec.payload) +
    spec.jobKey.length +
    spec.workflowId.length +
    keys(spec.parents) +
    keys(spec.children.map((c) => c.jobKey)) +
    keys(spec.tags ?? []) +
    4 * spec.children.length +
    ends +
    (spec.trace ? 60 + (spec.trace.state?.length ?? 0) : 0);
  return bytes <= SPEC_ON_RECORD_BYTES;
}

/** A job of more parents than a record keeps the ends of: theirs kept {@link PARENT_ENDS_PER_ITEM} to an item. */
function endsPerItemOf(job: WorkflowJob): { endsPerItem?: number } {
  return job.after.length > PARENT_ENDS_PER_ITEM ? { endsPerItem: PARENT_ENDS_PER_ITEM } : {};
}

/** A job's waiting record as first written: moved to the table path already when its submit decided so. */
function waitingOf(tenant: string, job: WorkflowJob, key: RowKey, route: Route | undefined, trace: TraceContext): NewWaitingChild {
  const moved = route && { moved: { to: 'RELEASING' as const, dueMs: route.dueMs } };
  return {
    key,
    tenant,
    parents: job.after.length,
    timing: job.timing,
    onParentFailure: job.onParentFailure,
    ...moved,
    ...endsPerItemOf(job),
    trace,
  };
}

/** A job's place in the request as sent (its jobs are checked and kept parents first). */
function order(request: WorkflowRequest, key: string): number {
  return request.sentOrder.get(key) ?? 0;
}

/**
 * What makes two workflow requests "the same" for an idempotency key: every job's key, parents,
 * time as given (an instant, or a delay, not the moment it moves with), priority, cancellable,
 * failure policy, tags and concurrency key and limit (only when there are some: fingerprints from before they existed stand) and payload
 * text byte for byte, in the order sent. SHA-256, base64url.
 */
export function workflowFingerprint(request: WorkflowRequest): string {
  const h = createHash('sha256').update('dynein-workflow-v1\n');
  const jobs = [...request.jobs].sort((a, b) => order(request, a.key) - order(request, b.key));
  for (const j of jobs) {
    const tags = j.tags.length > 0 ? [`t${JSON.stringify(j.tags)}`] : [];
    const keyed = j.concurrency ? [`k${JSON.stringify([j.concurrency.key, j.concurrency.limit])}`] : [];
    const head = [
      j.key,
      j.after.join(','),
      j.timingGiven,
      j.priority,
      j.cancellable ? 'c' : 'n',
      j.onParentFailure,
      ...tags,
      ...keyed,
    ].join('\u0000');
    h.update(`${head.length}:${head}\n${Buffer.byteLength(j.payloadText)}:`)
      .update(j.payloadText, 'utf8')
      .update('\n');
  }
  return h.digest('base64url');
}
