import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OtlpHttpSpanSink } from '../../adapters/otlpSpans.js';
import { jobTrace, type SpanRecord, workflowTrace } from '../../core/model/index.js';
import { outcomesHandler, statusHandler, submitHandler, workflowsHandler } from '../../lambdas/runtime/handlers.js';
import { httpApiEvent } from '../support/lambdaEvents.js';
import type { Emulators } from '../support/emulators.js';
import { startOtlpReceiver, type ReceivedSpan } from '../support/otlpReceiver.js';
import { consume, httpEvent, startRunningSystem, type RunningSystem, type TestSystem } from '../support/system.js';

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
let running: RunningSystem;
let queue: ReturnType<typeof consume>;
let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let sink: OtlpHttpSpanSink;
let flushes = 0;
beforeAll(async () => {
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
  running = await startRunningSystem({ tenants: ['alpha'], spans: counted });
  ({ em, sys } = running);
  queue = consume(em.sqs, sys.tenants.alpha!.url);
});
afterAll(async () => {
  await queue?.stop();
  await running?.stop();
  await receiver?.stop();
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
  return { traceId: m![1]!, parentSpan: m![2]!, flags: m![3]!, tracestate: d.attributes.tracestate, messageId: d.messageId };
}

// The tests of a block run at once (each waits seconds for its jobs' due time); each looks only at
// its own jobs' messages and spans.
describe.concurrent('trace context', () => {
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

describe.concurrent('span export over OTLP/HTTP JSON', () => {
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
    // The message id SQS gave the send: the same the worker receives.
    expect(receiver.attribute(dispatchSpan!, 'messaging.message.id')).toBe((await delivered(job.jobId)).messageId);
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
    expect(receiver.attribute(directDispatch!, 'messaging.message.id')).toBe((await delivered(direct!.jobId)).messageId);
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

  // Alone: it counts the sink's flushes, which every submit makes.
  it('the submit function has exported its spans when it answers (a Lambda may be frozen after)', { concurrent: false }, async () => {
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

const TRACE_3 = '5b8efff798038103d269b633813fc60c';
const CALLER_SPAN_3 = 'eee19b7ec3c1b174';

async function submitWorkflow(body: unknown, headers: Record<string, string> = {}) {
  const res = await workflowsHandler(sys.w)(
    httpApiEvent({
      method: 'POST',
      path: '/v1/tenants/alpha/workflows',
      pathParameters: { tenant: 'alpha' },
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  );
  expect(res.statusCode, res.body).toBe(201);
  return JSON.parse(res.body) as { workflowId: string; jobs: Record<string, string> };
}

async function succeeded(jobId: string) {
  const res = await outcomesHandler(sys.w)(
    httpEvent('POST', '/v1/tenants/alpha/jobs/outcomes', {
      pathParameters: { tenant: 'alpha' },
      body: JSON.stringify({
        outcomes: [{ jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: new Date().toISOString(), durationMs: 3 }],
      }),
    }),
  );
  expect(res.statusCode, res.body).toBe(200);
}

/** The workflow's `dynein.submit` span, once the receiver has it. */
async function workflowSubmitSpan(workflowId: string): Promise<ReceivedSpan> {
  const of = () => receiver.spans.find((s) => s.name === 'dynein.submit' && receiver.attribute(s, 'dynein.workflow_id') === workflowId);
  for (const until = Date.now() + 10_000; !of() && Date.now() < until;) await new Promise((r) => setTimeout(r, 50));
  return of()!;
}

describe('workflows', () => {
  it("put every job in the caller's trace: children under a dynein.workflow.release span, GET naming the trace", async () => {
    const { workflowId, jobs } = await submitWorkflow(
      {
        jobs: [
          { key: 'extract', payload: 1, delaySeconds: 0 },
          { key: 'load', payload: 2, after: ['extract'] },
          { key: 'report', payload: 3, after: ['extract'], delaySeconds: 8 },
        ],
      },
      { traceparent: `00-${TRACE_3}-${CALLER_SPAN_3}-01`, tracestate: 'team=billing' },
    );
    const submitSpan = await workflowSubmitSpan(workflowId);
    expect(submitSpan).toMatchObject({ traceId: TRACE_3, parentSpanId: CALLER_SPAN_3, kind: 2 });
    expect(receiver.attribute(submitSpan, 'dynein.jobs')).toBe('3');
    // Waiting for its parent, a job already names its trace; so does the workflow.
    expect((await status(jobs.load!)).traceId).toBe(TRACE_3);
    const view = await workflowsHandler(sys.w)(
      httpEvent('GET', `/v1/tenants/alpha/workflows/${workflowId}`, { pathParameters: { tenant: 'alpha', workflowId } }),
    );
    expect(JSON.parse(view.body).traceId).toBe(TRACE_3);

    // The root goes straight to its queue, its dispatch span under the workflow's submit.
    const root = await delivered(jobs.extract!);
    expect(root).toMatchObject({ traceId: TRACE_3, flags: '01', tracestate: 'team=billing' });
    const [rootDispatch] = await spansOf(jobs.extract!, 'dynein.dispatch');
    expect(rootDispatch).toMatchObject({ spanId: root.parentSpan, parentSpanId: submitSpan.spanId });

    // Its success releases both children: one at once (straight to its queue), one 8 s on (the table).
    await succeeded(jobs.extract!);
    const [release] = await spansOf(jobs.load!, 'dynein.workflow.release');
    expect(release).toMatchObject({ traceId: TRACE_3, parentSpanId: submitSpan.spanId, kind: 1 });
    expect(receiver.attribute(release!, 'dynein.workflow.released_by')).toBe('extract');
    expect(receiver.attribute(release!, 'dynein.path')).toBe('queue');
    const load = await delivered(jobs.load!);
    expect(load.traceId).toBe(TRACE_3);
    const [loadDispatch] = await spansOf(jobs.load!, 'dynein.dispatch');
    expect(loadDispatch).toMatchObject({ spanId: load.parentSpan, parentSpanId: release!.spanId });
    expect(receiver.attribute(loadDispatch!, 'messaging.message.id')).toBe(load.messageId);

    const [later] = await spansOf(jobs.report!, 'dynein.workflow.release');
    expect(receiver.attribute(later!, 'dynein.path')).toBe('table');
    const [ingested] = await spansOf(jobs.report!, 'dynein.ingest');
    expect(ingested).toMatchObject({ traceId: TRACE_3, parentSpanId: later!.spanId });
    const report = await delivered(jobs.report!);
    expect(report.traceId).toBe(TRACE_3);
    const [reportDispatch] = await spansOf(jobs.report!, 'dynein.dispatch');
    expect(reportDispatch).toMatchObject({ spanId: report.parentSpan, parentSpanId: later!.spanId });
    expect((await status(jobs.report!)).traceId).toBe(TRACE_3);
  });

  it("without a traceparent share the trace the workflow's id derives; an unsampled one exports nothing", async () => {
    const own = await submitWorkflow({
      jobs: [
        { key: 'a', payload: 1, delaySeconds: 0 },
        { key: 'b', payload: 2, after: ['a'] },
      ],
    });
    const derived = workflowTrace(own.workflowId);
    const submitSpan = await workflowSubmitSpan(own.workflowId);
    expect(submitSpan).toMatchObject({ traceId: derived.traceId, spanId: derived.spanId });
    expect(submitSpan.parentSpanId).toBeUndefined();
    expect((await delivered(own.jobs.a!)).traceId).toBe(derived.traceId);
    await succeeded(own.jobs.a!);
    expect((await delivered(own.jobs.b!)).traceId).toBe(derived.traceId);

    const unsampled = await submitWorkflow(
      {
        jobs: [
          { key: 'a', payload: 1, delaySeconds: 0 },
          { key: 'b', payload: 2, after: ['a'] },
        ],
      },
      { traceparent: `00-${TRACE_3}-${CALLER_SPAN_3}-00` },
    );
    expect(await delivered(unsampled.jobs.a!)).toMatchObject({ traceId: TRACE_3, flags: '00' });
    await succeeded(unsampled.jobs.a!);
    expect(await delivered(unsampled.jobs.b!)).toMatchObject({ traceId: TRACE_3, flags: '00' });
    await sink.flush();
    await new Promise((r) => setTimeout(r, 200));
    const ids = new Set([unsampled.workflowId, ...Object.values(unsampled.jobs)]);
    expect(
      receiver.spans.filter(
        (s) => ids.has(String(receiver.attribute(s, 'dynein.job_id'))) || ids.has(String(receiver.attribute(s, 'dynein.workflow_id'))),
      ),
    ).toEqual([]);
  });
});
