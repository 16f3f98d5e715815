import type { SQSRecord } from 'aws-lambda';
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import {
  MalformedMessageError,
  NetworkError,
  OutcomeNotReportedError,
  UnrecoverableError,
  ValidationError,
  parseDelivery,
  type OutcomeReport,
  type ParentOutcome,
} from '../../client/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { MAX_RESULT_BYTES, MAX_WORKFLOW_RESULT_BYTES, OutcomeReporter, reportOutcomeNow, resultOf } from '../../client/outcomes.js';
import * as history from '../../core/jobs/history.js';
import { deliveryMessage } from '../../core/model/messages.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { refused, scriptedSink, stored, type ScriptedAnswer } from '../support/outcomeSinks.js';

/**
 * Workflow jobs on the consumer side (issue #25): the delivery's `workflow` and `parents`, and the
 * report sent at once and retried until answered, which the Lambda wrapper awaits before a record
 * counts as done. The outcome sink is a fake (test/support/outcomeSinks.ts: the answers these
 * tests need, a call that throws, `Throttled` and then a state, `NotDelivered`, are ones the local
 * stack cannot be made to give on demand). No network, no timers waited on (`random: () => 0`
 * makes every backoff 0 ms). The Worker's side, against fauxqs: test/client/workflow-worker.test.ts.
 */

const PARENTS =
  '[{"key":"charge","jobId":"j1.t.3.1.w.a.b","outcome":"SUCCEEDED","result":{"invoice":42,"lines":[1,2]}},' +
  '{"key":"audit","jobId":"j1.t.3.1.w.a.c","outcome":"DEAD"},' +
  '{"key":"mail","jobId":"j1.t.3.1.w.a.d","outcome":"SUCCEEDED","resultOmitted":true},' +
  '{"key":"ping","jobId":"j1.t.3.1.w.a.e","outcome":"CANCELLED"}]';

/** A workflow job's delivery as the dispatcher builds it (core/model/messages.ts). */
function workflowMessage(jobId: string, opts: { parents?: string; payload?: string; history?: boolean } = {}) {
  return deliveryMessage(
    'm',
    {
      jobId,
      tenant: 't',
      dueMs: Date.now(),
      payload: opts.payload ?? '{"n":1}',
      workflow: 'wf-1',
      ...(opts.parents !== undefined ? { parents: opts.parents } : {}),
    },
    undefined,
    { history: opts.history },
  );
}

/** The same, as the record Lambda's SQS event source hands over. */
function workflowRecord(jobId: string, opts: { parents?: string; receiveCount?: number } = {}): SQSRecord {
  return recordOf(jobId, workflowMessage(jobId, opts), opts.receiveCount);
}

function recordOf(jobId: string, m: { body: string; attributes?: Record<string, string> }, receiveCount = 1): SQSRecord {
  return sqsRecordFor({
    messageId: `m-${jobId}`,
    body: m.body,
    attributes: { ApproximateReceiveCount: String(receiveCount) },
    messageAttributes: Object.fromEntries(Object.entries(m.attributes ?? {}).map(([k, v]) => [k, { stringValue: v, dataType: 'String' }])),
  });
}

type Answer = ScriptedAnswer;

const report: OutcomeReport = {
  jobId: 'j1.t.3.1.w.a.b',
  outcome: 'SUCCEEDED',
  attempts: 1,
  receivedAt: new Date(0).toISOString(),
  durationMs: 5,
};

afterEach(() => vi.restoreAllMocks());

