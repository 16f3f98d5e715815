/**
 * Outcome reporting (`POST /v1/tenants/{tenant}/jobs/outcomes`). For tenants with history on
 * (docs/history.md) the Worker and the Lambda wrapper hand each delivery's outcome to an
 * {@link OutcomeReporter}, which sends them in batches of up to 100, fire and forget. A keyed job's
 * (concurrency by key, docs/flow-control.md) is reported whatever the history setting, with its
 * key: its final outcome frees its key's slot. A workflow
 * job's outcome is what moves its workflow on, so it is sent at once instead and retried until
 * answered ({@link reportOutcomeNow}); its message is deleted only then. Workflow jobs that end
 * at the same time share requests ({@link OutcomeReporter.reportNow}): one request per job would
 * cost one API call, and one Lambda invocation, each.
 */

import { backoffMs, cutText, sleep } from '../core/util/index.js';
import { DyneinError } from './errors.js';

/** The message attribute that asks for a report (the dispatcher sets it for history tenants). */
export const HISTORY_ATTRIBUTE = 'dynein-history';

/**
 * The message attribute naming a workflow job's workflow (core/model/messages.ts): its outcome is
 * reported whatever the tenant's history setting, before the message is deleted.
 */
export const WORKFLOW_ATTRIBUTE = 'workflow';

/**
 * The message attribute naming a keyed job's concurrency key (core/model/messages.ts): its outcome
 * is reported with that key whatever the tenant's history setting (a final outcome frees the key's
 * slot), and its heartbeats renew the slot's lease.
 */
export const CONCURRENCY_KEY_ATTRIBUTE = 'concurrencyKey';

/** Longest concurrency key, in characters (UTF-16 code units; core/model/validate.ts). */
export const MAX_CONCURRENCY_KEY_LENGTH = 128;

/** Largest `result` the route keeps for a job (its JSON text, UTF-8 bytes; core/jobs/history.ts). */
export const MAX_RESULT_BYTES = 1024;
/** Largest `result` the route keeps for a workflow job, which its children receive (core/jobs/history.ts). */
export const MAX_WORKFLOW_RESULT_BYTES = 64 * 1024;

/** Most job ids in one heartbeat request (`POST /v1/tenants/{tenant}/jobs/heartbeats`). */
export const MAX_HEARTBEAT_JOBS = 100;

/**
 * One delivery's outcome, as the API takes it. `CANCELLED`: the job stopped on a cancel request
 * while it ran (docs/flow-control.md "Cancel a running job"); final, as `SUCCEEDED` and `DEAD` are.
 */
export interface OutcomeReport {
  readonly jobId: string;
  readonly outcome: 'SUCCEEDED' | 'FAILED' | 'DEAD' | 'CANCELLED';
  /** The delivery attempt (the message's receive count). */
  readonly attempts: number;
  /** When the worker received the message (RFC 3339). */
  readonly receivedAt: string;
  readonly durationMs: number;
  readonly error?: string;
  /** The handler's return value, when it is JSON of at most 1 KB (64 KiB for a workflow job). */
  readonly result?: unknown;
  /**
   * A keyed job's concurrency key (its `concurrencyKey` message attribute): the route then takes
   * the report whatever the tenant's history setting; `SUCCEEDED`, `DEAD` and `CANCELLED` free the
   * key's slot, `FAILED` renews its lease.
   */
  readonly concurrencyKey?: string;
  /**
   * The delivered message's `traceparent`: the scheduler records the receive and the outcome as
   * spans of the job's trace, under its dispatch span (docs/tracing.md#the-receive-and-the-outcome).
   */
  readonly traceparent?: string;
}

/**
 * The report of one delivery of job `jobId`: received at `receivedAt` (epoch ms) on its
 * `attempts`-th receive, ended at `endedAt`; `extra`'s undefined fields are left out.
 */
