import type { RequestCounter } from '../adapters/requestCounter.js';
import type { Telemetry } from '../lambdas/runtime/handlers.js';

/** Upper bounds (ms) of the lateness histogram's buckets; the last bucket is open. */
export const LATENESS_BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

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
  readonly startedAt = Date.now();

  constructor(private readonly requests: RequestCounter) {}

  /** The {@link Telemetry} handlers report to; errors go to stderr. */
  telemetry(): Telemetry {
    return {
      count: (name, n) => this.#counts.set(name, (this.#counts.get(name) ?? 0) + n),
      values: (name, _unit, values) => {
        if (name !== 'LatenessMs') return;
        for (const v of values) {
          const i = LATENESS_BUCKETS_MS.findIndex((b) => v <= b);
          this.#lateness[i < 0 ? LATENESS_BUCKETS_MS.length : i]!++;
          this.#latenessCount++;
          this.#latenessSum += v;
          this.#latenessMax = Math.max(this.#latenessMax, v);
        }
      },
      error: (message, err) => console.error(`dynein compute: ${message}: ${(err as Error)?.stack ?? err}`),
    };
  }

  snapshot() {
    const c = (k: string) => this.#counts.get(k) ?? 0;
    const submitted = c('JobsSubmitted');
    const requests = this.requests.snapshot();
    const dispatched = c('JobsDispatched');
    const direct = c('JobsQueuedDirectly');
    const handled = dispatched + direct;
    return {
      since: new Date(this.startedAt).toISOString(),
      jobs: {
        submitted,
        queuedDirectly: direct,
        ingested: c('JobsIngested'),
        dispatched,
        cancelled: c('JobsCancelled'),
        /** Table jobs accepted and not yet sent or cancelled (since compute started). */
        backlog: Math.max(0, submitted - direct - dispatched - c('JobsCancelled')),
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
      requestsPerJob: handled === 0 ? {} : Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, +(v / handled).toFixed(3)])),
    };
  }
}
