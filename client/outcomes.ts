/**
 * Outcome reporting for tenants with history on (docs/history.md): the Worker and the Lambda
 * wrapper hand each delivery's outcome to an {@link OutcomeReporter}, which sends them in
 * batches (`POST /v1/tenants/{tenant}/jobs/outcomes`, up to 100 per request).
 */

import { cutText } from '../core/util/index.js';

/** The message attribute that asks for a report (the dispatcher sets it for history tenants). */
export const HISTORY_ATTRIBUTE = 'dynein-history';

/** One delivery's outcome, as the API takes it. */
export interface OutcomeReport {
  readonly jobId: string;
  readonly outcome: 'SUCCEEDED' | 'FAILED' | 'DEAD';
  /** The delivery attempt (the message's receive count). */
  readonly attempts: number;
  /** When the worker received the message (RFC 3339). */
  readonly receivedAt: string;
  readonly durationMs: number;
  readonly error?: string;
  /** The handler's return value, when it is JSON of at most 1 KB. */
  readonly result?: unknown;
}

/** Per-entry answer of the outcomes route. */
export type OutcomeResult =
  { readonly jobId: string; readonly state: string } | { readonly jobId?: string; readonly error: { code: string; message: string } };

/** What a reporter sends through: {@link DyneinClient.reportOutcomes}. */
export interface OutcomeSink {
  reportOutcomes(tenant: string, outcomes: readonly OutcomeReport[]): Promise<{ results: OutcomeResult[] }>;
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

  constructor(
    private readonly sink: OutcomeSink,
    private readonly opts: OutcomeReporterOptions = {},
  ) {
    this.#maxBatch = Math.min(100, opts.maxBatch ?? 100);
    this.#flushMs = opts.flushMs ?? 1_000;
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

  /** Sends everything buffered and waits for every request under way. */
  async flush(): Promise<void> {
    for (const tenant of [...this.#buffers.keys()]) this.#send(tenant);
    while (this.#sending.size > 0) await Promise.all([...this.#sending]);
  }

  #send(tenant: string): void {
    clearTimeout(this.#timers.get(tenant));
    this.#timers.delete(tenant);
    const buffer = this.#buffers.get(tenant) ?? [];
    this.#buffers.delete(tenant);
    for (let i = 0; i < buffer.length; i += this.#maxBatch) {
      const batch = buffer.slice(i, i + this.#maxBatch);
      const sending: Promise<void> = this.#post(tenant, batch).finally(() => {
        this.#sending.delete(sending);
        for (const p of batch) p.done();
      });
      this.#sending.add(sending);
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

/** A handler's return value as a report's `result`: JSON of at most 1 KB, else left out. */
export function resultOf(value: unknown): unknown {
  if (value === undefined) return undefined;
  try {
    const text = JSON.stringify(value);
    return text !== undefined && Buffer.byteLength(text) <= 1024 ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The error text a report carries. */
export function errorText(error: unknown): string {
  return cutText(String((error as Error)?.message ?? error), 1024);
}
