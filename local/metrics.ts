import type { RequestCounter } from '../adapters/requestCounter.js';
import type { AuditReport } from '../core/recurring/index.js';
import type { Telemetry } from '../lambdas/runtime/handlers.js';

/** Upper bounds (ms) of the lateness histogram's buckets; the last bucket is open. */
export const LATENESS_BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

/** What `requestsPerJob` counts, shown on the dashboard next to the figures. */
export const REQUESTS_PER_JOB_COUNTS =
  'every AWS request the compute process made since it started (API calls, status reads and cancels included; ingest; ' +
  "the tick's reads, idle polls included; sends and delivered markers), divided by the jobs delivered to their queues " +
  '(dispatched + queued directly). Cancelled jobs are not in the divisor; an idle stack still polls, so the figure falls as load rises.';
/** Lateness values kept per tenant for its p95 on the dashboard. */
const TENANT_LATENESS_KEPT = 1_000;
/** Concurrency keys kept (the oldest seen goes first), and shown. */
const MAX_KEYS_KEPT = 1_000;
const KEYS_SHOWN = 10;

/** The 95th percentile of `values`, or null for none. */
function p95(values: readonly number[]): number | null {
  return percentiles(values, [0.95])[0]!;
}

/** Percentiles (nearest rank) of `values`, one per fraction; null each when there are none. */
function percentiles(values: readonly number[], fractions: readonly number[]): (number | null)[] {
  const sorted = [...values].sort((a, b) => a - b);
  return fractions.map((f) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * f))]! : null));
}
/** Missed occurrences the dashboard lists (the newest). */
const MISSED_SHOWN = 20;

/** A missed occurrence as `GET /local/metrics` shows it. */
interface MissedShown {
  readonly tenant: string;
  readonly schedule: string;
  readonly occurrenceAt: string;
  readonly reason: string;
  readonly jobId: string;
  readonly traceId: string;
}
/** Cancelled job ids kept for de-duplication (beyond this, further cancels are not counted). */
const MAX_TRACKED_CANCELS = 1_000_000;

/**
 * The counters behind the local dashboard and `GET /local/metrics`, fed by the handlers'
 * telemetry (as CloudWatch is on AWS) and by the SDK request counter.
 */
export class LocalMetrics {
  readonly #counts = new Map<string, number>();
  readonly #lateness = new Array<number>(LATENESS_BUCKETS_MS.length + 1).fill(0);
  #latenessCount = 0;
  #latenessSum = 0;
  #latenessMax = 0;
  /** The dispatch steps' latest `HeldAfterResumeMs` (the HeldAfterResume alarm's metric on AWS). */
  #heldAfterResumeMs = 0;
  /** Jobs cancelled since compute started, by id: a repeated cancel (answered 200 again) is one job. */
  readonly #cancelled = new Set<string>();
  readonly startedAt = Date.now();
  /** Per tenant (the `Tenant` dimension on AWS): counts, the latest lateness values, when dispatch last saw it paused. */
  readonly #tenants = new Map<string, { counts: Record<string, number>; lateness: number[]; pausedSeenAt?: number }>();
  /** Per concurrency key a dispatch step counted among its busiest: totals, the latest step's waiting, the latest waits. */
  readonly #keys = new Map<string, { tenant: string; key: string; started: number; refused: number; waiting: number; waits: number[] }>();

  /** The never-fired check: checks run, occurrences missed in all, the latest missed ones (newest first). */
  #audits = { runs: 0, lastRunAt: undefined as string | undefined, missed: 0, recent: [] as MissedShown[] };

  constructor(private readonly requests: RequestCounter) {}

  /** A never-fired check's report (docs/tracing.md#never-fired): what the dashboard shows of it. */
  occurrencesAudited(report: AuditReport): void {
    this.#audits.runs++;
    this.#audits.lastRunAt = new Date().toISOString();
    this.#audits.missed += report.missed.length;
    const shown = report.missed.map((m) => ({
      tenant: m.tenant,
      schedule: m.schedule,
      occurrenceAt: new Date(m.dueMs).toISOString(),
      reason: m.reason,
      jobId: m.jobId,
      traceId: m.traceId,
    }));
    this.#audits.recent = [...shown.reverse(), ...this.#audits.recent].slice(0, MISSED_SHOWN);
  }