export function outcomeReport(
  jobId: string,
  outcome: OutcomeReport['outcome'],
  delivery: { readonly attempts: number; readonly receivedAt: number; readonly endedAt: number },
  extra: {
    readonly error?: string;
    readonly result?: unknown;
    readonly concurrencyKey?: string | undefined;
    readonly traceparent?: string | undefined;
  } = {},
): OutcomeReport {
  return {
    jobId,
    outcome,
    attempts: delivery.attempts,
    receivedAt: new Date(delivery.receivedAt).toISOString(),
    durationMs: Math.max(0, delivery.endedAt - delivery.receivedAt),
    ...(extra.error !== undefined ? { error: extra.error } : {}),
    ...(extra.result !== undefined ? { result: extra.result } : {}),
    ...(extra.concurrencyKey !== undefined ? { concurrencyKey: extra.concurrencyKey } : {}),
    ...(extra.traceparent !== undefined ? { traceparent: extra.traceparent } : {}),
  };
}

/** Per-entry answer of the outcomes route. */
export type OutcomeResult =
  { readonly jobId: string; readonly state: string } | { readonly jobId?: string; readonly error: { code: string; message: string } };

/**
 * What the Worker and the Lambda wrapper learn running jobs' stop requests through, and renew
 * keyed jobs' slot leases with (`concurrencyKeys`: job id to key, for the keyed jobs among
 * `jobIds`): {@link DyneinClient.heartbeats} (`POST /v1/tenants/{tenant}/jobs/heartbeats`, 1 to 100 ids).
 */
export interface HeartbeatSink {
  heartbeats(
    tenant: string,
    jobIds: readonly string[],
    opts?: { signal?: AbortSignal; concurrencyKeys?: Readonly<Record<string, string>> },
  ): Promise<{ readonly cancelRequested: readonly string[] }>;
}

/**
 * What a reporter sends through: {@link DyneinClient.reportOutcomes}, and its `heartbeats` when the
 * sink has them (a DyneinClient does): without them, a Worker or Lambda wrapper never learns that a
 * running job's stop was requested (docs/flow-control.md "Cancel a running job").
 */
export interface OutcomeSink extends Partial<HeartbeatSink> {
  reportOutcomes(tenant: string, outcomes: readonly OutcomeReport[]): Promise<{ results: OutcomeResult[] }>;
}

/** The heartbeats of a Worker's or Lambda wrapper's `client`, when it has them. */
export function heartbeatSinkOf(client: OutcomeSink | OutcomeReporter | undefined): HeartbeatSink | undefined {
  if (client instanceof OutcomeReporter) return client.heartbeatSink();
  if (!client || typeof client.heartbeats !== 'function') return undefined;
  return { heartbeats: (tenant, jobIds, opts) => client.heartbeats!(tenant, jobIds, opts) };
}

/** A running job a heartbeat names: its key too when it is a keyed job (its slot lease is renewed). */
export interface HeartbeatJob {
  readonly tenant: string;
  readonly jobId: string;
  readonly concurrencyKey?: string | undefined;
}

/**
 * The jobs of `jobs` whose stop was requested: one heartbeat request per tenant and 100 ids, all at
 * once, each with the keys of its keyed jobs (`concurrencyKeys`), which renews their slot leases. A
 * request that fails is given to `onError` and its jobs read as not requested (they run on; the
 * next heartbeat asks again): a heartbeat never fails a job.
 */
export async function requestedStops(
  sink: HeartbeatSink,
  jobs: Iterable<HeartbeatJob>,
  onError: (error: unknown, tenant: string, jobIds: readonly string[]) => void,
  signal?: AbortSignal,
): Promise<Set<string>> {
  const byTenant = new Map<string, Map<string, string | undefined>>();
  for (const { tenant, jobId, concurrencyKey } of jobs) {
    const ids = byTenant.get(tenant) ?? new Map<string, string | undefined>();
    ids.set(jobId, concurrencyKey ?? ids.get(jobId));
    byTenant.set(tenant, ids);
  }
  const requests: { tenant: string; jobIds: string[]; keys: Map<string, string | undefined> }[] = [];
  for (const [tenant, ids] of byTenant) {
    const all = [...ids.keys()];
    for (let i = 0; i < all.length; i += MAX_HEARTBEAT_JOBS)
      requests.push({ tenant, jobIds: all.slice(i, i + MAX_HEARTBEAT_JOBS), keys: ids });
  }
  const stops = new Set<string>();
  await Promise.all(
    requests.map(async ({ tenant, jobIds, keys }) => {
      const keyed = jobIds.flatMap((id) => {
        const key = keys.get(id);
        return key === undefined ? [] : [[id, key] as const];
      });
      const opts = {
        ...(signal ? { signal } : {}),
        ...(keyed.length > 0 ? { concurrencyKeys: Object.fromEntries(keyed) } : {}),
      };
      try {
        const { cancelRequested } = await sink.heartbeats(tenant, jobIds, opts);
        for (const id of cancelRequested) stops.add(id);
      } catch (error) {
        if (!signal?.aborted) onError(error, tenant, jobIds);
      }
    }),
  );
  return stops;
}

