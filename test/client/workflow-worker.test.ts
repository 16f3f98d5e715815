import { randomUUID } from 'node:crypto';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  OutcomeNotReportedError,
  UnrecoverableError,
  Worker,
  type OutcomeReport,
  type ParentOutcome,
  type WorkerEvent,
  type WorkerOptions,
} from '../../client/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { deliveryMessage } from '../../core/model/messages.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { refused, scriptedSink, stored, type ScriptedAnswer } from '../support/outcomeSinks.js';
import { waitForEmptyQueue } from '../support/system.js';
import { receiveAll, waitUntil } from './support.js';

/**
 * Workflow jobs' outcomes (issue #25), Worker against fauxqs with the real SQS client: the report
 * goes first, at once and alone, retried until answered, and the message is deleted (or
 * dead-lettered) only then; a report given up on leaves the message to come back. The outcome
 * sink is a fake (test/support/outcomeSinks.ts): the answers needed here (a call that throws,
 * `Throttled` then a state, `NotDelivered`) cannot be had from the local stack on demand. The
 * Lambda wrapper's side without SQS: test/unit/workflow-reporting.test.ts.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const PARENTS =
  '[{"key":"charge","jobId":"j-charge","outcome":"SUCCEEDED","result":{"invoice":42}},{"key":"audit","jobId":"j-audit","outcome":"DEAD"}]';

/** Sends a workflow job's delivery, body and attributes as the dispatcher builds them (core/model/messages.ts). */
async function sendWorkflowJob(sqs: SQSClient, queueUrl: string, jobId: string, parents?: string): Promise<void> {
  const m = deliveryMessage('m', {
    jobId,
    tenant: 'demo',
    dueMs: Date.now(),
    payload: '{"n":1}',
    workflow: 'wf-1',
    ...(parents ? { parents } : {}),
  });
  await sendMessage(sqs, queueUrl, m);
}

/** Sends an ordinary job's delivery for a tenant with history on. */
async function sendHistoryJob(sqs: SQSClient, queueUrl: string, jobId: string): Promise<void> {
  await sendMessage(
    sqs,
    queueUrl,
    deliveryMessage('m', { jobId, tenant: 'demo', dueMs: Date.now(), payload: 'null' }, undefined, { history: true }),
  );
}

async function sendMessage(sqs: SQSClient, queueUrl: string, m: { body: string; attributes?: Record<string, string> }) {
  const attributes = Object.fromEntries(Object.entries(m.attributes ?? {}).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]));
  await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: m.body, MessageAttributes: attributes }));
}

/**
 * An SQS client whose calls are pushed onto `log` as `<Command> <jobId>` (the job of the receipt
 * handle they name, learnt from the receives), in the order they are sent.
 */
function loggedSqs(log: string[]): SQSClient {
  const sqs = em.newClients().sqs;
  const jobOf = new Map<string, string>();
  sqs.middlewareStack.add(
    (next: any, context: any) => async (args: any) => {
      const command = String(context.commandName).replace(/Command$/, '');
      if (command !== 'ReceiveMessage') log.push(`${command} ${jobOf.get(args.input.ReceiptHandle) ?? '?'}`);
      const result = await next(args);
      for (const m of result.output?.Messages ?? []) jobOf.set(m.ReceiptHandle, JSON.parse(m.Body).jobId);
      return result;
    },
    { step: 'initialize', name: `log-${randomUUID()}` },
  );
  return sqs;
}

/** A worker for these tests: no signals, 1 s polls, events collected, the given options over those. */
function workerFor<P>(queueUrl: string, log: string[], opts: Partial<WorkerOptions<P>> & Pick<WorkerOptions<P>, 'handler'>) {
  const events: WorkerEvent<P>[] = [];
  const worker = new Worker<P>({
    queueUrl,
    sqs: loggedSqs(log),
    handleSignals: false,
    waitTimeSeconds: 1,
    onEvent: (e) => void events.push(e),
    ...opts,
  });
  return { worker, events, running: worker.run() };
}

const errorsOf = (events: readonly WorkerEvent[]) => events.flatMap((e) => (e.type === 'error' ? [e.error] : []));

