import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import type { DynamoWorkflowStore } from '../../adapters/dynamoWorkflowStore.js';
import { IdempotencyKeyReusedError, ValidationError } from '../../core/model/index.js';
import { WorkflowService, type WorkflowServiceDeps, type WorkflowStore } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, type TestSystem } from '../support/system.js';
import { createWorkflowSystem } from '../support/workflows.js';

/**
 * A workflow's submit (issue #25) on the emulators through the real SDK: its jobs stored with ids
 * by key, the jobs without parents handed over (and delivered, never early), the others waiting;
 * a retry with the same key and body answers 200 with the same ids and completes what a request
 * that died left undone; another body with that key is a 409; a bad request stores nothing.
 */
let em: Emulators;
let sys: TestSystem;
let deps: WorkflowServiceDeps;
let service: WorkflowService;
let waiting: DynamoWaitingChildren;
let store: DynamoWorkflowStore;

beforeAll(async () => {
  em = await startEmulators();
  ({ sys, deps, service, waiting, store } = await createWorkflowSystem(em));
});
afterAll(async () => em?.stop());

const itemCount = async () => ((await em.dynamo.send(new ScanCommand({ TableName: sys.tableName }))).Items ?? []).length;

const nightly = (runAt: string) =>
  JSON.stringify({
    idempotencyKey: `nightly-${runAt}`,
    jobs: [
      { key: 'extract', payload: { day: '2030-01-31' }, runAt },
      { key: 'transform', payload: {}, after: ['extract'] },
      { key: 'load-eu', payload: {}, after: ['transform'], delaySeconds: 60 },
      { key: 'load-us', payload: {}, after: ['transform'] },
      { key: 'report', payload: {}, after: ['load-eu', 'load-us'], onParentFailure: 'run' },
      { key: 'ping', payload: { at: 'once' }, delaySeconds: 1 },
    ],
  }).replace('{"at":"once"}', '{ "at" : "once" }');

