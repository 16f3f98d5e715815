import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { httpApiEvent } from '../support/lambdaEvents.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, httpEvent, runAllGroups, type TestSystem } from '../support/system.js';

/**
 * Trace context from the producer to the worker (docs/tracing.md): the submit's `traceparent`
 * (and `tracestate`) travel with the job, through the inbound queue and the table or straight to
 * the queue, and the delivered message's `traceparent` names the same trace with the scheduler's
 * send as the parent span; `GET` shows the trace id. Without one (or with an invalid one) the job
 * carries the trace its id derives.
 */
let em: Emulators;
let sys: TestSystem;
let ingest: { stop(): Promise<void> };
let dispatch: { stop(): Promise<void> };
let queue: ReturnType<typeof consume>;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['alpha'] });
  ingest = sys.startIngest();
  dispatch = runAllGroups(sys.w.dispatch);
  queue = consume(em.sqs, sys.tenants.alpha!.url);
});
afterAll(async () => {
  await queue?.stop();
  await dispatch?.stop();
  await ingest?.stop();
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
