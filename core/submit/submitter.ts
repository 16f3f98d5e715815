import {
  ApiError,
  assertNoDuplicateFields,
  BATCH_PAYLOADS,
  type Clock,
  deliveryMessage,
  IdempotencyKeyReusedError,
  type InboundJob,
  inboundMessageBody,
  isoMs,
  JOB_PAYLOAD,
  type JobIdCodec,
  type JobPath,
  type JobRequest,
  packInbound,
  parseJsonBody,
  type QueueSender,
  type SchedulerSettings,
  type TenantRecord,
  validateJob,
  ValidationError,
} from '../model/index.js';
import { CONTROLS_TTL_MS, type ControlsCache, type TenantRegistry } from '../tenants/index.js';
import { fingerprint, IDEMPOTENCY_WINDOW_MS, type IdempotencyEntry, type IdempotencyStore } from './idempotency.js';
import { limiter, shortText } from '../util/index.js';
import type { SubmitRateLimiter } from './submitRateLimit.js';
import { sendParcels, type Parcel, type SendOptions, type SendProblem } from './sendParcels.js';
import { type DebounceDeps, submitDebounced } from '../debounce/index.js';
import { jobSpan, newSpanId, SPAN_KIND, type SpanSink, spanIdOfTraceparent, submitSpans, type TraceContext } from '../model/index.js';

export interface JobReply {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly state: 'SCHEDULED' | 'QUEUED';
  /** A job with `debounce`: true when it replaced the key's pending job (200), false when it started one (201). */
  readonly debounced?: boolean;
}

export interface ErrorReply {
  readonly error: { readonly code: string; readonly message: string };
}

/** A single submit's outcome: 201 for a new job, 200 for a retry that named an existing one. */
export interface SubmitResult {
  readonly status: 200 | 201;
  readonly job: JobReply;
}

export interface SubmitDeps {
  readonly settings: SchedulerSettings;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly sender: QueueSender;
  readonly inboundQueueUrl: string;
  readonly clock: Clock;
  readonly idempotency: IdempotencyStore;
  /** Retries of SQS sends within one request. */
  readonly send?: SendOptions;
  /**
   * The tenants' `maxSubmitsPerSecond` (docs/tenant-controls.md#submit-rate-limit): checked after
   * validation and before anything is written. Absent: no limits.
   */
  readonly rateLimit?: SubmitRateLimiter;
  /**
   * Tenant controls: a request with a job due soon reads them fresh, and a paused tenant's jobs
   * (or those of a tenant whose controls cannot be read) never take the direct path
   * (docs/tenant-controls.md#every-path-is-held). Absent: no tenant is ever paused.
   */
  readonly controls?: ControlsCache;
  /** Debounced jobs (docs/flow-control.md#debounce): their items and rows, which submit writes itself. Absent: a job with `debounce` is refused. */
  readonly debounce?: Omit<DebounceDeps, 'codec' | 'clock' | 'settings'>;
  /** Where the `dynein.submit` spans go (docs/tracing.md). Absent: none are built. */
  readonly spans?: SpanSink;
}

/**
 * How far clocks of submit and dispatch processes may disagree. A job due within
 * `CONTROLS_TTL_MS` plus this of its submit is one a dispatcher's copy of the controls (at most
 * `CONTROLS_TTL_MS` old) may predate: its request reads the controls fresh.
 */
export const CLOCK_MARGIN_MS = 1_000;
/**
 * The inbound delay of a held request's jobs (its tenant paused, or its controls unreadable):
 * by the time ingest stores their rows, every dispatcher's copy of the controls was read after
 * the request's own read, so a pause that request saw holds them everywhere.
 */
export const HELD_INBOUND_DELAY_SECONDS = Math.ceil((CONTROLS_TTL_MS + CLOCK_MARGIN_MS) / 1000);