describe('submitting a workflow', () => {
  it('stores its jobs by key, hands over those without parents (delivered, never early) and leaves the rest waiting', async () => {
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const before = Date.now();
    const { status, reply } = await service.submit('demo', nightly(runAt));
    expect(status).toBe(201);
    expect(reply).toMatchObject({ tenant: 'demo', state: 'RUNNING' });
    expect(Object.keys(reply.jobs)).toEqual(['extract', 'transform', 'load-eu', 'load-us', 'report', 'ping']);
    const key = (k: string) => {
      const id = deps.codec.parse(reply.jobs[k]!);
      expect(id).toMatchObject({ tenant: 'demo', path: 'w' });
      return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    };
    expect(await waiting.get(key('extract'))).toMatchObject({ state: 'RELEASING', dueMs: Date.parse(runAt) });
    expect(await waiting.get(key('ping'))).toMatchObject({ state: 'QUEUING' });
    for (const k of ['transform', 'load-eu', 'load-us', 'report']) expect(await waiting.get(key(k))).toMatchObject({ state: 'WAITING' });
    expect(await waiting.get(key('report'))).toMatchObject({ parents: 2, onParentFailure: 'run' });
    expect((await store.getSpec(key('transform')))?.children).toEqual([
      { jobKey: 'load-eu', index: 0 },
      { jobKey: 'load-us', index: 0 },
    ]);
    expect([...(await store.getWorkflow('demo', reply.workflowId))!.jobs]).toEqual(Object.entries(reply.jobs));
    // Its claim notes that the jobs without parents went: a retry (its answer lost) sends none again.
    const claim = await store.claim('demo', `nightly-${runAt}`, { workflowId: 'other', createdMs: 1, fingerprint: 'x', shardCount: 1 });
    expect(claim).toMatchObject({ workflowId: reply.workflowId, started: true });
    expect(await service.submit('demo', nightly(runAt))).toEqual({ status: 200, reply });
    await consumer.waitFor((d) => d.length >= 1, 10_000);
    await new Promise((r) => setTimeout(r, 1_000));
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([reply.jobs.ping]);
    expect(consumer.deliveries[0]!.body).toContain(`"workflow":"${reply.workflowId}","payload":{ "at" : "once" }}`);
    expect(consumer.deliveries[0]!.receivedAt).toBeGreaterThanOrEqual(before + 1_000);
  });

  it('keeps a small spec on its waiting record (one item a job) and a large one apart, each read back whole', async () => {
    const big = { blob: 'x'.repeat(2_000) };
    const body = JSON.stringify({
      jobs: [
        { key: 'small', payload: { n: 1 }, runAt: new Date(Date.now() + 3_600_000).toISOString() },
        { key: 'large', payload: big, after: ['small'] },
      ],
    });
    const before = await itemCount();
    const { reply } = await service.submit('demo', body);
    // The workflow record, its graph, two waiting records and one spec apart (the large one).
    expect((await itemCount()) - before).toBe(5);
    const key = (k: string) => {
      const id = deps.codec.parse(reply.jobs[k]!);
      return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    };
    const items = (await em.dynamo.send(new ScanCommand({ TableName: sys.tableName }))).Items ?? [];
    const at = (prefix: string, k: string) => items.filter((i) => i.pk!.S!.startsWith(prefix) && i.sk!.S!.endsWith(reply.jobs[k]!));
    expect(at('wp#', 'small')).toEqual([]);
    expect(at('w#', 'small')[0]?.links).toBeDefined();
    expect(at('wp#', 'large')).toHaveLength(1);
    expect(at('w#', 'large')[0]?.links).toBeUndefined();
    expect(await store.getSpec(key('small'))).toMatchObject({
      jobKey: 'small',
      payload: '{"n":1}',
      children: [{ jobKey: 'large', index: 0 }],
    });
    expect(await store.getSpec(key('large'))).toMatchObject({ jobKey: 'large', payload: JSON.stringify(big), parents: ['small'] });
    const both = await store.getSpecs([key('small'), key('large')]);
    expect([...both.values()].map((s) => s.jobKey).sort()).toEqual(['large', 'small']);
  });

  it("keeps a job's tags in its spec (on its record or apart) and on its row once handed to the table; other tags with the key are a 409", async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const body = (tags: string[]) =>
      JSON.stringify({
        idempotencyKey: `tagged-${runAt}-${tags.join()}`.slice(0, 120),
        jobs: [
          { key: 'root', payload: 1, runAt, tags },
          { key: 'child', payload: { blob: 'x'.repeat(2_000) }, after: ['root'], tags: ['big', ...tags] },
        ],
      });
    const { reply } = await service.submit('demo', body(['order-42', 'nightly']));
    const key = (k: string) => {
      const id = deps.codec.parse(reply.jobs[k]!);
      return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId };
    };
    expect((await store.getSpec(key('root')))?.tags).toEqual(['order-42', 'nightly']);
    expect((await store.getSpec(key('child')))?.tags).toEqual(['big', 'order-42', 'nightly']);
    // The root, due past the lookahead, goes through the inbound queue to its row: with its tags.
    const ingest = sys.startIngest();
    try {
      let listed: string[] = [];
      for (let i = 0; i < 100 && listed.length === 0; i++) {
        listed = (await sys.w.lister.list('demo', { tag: 'order-42' })).jobs.map((j) => j.jobId);
        if (listed.length === 0) await new Promise((r) => setTimeout(r, 100));
      }
      expect(listed).toEqual([reply.jobs.root]);
    } finally {
      await ingest.stop();
    }
    const retry = JSON.parse(body(['order-42', 'nightly'])) as { jobs: { tags: string[] }[] };
    retry.jobs[0]!.tags = ['order-42'];
    await expect(
      service.submit('demo', JSON.stringify({ ...retry, idempotencyKey: JSON.parse(body(['order-42', 'nightly'])).idempotencyKey })),
    ).rejects.toThrow(IdempotencyKeyReusedError);
    await expect(service.submit('demo', JSON.stringify({ jobs: [{ key: 'a', payload: 1, runAt, tags: ['x', 'x'] }] }))).rejects.toThrow(
      /jobs\[0\]|tags\[1\] repeats/,
    );
  });

  it('answers a retry with the same key and body 200 with the same ids; another body with the key is a 409', async () => {
    const runAt = new Date(Date.now() + 7_200_000).toISOString();
    const first = await service.submit('demo', nightly(runAt));
    const again = await service.submit('demo', nightly(runAt));
    expect(again).toEqual({ status: 200, reply: first.reply });
    const other = nightly(runAt).replace('"day":"2030-01-31"', '"day":"2030-02-01"');
    await expect(service.submit('demo', other)).rejects.toThrow(IdempotencyKeyReusedError);
  });

  it('completes on retry what a request that died before its last write left undone', async () => {
    let die = true;
    const dying: WorkflowStore = {
      claim: (...a) => store.claim(...a),
      putSpecs: (...a) => store.putSpecs(...a),
      getSpec: (...a) => store.getSpec(...a),
      getSpecs: (...a) => store.getSpecs(...a),
      markStarted: (...a) => store.markStarted(...a),
      getWorkflow: (...a) => store.getWorkflow(...a),
      putGraph: (...a) => store.putGraph(...a),
      getGraph: (...a) => store.getGraph(...a),
      putWorkflow: async (r) => {
        if (die) throw new Error('the function timed out');
        return store.putWorkflow(r);
      },
    };
    const flaky = new WorkflowService({ ...deps, store: dying });
    const runAt = new Date(Date.now() + 10_800_000).toISOString();
    await expect(flaky.submit('demo', nightly(runAt))).rejects.toThrow('timed out');
    die = false;
    const { status, reply } = await flaky.submit('demo', nightly(runAt));
    expect(status).toBe(200);
    expect(await store.getWorkflow('demo', reply.workflowId)).toBeDefined();
    const extract = deps.codec.parse(reply.jobs.extract!);
    expect(await waiting.get({ shard: extract.shard, dueMs: extract.dueMs, jobId: extract.jobId })).toMatchObject({ state: 'RELEASING' });
  });

  it('stores nothing for a request it refuses', async () => {
    const items = await itemCount();
    const bad = [
      '{"jobs": [{"key": "a", "payload": 1, "runAt": "2030-01-01T00:00:00Z"}, {"key": "b", "after": ["c"]}]}',
      '{"jobs": [{"key": "a", "after": ["b"]}, {"key": "b", "after": ["a"]}]}',
      '{"idempotencyKey": "x", "jobs": [{"key": "a", "delaySeconds": 1, "colour": "blue"}]}',
      '{"jobs": []}',
      'not json',
    ];
    for (const body of bad) await expect(service.submit('demo', body)).rejects.toThrow(ValidationError);
    expect(await itemCount()).toBe(items);
  });
});
