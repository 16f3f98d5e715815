import { SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { UnrecoverableError, Worker, type OutcomeReport, type OutcomeSink } from '../../client/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { OutcomeReporter } from '../../client/outcomes.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { deliveryBody, waitUntil } from './support.js';

/**
 * Outcome reporting (docs/history.md): the Worker against fauxqs and the Lambda wrapper report
 * each job's outcome once, in batches (≤ 0.2 requests per job at steady load), only for
 * messages carrying the `dynein-history` attribute.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** A sink recording each request (the DyneinClient's reportOutcomes, as the API answers it). */
function recordingSink(): OutcomeSink & { requests: { tenant: string; outcomes: OutcomeReport[] }[]; all(): OutcomeReport[] } {
  const requests: { tenant: string; outcomes: OutcomeReport[] }[] = [];
  return {
    requests,
    all: () => requests.flatMap((r) => r.outcomes),
    async reportOutcomes(tenant, outcomes) {
      if (outcomes.length > 100) throw new Error('more than 100 outcomes in one request');
      requests.push({ tenant, outcomes: [...outcomes] });
      return { results: outcomes.map((o) => ({ jobId: o.jobId, state: o.outcome })) };
    },
  };
}

async function sendJobs(sqs: SQSClient, url: string, ids: readonly string[], history = true): Promise<void> {
  for (let i = 0; i < ids.length; i += 10) {
    const entries = ids.slice(i, i + 10).map((jobId, k) => {
      const { body, runAt } = deliveryBody(jobId, { n: jobId });
      return {
        Id: String(k),
        MessageBody: body,
        MessageAttributes: {
          runAt: { DataType: 'String', StringValue: runAt },
          ...(history ? { 'dynein-history': { DataType: 'String', StringValue: '1' } } : {}),
        },
      };
    });
    await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries }));
  }
}

describe('Worker outcome reporting', () => {
  it('reports every job once, in batches: at most 0.2 requests per job at steady load', async () => {
    const q = await em.createQueue('h-worker', { dlq: true });
    const sink = recordingSink();
    const handled: string[] = [];
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      concurrency: 20,
      client: sink,
      deadLetterQueueUrl: q.dlqUrl,
      handler: (job) => {
        handled.push(job.jobId);
        if (job.jobId.endsWith('-13')) throw new UnrecoverableError('no such account');
        return { done: job.jobId };
      },
    });
    const running = worker.run();
    // Steady load: 10 jobs every 50 ms (about 200 jobs/s) for 2 s.
    const ids: string[] = [];
    for (let round = 0; round < 40; round++) {
      const batch = Array.from({ length: 10 }, (_, i) => `w-${round * 10 + i}`);
      ids.push(...batch);
      await sendJobs(em.sqs, q.url, batch);
      await new Promise((r) => setTimeout(r, 50));
    }
    await waitUntil(() => new Set(handled).size === ids.length, 15_000, 'every job handled');
    await worker.stop();
    await running;

    const reported = sink.all();
    expect(reported.map((o) => o.jobId).sort()).toEqual([...ids].sort()); // each once, flushed on stop
    expect(sink.requests.length / ids.length).toBeLessThanOrEqual(0.2);
    for (const r of sink.requests) expect(r.tenant).toBe('demo');
    const dead = reported.filter((o) => o.outcome === 'DEAD');
    expect(dead.map((o) => o.jobId).sort()).toEqual(ids.filter((id) => id.endsWith('-13')).sort());
    expect(dead[0]!.error).toBe('no such account');
    const ok = reported.find((o) => o.jobId === 'w-0')!;
    expect(ok).toMatchObject({ outcome: 'SUCCEEDED', attempts: 1, result: { done: 'w-0' } });
    expect(ok.durationMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(ok.receivedAt)).toBeGreaterThan(0);
  }, 30_000);

  it('reports a failure before the retry, and the retry after it; DEAD on maxReceiveCount', async () => {
    const q = await em.createQueue('h-retry', { dlq: true, maxReceiveCount: 3 });
    const sink = recordingSink();
    let calls = 0;
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      client: new OutcomeReporter(sink, { flushMs: 200 }),
      maxReceiveCount: 3,
      backoff: { baseMs: 1, capMs: 1 },
      handler: (job) => {
        calls++;
        if (job.jobId === 'flaky' && calls === 1) throw new Error('try again');
        if (job.jobId === 'broken') throw new Error('always');
      },
    });
    const running = worker.run();
    await sendJobs(em.sqs, q.url, ['flaky']);
    await waitUntil(() => sink.all().some((o) => o.outcome === 'SUCCEEDED'), 10_000, 'the retry succeeded');
    await sendJobs(em.sqs, q.url, ['broken']);
    await waitUntil(() => sink.all().some((o) => o.outcome === 'DEAD'), 15_000, 'the third failure');
    await worker.stop();
    await running;
    const flaky = sink.all().filter((o) => o.jobId === 'flaky');
    expect(flaky.map((o) => [o.outcome, o.attempts])).toEqual([
      ['FAILED', 1],
      ['SUCCEEDED', 2],
    ]);
    expect(flaky[0]!.error).toBe('try again');
    const broken = sink.all().filter((o) => o.jobId === 'broken');
    expect(broken.map((o) => [o.outcome, o.attempts])).toEqual([
      ['FAILED', 1],
      ['FAILED', 2],
      ['DEAD', 3],
    ]);
  }, 30_000);

  it('reports nothing for messages without the attribute, and warns once when it has no client', async () => {
    const q = await em.createQueue('h-off');
    const sink = recordingSink();
    const handled: string[] = [];
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      client: sink,
      handler: (job) => void handled.push(job.jobId),
    });
    const running = worker.run();
    await sendJobs(em.sqs, q.url, ['off-1', 'off-2'], false);
    await waitUntil(() => handled.length === 2, 5_000, 'jobs handled');
    await worker.stop();
    await running;
    expect(sink.requests).toHaveLength(0);

    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const q2 = await em.createQueue('h-noclient');
      const seen: string[] = [];
      const bare = new Worker({
        queueUrl: q2.url,
        sqs: em.newClients().sqs,
        handleSignals: false,
        waitTimeSeconds: 1,
        handler: (job) => void seen.push(job.jobId),
      });
      const r2 = bare.run();
      await sendJobs(em.sqs, q2.url, ['n-1', 'n-2', 'n-3']);
      await waitUntil(() => seen.length === 3, 5_000, 'jobs handled');
      await bare.stop();
      await r2;
      expect(warn.mock.calls.filter((c) => String(c[0]).includes('history'))).toHaveLength(1);
    } finally {
      warn.mockRestore();
    }
  }, 20_000);
});