export interface OutcomeReporterOptions {
  /** Outcomes per request (the route's limit). @default 100 */
  readonly maxBatch?: number;
  /** How long an outcome may wait for others before its batch is sent. @default 1_000 */
  readonly flushMs?: number;
  /** A batch (or entries of it) that could not be stored after the client's retries and the reporter's. */
  readonly onError?: (error: unknown, outcomes: readonly OutcomeReport[]) => void;
  /** Times entries answered `Throttled` are sent again (after 200 ms, 400 ms, 800 ms, ...). @default 3 */
  readonly throttledRetries?: number;
  /** The first of those waits, doubled each time. @default 200 */
  readonly retryDelayMs?: number;
  /**
   * Requests of {@link OutcomeReporter.reportNow} under way at once per tenant (an integer, at
   * least 1); reports made while that many are under way wait and go together in the next.
   * @default 4
   */
  readonly nowInFlight?: number;
}

interface Pending {
  readonly report: OutcomeReport;
  readonly done: () => void;
}

/**
 * Buffers outcomes per tenant and sends a batch when it holds `maxBatch` (100) of them, when its
 * oldest has waited `flushMs` (1 s), or on {@link flush}. At steady load a worker makes at most
 * one request per second per tenant, and one per 100 jobs above 100 jobs/s.
 *
 * @example
 * const reporter = new OutcomeReporter(client);
 * await reporter.report('billing', { jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt, durationMs: 12 });
 */
export class OutcomeReporter {
  readonly #buffers = new Map<string, Pending[]>();
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #sending = new Set<Promise<void>>();
  readonly #maxBatch: number;
  readonly #flushMs: number;
  /** What {@link reportNow} sends through: this reporter's sink, with reports made together sharing requests. */
  readonly #now: CoalescingSink;

