/**
 * Outcome reporting for tenants with history on (docs/history.md): the Worker and the Lambda
 * wrapper hand each delivery's outcome to an {@link OutcomeReporter}, which sends them in
 * batches (`POST /v1/tenants/{tenant}/jobs/outcomes`, up to 100 per request).
 */

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
  /** A batch (or entries of it) that could not be stored after the client's retries. */
  readonly onError?: (error: unknown, outcomes: readonly OutcomeReport[]) => void;
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

  async #post(tenant: string, batch: readonly Pending[]): Promise<void> {
    const reports = batch.map((p) => p.report);
    try {
      const { results } = await this.sink.reportOutcomes(tenant, reports);
      const failed = reports.filter((_, i) => results[i] !== undefined && 'error' in results[i]!);
      if (failed.length > 0) this.opts.onError?.(new Error(`${failed.length} outcome(s) were not stored`), failed);
    } catch (error) {
      this.opts.onError?.(error, reports);
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
  return String((error as Error)?.message ?? error).slice(0, 1024);
}
