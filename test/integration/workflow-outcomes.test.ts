import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoHistoryStore } from '../../adapters/dynamoHistoryStore.js';
import { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import { DynamoWorkflowStore } from '../../adapters/dynamoWorkflowStore.js';
import { SqsSender } from '../../adapters/sqsSender.js';
import { HistoryOffError, OutcomesService } from '../../core/jobs/index.js';
import { JobIdCodec } from '../../core/model/index.js';
import { keyOfId, workflowOutcomes, WorkflowService } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, submitJobs, type TestSystem } from '../support/system.js';

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

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { settings: { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 } });
  waiting = new DynamoWaitingChildren(em.dynamo, sys.tableName);
  const store = new DynamoWorkflowStore(em.dynamo, sys.tableName);
  codec = new JobIdCodec(sys.idKey);
  const clock = { now: () => Date.now() };
  const handOff = { sender: new SqsSender(em.sqs), inboundQueueUrl: sys.inboundUrl };
  const settings = sys.w.config.settings;
  service = new WorkflowService({ rows: sys.w.store, store, waiting, codec, tenants: sys.w.tenants, settings, clock, handOff });
  outcomes = new OutcomesService({
    history: new DynamoHistoryStore(sys.tableName, em.dynamo),
    rows: sys.w.store,
    codec,
    tenants: sys.w.tenants,
    clock,
    workflows: workflowOutcomes({ rows: sys.w.store, store, waiting, codec, settings, clock, handOff, retentionMs: 86_400_000 }),
  });
});
afterAll(async () => em?.stop());

const report = (jobId: string, outcome: string) => ({
  jobId,
  outcome,
  attempts: 1,
  receivedAt: new Date().toISOString(),
  durationMs: 5,
});

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
    const ok = await outcomes.report('demo', JSON.stringify({ outcomes: [report(a, 'FAILED'), report(a, 'SUCCEEDED')] }));
    expect(ok.results).toEqual([
      { jobId: a, state: 'FAILED' },
      { jobId: a, state: 'SUCCEEDED' },
    ]);
    // Answered only once b was handed over: straight to its queue, its parent in its summary.
    expect(await waiting.get(keyOfId(codec, b))).toMatchObject({ state: 'QUEUED' });
    await consumer.waitFor((d) => d.some((x) => x.jobId === b), 10_000);
    await consumer.stop();
    const delivered = consumer.deliveries.find((d) => d.jobId === b)!;
    expect(JSON.parse(delivered.body).parents).toEqual([{ key: 'a', jobId: a, outcome: 'SUCCEEDED' }]);
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
});
