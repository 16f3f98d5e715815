import { jobTrace, newSpanId, sampled, type TraceContext } from './traceContext.js';

/**
 * The scheduler's own spans (docs/tracing.md): each in the trace of the job it is about, none
 * holding payload text. A {@link SpanSink} takes them (the OTLP/HTTP exporter, the local stack's
 * memory); without one nothing is built.
 */
export type SpanName =
  | 'dynein.submit'
  | 'dynein.ingest'
  | 'dynein.dispatch'
  | 'dynein.schedule.fire'
  | 'dynein.workflow.release'
  | 'dynein.receive'
  | 'dynein.outcome';

/** OpenTelemetry's span kinds, as OTLP numbers them. */
export const SPAN_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface SpanRecord {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: SpanName;
  readonly kind: (typeof SPAN_KIND)[keyof typeof SPAN_KIND];
  /** Epoch milliseconds (fractions kept). */
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
  /** Other spans this one stands for too (a batch span's jobs). */
  readonly links?: readonly { readonly traceId: string; readonly spanId: string }[];
  /** Set when what the span covers failed: its message. */
  readonly error?: string;
}

/** Where the scheduler's spans go. `record` never throws and never waits; `flush` sends what is buffered. */
export interface SpanSink {
  record(span: SpanRecord): void;
  flush(): Promise<void>;
}

/**
 * The trace a job's spans go in and their parent: the submit's span (the caller's trace), or,
 * for a job submitted without one, the span its id derives; undefined when the trace is not
 * sampled (nothing is recorded for it).
 */
export function jobSpanParent(jobId: string, trace: TraceContext | undefined): TraceContext | undefined {
  const t = trace ?? jobTrace(jobId);
  return sampled(t) ? t : undefined;
}

/** A job's trace id: the one its submit carried, else the one its id derives (docs/tracing.md). */
export function jobTraceId(job: { readonly jobId: string; readonly trace?: TraceContext | undefined }): string {
  return (job.trace ?? jobTrace(job.jobId)).traceId;
}

/** What every log line about one job carries (docs/tracing.md): its id and its trace id. */
export function jobLogFields(job: { readonly jobId: string; readonly trace?: TraceContext | undefined }): {
  jobId: string;
  traceId: string;
} {
  return { jobId: job.jobId, traceId: jobTraceId(job) };
}

/** The span id a delivered message's `traceparent` names as its parent: the send's `dynein.dispatch` span. */
export function spanIdOfTraceparent(header: string): string {
  return header.slice(36, 52);
}

/**
 * The `dynein.submit` spans of one request: one for a caller's trace (its span the parent), or
 * one per job for jobs without (each the root of its own trace, its span id the one the job's id
 * derives).
 */
export function submitSpans(
  jobIds: readonly string[],
  trace: TraceContext | undefined,
  caller: TraceContext | undefined,
  at: { readonly startMs: number; readonly endMs: number },
  attributes: Readonly<Record<string, string | number | boolean>>,
): SpanRecord[] {
  const base = { name: 'dynein.submit' as const, kind: SPAN_KIND.server, startMs: at.startMs, endMs: at.endMs };
  if (trace && caller) {
    if (!sampled(trace) || jobIds.length === 0) return [];
    return [
      {
        ...base,
        traceId: trace.traceId,
        spanId: trace.spanId,
        parentSpanId: caller.spanId,
        attributes: { ...attributes, 'dynein.jobs': jobIds.length, ...(jobIds.length === 1 ? { 'dynein.job_id': jobIds[0]! } : {}) },
      },
    ];
  }
  return jobIds.map((jobId) => {
    const t = jobTrace(jobId);
    return { ...base, traceId: t.traceId, spanId: t.spanId, attributes: { ...attributes, 'dynein.job_id': jobId } };
  });
}

/** A span in a job's trace under its submit (`dynein.ingest`, `dynein.dispatch`), or undefined when not sampled. */
export function jobSpan(
  name: SpanName,
  kind: SpanRecord['kind'],
  job: { readonly jobId: string; readonly tenant: string; readonly trace?: TraceContext },
  at: { readonly startMs: number; readonly endMs: number },
  attributes: Readonly<Record<string, string | number | boolean>> = {},
  spanId: string = newSpanId(),
): SpanRecord | undefined {
  const parent = jobSpanParent(job.jobId, job.trace);
  if (!parent) return undefined;
  return {
    traceId: parent.traceId,
    spanId,
    parentSpanId: parent.spanId,
    name,
    kind,
    startMs: at.startMs,
    endMs: at.endMs,
    attributes: { 'dynein.job_id': job.jobId, 'dynein.tenant': job.tenant, ...attributes },
  };
}

/** A delivery a worker reported the outcome of (`POST .../jobs/outcomes`), as the spans of its trace take it. */
export interface ReportedDelivery {
  readonly jobId: string;
  readonly tenant: string;
  readonly dueMs: number;
  /** The receive count. */
  readonly attempt: number;
  readonly receivedAtMs: number;
  readonly durationMs: number;
  readonly outcome: string;
  readonly error?: string;
}

/**
 * The spans of a reported delivery (docs/tracing.md#the-receive-and-the-outcome), in the trace
 * of the delivered message's `traceparent` (`message`): `dynein.receive`, the worker's handling
 * from its receive for the handler's duration, under the dispatch span the message names; and
 * `dynein.outcome`, the report's arrival at the scheduler (`reported`), under it. None when the
 * trace is not sampled.
 */
export function deliverySpans(
  delivery: ReportedDelivery,
  message: TraceContext,
  reported: { readonly startMs: number; readonly endMs: number },
): SpanRecord[] {
  if (!sampled(message)) return [];
  const job = { 'dynein.job_id': delivery.jobId, 'dynein.tenant': delivery.tenant };
  const receive: SpanRecord = {
    traceId: message.traceId,
    spanId: newSpanId(),
    parentSpanId: message.spanId,
    name: 'dynein.receive',
    kind: SPAN_KIND.consumer,
    startMs: delivery.receivedAtMs,
    endMs: delivery.receivedAtMs + delivery.durationMs,
    attributes: {
      ...job,
      'messaging.system': 'aws_sqs',
      'messaging.operation': 'process',
      'dynein.attempt': delivery.attempt,
      'dynein.lateness_ms': delivery.receivedAtMs - delivery.dueMs,
      'dynein.outcome': delivery.outcome,
    },
    ...(delivery.outcome === 'FAILED' || delivery.outcome === 'DEAD' ? { error: delivery.error ?? delivery.outcome } : {}),
  };
  const outcome: SpanRecord = {
    traceId: message.traceId,
    spanId: newSpanId(),
    parentSpanId: receive.spanId,
    name: 'dynein.outcome',
    kind: SPAN_KIND.server,
    startMs: reported.startMs,
    endMs: reported.endMs,
    attributes: { ...job, 'dynein.outcome': delivery.outcome },
  };
  return [receive, outcome];
}
