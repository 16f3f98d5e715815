import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DeliveredJob } from '../../client/delivery.js';
import { inHandlerSpan, otelApi, queueNameOf } from '../../client/tracing.js';

/**
 * The handler's span (client/tracing.ts, docs/tracing.md#the-workers-span) with OpenTelemetry's
 * own SDK: the first attempt a child of the message's `traceparent`, a retry a new trace linked to
 * it, the messaging attributes, an error recorded, the span active while the handler runs.
 */
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  otel.context.setGlobalContextManager(contextManager.enable());
  otel.trace.setGlobalTracerProvider(provider);
});
afterAll(() => {
  otel.trace.disable();
  otel.context.disable();
});
beforeEach(() => exporter.reset());

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const DISPATCH = '00f067aa0ba902b7';
const job = (over: Partial<DeliveredJob<unknown>> = {}): DeliveredJob<unknown> => ({
  jobId: 'j1.demo.3.1.t.x.y',
  tenant: 'demo',
  runAt: '2030-01-01T00:00:00.000Z',
  payload: {},
  payloadText: '{}',
  traceparent: `00-${TRACE}-${DISPATCH}-01`,
  tracestate: 'vendor=abc',
  ...over,
});
const info = (attempt: number) => ({ queue: 'dynein-t-demo', messageId: 'm-1', attempt, latenessMs: 12 });

describe('the handler span', () => {
  it('continues the job’s trace on the first attempt, with the messaging attributes; the handler runs in it', async () => {
    let active: string | undefined;
    const value = await inHandlerSpan(otel, job(), info(1), async () => {
      active = otel.trace.getActiveSpan()?.spanContext().spanId;
      return 42;
    });
    expect(value).toBe(42);
    const [span] = exporter.getFinishedSpans();
    expect(span!.name).toBe('process dynein-t-demo');
    expect(span!.kind).toBe(otel.SpanKind.CONSUMER);
    expect(span!.spanContext().traceId).toBe(TRACE);
    expect(span!.parentSpanContext?.spanId).toBe(DISPATCH);
    expect(span!.spanContext().traceState?.get('vendor')).toBe('abc');
    expect(span!.attributes).toEqual({
      'messaging.system': 'aws_sqs',
      'messaging.operation': 'process',
      'messaging.destination.name': 'dynein-t-demo',
      'messaging.message.id': 'm-1',
      'dynein.job_id': 'j1.demo.3.1.t.x.y',
      'dynein.tenant': 'demo',
      'dynein.lateness_ms': 12,
      'dynein.attempt': 1,
    });
    expect(active).toBe(span!.spanContext().spanId);
    expect(span!.status.code).toBe(otel.SpanStatusCode.UNSET);
  });

  it('starts a new trace on a retry, linked to the job’s', async () => {
    await inHandlerSpan(otel, job(), info(2), async () => undefined);
    const [span] = exporter.getFinishedSpans();
    expect(span!.spanContext().traceId).not.toBe(TRACE);
    expect(span!.parentSpanContext).toBeUndefined();
    expect(span!.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[TRACE, DISPATCH]]);
    expect(span!.attributes['dynein.attempt']).toBe(2);
  });

  it('records what the handler threw (status error) and throws it on', async () => {
    await expect(
      inHandlerSpan(otel, job(), info(1), async () => {
        throw new Error('card declined');
      }),
    ).rejects.toThrow('card declined');
    const [span] = exporter.getFinishedSpans();
    expect(span!.status).toEqual({ code: otel.SpanStatusCode.ERROR, message: 'card declined' });
    expect(span!.events.map((e) => e.name)).toEqual(['exception']);
  });

  it('a message without a traceparent (an earlier release) gets a root span; no API: just runs', async () => {
    await inHandlerSpan(otel, job({ traceparent: undefined, tracestate: undefined }), info(1), async () => undefined);
    const [span] = exporter.getFinishedSpans();
    expect(span!.parentSpanContext).toBeUndefined();
    expect(span!.links).toEqual([]);
    exporter.reset();
    expect(await inHandlerSpan(undefined, job(), info(1), async () => 'ran')).toBe('ran');
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('finds @opentelemetry/api by itself when it is installed, and none with `false`', async () => {
    const found = await otelApi(undefined);
    expect(typeof found?.trace.getTracer).toBe('function');
    expect(await otelApi(false)).toBeUndefined();
    expect(await otelApi(otel)).toBe(otel);
    expect(queueNameOf('https://sqs.eu-west-1.amazonaws.com/123456789012/dynein-t-demo')).toBe('dynein-t-demo');
    expect(queueNameOf('arn:aws:sqs:eu-west-1:123456789012:dynein-t-demo')).toBe('dynein-t-demo');
  });
});