describe('dyneinLambdaHandler outcome reporting', () => {
  const record = (jobId: string, history: boolean, receiveCount = 1): SQSRecord => {
    const { body, runAt } = deliveryBody(jobId, null);
    return sqsRecordFor({
      messageId: `m-${jobId}`,
      receiptHandle: `r-${jobId}`,
      body,
      attributes: { ApproximateReceiveCount: String(receiveCount) },
      messageAttributes: {
        runAt: { stringValue: runAt, dataType: 'String' },
        ...(history ? { 'dynein-history': { stringValue: '1', dataType: 'String' } } : {}),
      },
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:q',
    });
  };

  it('sends one request per invocation (batches of 10: 0.1 per job) and none without the attribute', async () => {
    const sink = recordingSink();
    const handler = dyneinLambdaHandler(
      (job) => {
        if (job.jobId === 'l-5-3') throw new UnrecoverableError('bad');
        if (job.jobId === 'l-7-7') throw new Error('later');
        return job.jobId.length;
      },
      { client: sink, maxReceiveCount: 5 },
    );
    let jobs = 0;
    for (let inv = 0; inv < 10; inv++) {
      const event: SQSEvent = { Records: Array.from({ length: 10 }, (_, i) => record(`l-${inv}-${i}`, true)) };
      jobs += 10;
      const res = await handler(event);
      if (inv === 7) expect(res.batchItemFailures).toEqual([{ itemIdentifier: 'm-l-7-7' }]);
    }
    expect(sink.requests).toHaveLength(10);
    expect(sink.requests.length / jobs).toBeLessThanOrEqual(0.2);
    const all = sink.all();
    expect(all).toHaveLength(100);
    expect(all.find((o) => o.jobId === 'l-5-3')).toMatchObject({ outcome: 'DEAD', error: 'bad' });
    expect(all.find((o) => o.jobId === 'l-7-7')).toMatchObject({ outcome: 'FAILED', error: 'later', attempts: 1 });
    expect(all.find((o) => o.jobId === 'l-0-0')).toMatchObject({ outcome: 'SUCCEEDED', result: 5 });

    const quiet = recordingSink();
    const off = dyneinLambdaHandler(() => {}, { client: quiet });
    await off({ Records: [record('q-1', false), record('q-2', false)] });
    expect(quiet.requests).toHaveLength(0);
  });
});
