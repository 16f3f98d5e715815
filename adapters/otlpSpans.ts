import type { SpanRecord, SpanSink } from '../core/model/index.js';

/**
 * The scheduler's spans exported over OTLP/HTTP with the JSON encoding
 * (https://opentelemetry.io/docs/specs/otlp/#otlphttp): POSTed to `<endpoint>/v1/traces` as an
 * `ExportTraceServiceRequest`, by batches of at most `maxBatch` spans, at least every `intervalMs`
 * while spans wait, and when a function flushes before it returns (docs/tracing.md). At most
 * `maxQueued` spans wait: past that the newest are dropped (counted), so a collector that is down
 * never grows the function's memory. A failed export is dropped too (logged once per minute): a
 * trace is never worth delaying a job.
 */
export interface OtlpOptions {
  /** e.g. `http://127.0.0.1:4318` (the ADOT Lambda layer's collector, or one the team runs). */
  readonly endpoint: string;
  /** `service.name` of the resource: `dynein` by default. */
  readonly serviceName?: string;
  /** Further resource attributes (the function, the deployment). */
  readonly resource?: Readonly<Record<string, string>>;
  readonly maxBatch?: number;
  readonly maxQueued?: number;
  readonly intervalMs?: number;
  /** Per request. */
  readonly timeoutMs?: number;
  readonly log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** The POST (default: the global `fetch`). */
  readonly fetch?: (url: string, init: RequestInit) => Promise<Response>;
}

const SCOPE = { name: 'dynein-serverless' };

export class OtlpHttpSpanSink implements SpanSink {
  readonly #queue: SpanRecord[] = [];
  readonly #url: string;
  readonly #resource: unknown;
  #timer: NodeJS.Timeout | undefined;
  #inflight = new Set<Promise<void>>();
  #lastLogged = 0;
  /** Spans dropped (queue full, or their export failed), and spans exported. */
  dropped = 0;
  exported = 0;

  constructor(private readonly opts: OtlpOptions) {
    this.#url = `${opts.endpoint.replace(/\/+$/, '')}/v1/traces`;
    this.#resource = {
      attributes: attributes({ 'service.name': opts.serviceName ?? 'dynein', ...(opts.resource ?? {}) }),
    };
  }

  record(span: SpanRecord): void {
    if (this.#queue.length >= (this.opts.maxQueued ?? 10_000)) {
      this.dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= (this.opts.maxBatch ?? 512)) void this.#send();
    else this.#timer ??= setTimeout(() => void this.#send(), this.opts.intervalMs ?? 1_000).unref();
  }

  /** Sends every span waiting, and waits for the exports in flight. */
  async flush(): Promise<void> {
    while (this.#queue.length > 0) await this.#send();
    await Promise.all([...this.#inflight]);
  }

  #send(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#queue.splice(0, this.opts.maxBatch ?? 512);
    if (batch.length === 0) return Promise.resolve();
    const p = this.#post(batch).finally(() => this.#inflight.delete(p));
    this.#inflight.add(p);
    return p;
  }

  async #post(batch: readonly SpanRecord[]): Promise<void> {
    const body = JSON.stringify(otlpRequest(batch, this.#resource));
    try {
      const res = await (this.opts.fetch ?? fetch)(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5_000),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      this.exported += batch.length;
    } catch (err) {
      this.dropped += batch.length;
      const now = Date.now();
      if (now - this.#lastLogged >= 60_000) {
        this.#lastLogged = now;
        this.opts.log?.('span export failed; spans dropped', { url: this.#url, spans: batch.length, error: (err as Error).message });
      }
    }
  }
}

/** An OTLP `ExportTraceServiceRequest` (JSON mapping: ids in hex, 64-bit integers as strings). */
export function otlpRequest(spans: readonly SpanRecord[], resource: unknown = { attributes: [] }): unknown {
  return { resourceSpans: [{ resource, scopeSpans: [{ scope: SCOPE, spans: spans.map(otlpSpan) }] }] };
}

function otlpSpan(s: SpanRecord): unknown {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.parentSpanId !== undefined ? { parentSpanId: s.parentSpanId } : {}),
    name: s.name,
    kind: s.kind,
    startTimeUnixNano: nanos(s.startMs),
    endTimeUnixNano: nanos(Math.max(s.startMs, s.endMs)),
    attributes: attributes(s.attributes),
    ...(s.links && s.links.length > 0 ? { links: s.links.map((l) => ({ traceId: l.traceId, spanId: l.spanId })) } : {}),
    status: s.error !== undefined ? { code: 2, message: s.error } : { code: 0 },
  };
}

const nanos = (ms: number): string => (BigInt(Math.round(ms * 1_000)) * 1_000n).toString();

function attributes(attrs: Readonly<Record<string, string | number | boolean>>): unknown[] {
  return Object.entries(attrs).map(([key, v]) => ({
    key,
    value:
      typeof v === 'string'
        ? { stringValue: v }
        : typeof v === 'boolean'
          ? { boolValue: v }
          : Number.isInteger(v)
            ? { intValue: String(v) }
            : { doubleValue: v },
  }));
}