/** Where a job goes: straight to its queue with a delay, or through the inbound queue to the table. */
export interface Placement {
  readonly path: JobPath;
  /** For `d`: the SQS delay, rounded up so that the job is never early. */
  readonly delaySeconds?: number;
}

/**
 * Direct path for jobs due within the lookahead, and for `cancellable: false` jobs due within
 * 900 s (SQS's largest delay) after rounding up; the table for the rest, and for every job of a
 * `held` tenant (paused, or its controls unreadable), whose rows dispatch holds. Priority plays
 * no part: a direct job is delivered by SQS at its time, whatever its priority.
 */
export function place(job: Pick<JobRequest, 'dueMs' | 'cancellable'>, nowMs: number, lookaheadMs: number, held = false): Placement {
  const delayMs = job.dueMs - nowMs;
  const delaySeconds = Math.max(0, Math.ceil(delayMs / 1000));
  if (!held && delayMs <= lookaheadMs) return { path: 'd', delaySeconds };
  if (!held && !job.cancellable && delaySeconds <= 900) return { path: 'd', delaySeconds };
  return { path: job.cancellable ? 't' : 'u' };
}

/**
 * Whether a job's placement needs the tenant's controls as they are now: it would take the
 * direct path, or it is due so soon that a dispatcher's copy of the controls may predate the
 * request.
 */
export function needsFreshControls(job: Pick<JobRequest, 'dueMs' | 'cancellable'>, nowMs: number, lookaheadMs: number): boolean {
  return place(job, nowMs, lookaheadMs).path === 'd' || job.dueMs - nowMs <= CONTROLS_TTL_MS + CLOCK_MARGIN_MS;
}

/**
 * Whether jobs handed over now are held (docs/tenant-controls.md#every-path-is-held): read only
 * when a job {@link needsFreshControls} (one strongly consistent `GetItem`, begun after the
 * request arrived, so a pause acknowledged before it is seen); true when the tenant is paused or
 * the read failed (fail closed). Jobs due later need no read: every dispatcher's copy of the
 * controls is read after the request by the time they are due. No `controls`: never held.
 */
export async function heldNow(
  controls: ControlsCache | undefined,
  tenant: string,
  jobs: readonly Pick<JobRequest, 'dueMs' | 'cancellable'>[],
  nowMs: number,
  lookaheadMs: number,
): Promise<boolean> {
  if (!controls || !jobs.some((job) => needsFreshControls(job, nowMs, lookaheadMs))) return false;
  return (await controls.fresh(tenant)).paused;
}

/** Idempotency records written at once by one request. */
const CLAIM_CONCURRENCY = 32;

/** One job on its way: a new one, or the job an idempotency record names. */
interface Planned {
  readonly jobId: string;
  readonly shard: number;
  readonly dueMs: number;
  readonly path: JobPath;
  readonly payload: string;
  /** 1..9 (5: the default). */
  readonly priority: number;
  /** Its tags (empty: none). */
  readonly tags: readonly string[];
  /** Its concurrency key and limit, when it has one. */
  readonly concurrency?: JobRequest['concurrency'];
  /** The trace its submit carried (absent: the trace its id derives). */
  readonly trace?: TraceContext;
  /** With a key: its record. */
  readonly entry?: IdempotencyEntry;
  /** This request wrote the record (so it releases it if SQS refuses the job). */
  readonly claimed: boolean;
  /** A retry that named an existing job. */
  readonly replayed: boolean;
  /** Whether to hand the job to SQS (false for a replay whose first send completed). */
  readonly send: boolean;
}

type Outcome = { readonly reply: JobReply; readonly replayed: boolean } | ApiError;

/** Submits jobs: `POST /v1/tenants/{tenant}/jobs` and `.../jobs/batch`. */
export class Submitter {
  constructor(readonly deps: SubmitDeps) {}