  /** @throws RangeError listing every option out of range (`maxBatch`, `nowInFlight`) */
  constructor(
    private readonly sink: OutcomeSink,
    private readonly opts: OutcomeReporterOptions = {},
  ) {
    checkReporterOptions(opts);
    this.#maxBatch = Math.min(100, opts.maxBatch ?? 100);
    this.#flushMs = opts.flushMs ?? 1_000;
    const limits = { maxInFlight: opts.nowInFlight ?? 4, maxBatch: this.#maxBatch };
    this.#now = new CoalescingSink(sink, limits, (request) => this.#track(request));
  }

  /** Queues an outcome; resolves once its batch has been sent (or given up on: never rejects). */
  report(tenant: string, report: OutcomeReport): Promise<void> {
    return new Promise<void>((done) => {
      const buffer = this.#buffers.get(tenant) ?? [];
      buffer.push({ report, done });
      this.#buffers.set(tenant, buffer);
      if (buffer.length >= this.#maxBatch) this.#send(tenant);
      else if (!this.#timers.has(tenant)) {
        const timer = setTimeout(() => this.#send(tenant), this.#flushMs);
        timer.unref?.();
        this.#timers.set(tenant, timer);
      }
    });
  }

  /**
   * Sends one outcome at once (not in the 1 s batch), retrying until it is answered: what
   * {@link reportOutcomeNow} does, with the same answer, options and retries for this report.
   * Used for workflow jobs. Reports made together share requests: while fewer than `nowInFlight`
   * (4) of the tenant's are under way, a try goes out at once (alone, when the tenant is idle);
   * else it waits for the next request, which takes up to `maxBatch` (100) waiting tries. A worker
   * finishing 50 workflow jobs at once thus makes a handful of requests, not 50, and waits no
   * longer when idle.
   */
  reportNow(tenant: string, report: OutcomeReport, opts: ReportNowOptions = {}): Promise<ReportAnswer> {
    return reportOutcomeNow(this.#now, tenant, report, opts);
  }

  /** The sink's heartbeats ({@link DyneinClient.heartbeats}), or undefined when it has none. */
  heartbeatSink(): HeartbeatSink | undefined {
    const sink = this.sink;
    if (typeof sink.heartbeats !== 'function') return undefined;
    return { heartbeats: (tenant, jobIds, opts) => sink.heartbeats!(tenant, jobIds, opts) };
  }

  /** Sends everything buffered and waits for every request under way, {@link reportNow}'s too. */
  async flush(): Promise<void> {
    for (const tenant of [...this.#buffers.keys()]) this.#send(tenant);
    while (this.#sending.size > 0) await Promise.all([...this.#sending]);
  }

  /** Keeps `request` (which never rejects) in what {@link flush} waits for until it settles. */
  #track(request: Promise<void>): void {
    this.#sending.add(request);
    void request.finally(() => this.#sending.delete(request));
  }

  #send(tenant: string): void {
    clearTimeout(this.#timers.get(tenant));
    this.#timers.delete(tenant);
    const buffer = this.#buffers.get(tenant) ?? [];
    this.#buffers.delete(tenant);
    for (let i = 0; i < buffer.length; i += this.#maxBatch) {
      const batch = buffer.slice(i, i + this.#maxBatch);
      this.#track(this.#post(tenant, batch).finally(() => batch.forEach((p) => p.done())));
    }
  }

  /**
   * Sends a batch; entries the route answers `Throttled` (DynamoDB did not take them in time) are
   * sent again after a backoff, so an outcome is not lost to a burst. The batch's `report()`
   * promises resolve only after the last try: a worker awaiting a `FAILED` report therefore
   * sets the retry's backoff after that report landed, and the retry's report cannot be
   * overwritten by it.
   */
  async #post(tenant: string, batch: readonly Pending[]): Promise<void> {
    let reports = batch.map((p) => p.report);
    const retries = this.opts.throttledRetries ?? 3;
    for (let attempt = 0; ; attempt++) {
      let results: OutcomeResult[];
      try {
        ({ results } = await this.sink.reportOutcomes(tenant, reports));
      } catch (error) {
        this.opts.onError?.(error, reports);
        return;
      }
      const errorOf = (i: number) => {
        const r = results[i];
        return r !== undefined && 'error' in r ? r.error : undefined;
      };
      const throttled = reports.filter((_, i) => errorOf(i)?.code === 'Throttled');
      const refused = reports.filter((_, i) => errorOf(i) !== undefined && errorOf(i)!.code !== 'Throttled');
      if (refused.length > 0) this.opts.onError?.(new Error(`${refused.length} outcome(s) were refused`), refused);
      if (throttled.length === 0) return;
      if (attempt >= retries) {
        this.opts.onError?.(new Error(`${throttled.length} outcome(s) were not stored (throttled ${attempt + 1} times)`), throttled);
        return;
      }
      await new Promise((r) => setTimeout(r, (this.opts.retryDelayMs ?? 200) * 2 ** attempt));
      reports = throttled;
    }
  }
}

/** Throws one RangeError listing every option of `opts` out of range. */
function checkReporterOptions(opts: OutcomeReporterOptions): void {
  const problems: string[] = [];
  // Below 1, a request would take no entry, or none would ever start: the reports would hang.
  for (const name of ['maxBatch', 'nowInFlight'] as const) {
    const value = opts[name];
    if (value !== undefined && !(Number.isInteger(value) && value >= 1))
      problems.push(`${name} must be an integer of at least 1 (got ${String(value)})`);
  }
  if (problems.length > 0) throw new RangeError(`OutcomeReporter: ${problems.join('; ')}`);
}

/** An entry waiting in a {@link CoalescingSink}, and how to answer the call that gave it. */
interface Waiting {
  readonly report: OutcomeReport;
  /** The route's result for the entry; undefined when it answered none for it. */
  readonly resolve: (result: OutcomeResult | undefined) => void;
  /** The whole request's error, given to every entry of it. */
  readonly reject: (error: unknown) => void;
}

/**
 * An {@link OutcomeSink} in front of `sink` that lets calls made at about the same time share
 * requests, without making any wait when the tenant is idle: per tenant, a call's entries go out
 * at once while fewer than `maxInFlight` requests are under way; else they wait, and each request
 * that ends sends up to `maxBatch` of those waiting. Each call still gets its own answer: its
 * entries' results (the route answers one per entry, in order), or the request's error. So
 * {@link reportOutcomeNow} runs its retries unchanged, each try through here.
 */
class CoalescingSink implements OutcomeSink {
  readonly #waiting = new Map<string, Waiting[]>();
  readonly #inFlight = new Map<string, number>();

  constructor(
    private readonly sink: OutcomeSink,
    private readonly limits: { readonly maxInFlight: number; readonly maxBatch: number },
    /** Given each request (a promise that never rejects), so that a flush can wait for it. */
    private readonly track: (request: Promise<void>) => void,
  ) {}

  async reportOutcomes(tenant: string, outcomes: readonly OutcomeReport[]): Promise<{ results: OutcomeResult[] }> {
    const answers = await Promise.all(
      outcomes.map(
        (report) => new Promise<OutcomeResult | undefined>((resolve, reject) => this.#enqueue(tenant, { report, resolve, reject })),
      ),
    );
    // Results map to entries by index: the list ends at the first entry answered none, so the
    // entries after it read as unanswered too (retried) rather than taking another's result.
    const results: OutcomeResult[] = [];
    for (const answer of answers) {
      if (answer === undefined) break;
      results.push(answer);
    }
    return { results };
  }

  #enqueue(tenant: string, entry: Waiting): void {
    const waiting = this.#waiting.get(tenant) ?? [];
    waiting.push(entry);
    this.#waiting.set(tenant, waiting);
    this.#pump(tenant);
  }

  /** Sends what waits for `tenant` while fewer than `maxInFlight` of its requests are under way. */
  #pump(tenant: string): void {
    const waiting = this.#waiting.get(tenant) ?? [];
    while (waiting.length > 0 && (this.#inFlight.get(tenant) ?? 0) < this.limits.maxInFlight) {
      this.#inFlight.set(tenant, (this.#inFlight.get(tenant) ?? 0) + 1);
      this.track(this.#post(tenant, waiting.splice(0, this.limits.maxBatch)));
    }
    if (waiting.length === 0) this.#waiting.delete(tenant);
  }

  /** One request: each entry gets its result, or the request's error; then the next may start. */
  async #post(tenant: string, batch: readonly Waiting[]): Promise<void> {
    try {
      const { results } = await this.sink.reportOutcomes(
        tenant,
        batch.map((w) => w.report),
      );
      batch.forEach((w, i) => w.resolve(results[i]));
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      const left = (this.#inFlight.get(tenant) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(tenant, left);
      else this.#inFlight.delete(tenant);
      this.#pump(tenant);
    }
  }
}

/**
 * A handler's return value as a report's `result`: JSON of at most `maxBytes` (1 KB; a workflow
 * job's {@link MAX_WORKFLOW_RESULT_BYTES}), else left out (undefined).
 */
export function resultOf(value: unknown, maxBytes = MAX_RESULT_BYTES): unknown {
  if (value === undefined) return undefined;
  try {
    const text = JSON.stringify(value);
    return text !== undefined && Buffer.byteLength(text) <= maxBytes ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The error text a report carries. */
export function errorText(error: unknown): string {
  return cutText(String((error as Error)?.message ?? error), 1024);
}

/**
 * An outcome that {@link reportOutcomeNow} gave up on: refused for good (`code`: the entry's error
 * code, such as `NotDelivered` or `ValidationError`, or the whole request's), or still unanswered
 * when its retries ran out or its signal aborted. `cause` is the last error.
 */
export class OutcomeNotReportedError extends Error {
  readonly jobId: string;
  readonly outcome: OutcomeReport['outcome'];
  /** The route's error code, when it answered one. */
  readonly code: string | undefined;
  readonly attempts: number;

  constructor(report: OutcomeReport, why: string, opts: { code?: string; attempts: number; cause?: unknown }) {
    super(`the outcome ${report.outcome} of job ${report.jobId} was not reported after ${opts.attempts} attempt(s): ${why}`, {
      cause: opts.cause,
    });
    this.name = 'OutcomeNotReportedError';
    this.jobId = report.jobId;
    this.outcome = report.outcome;
    this.code = opts.code;
    this.attempts = opts.attempts;
  }
}

/** How {@link reportOutcomeNow} ended: the state the route kept, or the report given up on. */
export type ReportAnswer =
  { readonly answered: true; readonly state: string } | { readonly answered: false; readonly error: OutcomeNotReportedError };

export interface ReportNowOptions {
  /** No retry starts once it aborts (the message was released or lost); the attempt under way finishes. */
  readonly signal?: AbortSignal;
  /** Attempts at most. @default unlimited */
  readonly maxAttempts?: number;
  /** No retry starts this long after the first attempt. @default unlimited */
  readonly budgetMs?: number;
  /** The wait before retry n: full jitter over `baseMs · 2^n`, capped. @default { baseMs: 200, capMs: 5_000 } */
  readonly backoff?: { readonly baseMs: number; readonly capMs: number };
  readonly now?: () => number;
  readonly random?: () => number;
}

/** Per-entry codes that mean "report it again" (`Throttled`: not stored, or stored but the workflow did not move on). */
const RETRYABLE_CODES: ReadonlySet<string> = new Set(['Throttled', 'InternalError']);

/**
 * Sends one outcome (alone, through `sink`) and retries, with backoff, while the answer is "report it again": a call
 * that threw a retryable error (network, 429, 5xx: the client's own retries spent; any error that
 * is not a {@link DyneinError}), or the entry answered `Throttled` (or `InternalError`). It gives up
 * at once on an error that repeating cannot fix (a 4xx for the whole request, or the entry refused:
 * `NotDelivered`, `ValidationError`, `InvalidJobId`...), and once `signal` aborts, `maxAttempts`
 * are spent or `budgetMs` has passed. Never throws.
 *
 * @example
 * const answer = await reportOutcomeNow(client, 'billing', report, { maxAttempts: 5 });
 * if (answer.answered) await deleteMessage();
 * else console.error(answer.error); // leave the message to come back
 */
export async function reportOutcomeNow(
  sink: OutcomeSink,
  tenant: string,
  report: OutcomeReport,
  opts: ReportNowOptions = {},
): Promise<ReportAnswer> {
  const now = opts.now ?? Date.now;
  const started = now();
  const maxAttempts = opts.maxAttempts ?? Number.POSITIVE_INFINITY;
  const budgetMs = opts.budgetMs ?? Number.POSITIVE_INFINITY;
  for (let attempt = 1; ; attempt++) {
    const tried = await tryReport(sink, tenant, report);
    if ('state' in tried) return { answered: true, state: tried.state };
    const giveUp = (why: string): ReportAnswer => ({
      answered: false,
      error: new OutcomeNotReportedError(report, why, { code: tried.code, attempts: attempt, cause: tried.cause }),
    });
    const stopped = () => `${tried.why}; stopped retrying: ${String(opts.signal?.reason?.message ?? 'aborted')}`;
    if (!tried.retryable) return giveUp(tried.why);
    if (opts.signal?.aborted) return giveUp(stopped());
    if (attempt >= maxAttempts || now() - started >= budgetMs) return giveUp(`${tried.why}; retries spent`);
    await sleep(backoffMs(attempt - 1, opts.backoff ?? { baseMs: 200, capMs: 5_000 }, opts.random), opts.signal);
    if (opts.signal?.aborted) return giveUp(stopped());
  }
}

type Tried =
  { readonly state: string } | { readonly retryable: boolean; readonly why: string; readonly code?: string; readonly cause?: unknown };

/** One attempt: the state kept, or why not and whether another attempt may help. */
async function tryReport(sink: OutcomeSink, tenant: string, report: OutcomeReport): Promise<Tried> {
  let results: OutcomeResult[];
  try {
    ({ results } = await sink.reportOutcomes(tenant, [report]));
  } catch (error) {
    const retryable = error instanceof DyneinError ? error.retryable : true;
    const code = (error as { code?: unknown } | null)?.code;
    return { retryable, why: String((error as Error)?.message ?? error), cause: error, ...(typeof code === 'string' ? { code } : {}) };
  }
  const r = results[0];
  if (r === undefined) return { retryable: true, why: 'the route answered no result for the entry' };
  if ('state' in r) return { state: r.state };
  return { retryable: RETRYABLE_CODES.has(r.error.code), why: `${r.error.code}: ${r.error.message}`, code: r.error.code };
}
