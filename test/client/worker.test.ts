import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnrecoverableError, Worker, type DeliveredJob, type JobContext, type WorkerEvent } from '../../client/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { waitForEmptyQueue } from '../support/system.js';
import { fakeOtel, receiveAll, receivedHandles, recordCalls, sendDeliveries, sendRaw, sequence, waitUntil } from './support.js';

/**
 * The Worker against fauxqs with the real SQS client: what it deletes, the visibility timeouts it
 * sets (captured as sent, compared with the schedule computed here), the heartbeat, the DLQ
 * paths, isolation of bad messages, the concurrency bound, and SIGTERM in a real process.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => ({ jobId: `${prefix}-${i}`, payload: { i } }));

describe.concurrent('Worker', () => {
  it("hands the handler the message's trace context (traceparent, tracestate: docs/tracing.md)", async () => {
    const q = await em.createQueue('w-trace');
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await em.sqs.send(
      new SendMessageCommand({
        QueueUrl: q.url,
        MessageBody: '{"jobId":"j-t","tenant":"demo","runAt":"2030-01-01T00:00:00.000Z","payload":1}',
        MessageAttributes: {
          traceparent: { DataType: 'String', StringValue: traceparent },
          tracestate: { DataType: 'String', StringValue: 'v=1' },
        },
      }),
    );
    const seen: DeliveredJob[] = [];
    const otel = fakeOtel();
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      otel: otel.api,
      handler: (job) => void seen.push({ ...job, inSpan: otel.active() } as DeliveredJob),
    });
    const running = worker.run();
    await waitUntil(() => seen.length === 1, 5_000, 'the delivery');
    await worker.stop();
    await running;
    const spanName = `process ${q.url.split('/').pop()}`;
    expect(seen[0]).toMatchObject({ jobId: 'j-t', traceparent, tracestate: 'v=1', inSpan: spanName });
    // The handler ran in its span: the first attempt, a child of the message's traceparent.
    expect(otel.spans).toEqual([
      {
        name: spanName,
        kind: 4,
        parent: {
          traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
          spanId: '00f067aa0ba902b7',
          traceFlags: 1,
          isRemote: true,
          traceState: 'v=1',
        },
        root: false,
        links: undefined,
        attempt: 1,
        ended: true,
      },
    ]);
  });

  it('hands each job to the handler with its context and deletes it on success', async () => {
    const q = await em.createQueue('w-basic', { dlq: true });
    const runAtMs = Date.now() - 1_500;
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'j-1', payload: { hello: 'world' }, runAtMs }]);
    const seen: { job: DeliveredJob; ctx: JobContext; aborted: boolean }[] = [];
    const sqs = em.newClients().sqs;
    const calls = recordCalls(sqs);
    const worker = new Worker({
      queueUrl: q.url,
      sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      handler: (job, ctx) => void seen.push({ job, ctx, aborted: ctx.signal.aborted }),
    });
    const running = worker.run();
    await waitUntil(() => seen.length === 1, 5_000, 'the delivery');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await worker.stop();
    await running;
    expect(seen[0]!.job).toEqual({
      jobId: 'j-1',
      tenant: 'demo',
      runAt: new Date(runAtMs).toISOString(),
      payload: { hello: 'world' },
      payloadText: '{"hello":"world"}',
    });
    expect(seen[0]!.ctx.receiveCount).toBe(1);
    expect(seen[0]!.ctx.latenessMs).toBeGreaterThanOrEqual(1_500);
    expect(seen[0]!.ctx.latenessMs).toBe(seen[0]!.ctx.receivedAt - runAtMs);
    expect(seen[0]!.aborted).toBe(false);
    const deletes = calls.filter((c) => c.command === 'DeleteMessage');
    expect(deletes).toHaveLength(1);
    expect(receivedHandles(calls).has(deletes[0]!.input.ReceiptHandle)).toBe(true);
  });

  it('long-polls 20 s for up to 10 messages by default; stop() cuts a poll only at the end of the grace period', async () => {
    const q = await em.createQueue('w-defaults');
    const sqs = em.newClients().sqs;
    const calls = recordCalls(sqs);
    const worker = new Worker({ queueUrl: q.url, sqs, handleSignals: false, shutdownGraceMs: 300, handler: () => {} });
    const running = worker.run();
    await waitUntil(() => calls.length > 0, 2_000, 'the first receive');
    const stoppedAt = Date.now();
    await worker.stop();
    await running;
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(290);
    expect(Date.now() - stoppedAt).toBeLessThan(2_000);
    expect(calls[0]!.input).toMatchObject({ QueueUrl: q.url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10, VisibilityTimeout: 30 });
  });

  it('releases at once what a receive under way brings back after stop(), without running it', async () => {
    const q = await em.createQueue('w-stop-poll');
    const events: WorkerEvent[] = [];
    let handled = 0;
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 5,
      onEvent: (e) => void events.push(e),
      handler: () => void handled++,
    });
    const running = worker.run();
    await new Promise((r) => setTimeout(r, 300)); // the long poll is under way
    const stopped = worker.stop();
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'arrives-while-stopping' }]);
    await stopped;
    await running;
    expect(handled).toBe(0);
    expect(events.map((e) => e.type)).toEqual(['released']);
    // Visible again at once, not after the 30 s visibility timeout of the receive.
    const [m] = await receiveAll(em.sqs, q.url, { waitMs: 500 });
    expect(JSON.parse(m!.Body!).jobId).toBe('arrives-while-stopping');
  });

  it('sets the visibility timeout by the backoff schedule from the receive count, until the DLQ takes the message', async () => {
    const q = await em.createQueue('w-backoff', { dlq: true, maxReceiveCount: 4 });
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'always-fails' }]);
    const sqs = em.newClients().sqs;
    const calls = recordCalls(sqs);
    const draws = [0.3, 0.9, 0.6, 0.1];
    const counts: number[] = [];
    const failed: number[] = [];
    const worker = new Worker({
      queueUrl: q.url,
      sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      backoff: { baseMs: 1_000, capMs: 60_000 },
      random: sequence(draws),
      onEvent: (e) => void (e.type === 'failed' && failed.push(e.retryInSeconds)),
      handler: (_job, ctx) => {
        counts.push(ctx.receiveCount);
        throw new Error('downstream is down');
      },
    });
    const running = worker.run();
    // The schedule, computed independently: full jitter over base * 2^(n-1), rounded up to whole seconds, at least 1.
    const expected = draws.map((r, i) => Math.max(1, Math.ceil(Math.floor(r * Math.min(60_000, 1_000 * 2 ** i)) / 1000)));
    expect(expected).toEqual([1, 2, 3, 1]);
    const dlq = await (async () => {
      for (const until = Date.now() + 20_000; Date.now() < until;) {
        const got = await receiveAll(em.sqs, q.dlqUrl!, { waitMs: 500 });
        if (got.length > 0) return got;
      }
      return [];
    })();
    await worker.stop();
    await running;
    const changes = calls.filter((c) => c.command === 'ChangeMessageVisibility');
    const handles = receivedHandles(calls);
    expect(changes.every((c) => handles.has(c.input.ReceiptHandle))).toBe(true);
    expect(new Set(changes.map((c) => c.input.ReceiptHandle)).size).toBe(changes.length); // one per delivery
    const visibilities = changes.map((c) => c.input.VisibilityTimeout);
    expect(visibilities).toEqual(expected);
    expect(failed).toEqual(expected);
    expect(counts).toEqual([1, 2, 3, 4]);
    // Receives ask for the worker's own visibility timeout and as many messages as free slots (≤ 10).
    const receives = calls.filter((c) => c.command === 'ReceiveMessage');
    expect(receives[0]!.input).toMatchObject({ VisibilityTimeout: 30, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 });
    for (const c of receives) expect(c.input.MaxNumberOfMessages).toBeLessThanOrEqual(10);
    expect(dlq.map((m) => JSON.parse(m.Body!).jobId)).toEqual(['always-fails']);
  }, 30_000);

  it('keeps a handler that runs three times the visibility timeout from being redelivered (heartbeat)', async () => {
    const q = await em.createQueue('w-heartbeat', { dlq: true, visibilityTimeout: 2 });
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'long-job' }]);
    const calls: number[] = [];
    const handler = async (_job: DeliveredJob, ctx: JobContext) => {
      calls.push(ctx.receiveCount);
      await new Promise((r) => setTimeout(r, 6_000));
    };
    // Two workers poll the same queue: the one without the job keeps asking for it.
    const sqsA = em.newClients().sqs;
    const sqsB = em.newClients().sqs;
    const callsA = recordCalls(sqsA);
    const callsB = recordCalls(sqsB);
    const a = new Worker({ queueUrl: q.url, sqs: sqsA, handleSignals: false, waitTimeSeconds: 1, visibilityTimeoutSeconds: 2, handler });
    const b = new Worker({ queueUrl: q.url, sqs: sqsB, handleSignals: false, waitTimeSeconds: 1, visibilityTimeoutSeconds: 2, handler });
    const runs = [a.run(), b.run()];
    await waitUntil(() => calls.length >= 1, 5_000, 'the first delivery');
    await waitForEmptyQueue(em.sqs, q.url, 12_000);
    await Promise.all([a.stop(), b.stop()]);
    await Promise.all(runs);
    expect(calls).toEqual([1]);
    const heartbeats = [...callsA, ...callsB].filter((c) => c.command === 'ChangeMessageVisibility');
    expect(heartbeats.length).toBeGreaterThanOrEqual(6); // every ~667 ms for 6 s
    expect(new Set(heartbeats.map((c) => c.input.VisibilityTimeout))).toEqual(new Set([2]));
    expect([...callsA, ...callsB].filter((c) => c.command === 'DeleteMessage')).toHaveLength(1);
  }, 30_000);

  it('sends an UnrecoverableError straight to the DLQ, skipping the remaining retries', async () => {
    const q = await em.createQueue('w-unrecoverable', { dlq: true, maxReceiveCount: 5 });
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'gone-account' }]);
    let calls = 0;
    const events: WorkerEvent[] = [];
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      deadLetterQueueUrl: q.dlqUrl,
      handleSignals: false,
      waitTimeSeconds: 1,
      onEvent: (e) => void events.push(e),
      handler: () => {
        calls++;
        throw new UnrecoverableError('the account was deleted');
      },
    });
    const running = worker.run();
    await waitUntil(() => events.some((e) => e.type === 'dead'), 5_000, 'the dead event');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await worker.stop();
    await running;
    expect(calls).toBe(1);
    const [dead] = await receiveAll(em.sqs, q.dlqUrl!);
    expect(JSON.parse(dead!.Body!).jobId).toBe('gone-account');
    expect(dead!.MessageAttributes?.dyneinError?.StringValue).toBe('the account was deleted');
    expect(dead!.MessageAttributes?.runAt?.StringValue).toBeDefined();
    expect(events.find((e) => e.type === 'dead')).toMatchObject({ to: 'dead-letter-queue', receiveCount: 1 });
  });

  it('without a DLQ URL, releases an unrecoverable message until the redrive policy moves it, never running it again', async () => {
    const q = await em.createQueue('w-unrecoverable-2', { dlq: true, maxReceiveCount: 3 });
    await sendDeliveries(em.sqs, q.url, [{ jobId: 'bad-input' }]);
    let calls = 0;
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      handler: () => {
        calls++;
        throw new UnrecoverableError('cannot parse the invoice');
      },
    });
    const running = worker.run();
    const dlq = await (async () => {
      for (const until = Date.now() + 8_000; Date.now() < until;) {
        const got = await receiveAll(em.sqs, q.dlqUrl!, { waitMs: 300 });
        if (got.length > 0) return got;
      }
      return [];
    })();
    await worker.stop();
    await running;
    expect(calls).toBe(1);
    expect(dlq.map((m) => JSON.parse(m.Body!).jobId)).toEqual(['bad-input']);
  }, 15_000);

  it('isolates a malformed message and a failing job from the others', async () => {
    const q = await em.createQueue('w-isolation', { dlq: true });
    await sendRaw(em.sqs, q.url, 'this is not JSON');
    await sendDeliveries(em.sqs, q.url, [...ids(6, 'good'), { jobId: 'flaky' }]);
    const done: string[] = [];
    const firstReceive = new Map<string, number>();
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      deadLetterQueueUrl: q.dlqUrl,
      handleSignals: false,
      waitTimeSeconds: 1,
      concurrency: 8,
      backoff: { baseMs: 1_000, capMs: 1_000 },
      handler: (job, ctx) => {
        if (!firstReceive.has(job.jobId)) firstReceive.set(job.jobId, ctx.receiveCount);
        if (job.jobId === 'flaky' && ctx.receiveCount === 1) throw new Error('transient');
        done.push(job.jobId);
      },
    });
    const running = worker.run();
    await waitUntil(() => done.length === 7, 10_000, 'all good jobs');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await worker.stop();
    await running;
    expect(done.filter((id) => id.startsWith('good')).sort()).toEqual(
      ids(6, 'good')
        .map((j) => j.jobId)
        .sort(),
    );
    expect(done.filter((id) => id === 'flaky')).toHaveLength(1);
    for (const j of ids(6, 'good')) expect(firstReceive.get(j.jobId)).toBe(1);
    const dlq = await receiveAll(em.sqs, q.dlqUrl!);
    expect(dlq.map((m) => m.Body)).toEqual(['this is not JSON']);
  }, 20_000);

  it('runs at most `concurrency` handlers at once', async () => {
    const q = await em.createQueue('w-concurrency', { dlq: true });
    await sendDeliveries(em.sqs, q.url, ids(24, 'c'));
    let active = 0;
    let max = 0;
    let done = 0;
    const sqs = em.newClients().sqs;
    const calls = recordCalls(sqs);
    const worker = new Worker({
      queueUrl: q.url,
      sqs,
      concurrency: 3,
      handleSignals: false,
      waitTimeSeconds: 1,
      handler: async () => {
        max = Math.max(max, ++active);
        await new Promise((r) => setTimeout(r, 100));
        active--;
        done++;
      },
    });
    const running = worker.run();
    await waitUntil(() => done === 24, 15_000, '24 jobs');
    await worker.stop();
    await running;
    expect(max).toBe(3);
    for (const c of calls.filter((c) => c.command === 'ReceiveMessage')) expect(c.input.MaxNumberOfMessages).toBeLessThanOrEqual(3);
  }, 20_000);

  it('on SIGTERM in the middle of a batch, finishes or releases every job: nothing is lost', async () => {
    const q = await em.createQueue('w-sigterm', { dlq: true, visibilityTimeout: 2 });
    const jobs = Array.from({ length: 20 }, (_, i) => ({ jobId: `t-${i}`, payload: { ms: 150 + ((i * 397) % 2_000) } }));
    await sendDeliveries(em.sqs, q.url, jobs);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/client/fixtures/slowWorker.ts'], {
      env: { ...process.env, QUEUE_URL: q.url, SQS_ENDPOINT: em.sqsEndpoint, GRACE_MS: '600', CONCURRENCY: '4' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: { event: string; jobId?: string }[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(JSON.parse(l)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const of = (event: string) => lines.filter((l) => l.event === event).map((l) => l.jobId!);
    await waitUntil(() => of('completed').length >= 5, 20_000, 'five completed jobs in the child');
    child.kill('SIGTERM');
    const inFlightAtSigterm = of('start').length - of('completed').length;
    expect(await exited).toBe(0);
    expect(inFlightAtSigterm).toBeGreaterThan(0);
    expect(of('stopped')).toHaveLength(1);

    // A second worker takes over: it must see every job the first one did not complete.
    const firstRun = new Set(of('completed'));
    const secondRun: string[] = [];
    const worker = new Worker({
      queueUrl: q.url,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      visibilityTimeoutSeconds: 5,
      concurrency: 10,
      handler: (job) => void secondRun.push(job.jobId),
    });
    const running = worker.run();
    await waitUntil(() => firstRun.size + secondRun.length >= jobs.length, 15_000, 'the remaining jobs');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await worker.stop();
    await running;
    expect([...firstRun, ...secondRun].sort()).toEqual(jobs.map((j) => j.jobId).sort());
    expect(secondRun.filter((id) => firstRun.has(id))).toEqual([]); // completed jobs were deleted before the exit
    const attributes = (
      await em.sqs.send(new GetQueueAttributesCommand({ QueueUrl: q.dlqUrl!, AttributeNames: ['ApproximateNumberOfMessages'] }))
    ).Attributes;
    expect(attributes?.ApproximateNumberOfMessages).toBe('0');
  }, 45_000);

  it('with its defaults, stops within 2 s of SIGTERM: quick jobs finish, long ones are released for another worker at once', async () => {
    const q = await em.createQueue('w-sigterm-defaults', { dlq: true }); // 30 s visibility, as the worker asks
    const quick = Array.from({ length: 3 }, (_, i) => ({ jobId: `quick-${i}`, payload: { ms: 50 } }));
    const long = Array.from({ length: 3 }, (_, i) => ({ jobId: `long-${i}`, payload: { ms: 60_000 } }));
    await sendDeliveries(em.sqs, q.url, [...quick, ...long]);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/client/fixtures/defaultsWorker.ts'], {
      env: { ...process.env, QUEUE_URL: q.url, SQS_ENDPOINT: em.sqsEndpoint },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: { event: string; jobId?: string; at: number }[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(JSON.parse(l)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const of = (event: string) => lines.filter((l) => l.event === event);
    await waitUntil(
      () => of('completed').length === 3 && of('start').length === 6,
      20_000,
      'the quick jobs done and the long ones running',
    );
    child.kill('SIGTERM');
    expect(await exited).toBe(0);

    const [sigterm] = of('sigterm');
    const [stopped] = of('stopped');
    // The long poll under way (20 s) and the long handlers (60 s) do not hold the stop.
    expect(stopped!.at - sigterm!.at).toBeLessThan(2_000);
    expect(
      of('completed')
        .map((l) => l.jobId)
        .sort(),
    ).toEqual(quick.map((j) => j.jobId));
    // The three long jobs, each handed back (one may be released twice: picked up again by the
    // worker's own receive under way, and handed straight back).
    expect(new Set(of('released').map((l) => l.jobId)).size).toBe(3);
    // Released means visible again now, not after the 30 s visibility timeout of the receive.
    const back = await receiveAll(em.sqs, q.url, { waitMs: 1_500 });
    expect(back.map((m) => JSON.parse(m.Body!).jobId).sort()).toEqual(long.map((j) => j.jobId));
  }, 45_000);
});