  /** The {@link Telemetry} handlers report to; errors go to stderr. */
  telemetry(): Telemetry {
    return {
      count: (name, n) => this.#counts.set(name, (this.#counts.get(name) ?? 0) + n),
      values: (name, _unit, values) => {
        if (name === 'HeldAfterResumeMs') this.#heldAfterResumeMs = Math.max(0, ...values);
        if (name !== 'LatenessMs') return;
        for (const v of values) {
          const i = LATENESS_BUCKETS_MS.findIndex((b) => v <= b);
          this.#lateness[i < 0 ? LATENESS_BUCKETS_MS.length : i]!++;
          this.#latenessCount++;
          this.#latenessSum += v;
          this.#latenessMax = Math.max(this.#latenessMax, v);
        }
      },
      tenantMetrics: (tenant, counts, ms) => {
        let t = this.#tenants.get(tenant);
        if (!t) this.#tenants.set(tenant, (t = { counts: {}, lateness: [] }));
        for (const [k, v] of Object.entries(counts)) {
          if (k === 'TenantPaused') t.pausedSeenAt = Date.now();
          else t.counts[k] = (t.counts[k] ?? 0) + v;
        }
        t.lateness.push(...(ms.LatenessMs ?? []));
        if (t.lateness.length > TENANT_LATENESS_KEPT) t.lateness.splice(0, t.lateness.length - TENANT_LATENESS_KEPT);
      },
      keyMetrics: (tenant, key, counts, ms) => {
        const id = `${tenant}\u0000${key}`;
        let k = this.#keys.get(id);
        if (!k) this.#keys.set(id, (k = { tenant, key, started: 0, refused: 0, waiting: 0, waits: [] }));
        k.started += counts.KeyJobsStarted ?? 0;
        k.refused += counts.KeySlotAsksRefused ?? 0;
        k.waiting = counts.KeyJobsWaiting ?? 0;
        k.waits.push(...(ms.KeyWaitMs ?? []));
        if (k.waits.length > TENANT_LATENESS_KEPT) k.waits.splice(0, k.waits.length - TENANT_LATENESS_KEPT);
        if (this.#keys.size > MAX_KEYS_KEPT) this.#keys.delete(this.#keys.keys().next().value!);
      },
      error: (message, err) => console.error(`dynein compute: ${message}: ${(err as Error)?.stack ?? err}`),
      info: (message, fields) => console.log(`dynein compute: ${message} ${JSON.stringify(fields)}`),
    };
  }

  /** A cancel answered 200 (`DELETE .../jobs/{jobId}`): the job counts once, however often it is cancelled. */
  cancelled(jobId: string): void {
    if (this.#cancelled.size < MAX_TRACKED_CANCELS) this.#cancelled.add(jobId);
  }

  snapshot() {
    const c = (k: string) => this.#counts.get(k) ?? 0;
    const submitted = c('JobsSubmitted');
    const requests = this.requests.snapshot();
    const dispatched = c('JobsDispatched');
    const direct = c('JobsQueuedDirectly');
    const delivered = dispatched + direct;
    const cancelled = this.#cancelled.size;
    return {
      since: new Date(this.startedAt).toISOString(),
      jobs: {
        submitted,
        queuedDirectly: direct,
        ingested: c('JobsIngested'),
        /** Sent to their queue by dispatch, counted as each batch is sent (not when the dispatch step ends). */
        dispatched,
        /** Sent to their queue: dispatched + queued directly (the divisor of requestsPerJob). */
        delivered,
        /** Distinct jobs cancelled: a repeated cancel of the same job is not another job. */
        cancelled,
        /** Cancel calls answered 200, repeats included (requests, not jobs). */
        cancelRequests: c('JobsCancelled'),
        /** Table jobs accepted and not yet sent or cancelled (since compute started). */
        backlog: Math.max(0, submitted - direct - dispatched - cancelled),
      },
      lateness: {
        count: this.#latenessCount,
        meanMs: this.#latenessCount ? Math.round(this.#latenessSum / this.#latenessCount) : 0,
        maxMs: this.#latenessMax,
        buckets: LATENESS_BUCKETS_MS.map((le, i) => ({ le, count: this.#lateness[i]! })).concat([
          { le: Number.POSITIVE_INFINITY, count: this.#lateness[LATENESS_BUCKETS_MS.length]! },
        ]),
      },
      requests,
      /** Every AWS request compute made (by operation) divided by jobs delivered; see requestsPerJobCounts. */
      requestsPerJob: delivered === 0 ? {} : Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, +(v / delivered).toFixed(3)])),
      requestsPerJobCounts: REQUESTS_PER_JOB_COUNTS,
      /**
       * As of the latest dispatch step: the longest a tenant that may send (not paused, registered)
       * has had the same first job in a hold lane (ms; 0: none). Near 0 while held jobs drain.
       */
      heldAfterResumeMs: this.#heldAfterResumeMs,
      /** The never-fired check (docs/tracing.md#never-fired): runs, occurrences missed in all, the latest missed. */
      missedOccurrences: { ...this.#audits, recent: [...this.#audits.recent] },
      /** Refused by a tenant's maxSubmitsPerSecond (429 Throttled), all tenants. */
      submitsThrottled: c('SubmitsThrottled'),
      /**
       * The busiest concurrency keys (docs/flow-control.md, "Metrics"), most waiting first: jobs
       * started, asks for a slot refused, jobs waiting as of the latest step that counted the key,
       * and the p95 of the latest waits (due time to slot) of jobs that waited.
       */
      keys: [...this.#keys.values()]
        .sort((a, b) => b.waiting - a.waiting || b.refused - a.refused || b.started - a.started)
        .slice(0, KEYS_SHOWN)
        .map((k) => ({
          tenant: k.tenant,
          key: k.key,
          started: k.started,
          refused: k.refused,
          waiting: k.waiting,
          waitP95Ms: p95(k.waits),
        })),
      /** Per tenant, from dispatch: delivered, held (paused), sends deferred (delivery limit), lateness p50/p95/p99 of the latest sends. */
      tenants: Object.fromEntries(
        [...this.#tenants]
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([name, t]) => {
            const [p50, p95of, p99] = percentiles(t.lateness, [0.5, 0.95, 0.99]);
            return [
              name,
              {
                delivered: t.counts.JobsDispatched ?? 0,
                held: t.counts.JobsHeld ?? 0,
                deferred: t.counts.DeliveriesDeferred ?? 0,
                failedSends: t.counts.DeliveryFailures ?? 0,
                latenessP50Ms: p50,
                latenessP95Ms: p95of,
                latenessP99Ms: p99,
                /** Dispatch saw it paused with jobs held within the last 10 s. */
                paused: t.pausedSeenAt !== undefined && Date.now() - t.pausedSeenAt < 10_000,
              },
            ];
          }),
      ),
    };
  }
}