describe('parseDelivery of a workflow job', () => {
  it('reads workflow and parents (typed), keeping the payload byte for byte', () => {
    const payload = '{"amount":1.0,"id":12345678901234567890}';
    const job = parseDelivery<{ amount: number }>(workflowMessage('j1.t.3.1.w.a.z', { parents: PARENTS, payload }).body);
    expect(job.workflow).toBe('wf-1');
    expect(job.payloadText).toBe(payload);
    expect(job.parents).toEqual([
      { key: 'charge', jobId: 'j1.t.3.1.w.a.b', outcome: 'SUCCEEDED', result: { invoice: 42, lines: [1, 2] } },
      { key: 'audit', jobId: 'j1.t.3.1.w.a.c', outcome: 'DEAD' },
      { key: 'mail', jobId: 'j1.t.3.1.w.a.d', outcome: 'SUCCEEDED', resultOmitted: true },
      { key: 'ping', jobId: 'j1.t.3.1.w.a.e', outcome: 'CANCELLED' },
    ]);
    expectTypeOf(job.parents).toEqualTypeOf<readonly ParentOutcome[] | undefined>();
    expectTypeOf<ParentOutcome['outcome']>().toEqualTypeOf<'SUCCEEDED' | 'DEAD' | 'CANCELLED'>();
  });

  it('a root job has its workflow and no parents; a job outside workflows has neither', () => {
    const root = parseDelivery(workflowMessage('j1.t.3.1.w.a.r').body);
    expect(root.workflow).toBe('wf-1');
    expect('parents' in root).toBe(false);
    const plain = parseDelivery(deliveryMessage('m', { jobId: 'j', tenant: 't', dueMs: 0, payload: '1' }).body);
    expect(plain).toEqual({ jobId: 'j', tenant: 't', runAt: new Date(0).toISOString(), payload: 1, payloadText: '1' });
  });

  it('a result of null is kept as null, not left out', () => {
    const job = parseDelivery(workflowMessage('x', { parents: '[{"key":"a","jobId":"j","outcome":"SUCCEEDED","result":null}]' }).body);
    expect(job.parents).toEqual([{ key: 'a', jobId: 'j', outcome: 'SUCCEEDED', result: null }]);
  });

  it.each([
    ['not an array', '{"key":"a"}'],
    ['an entry without its key', '[{"jobId":"j","outcome":"SUCCEEDED"}]'],
    ['an unknown outcome', '[{"key":"a","jobId":"j","outcome":"FAILED"}]'],
    ['resultOmitted other than true', '[{"key":"a","jobId":"j","outcome":"SUCCEEDED","resultOmitted":false}]'],
  ])('refuses parents that are %s', (_what, parents) => {
    expect(() => parseDelivery(workflowMessage('x', { parents }).body)).toThrow(MalformedMessageError);
  });
});

describe('resultOf', () => {
  it('keeps JSON up to 1 KB, or up to 64 KiB for a workflow job (the route limits of core/jobs/history.ts)', () => {
    expect([MAX_RESULT_BYTES, MAX_WORKFLOW_RESULT_BYTES]).toEqual([history.MAX_RESULT_BYTES, history.MAX_WORKFLOW_RESULT_BYTES]);
    const big = { text: 'x'.repeat(40_000) };
    expect(resultOf(big)).toBeUndefined();
    expect(resultOf(big, MAX_WORKFLOW_RESULT_BYTES)).toBe(big);
    expect(resultOf({ text: 'x'.repeat(MAX_WORKFLOW_RESULT_BYTES) }, MAX_WORKFLOW_RESULT_BYTES)).toBeUndefined();
    expect(resultOf(10n, MAX_WORKFLOW_RESULT_BYTES)).toBeUndefined(); // not JSON
  });
});