  /**
   * One job; the raw request body, and the trace context of its `traceparent` header, when it
   * had a valid one (docs/tracing.md). Throws an {@link ApiError} for bad input or a job not accepted.
   */
  async submit(tenantName: string, rawBody: string | undefined, caller?: TraceContext): Promise<SubmitResult> {
    const startMs = this.deps.clock.now();
    const tenant = await this.deps.tenants.require(tenantName);
    const body = parseJsonBody(rawBody, this.deps.settings.maxBatchBytes, JOB_PAYLOAD);
    const job = validateJob(body, this.deps.settings, this.deps.clock.now(), rawBody);
    await this.deps.rateLimit?.admit(tenant.name, 1);
    const trace = submitTrace(caller);
    const outcomes = await this.#accept(tenant, [job], trace);
    this.#span(tenant.name, outcomes, trace, caller, startMs);
    const [outcome] = outcomes;
    if (outcome === undefined) throw new SubmitFailedError('no result');
    if (outcome instanceof ApiError) throw outcome;
    return { status: outcome.replayed ? 200 : 201, job: outcome.reply };
  }

  /**
   * Up to 100 jobs; a result per job in request order. Each job stands alone: an invalid job, a
   * reused key or a job SQS refused answers an error in its place and the others are accepted.
   * Throws only for a bad request as a whole.
   */
  async submitBatch(
    tenantName: string,
    rawBody: string | undefined,
    caller?: TraceContext,
  ): Promise<{ results: (JobReply | ErrorReply)[] }> {
    const startMs = this.deps.clock.now();
    const tenant = await this.deps.tenants.require(tenantName);
    const body = parseJsonBody(rawBody, this.deps.settings.maxBatchBytes, BATCH_PAYLOADS);
    if (typeof body !== 'object' || body === null || Array.isArray(body) || !Array.isArray((body as { jobs?: unknown }).jobs)) {
      throw new ValidationError('a batch must be a JSON object like {"jobs": [{"payload": ..., "delaySeconds": 30}]}');
    }
    assertNoDuplicateFields(body, 'the batch');
    const extra = Object.keys(body).filter((k) => k !== 'jobs');
    if (extra.length > 0)
      throw new ValidationError(`unknown field ${extra.map((k) => `'${k}'`).join(', ')} in batch: only 'jobs' is allowed`);
    const jobs = (body as { jobs: unknown[] }).jobs;
    const max = this.deps.settings.maxBatchJobs;
    if (jobs.length === 0 || jobs.length > max)
      throw new ValidationError(`a batch holds 1 to ${max} jobs, got ${jobs.length}: split it into several requests`);

    const now = this.deps.clock.now();
    const outcomes: (Outcome | undefined)[] = new Array(jobs.length);
    const valid: JobRequest[] = [];
    const validIndex: number[] = [];
    jobs.forEach((job, i) => {
      try {
        valid.push(validateJob(job, this.deps.settings, now, rawBody));
        validIndex.push(i);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        outcomes[i] = err;
      }
    });
    // The limit counts each valid job, and admits the request whole or refuses it whole (429).
    if (valid.length > 0) await this.deps.rateLimit?.admit(tenant.name, valid.length);
    const trace = submitTrace(caller);
    const accepted = await this.#accept(tenant, valid, trace);
    accepted.forEach((o, k) => (outcomes[validIndex[k]!] = o));
    this.#span(tenant.name, accepted, trace, caller, startMs);
    return {
      results: outcomes.map((o, i) => {
        if (o === undefined) return { error: { code: 'InternalError', message: `jobs[${i}]: no result: retry the request` } };
        return o instanceof ApiError ? { error: { code: o.code, message: `jobs[${i}]: ${o.message}` } } : o.reply;
      }),
    };
  }

