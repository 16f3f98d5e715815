import { RawJson } from '../../core/util/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import { HistoryOffError, OutcomesService } from '../../core/jobs/index.js';
import type { JobIdCodec } from '../../core/model/index.js';
import { keyOfId, workflowOutcomes, type WorkflowService } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, submitJobs, type TestSystem } from '../support/system.js';
import { createWorkflowSystem, type WorkflowSystem } from '../support/workflows.js';

/**
 * The outcomes route's side of workflows (issue #25), on the emulators through the real SDK, for a
 * tenant without history: a workflow job's outcome is taken (an ordinary job's is not), only once
 * the job was delivered, and a success hands its child over before the report is answered.
 */
let em: Emulators;
let sys: TestSystem;
let service: WorkflowService;
let outcomes: OutcomesService;
let codec: JobIdCodec;
let waiting: DynamoWaitingChildren;
let ws: WorkflowSystem;

beforeAll(async () => {
  em = await startEmulators();
  const w = await createWorkflowSystem(em);
  ({ sys, service, codec, waiting } = w);
  ws = w;
  outcomes = new OutcomesService({
    history: w.history,
    rows: sys.w.store,
    codec,
    tenants: sys.w.tenants,
    clock: w.deps.clock,
    workflows: workflowOutcomes({ ...w.progress, rows: sys.w.store, retentionMs: 86_400_000 }),
  });
});
afterAll(async () => em?.stop());

const report = (jobId: string, outcome: string, extra: object = {}) => ({
  jobId,
  outcome,
  attempts: 1,
  receivedAt: new Date().toISOString(),
  durationMs: 5,
  ...extra,
});
/** A report body with `result` texts spliced in as given (spacing kept). */
const reportBody = (entries: object[], results: Record<number, string> = {}) =>
  JSON.stringify({ outcomes: entries }).replace(/"result":"@(\d+)"/g, (_, i: string) => `"result":${results[Number(i)]}`);

