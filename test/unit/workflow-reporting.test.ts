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
  type OutcomeSink,
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

/** The report of job `jobId`. */
const reportOf = (jobId: string): OutcomeReport => ({ ...report, jobId });

/** Resolves after the promises already settled have run their callbacks (one macrotask). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A {@link scriptedSink} whose requests each wait for `wait()` (by default one macrotask) before
 * they are answered: `started` lists the requests as they begin, `most.inFlight` the most under
 * way at once.
 */
function slowSink(script: (report: OutcomeReport, call: number) => Answer, wait: () => Promise<void> = settle) {
  const inner = scriptedSink(script);
  const started: OutcomeReport[][] = [];
  const most = { inFlight: 0 };
  let inFlight = 0;
  const sink: OutcomeSink = {
    async reportOutcomes(tenant, outcomes) {
      started.push([...outcomes]);
      most.inFlight = Math.max(most.inFlight, ++inFlight);
      try {
        await wait();
        return await inner.sink.reportOutcomes(tenant, outcomes);
      } finally {
        inFlight--;
      }
    },
  };
  return { sink, started, most };
}

const idsOf = (requests: readonly OutcomeReport[][]) => requests.map((r) => r.map((o) => o.jobId));

describe('OutcomeReporter.reportNow coalesces the reports made together', () => {
  const fast = { random: () => 0 };

  it('sends a report made while the tenant is idle at once and alone: the request starts before reportNow returns', async () => {
    const { sink, requests } = scriptedSink(stored);
    const reporter = new OutcomeReporter(sink);
    const answer = reporter.reportNow('t', report, fast);
    expect(requests).toEqual([[report]]);
    await expect(answer).resolves.toEqual({ answered: true, state: 'SUCCEEDED' });
    // Idle again once answered: the next report goes alone as well.
    const next = reporter.reportNow('t', reportOf('j-next'), fast);
    expect(idsOf(requests)).toEqual([[report.jobId], ['j-next']]);
    await next;
  });

  it('sends up to 4 requests at once per tenant by default; the reports made meanwhile go together in the next', async () => {
    const { sink, started, most } = slowSink(stored);
    const reporter = new OutcomeReporter(sink);
    const jobs = ['a', 'b', 'c', 'd', 'e', 'f'];
    await Promise.all(jobs.map((j) => reporter.reportNow('t', reportOf(j), fast)));
    expect(idsOf(started)).toEqual([['a'], ['b'], ['c'], ['d'], ['e', 'f']]);
    expect(most.inFlight).toBe(4);
    // Another tenant's reports have their own requests.
    const other = slowSink(stored);
    const shared = new OutcomeReporter(other.sink, { nowInFlight: 1 });
    await Promise.all([shared.reportNow('t1', reportOf('x'), fast), shared.reportNow('t2', reportOf('y'), fast)]);
    expect(idsOf(other.started)).toEqual([['x'], ['y']]);
    expect(other.most.inFlight).toBe(2);
  });

  it('with nowInFlight 1 and a slow sink, 30 reports made at once take 2 requests, each report getting its own answer', async () => {
    const { sink, started, most } = slowSink((o) => ({ jobId: o.jobId, state: `kept ${o.jobId}` }));
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1 });
    const jobs = Array.from({ length: 30 }, (_, i) => `j-${i}`);
    const answers = await Promise.all(jobs.map((j) => reporter.reportNow('t', reportOf(j), fast)));
    expect(answers).toEqual(jobs.map((j) => ({ answered: true, state: `kept ${j}` })));
    expect(started.length).toBeLessThanOrEqual(3);
    // The first alone, at once; the 29 made while it was under way together, when it ended.
    expect(idsOf(started)).toEqual([['j-0'], jobs.slice(1)]);
    expect(most.inFlight).toBe(1);
  });

  it('takes at most maxBatch waiting reports a request', async () => {
    const { sink, started } = slowSink(stored);
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1, maxBatch: 10 });
    await Promise.all(Array.from({ length: 30 }, (_, i) => reporter.reportNow('t', reportOf(`j-${i}`), fast)));
    expect(started.map((r) => r.length)).toEqual([1, 10, 10, 9]);
  });

  it('sends again, alone, the one entry of a request answered Throttled, while the others are answered', async () => {
    let throttled = false; // c's first try only
    const { sink, requests } = scriptedSink((o) => {
      if (o.jobId !== 'c' || throttled) return stored(o);
      throttled = true;
      return refused(o, 'Throttled');
    });
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1 });
    const answeredOrder: string[] = [];
    const answers = await Promise.all(
      ['a', 'b', 'c', 'd', 'e'].map(async (j) => {
        const answer = await reporter.reportNow('t', reportOf(j), fast);
        answeredOrder.push(j);
        return answer;
      }),
    );
    expect(answers.every((a) => a.answered)).toBe(true);
    expect(idsOf(requests)).toEqual([['a'], ['b', 'c', 'd', 'e'], ['c']]);
    expect(answeredOrder.at(-1)).toBe('c');
  });

  it('gives a call that threw to every entry of its request: each retries on its own, with its own attempts', async () => {
    const { sink, requests } = scriptedSink((o, call) => (call === 2 ? new NetworkError('connection reset') : stored(o)));
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1 });
    const answers = await Promise.all([
      reporter.reportNow('t', reportOf('a'), fast),
      reporter.reportNow('t', reportOf('b'), fast),
      reporter.reportNow('t', reportOf('c'), fast),
      reporter.reportNow('t', reportOf('d'), { ...fast, maxAttempts: 1 }),
    ]);
    expect(idsOf(requests).slice(0, 2)).toEqual([['a'], ['b', 'c', 'd']]);
    // b and c are sent again (alone or together, as the slot allows); d had one attempt only.
    expect(
      requests
        .slice(2)
        .flat()
        .map((o) => o.jobId)
        .sort(),
    ).toEqual(['b', 'c']);
    expect(answers.slice(0, 3)).toEqual([0, 1, 2].map(() => ({ answered: true, state: 'SUCCEEDED' })));
    const d = answers[3];
    expect(d.answered).toBe(false);
    if (d.answered) return;
    expect(d.error).toMatchObject({ jobId: 'd', attempts: 1 });
    expect(d.error.cause).toBeInstanceOf(NetworkError);
  });

  it('gives up at once on every entry of a request that threw an error repeating cannot fix', async () => {
    const { sink, requests } = scriptedSink((o, call) => (call === 2 ? new ValidationError({ message: 'bad outcome' }) : stored(o)));
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1 });
    const answers = await Promise.all(['a', 'b', 'c'].map((j) => reporter.reportNow('t', reportOf(j), fast)));
    expect(idsOf(requests)).toEqual([['a'], ['b', 'c']]);
    expect(answers.map((a) => (a.answered ? a.state : a.error.code))).toEqual(['SUCCEEDED', 'ValidationError', 'ValidationError']);
  });

  it('sends again an entry the route answered no result for, mapping the results it answered by index', async () => {
    const requests: string[][] = [];
    const sink: OutcomeSink = {
      async reportOutcomes(_tenant, outcomes) {
        requests.push(outcomes.map((o) => o.jobId));
        // Short by one: the last entry of a request of several is left unanswered.
        const answered = outcomes.length > 1 ? outcomes.slice(0, -1) : outcomes;
        return { results: answered.map((o) => ({ jobId: o.jobId, state: `kept ${o.jobId}` })) };
      },
    };
    const reporter = new OutcomeReporter(sink, { nowInFlight: 1 });
    const answers = await Promise.all(['a', 'b', 'c'].map((j) => reporter.reportNow('t', reportOf(j), fast)));
    expect(requests).toEqual([['a'], ['b', 'c'], ['c']]);
    expect(answers).toEqual(['a', 'b', 'c'].map((j) => ({ answered: true, state: `kept ${j}` })));
  });

  it('flush() waits for its requests under way', async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { sink } = slowSink(stored, () => gate);
    const reporter = new OutcomeReporter(sink);
    const answer = reporter.reportNow('t', report, fast);
    let flushed = false;
    const flushing = reporter.flush().then(() => void (flushed = true));
    await settle();
    expect(flushed).toBe(false);
    open();
    await flushing;
    await expect(answer).resolves.toEqual({ answered: true, state: 'SUCCEEDED' });
  });

  it('refuses a nowInFlight (or maxBatch) below 1, or not an integer, naming every problem', () => {
    const { sink } = scriptedSink(stored);
    expect(() => new OutcomeReporter(sink, { nowInFlight: 0 })).toThrow(RangeError);
    expect(() => new OutcomeReporter(sink, { nowInFlight: 0 })).toThrow('nowInFlight must be an integer of at least 1 (got 0)');
    expect(() => new OutcomeReporter(sink, { nowInFlight: 1.5 })).toThrow(/nowInFlight/);
    expect(() => new OutcomeReporter(sink, { nowInFlight: 0, maxBatch: 0 })).toThrow(/maxBatch .*; nowInFlight /);
    expect(() => new OutcomeReporter(sink, { nowInFlight: 1, maxBatch: 1 })).not.toThrow();
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
    expect(requests.every((r) => r.length === 1)).toBe(true); // each alone, at once (fewer than 4 under way)
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
