import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpHttpSpanSink } from '../../adapters/otlpSpans.js';
import { jobTrace, type SpanRecord } from '../../core/model/index.js';
import { statusHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { httpApiEvent } from '../support/lambdaEvents.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { startOtlpReceiver, type ReceivedSpan } from '../support/otlpReceiver.js';
import { consume, createSystem, httpEvent, runAllGroups, type TestSystem } from '../support/system.js';

/**
 * Trace context from the producer to the worker (docs/tracing.md): the submit's `traceparent`
 * (and `tracestate`) travel with the job, through the inbound queue and the table or straight to
 * the queue, and the delivered message's `traceparent` names the same trace with the scheduler's
 * send as the parent span; `GET` shows the trace id. Without one (or with an invalid one) the job
 * carries the trace its id derives. The scheduler's own spans go out over OTLP/HTTP JSON: a job
 * submitted with a `traceparent` yields `dynein.submit`, `dynein.ingest` and `dynein.dispatch` in the
 * caller's trace, each under the submit span, the dispatch span being the parent its message's
 * `traceparent` names; a batch's jobs share one submit span; a job sent straight to its queue has
 * its dispatch span from submit; jobs without a trace get one each, rooted at the span their id
 * derives; an unsampled trace exports nothing.
 */
let em: Emulators;
let sys: TestSystem;
let ingest: { stop(): Promise<void> };
let dispatch: { stop(): Promise<void> };
let queue: ReturnType<typeof consume>;
let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let sink: OtlpHttpSpanSink;
let flushes = 0;
beforeAll(async () => {
  em = await startEmulators();
  // The scheduler's spans go to an OTLP/HTTP receiver, as to a collector at :4318.
  receiver = await startOtlpReceiver();
  sink = new OtlpHttpSpanSink({ endpoint: receiver.endpoint, intervalMs: 50 });
  const counted = {
    record: (span: SpanRecord) => sink.record(span),
    flush: async () => {
      flushes++;
      await sink.flush();
    },
  };
  sys = await createSystem(em, { tenants: ['alpha'], spans: counted });
  ingest = sys.startIngest();
  dispatch = runAllGroups(sys.w.dispatch);
  queue = consume(em.sqs, sys.tenants.alpha!.url);
});
afterAll(async () => {
  await queue?.stop();
  await dispatch?.stop();
  await ingest?.stop();
  await receiver?.stop();
  await em?.stop();
});

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

async function submit(path: 'jobs' | 'jobs/batch', body: unknown, headers: Record<string, string> = {}) {
  const res = await submitHandler(sys.w)(
    httpApiEvent({
      method: 'POST',
      path: `/v1/tenants/alpha/${path}`,
      pathParameters: { tenant: 'alpha' },
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  );
  return JSON.parse(res.body) as Record<string, any>;
}

async function status(jobId: string): Promise<Record<string, any>> {
  const res = await statusHandler(sys.w)(
    httpEvent('GET', `/v1/tenants/alpha/jobs/${jobId}`, { pathParameters: { tenant: 'alpha', jobId } }),
  );
  return JSON.parse(res.body) as Record<string, any>;
}

async function delivered(jobId: string) {
  await queue.waitFor((d) => d.some((x) => x.jobId === jobId), 20_000);
  const d = queue.deliveries.find((x) => x.jobId === jobId)!;
  const m = TRACEPARENT.exec(d.attributes.traceparent ?? '');
  expect(m, `traceparent of ${jobId}: ${d.attributes.traceparent}`).not.toBeNull();
  return { traceId: m![1]!, parentSpan: m![2]!, flags: m![3]!, tracestate: d.attributes.tracestate };
}

describe('trace context', () => {
  it("carries the caller's trace through the table, a batch and straight to the queue", async () => {
    const headers = { traceparent: `00-${TRACE}-${CALLER_SPAN}-01`, tracestate: 'vendor=abc' };
    const later = new Date(Date.now() + 7_000).toISOString();
    const table = await submit('jobs', { payload: 1, runAt: later }, headers);
    const batch = await submit(
      'jobs/batch',
      {
        jobs: [
          { payload: 2, runAt: later },
          { payload: 3, delaySeconds: 0 },
        ],
      },
      headers,
    );
    const direct = batch.results[1];
    expect(direct.state).toBe('QUEUED');
    expect(table.state).toBe('SCHEDULED');

    // GET: the table holds the trace; a job sent straight to its queue keeps nothing.
    for (let i = 0; i < 50 && (await status(table.jobId)).state === 'UNKNOWN'; i++) await new Promise((r) => setTimeout(r, 100));
    expect((await status(table.jobId)).traceId).toBe(TRACE);
    expect((await status(direct.jobId)).traceId).toBeUndefined();

    for (const jobId of [table.jobId, batch.results[0].jobId, direct.jobId]) {
      const t = await delivered(jobId);
      expect(t.traceId).toBe(TRACE);
      // The parent is the scheduler's span, not the caller's.
      expect(t.parentSpan).not.toBe(CALLER_SPAN);
      expect(t.flags).toBe('01');
      expect(t.tracestate).toBe('vendor=abc');
    }
    // Each send is a span of its own.
    expect((await delivered(table.jobId)).parentSpan).not.toBe((await delivered(batch.results[0].jobId)).parentSpan);
    // Delivered: its marker keeps the trace.
    expect((await status(table.jobId)).traceId).toBe(TRACE);
  });

  it('honours the sampled flag as sent, and starts a trace of its own without a valid traceparent', async () => {
    const later = new Date(Date.now() + 7_000).toISOString();
    const unsampled = await submit('jobs', { payload: 1, runAt: later }, { traceparent: `00-${TRACE}-${CALLER_SPAN}-00` });
    const none = await submit('jobs', { payload: 2, runAt: later });
    const invalid = await submit('jobs', { payload: 3, runAt: later }, { traceparent: `00-${'0'.repeat(32)}-${CALLER_SPAN}-01` });
    expect((await delivered(unsampled.jobId)).flags).toBe('00');
    for (const job of [none, invalid]) {
      const t = await delivered(job.jobId);
      expect(t.traceId).not.toBe(TRACE);
      expect(t.flags).toBe('01');
      expect(t.tracestate).toBeUndefined();
      // GET names the same trace as the message.
      expect((await status(job.jobId)).traceId).toBe(t.traceId);
    }
    expect((await delivered(none.jobId)).traceId).not.toBe((await delivered(invalid.jobId)).traceId);
  });

  it('a debounced job keeps the trace of its latest submit', async () => {
    const body = { payload: 1, debounce: { key: 'traced', periodSeconds: 2 } };
    const first = await submit('jobs', body);
    await submit('jobs', body, { traceparent: `00-${TRACE}-${CALLER_SPAN}-01` });
    expect((await delivered(first.jobId)).traceId).toBe(TRACE);
    expect((await status(first.jobId)).traceId).toBe(TRACE);
  });
});

const TRACE_2 = '0af7651916cd43dd8448eb211c80319c';
const CALLER_SPAN_2 = 'b7ad6b7169203331';

/** The spans of `jobId` (by `dynein.job_id`) named `name`, once the receiver has them. */
async function spansOf(jobId: string, name: string, n = 1): Promise<ReceivedSpan[]> {
  const of = () => receiver.spans.filter((s) => s.name === name && receiver.attribute(s, 'dynein.job_id') === jobId);
  for (const until = Date.now() + 10_000; of().length < n && Date.now() < until;) await new Promise((r) => setTimeout(r, 50));
  return of();
}

describe('span export over OTLP/HTTP JSON', () => {
  it("exports submit, ingest and dispatch under the caller's trace, the dispatch span being the message's parent", async () => {
    const runAt = new Date(Date.now() + 7_000).toISOString();
    const job = await submit(
      'jobs',
      { payload: { secret: 'never in a span' }, runAt },
      { traceparent: `00-${TRACE_2}-${CALLER_SPAN_2}-01` },
    );
    const { traceId, parentSpan: parent } = await delivered(job.jobId);
    expect(traceId).toBe(TRACE_2);
    const [submitSpan] = await spansOf(job.jobId, 'dynein.submit');
    const [ingestSpan] = await spansOf(job.jobId, 'dynein.ingest');
    const [dispatchSpan] = await spansOf(job.jobId, 'dynein.dispatch');
    expect(submitSpan).toMatchObject({ traceId: TRACE_2, parentSpanId: CALLER_SPAN_2, kind: 2 });
    expect(ingestSpan).toMatchObject({ traceId: TRACE_2, parentSpanId: submitSpan!.spanId, kind: 5 });
    expect(dispatchSpan).toMatchObject({ traceId: TRACE_2, parentSpanId: submitSpan!.spanId, spanId: parent, kind: 4 });
    expect(receiver.attribute(dispatchSpan!, 'messaging.system')).toBe('aws_sqs');
    expect(receiver.attribute(dispatchSpan!, 'messaging.destination.name')).toBe(sys.tenants.alpha!.url.split('/').pop());
    expect(receiver.attribute(dispatchSpan!, 'dynein.tenant')).toBe('alpha');
    const lateness = Number(receiver.attribute(dispatchSpan!, 'dynein.lateness_ms'));
    expect(lateness).toBeGreaterThanOrEqual(0);
    // Never before its due time: the send ends at or after runAt.
    expect(BigInt(dispatchSpan!.endTimeUnixNano) / 1_000_000n).toBeGreaterThanOrEqual(BigInt(Date.parse(runAt)));
    expect(BigInt(submitSpan!.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(submitSpan!.startTimeUnixNano));
    // No span holds payload text.
    expect(JSON.stringify(receiver.spans)).not.toContain('never in a span');
    expect(receiver.requests.every((r) => r.contentType === 'application/json' && r.resource['service.name'] === 'dynein')).toBe(true);
  });

  it("shares one submit span among a batch's jobs, and gives a job sent straight to its queue its dispatch span at submit", async () => {
    const runAt = new Date(Date.now() + 7_000).toISOString();
    const batch = await submit(
      'jobs/batch',
      {
        jobs: [
          { payload: 1, runAt },
          { payload: 2, delaySeconds: 0 },
        ],
      },
      { traceparent: `00-${TRACE_2}-${CALLER_SPAN_2}-01` },
    );
    const [later, direct] = batch.results as { jobId: string; state: string }[];
    expect(direct!.state, JSON.stringify(batch)).toBe('QUEUED');
    const submits = receiver.spans.filter(
      (s) => s.name === 'dynein.submit' && s.traceId === TRACE_2 && receiver.attribute(s, 'dynein.jobs') === '2',
    );
    expect(submits).toHaveLength(1);
    const directParent = (await delivered(direct!.jobId)).parentSpan;
    const [directDispatch] = await spansOf(direct!.jobId, 'dynein.dispatch');
    expect(directDispatch).toMatchObject({ spanId: directParent, parentSpanId: submits[0]!.spanId });
    expect(await spansOf(direct!.jobId, 'dynein.ingest', 0)).toEqual([]); // never through the table
    const laterParent = (await delivered(later!.jobId)).parentSpan;
    const [laterDispatch] = await spansOf(later!.jobId, 'dynein.dispatch');
    expect(laterDispatch).toMatchObject({ spanId: laterParent, parentSpanId: submits[0]!.spanId });
  });

  it('roots a job submitted without a trace at the span its id derives, and exports nothing for an unsampled trace', async () => {
    const runAt = new Date(Date.now() + 7_000).toISOString();
    const own = await submit('jobs', { payload: 1, runAt });
    const unsampled = await submit('jobs', { payload: 2, runAt }, { traceparent: `00-${TRACE_2}-${CALLER_SPAN_2}-00` });
    const derived = jobTrace(own.jobId);
    const { traceId, parentSpan: parent } = await delivered(own.jobId);
    expect(traceId).toBe(derived.traceId);
    const [root] = await spansOf(own.jobId, 'dynein.submit');
    expect(root).toMatchObject({ traceId: derived.traceId, spanId: derived.spanId });
    expect(root!.parentSpanId).toBeUndefined();
    const [d] = await spansOf(own.jobId, 'dynein.dispatch');
    expect(d).toMatchObject({ traceId: derived.traceId, parentSpanId: derived.spanId, spanId: parent });

    await delivered(unsampled.jobId);
    await sink.flush();
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.spans.filter((s) => receiver.attribute(s, 'dynein.job_id') === unsampled.jobId)).toEqual([]);
  });

  it('the submit function has exported its spans when it answers (a Lambda may be frozen after)', async () => {
    const before = flushes;
    const job = await submit('jobs', { payload: 3, runAt: new Date(Date.now() + 60_000).toISOString() });
    expect(flushes).toBe(before + 1);
    // At the receiver already: no wait.
    expect(receiver.spans.filter((s) => s.name === 'dynein.submit' && receiver.attribute(s, 'dynein.job_id') === job.jobId)).toHaveLength(
      1,
    );
    expect(sink.dropped).toBe(0);
  });
});