  /** The request's `dynein.submit` spans, for the jobs it accepted (not those a retry answered again). */
  #span(
    tenant: string,
    outcomes: readonly Outcome[],
    trace: TraceContext | undefined,
    caller: TraceContext | undefined,
    startMs: number,
  ): void {
    const { spans, clock } = this.deps;
    if (!spans) return;
    // A retry answered again is not a submit of the job; a debounced replace is (the job carries its trace now).
    const jobIds = outcomes.flatMap((o) =>
      o instanceof ApiError || (o.replayed && o.reply.debounced === undefined) ? [] : [o.reply.jobId],
    );
    const at = { startMs, endMs: clock.now() };
    for (const span of submitSpans(jobIds, trace, caller, at, { 'dynein.tenant': tenant })) spans.record(span);
  }

  /**
   * Accepts valid jobs: claims their idempotency keys, hands them to SQS (each job on its own:
   * see {@link sendParcels}) and answers an outcome per job.
   */
  async #accept(tenant: TenantRecord, jobs: readonly JobRequest[], trace: TraceContext | undefined): Promise<Outcome[]> {
    const now = this.deps.clock.now();
    const held = await this.#held(tenant.name, jobs, now);
    if (!jobs.some((job) => job.debounce)) return this.#acceptPlain(tenant, jobs, held, trace);
    const plain: number[] = [];
    jobs.forEach((job, i) => job.debounce || plain.push(i));
    const outcomes: Outcome[] = new Array(jobs.length);
    (
      await this.#acceptPlain(
        tenant,
        plain.map((i) => jobs[i]!),
        held,
        trace,
      )
    ).forEach((o, k) => (outcomes[plain[k]!] = o));
    // One at a time, in request order: a later job of the same key replaces an earlier one.
    for (const [i, job] of jobs.entries()) if (job.debounce) outcomes[i] = await this.#acceptDebounced(tenant, job, held, trace);
    return outcomes;
  }

  /** A job with `debounce`: it replaces its key's pending job (200) or starts one (201). */
  async #acceptDebounced(tenant: TenantRecord, job: JobRequest, held: boolean, trace: TraceContext | undefined): Promise<Outcome> {
    const { debounce, codec, clock, settings } = this.deps;
    if (!debounce)
      return new ValidationError('this deployment does not take debounced jobs (no debounce store is configured): leave out debounce');
    try {
      const notBeforeMs = held ? clock.now() + HELD_INBOUND_DELAY_SECONDS * 1000 : 0;
      const reply = await submitDebounced({ ...debounce, codec, clock, settings }, tenant.name, job, notBeforeMs, trace);
      return { reply, replayed: reply.debounced };
    } catch (err) {
      if (err instanceof ApiError) return err;
      return new SubmitFailedError(`debounce: ${(err as Error)?.message ?? err}`);
    }
  }

  /** Jobs without `debounce`: see {@link #accept}. */
  async #acceptPlain(
    tenant: TenantRecord,
    jobs: readonly JobRequest[],
    held: boolean,
    trace: TraceContext | undefined,
  ): Promise<Outcome[]> {
    if (jobs.length === 0) return [];
    const now = this.deps.clock.now();
    const outcomes: (Outcome | undefined)[] = new Array(jobs.length);
    const planned: (Planned | undefined)[] = jobs.map((job) => this.#plan(tenant.name, job, now, held, trace));
    const { leaders, followers } = this.#matchKeys(tenant.name, jobs, planned, outcomes, now);
    await this.#claimKeys(leaders, jobs, planned, outcomes, now);
    const sends = new Map<number, { spanId: string; startMs: number }>();
    // The message id SQS gave each job's message (its dispatch span's `messaging.message.id`).
    const messageIds = new Map<number, string>();
    const send = this.deps.spans
      ? { ...this.deps.send, onSent: (jobs: readonly number[], id: string) => jobs.forEach((j) => messageIds.set(j, id)) }
      : this.deps.send;
    const problems = await sendParcels(this.deps.sender, this.#parcels(tenant, planned, held, sends), send);
    this.#directSpans(tenant, planned, problems, sends, messageIds);
    await this.#settleRecords(planned, problems);
    planned.forEach((p, i) => {
      if (p) outcomes[i] = outcomeOf(tenant.name, p, problems.get(i));
    });
    for (const [i, leader] of followers) {
      const o = outcomes[leader]!;
      outcomes[i] = o instanceof ApiError ? o : { reply: o.reply, replayed: true };
    }
    return outcomes.map((o) => o ?? new SubmitFailedError('no result'));
  }

  /** Where a job goes (straight to its queue, or through the table) and its id. */
  #plan(tenant: string, job: JobRequest, now: number, held: boolean, trace: TraceContext | undefined): Planned {
    const { settings, codec } = this.deps;
    // A keyed job goes through the table, however soon it is due: only a dispatcher holding a slot of its key sends it.
    const { path } = place(job, now, settings.lookaheadMs, held || job.concurrency !== undefined);
    const { shard, random } = codec.placement(tenant, settings.shardCount);
    const jobId = codec.encode({ tenant, shard, dueMs: job.dueMs, path, random });
    return {
      jobId,
      shard,
      dueMs: job.dueMs,
      path,
      payload: job.payloadText,
      priority: job.priority,
      tags: job.tags,
      ...(job.concurrency ? { concurrency: job.concurrency } : {}),
      ...(trace ? { trace } : {}),
      claimed: false,
      replayed: false,
      send: true,
    };
  }

  /**
   * Keys: the first job of the request with a key claims it (a leader); a later one with the same
   * key is the same job when it is the same request (a follower, answered as its leader), and
   * refused otherwise.
   */
  #matchKeys(
    tenant: string,
    jobs: readonly JobRequest[],
    planned: (Planned | undefined)[],
    outcomes: (Outcome | undefined)[],
    now: number,
  ): { leaders: Map<string, number>; followers: [number, number][] } {
    const leaders = new Map<string, number>();
    const followers: [number, number][] = [];
    jobs.forEach((job, i) => {
      if (job.idempotencyKey === undefined) return;
      const keyId = this.deps.codec.keyId(tenant, job.idempotencyKey);
      const entry: IdempotencyEntry = {
        keyId,
        jobId: planned[i]!.jobId,
        fingerprint: fingerprint(job),
        expiresAtMs: now + IDEMPOTENCY_WINDOW_MS,
      };
      const leader = leaders.get(keyId);
      if (leader === undefined) {
        leaders.set(keyId, i);
        planned[i] = { ...planned[i]!, entry };
      } else if (planned[leader]!.entry?.fingerprint === entry.fingerprint) {
        followers.push([i, leader]);
        planned[i] = undefined;
      } else {
        outcomes[i] = reusedKey(job.idempotencyKey, 'an earlier job of this batch');
        planned[i] = undefined;
      }
    });
    return { leaders, followers };
  }

  /** Claims the leaders' keys: a job whose key names another job, or whose claim failed, is answered with that. */
  async #claimKeys(
    leaders: ReadonlyMap<string, number>,
    jobs: readonly JobRequest[],
    planned: (Planned | undefined)[],
    outcomes: (Outcome | undefined)[],
    now: number,
  ): Promise<void> {
    const limit = limiter(CLAIM_CONCURRENCY);
    await Promise.all(
      [...leaders.values()].map((i) =>
        limit(async () => {
          try {
            const result = await this.#claim(planned[i]!, jobs[i]!, now);
            if (result instanceof ApiError) {
              outcomes[i] = result;
              planned[i] = undefined;
            } else planned[i] = result;
          } catch (err) {
            outcomes[i] = new SubmitFailedError(`idempotency record: ${(err as Error)?.message ?? err}`);
            planned[i] = undefined;
          }
        }),
      ),
    );
  }

  /** What to send: direct jobs to the tenant queue, the table-path jobs of the request packed into shared inbound messages. */
  /**
   * The `dynein.dispatch` span of each job sent straight to its queue (the submit is its
   * dispatcher): the span its message's `traceparent` names, from the (last) send to its answer.
   */
  #directSpans(
    tenant: TenantRecord,
    planned: readonly (Planned | undefined)[],
    problems: ReadonlyMap<number, SendProblem>,
    sends: ReadonlyMap<number, { spanId: string; startMs: number }>,
    messageIds: ReadonlyMap<number, string>,
  ): void {
    const { spans, clock } = this.deps;
    if (!spans) return;
    const endMs = clock.now();
    const queue = tenant.queueUrl.slice(tenant.queueUrl.lastIndexOf('/') + 1);
    for (const [i, send] of sends) {
      const p = planned[i];
      if (!p || problems.has(i)) continue;
      const job = { jobId: p.jobId, tenant: tenant.name, ...(p.trace ? { trace: p.trace } : {}) };
      const at = { startMs: send.startMs, endMs };
      const attributes = {
        'messaging.system': 'aws_sqs',
        'messaging.operation': 'publish',
        'messaging.destination.name': queue,
        ...(messageIds.has(i) ? { 'messaging.message.id': messageIds.get(i)! } : {}),
        'dynein.lateness_ms': Math.max(0, endMs - p.dueMs),
      };
      const span = jobSpan('dynein.dispatch', SPAN_KIND.producer, job, at, attributes, send.spanId);
      if (span) spans.record(span);
    }
  }

  #parcels(
    tenant: TenantRecord,
    planned: readonly (Planned | undefined)[],
    held: boolean,
    sends?: Map<number, { spanId: string; startMs: number }>,
  ): Parcel[] {
    const { clock } = this.deps;
    const parcels: Parcel[] = [];
    const inbound: InboundJob[] = [];
    const inboundIndex: number[] = [];
    planned.forEach((p, i) => {
      if (!p?.send) return;
      const job: InboundJob = {
        jobId: p.jobId,
        tenant: tenant.name,
        shard: p.shard,
        dueMs: p.dueMs,
        payload: p.payload,
        priority: p.priority,
        ...(p.tags.length > 0 ? { tags: p.tags } : {}),
        ...(p.concurrency ? { concurrency: p.concurrency } : {}),
        ...(p.trace ? { trace: p.trace } : {}),
      };
      if (p.path === 'd') {
        parcels.push({
          queueUrl: tenant.queueUrl,
          jobs: [i],
          build: () => {
            const m = deliveryMessage('', job, delayOf(p.dueMs, clock.now()), { history: tenant.historyTtlMs !== undefined });
            sends?.set(i, { spanId: spanIdOfTraceparent(m.attributes!.traceparent!), startMs: clock.now() });
            return m;
          },
        });
      } else {
        inbound.push(job);
        inboundIndex.push(i);
      }
    });
    const inboundByIndex = new Map(inboundIndex.map((i, k) => [i, inbound[k]!]));
    for (const { indexes } of packInbound(inbound)) {
      parcels.push({
        queueUrl: this.deps.inboundQueueUrl,
        jobs: indexes.map((k) => inboundIndex[k]!),
        build: (js) => ({
          body: inboundMessageBody(js.map((i) => inboundByIndex.get(i)!)),
          ...(held ? { delaySeconds: HELD_INBOUND_DELAY_SECONDS } : {}),
        }),
      });
    }
    return parcels;
  }

  /**
   * Records: sent ones are marked (a retry then sends nothing); a refused job's record is
   * released (it was never accepted). A job whose send may or may not have happened keeps its
   * unsent record: a retry sends it again, under the same job id.
   */
  async #settleRecords(planned: readonly (Planned | undefined)[], problems: ReadonlyMap<number, SendProblem>): Promise<void> {
    const sent: IdempotencyEntry[] = [];
    const released: Promise<void>[] = [];
    planned.forEach((p, i) => {
      if (!p?.entry || !p.send) return;
      const problem = problems.get(i);
      if (!problem) sent.push(p.entry);
      else if (problem.refused && p.claimed) released.push(this.deps.idempotency.release(p.entry.keyId, p.jobId).catch(() => {}));
    });
    await Promise.all([this.deps.idempotency.markSent(sent).catch(() => {}), ...released]);
  }

  async #held(tenant: string, jobs: readonly JobRequest[], now: number): Promise<boolean> {
    return heldNow(this.deps.controls, tenant, jobs, now, this.deps.settings.lookaheadMs);
  }

  /**
   * Claims a job's idempotency key: the job as planned when the record was written; the job the
   * record names when it is the same request; {@link IdempotencyKeyReusedError} otherwise.
   */
  async #claim(p: Planned, job: JobRequest, now: number): Promise<Planned | ApiError> {
    const entry = p.entry!;
    for (let tries = 0; tries < 3; tries++) {
      const result = await this.deps.idempotency.claim(entry, now);
      if (result.claimed) return { ...p, claimed: true };
      const existing = result.existing;
      if (existing === undefined) continue; // its window ended in between: claim again
      if (existing.fingerprint !== entry.fingerprint) return reusedKey(job.idempotencyKey!, `job ${existing.jobId}`);
      const id = this.deps.codec.parse(existing.jobId);
      // The same request again: the same job. Its first request may have died between writing
      // the record and sending, so it is sent again until the record says the send completed.
      return {
        jobId: id.jobId,
        shard: id.shard,
        dueMs: id.dueMs,
        path: id.path,
        payload: p.payload,
        priority: p.priority,
        tags: p.tags,
        ...(p.concurrency ? { concurrency: p.concurrency } : {}),
        ...(p.trace ? { trace: p.trace } : {}),
        entry: { ...entry, jobId: id.jobId, expiresAtMs: existing.expiresAtMs },
        claimed: false,
        replayed: true,
        send: !existing.sent,
      };
    }
    return new SubmitFailedError('the idempotency record kept changing');
  }
}