describe('reportOutcomeNow', () => {
  const fast = { random: () => 0 };

  it('sends the outcome alone and answers the state kept', async () => {
    const { sink, requests } = scriptedSink(stored);
    expect(await reportOutcomeNow(sink, 't', report, fast)).toEqual({ answered: true, state: 'SUCCEEDED' });
    expect(requests).toEqual([[report]]);
  });

  it('reports again after Throttled (and InternalError), and after a call that threw a retryable error', async () => {
    const answers: Answer[] = [
      refused(report, 'Throttled'),
      new NetworkError('connection reset'),
      refused(report, 'InternalError'),
      new Error('socket hang up'),
      stored(report),
    ];
    const { sink, requests } = scriptedSink((_o, call) => answers[call - 1]!);
    expect(await reportOutcomeNow(sink, 't', report, fast)).toEqual({ answered: true, state: 'SUCCEEDED' });
    expect(requests).toHaveLength(5);
  });

  it('gives up at once on an entry refused for good, or a request error that repeating cannot fix', async () => {
    for (const answer of [refused(report, 'NotDelivered'), new ValidationError({ message: 'bad outcome' })]) {
      const { sink, requests } = scriptedSink(() => answer);
      const got = await reportOutcomeNow(sink, 't', report, fast);
      expect(requests).toHaveLength(1);
      expect(got.answered).toBe(false);
      if (got.answered) continue;
      expect(got.error).toBeInstanceOf(OutcomeNotReportedError);
      expect(got.error).toMatchObject({ jobId: report.jobId, outcome: 'SUCCEEDED', attempts: 1 });
      expect(got.error.code).toBe(answer instanceof Error ? 'ValidationError' : 'NotDelivered');
    }
  });

  it('stops retrying when its attempts are spent, its budget has passed, or its signal aborted (the try under way finishes)', async () => {
    const throttled = (o: OutcomeReport) => refused(o, 'Throttled');
    const a = scriptedSink(throttled);
    expect(await reportOutcomeNow(a.sink, 't', report, { ...fast, maxAttempts: 3 })).toMatchObject({ answered: false });
    expect(a.requests).toHaveLength(3);

    let clock = 0;
    const b = scriptedSink((o) => ((clock += 1_000), throttled(o)));
    const byBudget = await reportOutcomeNow(b.sink, 't', report, { ...fast, now: () => clock, budgetMs: 2_500 });
    expect(byBudget).toMatchObject({ answered: false, error: { code: 'Throttled', attempts: 3 } });

    const stop = new AbortController();
    const c = scriptedSink((o) => (stop.abort(new Error('the worker is shutting down')), throttled(o)));
    const aborted = await reportOutcomeNow(c.sink, 't', report, { ...fast, signal: stop.signal });
    expect(c.requests).toHaveLength(1);
    expect(aborted.answered ? '' : aborted.error.message).toContain('shutting down');
  });

  it('is what OutcomeReporter.reportNow does, never waiting for a batch', async () => {
    const { sink, requests } = scriptedSink(stored);
    const reporter = new OutcomeReporter(sink, { flushMs: 60_000 });
    await expect(reporter.reportNow('t', report, fast)).resolves.toEqual({ answered: true, state: 'SUCCEEDED' });
    expect(requests).toHaveLength(1);
  });
});

