/**
 * The handler's span (docs/tracing.md#the-workers-span): when the application has
 * `@opentelemetry/api`, the Worker and `dyneinLambdaHandler` run each handler in a span started
 * from the message's `traceparent`, as OpenTelemetry's messaging conventions ask: the first
 * attempt as a child of the scheduler's dispatch span, a retry as a new trace with a link to it.
 * Without the package (or with `otel: false`) nothing is loaded and nothing is built.
 */
import { parseTraceparent } from '../core/model/index.js';
import type { DeliveredJob } from './delivery.js';

/** A span's context as `@opentelemetry/api` takes it. */
export interface OtelSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  readonly isRemote?: boolean;
  readonly traceState?: unknown;
}

/** The span the handler runs in (the part of `@opentelemetry/api`'s `Span` used here). */
export interface OtelSpan {
  recordException(exception: unknown): void;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

/**
 * The part of `@opentelemetry/api` used here: pass the module itself
 * (`import * as otel from '@opentelemetry/api'`), as a bundled application must.
 */
export interface OtelApi {
  readonly trace: {
    getTracer(
      name: string,
      version?: string,
    ): {
      startSpan(
        name: string,
        options?: {
          kind?: number;
          attributes?: Record<string, unknown>;
          links?: { context: OtelSpanContext }[];
          root?: boolean;
        },
        context?: unknown,
      ): OtelSpan;
    };
    setSpanContext(context: unknown, spanContext: OtelSpanContext): unknown;
    setSpan(context: unknown, span: OtelSpan): unknown;
  };
  readonly context: { with<T>(context: unknown, fn: () => T): T; active?(): unknown };
  /** Writes a context's trace headers (DyneinClient's requests). */
  readonly propagation?: { inject(context: unknown, carrier: Record<string, string>): void };
  readonly ROOT_CONTEXT: unknown;
  readonly createTraceState?: (raw?: string) => unknown;
}

/** `SpanKind.CONSUMER`, `SpanStatusCode.ERROR` of `@opentelemetry/api`. */
const CONSUMER = 4;
const ERROR = 2;
/** Not a string literal: a bundler leaves it alone, so an application without the package still bundles. */
const OTEL_PACKAGE = ['@opentelemetry', 'api'].join('/');

let loaded: Promise<OtelApi | undefined> | undefined;

/**
 * The API to trace with: the one given, none for `false`, else `@opentelemetry/api` when it
 * resolves from here (looked for once per process).
 */
export function otelApi(given: OtelApi | false | undefined): Promise<OtelApi | undefined> {
  if (given === false) return Promise.resolve(undefined);
  if (given !== undefined) return Promise.resolve(given);
  loaded ??= import(OTEL_PACKAGE).then(
    (m: OtelApi & { default?: OtelApi }) => (m.trace ? m : m.default),
    () => undefined,
  );
  return loaded;
}

/** Where and how a job was received, for its span's attributes. */
export interface HandlerSpanInfo {
  /** The queue's name (the messaging destination). */
  readonly queue: string;
  readonly messageId: string;
  /** The receive count: 1 for the first attempt. */
  readonly attempt: number;
  readonly latenessMs: number;
}

/**
 * Runs `run` in the job's handler span (`process <queue>`, kind consumer), ending it with the
 * handler: an error thrown is recorded on it (status error) and thrown on. Without `api`, just runs.
 */
export async function inHandlerSpan<T>(
  api: OtelApi | undefined,
  job: DeliveredJob<unknown>,
  info: HandlerSpanInfo,
  run: () => Promise<T>,
): Promise<T> {
  if (!api) return run();
  const parent = parseTraceparent(job.traceparent, job.tracestate);
  const remote: OtelSpanContext | undefined = parent && {
    traceId: parent.traceId,
    spanId: parent.spanId,
    traceFlags: parent.flags,
    isRemote: true,
    ...(parent.state !== undefined && api.createTraceState ? { traceState: api.createTraceState(parent.state) } : {}),
  };
  // The first attempt continues the job's trace; a retry starts its own, linked to it.
  const child = remote !== undefined && info.attempt <= 1;
  const span = api.trace.getTracer('dynein-serverless').startSpan(
    `process ${info.queue}`,
    {
      kind: CONSUMER,
      attributes: {
        'messaging.system': 'aws_sqs',
        'messaging.operation': 'process',
        'messaging.destination.name': info.queue,
        'messaging.message.id': info.messageId,
        'dynein.job_id': job.jobId,
        'dynein.tenant': job.tenant,
        'dynein.lateness_ms': info.latenessMs,
        'dynein.attempt': info.attempt,
      },
      ...(remote && !child ? { links: [{ context: remote }] } : {}),
      root: !child,
    },
    child ? api.trace.setSpanContext(api.ROOT_CONTEXT, remote) : api.ROOT_CONTEXT,
  );
  try {
    return await api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, span), run);
  } catch (error) {
    span.recordException(error);
    span.setStatus({ code: ERROR, message: error instanceof Error ? error.message : String(error) });
    throw error;
  } finally {
    span.end();
  }
}

/** The queue name in a queue URL or ARN. */
export function queueNameOf(urlOrArn: string | undefined): string {
  if (!urlOrArn) return 'unknown';
  return urlOrArn.slice(Math.max(urlOrArn.lastIndexOf('/'), urlOrArn.lastIndexOf(':')) + 1) || 'unknown';
}