describe('outcomes of workflow jobs', () => {
  it("takes a workflow job's outcome from a tenant without history once it was delivered, and hands its child over before it answers", async () => {
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const { reply } = await service.submit(
      'demo',
      JSON.stringify({
        jobs: [
          { key: 'a', payload: 1, delaySeconds: 3 },
          { key: 'b', payload: 2, after: ['a'] },
        ],
      }),
    );
    const { a, b } = reply.jobs as { a: string; b: string };
    // Neither delivered yet: a is due in 3 s (a direct job counts as delivered from 1 s before), b waits for a.
    const early = await outcomes.report('demo', JSON.stringify({ outcomes: [report(a, 'SUCCEEDED'), report(b, 'SUCCEEDED')] }));
    expect(early.results.map((r) => ('error' in r ? r.error.code : r.state))).toEqual(['NotDelivered', 'NotDelivered']);
    expect('error' in early.results[1]! && early.results[1].error.message).toContain('WAITING');

    await consumer.waitFor((d) => d.some((x) => x.jobId === a), 10_000);
    const ok = await outcomes.report(
      'demo',
      reportBody([report(a, 'FAILED'), report(a, 'SUCCEEDED', { result: '@0' })], { 0: '{"rows" : 3}' }),
    );
    expect(ok.results).toEqual([
      { jobId: a, state: 'FAILED' },
      { jobId: a, state: 'SUCCEEDED' },
    ]);
    // Answered only once b was handed over: straight to its queue, its parent in its summary.
    expect(await waiting.get(keyOfId(codec, b))).toMatchObject({ state: 'QUEUING' });
    await consumer.waitFor((d) => d.some((x) => x.jobId === b), 10_000);
    await consumer.stop();
    const delivered = consumer.deliveries.find((d) => d.jobId === b)!;
    expect(delivered.body).toContain(`"parents":[{"key":"a","jobId":"${a}","outcome":"SUCCEEDED","result":{"rows" : 3}}]`);
    // Without history no outcome record is written: the end and its result are kept on the
    // job's workflow record, which GET of the job reads.
    expect(await ws.history.getOutcome(keyOfId(codec, a))).toBeUndefined();
    expect(await waiting.get(keyOfId(codec, a))).toMatchObject({ end: { outcome: 'SUCCEEDED' }, result: '{"rows" : 3}', resultKept: true });
    const status = await sys.w.jobs.status('demo', a);
    expect(status.state).toBe('SUCCEEDED');
    expect(status.result).toEqual(new RawJson('{"rows" : 3}', 0, 0));
  });

  it("takes the outcome of a child its only parent's success sent before its record moved; not of one held back by its cancel", async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const { reply } = await service.submit(
      'demo',
      JSON.stringify({
        jobs: [
          { key: 'p', payload: 1, runAt },
          { key: 'sent', payload: 2, after: ['p'] },
          { key: 'held', payload: 3, after: ['p'] },
        ],
      }),
    );
    const { p, sent, held } = reply.jobs as { p: string; sent: string; held: string };
    // The parent's success recorded as its release records it, 'held' cancelled on it first, and
    // (the release still sending) neither child's record moved yet.
    expect(await waiting.holdBack(keyOfId(codec, p), held)).toBe(true);
    await waiting.recordEnd(keyOfId(codec, p), { outcome: 'SUCCEEDED', atMs: Date.now() }, undefined, Date.now());
    expect(await waiting.get(keyOfId(codec, sent))).toMatchObject({ state: 'WAITING' });
    const res = await outcomes.report('demo', JSON.stringify({ outcomes: [report(sent, 'SUCCEEDED'), report(held, 'SUCCEEDED')] }));
    expect(res.results.map((r) => ('error' in r ? r.error.code : r.state))).toEqual(['SUCCEEDED', 'NotDelivered']);
    expect(await waiting.get(keyOfId(codec, sent))).toMatchObject({ end: { outcome: 'SUCCEEDED' } });
  });

  it("refuses an ordinary job's outcome from a tenant without history: the report whole when it has no workflow job, else that entry", async () => {
    const [plain] = await submitJobs(sys, 'demo', [{ payload: 1, delaySeconds: 1 }]);
    await new Promise((r) => setTimeout(r, 1_200));
    await expect(outcomes.report('demo', JSON.stringify({ outcomes: [report(plain!.jobId, 'SUCCEEDED')] }))).rejects.toThrow(
      HistoryOffError,
    );
    await expect(outcomes.report('demo', 'not json')).rejects.toThrow(HistoryOffError);
    const { reply } = await service.submit('demo', JSON.stringify({ jobs: [{ key: 'x', payload: 1, delaySeconds: 1 }] }));
    await new Promise((r) => setTimeout(r, 1_200));
    const mixed = await outcomes.report(
      'demo',
      JSON.stringify({ outcomes: [report(plain!.jobId, 'SUCCEEDED'), report(reply.jobs.x!, 'DEAD')] }),
    );
    expect(mixed.results[0]).toMatchObject({ jobId: plain!.jobId, error: { code: 'HistoryOff' } });
    expect(mixed.results[1]).toEqual({ jobId: reply.jobs.x, state: 'DEAD' });
    expect(await waiting.get(keyOfId(codec, reply.jobs.x!))).toMatchObject({ end: { outcome: 'DEAD' } });
  });

  it('a job’s end stored but not carried on: Throttled, counted (the WorkflowChildrenWaiting alarm); the same report again hands the child over', async () => {
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const { reply } = await service.submit(
      'demo',
      JSON.stringify({
        jobs: [
          { key: 'a', payload: 1, delaySeconds: 0 },
          { key: 'b', payload: 2, after: ['a'] },
        ],
      }),
    );
    await consumer.waitFor((d) => d.some((x) => x.jobId === reply.jobs.a), 10_000);
    // The carry-on fails once, as a DynamoDB outage or a function killed mid-way would leave it
    // (a port wrapper: the emulators cannot fail one call on demand).
    const w = workflowOutcomes({ ...ws.progress, rows: sys.w.store, retentionMs: 86_400_000 });
    let fail = true;
    const flaky = new OutcomesService({
      history: ws.history,
      rows: sys.w.store,
      codec,
      tenants: sys.w.tenants,
      clock: { now: () => Date.now() },
      workflows: {
        ...w,
        ended: async (...args) => {
          if (fail) throw new Error('ProvisionedThroughputExceededException');
          return w.ended(...args);
        },
      },
    });
    const body = JSON.stringify({ outcomes: [report(reply.jobs.a!, 'SUCCEEDED')] });
    const first = await flaky.report('demo', body);
    expect(first.results).toEqual([
      { jobId: reply.jobs.a, error: { code: 'Throttled', message: expect.stringContaining('report it again') } },
    ]);
    expect(flaky.takeCarryOnFailures()).toBe(1);
    expect(flaky.takeCarryOnFailures()).toBe(0);
    expect((await waiting.get(keyOfId(codec, reply.jobs.b!)))?.state).toBe('WAITING');
    fail = false;
    expect((await flaky.report('demo', body)).results).toEqual([{ jobId: reply.jobs.a, state: 'SUCCEEDED' }]);
    expect(flaky.takeCarryOnFailures()).toBe(0);
    await consumer.waitFor((d) => d.some((x) => x.jobId === reply.jobs.b), 10_000);
    await consumer.stop();
  });

  it("carries parents' results up to 64 KiB each while the child's message stays within SQS's limit; past it, resultOmitted", async () => {
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const parents = ['p1', 'p2', 'p3'].map((key) => ({ key, payload: null, delaySeconds: 2 }));
    const payload = JSON.stringify({ blob: 'x'.repeat(100 * 1024) });
    const { reply } = await service.submit(
      'demo',
      JSON.stringify({ jobs: [...parents, { key: 'sink', payload: 0, after: ['p1', 'p2', 'p3'] }] }).replace(
        '"payload":0',
        `"payload":${payload}`,
      ),
    );
    await consumer.waitFor((d) => parents.every((p) => d.some((x) => x.jobId === reply.jobs[p.key])), 10_000);
    const big = JSON.stringify('r'.repeat(64 * 1024 - 2));
    const entries = parents.map((p, i) => report(reply.jobs[p.key]!, 'SUCCEEDED', { result: `@${i}` }));
    const res = await outcomes.report('demo', reportBody(entries, { 0: big, 1: big, 2: big }));
    expect(res.results.every((r) => 'state' in r)).toBe(true);
    // One byte more than 64 KiB: refused, as any result past its limit.
    const tooBig = await outcomes.report(
      'demo',
      reportBody([report(reply.jobs.p1!, 'SUCCEEDED', { result: '@0' })], { 0: JSON.stringify('r'.repeat(64 * 1024 - 1)) }),
    );
    expect('error' in tooBig.results[0]! && tooBig.results[0].error.code).toBe('ValidationError');
    await consumer.waitFor((d) => d.some((x) => x.jobId === reply.jobs.sink), 10_000);
    await consumer.stop();
    const sink = consumer.deliveries.find((d) => d.jobId === reply.jobs.sink)!;
    expect(Buffer.byteLength(sink.body)).toBeLessThanOrEqual(256 * 1024);
    const summary = JSON.parse(sink.body).parents as { key: string; result?: string; resultOmitted?: boolean }[];
    expect(summary.map((p) => [p.key, p.result === undefined ? 'omitted' : p.result.length, p.resultOmitted])).toEqual([
      ['p1', 64 * 1024 - 2, undefined],
      ['p2', 64 * 1024 - 2, undefined],
      ['p3', 'omitted', true],
    ]);
    expect(JSON.parse(sink.body).payload).toEqual(JSON.parse(payload));
  });
});