describe.concurrent('Worker with workflow jobs', () => {
  it('reports at once and alone, before the delete; carries the result (above 1 KB) and hands the handler typed parents', async () => {
    const q = await em.createQueue('wf-order');
    const log: string[] = [];
    const { sink, requests } = scriptedSink(stored, log);
    const result = { summary: 'r'.repeat(3_000) };
    let parents: readonly ParentOutcome[] | undefined;
    const { worker, running, events } = workerFor(q.url, log, {
      client: sink,
      handler: (job) => {
        parents = job.parents;
        log.push(`handled ${job.jobId}`);
        return result;
      },
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-a', PARENTS);
    await waitUntil(() => log.includes('DeleteMessage wf-a'), 10_000, 'the delete');
    await worker.stop();
    await running;
    expect(log).toEqual(['handled wf-a', 'report wf-a:SUCCEEDED', 'DeleteMessage wf-a']);
    expect(requests).toEqual([[expect.objectContaining({ jobId: 'wf-a', outcome: 'SUCCEEDED', attempts: 1, result })]]);
    expect(parents).toEqual([
      { key: 'charge', jobId: 'j-charge', outcome: 'SUCCEEDED', result: { invoice: 42 } },
      { key: 'audit', jobId: 'j-audit', outcome: 'DEAD' },
    ]);
    expect(events.map((e) => e.type)).toEqual(['completed']);
  });

  it('reports again after Throttled and after a call that threw, holding the message; deletes it once answered', async () => {
    const q = await em.createQueue('wf-throttled');
    const log: string[] = [];
    const answers = (o: OutcomeReport, call: number): ScriptedAnswer =>
      call === 1 ? refused(o, 'Throttled') : call === 2 ? new Error('socket hang up') : stored(o);
    const { sink, requests } = scriptedSink(answers, log);
    let runs = 0;
    const { worker, running } = workerFor(q.url, log, { client: sink, random: () => 0, handler: () => void runs++ });
    await sendWorkflowJob(em.sqs, q.url, 'wf-t');
    await waitUntil(() => log.includes('DeleteMessage wf-t'), 10_000, 'the delete');
    await worker.stop();
    await running;
    expect(runs).toBe(1);
    expect(requests).toHaveLength(3);
    expect(log.filter((l) => !l.startsWith('ChangeMessageVisibility'))).toEqual([
      'report wf-t:SUCCEEDED',
      'report wf-t:SUCCEEDED',
      'report wf-t:SUCCEEDED',
      'DeleteMessage wf-t',
    ]);
  });

  it('leaves the message to come back when the report is refused for good: no delete, the handler runs again', async () => {
    const q = await em.createQueue('wf-refused');
    const log: string[] = [];
    const { sink } = scriptedSink((o, call) => (call === 1 ? refused(o, 'NotDelivered') : stored(o)), log);
    const { worker, running, events } = workerFor(q.url, log, {
      client: sink,
      backoff: { baseMs: 1, capMs: 1 },
      handler: (job, ctx) => void log.push(`handled ${job.jobId} #${ctx.receiveCount}`),
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-r');
    await waitUntil(() => log.includes('DeleteMessage wf-r'), 10_000, 'the second delivery deleted');
    await worker.stop();
    await running;
    expect(log).toEqual([
      'handled wf-r #1',
      'report wf-r:SUCCEEDED',
      'ChangeMessageVisibility wf-r', // the backoff: it comes back after 1 s
      'handled wf-r #2',
      'report wf-r:SUCCEEDED',
      'DeleteMessage wf-r',
    ]);
    const [error] = errorsOf(events);
    expect(error).toBeInstanceOf(OutcomeNotReportedError);
    expect(error).toMatchObject({ code: 'NotDelivered', jobId: 'wf-r', outcome: 'SUCCEEDED' });
  });

  it('keeps reporting while the heartbeat holds the message past its visibility timeout; stop() releases it undeleted', async () => {
    const q = await em.createQueue('wf-down');
    const log: string[] = [];
    const { sink, requests } = scriptedSink(() => new Error('the API is down'), log);
    let runs = 0;
    const { worker, running, events } = workerFor(q.url, log, {
      client: sink,
      visibilityTimeoutSeconds: 1,
      heartbeatMs: 250,
      handler: () => void runs++,
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-d');
    await waitUntil(() => runs === 1, 5_000, 'the handler');
    await new Promise((r) => setTimeout(r, 2_500)); // two and a half visibility timeouts
    expect(runs).toBe(1); // held, not redelivered
    expect(requests.length).toBeGreaterThanOrEqual(2);
    await worker.stop();
    await running;
    expect(log.some((l) => l.startsWith('DeleteMessage'))).toBe(false);
    expect(events.some((e) => e.type === 'released')).toBe(true);
    expect(errorsOf(events).filter((e) => e instanceof OutcomeNotReportedError)).toHaveLength(1);
    const [back] = await receiveAll(em.sqs, q.url, { waitMs: 500 });
    expect(JSON.parse(back!.Body!).jobId).toBe('wf-d');
  });

  it('sends an UnrecoverableError’s message to the DLQ only once its DEAD was answered', async () => {
    const q = await em.createQueue('wf-dead', { dlq: true });
    const log: string[] = [];
    const { sink } = scriptedSink((o, call) => (call === 1 ? new Error('api down') : stored(o)), log);
    let runs = 0;
    const { worker, running, events } = workerFor(q.url, log, {
      client: sink,
      deadLetterQueueUrl: q.dlqUrl,
      backoff: { baseMs: 1, capMs: 1 },
      handler: () => {
        runs++;
        throw new UnrecoverableError('no such account');
      },
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-x');
    await waitUntil(() => events.some((e) => e.type === 'dead'), 10_000, 'the dead-letter');
    await worker.stop();
    await running;
    expect(runs).toBe(1); // the first report failed with a thrown call and was retried; then answered
    expect(log).toEqual(['report wf-x:DEAD', 'report wf-x:DEAD', 'SendMessage ?', 'DeleteMessage wf-x']);
    const [dead] = await receiveAll(em.sqs, q.dlqUrl!, { waitMs: 500 });
    expect(JSON.parse(dead!.Body!).jobId).toBe('wf-x');
  });

  it('keeps an unanswered DEAD out of the DLQ: the message comes back, and goes once its DEAD is answered', async () => {
    const q = await em.createQueue('wf-dead-refused', { dlq: true });
    const log: string[] = [];
    const { sink } = scriptedSink((o, call) => (call === 1 ? refused(o, 'NotDelivered') : stored(o)), log);
    const { worker, running, events } = workerFor(q.url, log, {
      client: sink,
      deadLetterQueueUrl: q.dlqUrl,
      backoff: { baseMs: 1, capMs: 1 },
      handler: () => {
        throw new UnrecoverableError('no such account');
      },
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-y');
    await waitUntil(() => events.some((e) => e.type === 'dead'), 10_000, 'the dead-letter');
    await worker.stop();
    await running;
    expect(log).toEqual(['report wf-y:DEAD', 'ChangeMessageVisibility wf-y', 'report wf-y:DEAD', 'SendMessage ?', 'DeleteMessage wf-y']);
    expect(events.map((e) => e.type)).toEqual(['error', 'failed', 'dead']);
  });

  it('reports a failure FAILED, answered, before the backoff; the retry then succeeds', async () => {
    const q = await em.createQueue('wf-failed');
    const log: string[] = [];
    const { sink } = scriptedSink(stored, log);
    const { worker, running } = workerFor(q.url, log, {
      client: sink,
      backoff: { baseMs: 1, capMs: 1 },
      handler: (_job, ctx) => {
        if (ctx.receiveCount === 1) throw new Error('try again');
      },
    });
    await sendWorkflowJob(em.sqs, q.url, 'wf-f');
    await waitUntil(() => log.includes('DeleteMessage wf-f'), 10_000, 'the retry deleted');
    await worker.stop();
    await running;
    expect(log).toEqual(['report wf-f:FAILED', 'ChangeMessageVisibility wf-f', 'report wf-f:SUCCEEDED', 'DeleteMessage wf-f']);
  });

  it('leaves ordinary jobs as they were: a history job is deleted first and reported in the batch', async () => {
    const q = await em.createQueue('wf-mixed');
    const log: string[] = [];
    const { sink, requests } = scriptedSink(stored, log);
    const { worker, running } = workerFor(q.url, log, { client: sink, concurrency: 1, handler: () => 'done' });
    await sendHistoryJob(em.sqs, q.url, 'plain-1');
    await waitUntil(() => log.includes('DeleteMessage plain-1'), 10_000, 'the history job deleted');
    await sendWorkflowJob(em.sqs, q.url, 'wf-m');
    await waitUntil(() => log.includes('DeleteMessage wf-m'), 10_000, 'the workflow job deleted');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    await worker.stop();
    await running;
    const plain = log.filter((l) => l.includes('plain-1'));
    expect(plain).toEqual(['DeleteMessage plain-1', 'report plain-1:SUCCEEDED']);
    const wf = log.filter((l) => l.includes('wf-m'));
    expect(wf).toEqual(['report wf-m:SUCCEEDED', 'DeleteMessage wf-m']);
    expect(requests.flat().find((o) => o.jobId === 'plain-1')?.result).toBe('done');
  });

  it('without a client, does not run a workflow job: a failed event, the message backed off, a warning once', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const q = await em.createQueue('wf-noclient');
      const log: string[] = [];
      let runs = 0;
      const { worker, running, events } = workerFor(q.url, log, { handler: () => void runs++ });
      await sendWorkflowJob(em.sqs, q.url, 'wf-n1');
      await sendWorkflowJob(em.sqs, q.url, 'wf-n2');
      await waitUntil(() => events.filter((e) => e.type === 'failed').length >= 2, 10_000, 'two failed events');
      await worker.stop();
      await running;
      expect(runs).toBe(0);
      expect(log.some((l) => l.startsWith('DeleteMessage'))).toBe(false);
      expect(warn.mock.calls.filter((c) => String(c[0]).includes('workflow'))).toHaveLength(1);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('dyneinLambdaHandler with a workflow job and SQS', () => {
  it('sends an UnrecoverableError’s record to the DLQ only once its DEAD was answered', async () => {
    const q = await em.createQueue('wf-lambda-dead', { dlq: true });
    const log: string[] = [];
    const { sink } = scriptedSink((o, call) => (call === 1 ? refused(o, 'NotDelivered') : stored(o)), log);
    const handler = dyneinLambdaHandler(
      () => {
        throw new UnrecoverableError('no such account');
      },
      {
        client: sink,
        sqs: loggedSqs(log),
        queueUrl: q.url,
        deadLetterQueueUrl: q.dlqUrl,
        backoff: { baseMs: 1, capMs: 1 },
        random: () => 0,
      },
    );
    await sendWorkflowJob(em.sqs, q.url, 'wf-l');
    const invoke = async () => {
      const [m] = await receiveAll(em.sqs, q.url, { waitMs: 1_500, visibility: 30 });
      const messageAttributes = Object.fromEntries(
        Object.entries(m!.MessageAttributes ?? {}).map(([k, v]) => [k, { stringValue: v.StringValue, dataType: v.DataType! }]),
      );
      return handler({
        Records: [sqsRecordFor({ messageId: m!.MessageId!, receiptHandle: m!.ReceiptHandle!, body: m!.Body!, messageAttributes })],
      });
    };
    expect((await invoke()).batchItemFailures).toHaveLength(1); // DEAD refused: not to the DLQ
    expect((await invoke()).batchItemFailures).toEqual([]); // DEAD answered: to the DLQ
    expect(log).toEqual(['report wf-l:DEAD', 'ChangeMessageVisibility ?', 'report wf-l:DEAD', 'SendMessage ?']);
    const [dead] = await receiveAll(em.sqs, q.dlqUrl!, { waitMs: 500 });
    expect(JSON.parse(dead!.Body!).jobId).toBe('wf-l');
  });
});