describe('dyneinLambdaHandler with workflow jobs', () => {
  it('reports SUCCEEDED with the handler’s result (above 1 KB) before the record counts as done; the handler gets typed parents', async () => {
    const log: string[] = [];
    const { sink, requests } = scriptedSink(stored, log);
    const result = { summary: 'y'.repeat(4_000) };
    let parents: readonly ParentOutcome[] | undefined;
    const handler = dyneinLambdaHandler(
      (job) => {
        parents = job.parents;
        log.push(`handled ${job.jobId}`);
        return result;
      },
      { client: sink, random: () => 0 },
    );
    const res = await handler({ Records: [workflowRecord('wf-job', { parents: PARENTS })] });
    log.push('invocation done');
    expect(res.batchItemFailures).toEqual([]);
    expect(log).toEqual(['handled wf-job', 'report wf-job:SUCCEEDED', 'invocation done']);
    expect(requests[0]![0]).toMatchObject({ jobId: 'wf-job', outcome: 'SUCCEEDED', attempts: 1, result });
    expect(parents?.map((p) => [p.key, p.outcome])).toEqual([
      ['charge', 'SUCCEEDED'],
      ['audit', 'DEAD'],
      ['mail', 'SUCCEEDED'],
      ['ping', 'CANCELLED'],
    ]);
    expect(parents?.[0]?.result).toEqual({ invoice: 42, lines: [1, 2] });
  });

  it('reports again after Throttled, and the record succeeds once answered', async () => {
    const log: string[] = [];
    const { sink, requests } = scriptedSink((o, call) => (call === 1 ? refused(o, 'Throttled') : stored(o)), log);
    // random 0.1: the retry waits 20 ms, so a report not awaited would land after the invocation.
    const handler = dyneinLambdaHandler(() => 'ok', { client: sink, random: () => 0.1 });
    const res = await handler({ Records: [workflowRecord('wf-throttled')] });
    log.push('invocation done');
    expect(res.batchItemFailures).toEqual([]);
    expect(log).toEqual(['report wf-throttled:SUCCEEDED', 'report wf-throttled:SUCCEEDED', 'invocation done']);
    expect(requests.map((r) => r.map((o) => o.outcome))).toEqual([['SUCCEEDED'], ['SUCCEEDED']]);
  });

  it('fails the record when its report is given up on: refused for good, or still throwing after 5 tries', async () => {
    const errors: unknown[] = [];
    const onError = (error: unknown) => void errors.push(error);
    const notDelivered = scriptedSink((o) => refused(o, 'NotDelivered'));
    const refusedHandler = dyneinLambdaHandler(() => 'ok', { client: notDelivered.sink, random: () => 0, onError });
    expect((await refusedHandler({ Records: [workflowRecord('wf-refused')] })).batchItemFailures).toEqual([
      { itemIdentifier: 'm-wf-refused' },
    ]);
    expect(notDelivered.requests).toHaveLength(1);

    const down = scriptedSink(() => new Error('api down'));
    const downHandler = dyneinLambdaHandler(() => 'ok', { client: down.sink, random: () => 0, onError });
    expect((await downHandler({ Records: [workflowRecord('wf-down')] })).batchItemFailures).toEqual([{ itemIdentifier: 'm-wf-down' }]);
    expect(down.requests).toHaveLength(5);
    expect(errors.map((e) => (e as OutcomeNotReportedError).code)).toEqual(['NotDelivered', undefined]);
    expect(errors.every((e) => e instanceof OutcomeNotReportedError)).toBe(true);
  });

  it('reports a failure FAILED, an UnrecoverableError DEAD, awaiting both; an unanswered DEAD fails the record', async () => {
    const { sink, requests } = scriptedSink((o) => (o.jobId === 'wf-unreported' ? refused(o, 'NotDelivered') : stored(o)));
    const handler = dyneinLambdaHandler(
      (job) => {
        if (job.jobId === 'wf-flaky') throw new Error('later');
        throw new UnrecoverableError('no such account');
      },
      { client: sink, random: () => 0 },
    );
    const res = await handler({
      Records: [workflowRecord('wf-flaky'), workflowRecord('wf-dead'), workflowRecord('wf-unreported')],
    });
    const sent = requests.flat();
    expect(sent.find((o) => o.jobId === 'wf-flaky')).toMatchObject({ outcome: 'FAILED', error: 'later' });
    expect(sent.find((o) => o.jobId === 'wf-dead')).toMatchObject({ outcome: 'DEAD', error: 'no such account' });
    expect(requests.every((r) => r.length === 1)).toBe(true); // each alone, at once
    // Without `sqs` an unrecoverable record is failed (retried until maxReceiveCount) either way.
    expect(res.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m-wf-dead', 'm-wf-flaky', 'm-wf-unreported']);
  });

  it('leaves the result out when it is above 64 KiB, and still succeeds', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const { sink, requests } = scriptedSink(stored);
    const handler = dyneinLambdaHandler(() => ({ blob: 'z'.repeat(70_000) }), { client: sink, random: () => 0 });
    expect((await handler({ Records: [workflowRecord('wf-big')] })).batchItemFailures).toEqual([]);
    expect(requests[0]![0]!.outcome).toBe('SUCCEEDED');
    expect('result' in requests[0]![0]!).toBe(false);
    expect(warn.mock.calls.some((c) => String(c[0]).includes('64 KiB'))).toBe(true);
  });

  it('without a client, does not run a workflow job and fails its record, warning once', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const ran: string[] = [];
    const handler = dyneinLambdaHandler((job) => void ran.push(job.jobId));
    const res = await handler({ Records: [workflowRecord('wf-a'), workflowRecord('wf-b')] });
    expect(ran).toEqual([]);
    expect(res.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m-wf-a', 'm-wf-b']);
    expect(warn.mock.calls.filter((c) => String(c[0]).includes('workflow'))).toHaveLength(1);
  });

  it('keeps batching the outcomes of other jobs (history on), sent after the records, while a workflow job’s goes at once', async () => {
    const log: string[] = [];
    const { sink, requests } = scriptedSink(stored, log);
    const handler = dyneinLambdaHandler((job) => void log.push(`handled ${job.jobId}`), { client: sink, random: () => 0, concurrency: 1 });
    const plain = (jobId: string) =>
      recordOf(jobId, deliveryMessage('m', { jobId, tenant: 't', dueMs: Date.now(), payload: 'null' }, undefined, { history: true }));
    const res = await handler({ Records: [plain('h-1'), workflowRecord('wf-mid'), plain('h-2')] });
    expect(res.batchItemFailures).toEqual([]);
    expect(log).toEqual(['handled h-1', 'handled wf-mid', 'report wf-mid:SUCCEEDED', 'handled h-2', 'report h-1:SUCCEEDED,h-2:SUCCEEDED']);
    expect(requests).toHaveLength(2);
  });
});