/**
 * The trace context a request's jobs carry: the caller's trace and flags, with this submit as
 * the parent span (a new span id: the scheduler's `dynein.submit` span); none without a caller's
 * (each job then carries the trace its id derives).
 */
function submitTrace(caller: TraceContext | undefined): TraceContext | undefined {
  return caller ? { ...caller, spanId: newSpanId() } : undefined;
}

/** The SQS delay of a direct job: rounded up, never early; 0 once due. */
function delayOf(dueMs: number, nowMs: number): number {
  return Math.min(900, Math.max(0, Math.ceil((dueMs - nowMs) / 1000)));
}

function reusedKey(key: string, holder: string): IdempotencyKeyReusedError {
  const shown = shortText(key, 40);
  return new IdempotencyKeyReusedError(
    `idempotencyKey ${JSON.stringify(shown)} already names ${holder}, submitted in the last ${IDEMPOTENCY_WINDOW_MS / 3_600_000} hours with another payload, runAt/delaySeconds or cancellable: use a new key for a new job, or repeat the original request unchanged to get its job; nothing was written`,
  );
}

/** 500: the job could not be handed to SQS; the client retries. */
export class SubmitFailedError extends ApiError {
  readonly status = 500;
  readonly code = 'InternalError';
  constructor(detail: string) {
    super(`the job was not accepted (${detail}): retry the request`);
    this.name = 'SubmitFailedError';
  }
}

/** A planned job's answer: its reply, or why SQS did not take it. */
function outcomeOf(tenant: string, p: Planned, problem: SendProblem | undefined): Outcome {
  if (problem?.refused)
    return new ValidationError(`SQS refused the job (${problem.message}): it was not accepted, and sending it unchanged will not help`);
  if (problem) return new SubmitFailedError(problem.message);
  return { reply: { jobId: p.jobId, tenant, runAt: isoMs(p.dueMs), state: p.path === 'd' ? 'QUEUED' : 'SCHEDULED' }, replayed: p.replayed };
}
