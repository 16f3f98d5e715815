import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { SQSEvent } from 'aws-lambda';
import type { Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { UnrecoverableError, type JobContext } from '../../client/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { waitForEmptyQueue } from '../support/system.js';
import { fakeOtel, receiveAll, recordCalls, sendDeliveries, sendRaw, waitUntil } from './support.js';

/** The event Lambda's SQS event source would pass for these received messages. */
const sqsEventOf = (msgs: readonly Message[], withAttributes = true): SQSEvent => ({
  Records: msgs.map((m) =>
    sqsRecordFor({
      messageId: m.MessageId!,
      receiptHandle: m.ReceiptHandle!,
      body: m.Body!,
      ...(withAttributes ? { attributes: m.Attributes ?? {} } : {}),
    }),
  ),
});

/**
 * The Lambda wrapper, driven by the local stack's Lambda SQS event source (partial batch
 * failures) against fauxqs: only failed records come back, with the backoff's visibility.
 */
// Powertools' batch processing, spied on (the real one runs): the wrapper must delegate the batch to it.
vi.mock('@aws-lambda-powertools/batch', async (importOriginal) => {
  const real = await importOriginal<typeof import('@aws-lambda-powertools/batch')>();
  return { ...real, processPartialResponse: vi.fn(real.processPartialResponse) };
});

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('dyneinLambdaHandler', () => {
  it('runs each record in its span (docs/tracing.md): the first attempt a child of its traceparent, a retry linked, an error recorded', async () => {
    const otel = fakeOtel();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const record = (id: string, receiveCount: string) =>
      sqsRecordFor({
        messageId: id,
        body: JSON.stringify({ jobId: id, tenant: 'demo', runAt: '2030-01-01T00:00:00.000Z', payload: 1 }),
        attributes: { ApproximateReceiveCount: receiveCount },
        messageAttributes: { traceparent: { stringValue: traceparent, dataType: 'String' } },
        eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:dynein-t-demo',
      });
    const active: (string | undefined)[] = [];
    const handler = dyneinLambdaHandler(
      async (job) => {
        active.push(otel.active());
        if (job.jobId === 'fails') throw new Error('card declined');
      },
      { otel: otel.api },
    );
    const res = await handler({ Records: [record('first', '1'), record('retry', '3'), record('fails', '1')] });
    expect(res.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['fails']);
    expect(active).toEqual(['process dynein-t-demo', 'process dynein-t-demo', 'process dynein-t-demo']);
    const remote = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true };
    expect(
      otel.spans.map((s) => ({ root: s.root, parent: s.parent, links: s.links, attempt: s.attempt, ended: s.ended, error: s.error })),
    ).toEqual([
      { root: false, parent: remote, links: undefined, attempt: 1, ended: true, error: undefined },
      { root: true, parent: undefined, links: [{ context: remote }], attempt: 3, ended: true, error: undefined },
      { root: false, parent: remote, links: undefined, attempt: 1, ended: true, error: 'card declined' },
    ]);
  });

  it('reports only the failed records, backs them off, and sends unrecoverable ones to the DLQ', async () => {
    const q = await em.createQueue('l-batch', { dlq: true, maxReceiveCount: 5 });
    await sendDeliveries(em.sqs, q.url, [
      { jobId: 'ok-1' },
      { jobId: 'ok-2' },
      { jobId: 'flaky' },
      { jobId: 'doomed' },
      { jobId: 'ok-3', runAtMs: Date.now() - 2_000 },
    ]);
    const sqs = em.newClients().sqs;
    const calls = recordCalls(sqs);
    const seen: { jobId: string; ctx: JobContext }[] = [];
    const handler = dyneinLambdaHandler(
      async (job, ctx) => {
        seen.push({ jobId: job.jobId, ctx });
        if (job.jobId === 'flaky' && ctx.receiveCount === 1) throw new Error('downstream timeout');
        if (job.jobId === 'doomed') throw new UnrecoverableError('no such customer');
      },
      { sqs, queueUrl: q.url, deadLetterQueueUrl: q.dlqUrl, backoff: { baseMs: 1_000, capMs: 1_000 }, random: () => 0.5 },
    );
    const replies: string[][] = [];
    const source = startSqsEventSource({
      sqs: em.sqs,
      queueUrl: q.url,
      pollers: 1,
      handler: async (event) => {
        const res = await handler(event, { getRemainingTimeInMillis: () => 30_000 });
        replies.push(res.batchItemFailures.map((f) => f.itemIdentifier));
        return res;
      },
    });
    await waitUntil(() => seen.filter((s) => s.jobId === 'flaky').length === 2, 10_000, 'the retry of flaky');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await source.stop();

    const count = (id: string) => seen.filter((s) => s.jobId === id).length;
    expect([count('ok-1'), count('ok-2'), count('ok-3'), count('flaky'), count('doomed')]).toEqual([1, 1, 1, 2, 1]);
    expect(seen.filter((s) => s.jobId === 'flaky').map((s) => s.ctx.receiveCount)).toEqual([1, 2]);
    expect(seen.find((s) => s.jobId === 'ok-3')!.ctx.latenessMs).toBeGreaterThanOrEqual(2_000);
    expect(replies.flat()).toHaveLength(1); // flaky, once
    // floor(0.5 * 1000) ms, rounded up to 1 s.
    expect(calls.filter((c) => c.command === 'ChangeMessageVisibility').map((c) => c.input.VisibilityTimeout)).toEqual([1]);
    const dlq = await receiveAll(em.sqs, q.dlqUrl!);
    expect(dlq.map((m) => [JSON.parse(m.Body!).jobId, m.MessageAttributes?.dyneinError?.StringValue])).toEqual([
      ['doomed', 'no such customer'],
    ]);
  }, 20_000);

  it('without an SQS client, reports malformed and failed records as batch item failures', async () => {
    const q = await em.createQueue('l-plain');
    await sendRaw(em.sqs, q.url, '{"not":"a job"}');
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'fine' }, { jobId: 'broken' }]);
    const msgs = await receiveAll(em.sqs, q.url);
    const event = sqsEventOf(msgs);
    const handled: string[] = [];
    const errors: string[] = [];
    const res = await dyneinLambdaHandler(
      (job) => {
        if (job.jobId === 'broken') throw new UnrecoverableError('cannot be retried, but no DLQ URL was given');
        handled.push(job.jobId);
      },
      { onError: (e) => void errors.push((e as Error).name) },
    )(event);
    const idOf = (body: string) => msgs.find((m) => m.Body!.includes(body))!.MessageId!;
    expect(handled).toEqual(['fine']);
    expect(res.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual([idOf('not'), idOf('broken')].sort());
    expect(errors.sort()).toEqual(['MalformedMessageError', 'UnrecoverableError']);
  });

  it("aborts the handlers' signal before the function times out", async () => {
    const q = await em.createQueue('l-timeout');
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'slow' }]);
    const [m] = await receiveAll(em.sqs, q.url);
    let reason = '';
    const res = await dyneinLambdaHandler(
      (_job, { signal }) =>
        new Promise<void>((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            reason = (signal.reason as Error).message;
            reject(signal.reason);
          }),
        ),
      { timeoutMarginMs: 900 },
    )(
      {
        Records: [sqsRecordFor({ messageId: m!.MessageId!, receiptHandle: m!.ReceiptHandle!, body: m!.Body! })],
      },
      { getRemainingTimeInMillis: () => 1_000 },
    );
    expect(reason).toMatch(/about to time out/);
    expect(res.batchItemFailures).toEqual([{ itemIdentifier: m!.MessageId! }]);
  });

  it("hands the batch to Powertools' batch processing (SQS processor, partial responses) and bounds the records run at once", async () => {
    const q = await em.createQueue('l-powertools');
    await sendDeliveries(
      em.sqs,
      q.url,
      Array.from({ length: 7 }, (_, i) => ({ jobId: `p-${i}` })),
    );
    const msgs = await receiveAll(em.sqs, q.url);
    expect(msgs).toHaveLength(7);
    const event = sqsEventOf(msgs);
    const spy = vi.mocked(processPartialResponse);
    spy.mockClear();
    let active = 0;
    let most = 0;
    const res = await dyneinLambdaHandler(
      async (job) => {
        most = Math.max(most, ++active);
        await new Promise((r) => setTimeout(r, 30));
        active--;
        if (job.jobId === 'p-3') throw new Error('transient');
      },
      { concurrency: 2 },
    )(event);
    expect(spy).toHaveBeenCalledTimes(1);
    const [passedEvent, , processor, options] = spy.mock.calls[0]!;
    expect(passedEvent).toBe(event);
    expect(processor).toBeInstanceOf(BatchProcessor);
    expect(processor.eventType).toBe(EventType.SQS);
    expect(options).toMatchObject({ throwOnFullBatchFailure: false });
    expect(res).toEqual({ batchItemFailures: [{ itemIdentifier: msgs.find((m) => m.Body!.includes('"p-3"'))!.MessageId! }] });
    expect(most).toBe(2);
  });

  it('reports a batch where every record failed as failures, not as an invocation error', async () => {
    const q = await em.createQueue('l-all-fail');
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'f-1' }, { jobId: 'f-2' }]);
    const msgs = await receiveAll(em.sqs, q.url);
    const event = sqsEventOf(msgs, false);
    const res = await dyneinLambdaHandler(() => {
      throw new Error('down');
    })(event);
    expect(res.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(msgs.map((m) => m.MessageId!).sort());
  });
});
