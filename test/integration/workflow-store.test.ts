import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoWorkflowStore, specPartition } from '../../adapters/dynamoWorkflowStore.js';
import { sortKey } from '../../core/model/index.js';
import type { WorkflowJobSpec } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

/**
 * Workflows' specs, records and idempotency claims (issue #25) on the DynamoDB emulator, through
 * the real SDK: what is written reads back whole (payload text byte for byte, the links of a job
 * at the bounds), a retry overwrites with the same, and the first claim of a key stands.
 */
let em: Emulators;
let store: DynamoWorkflowStore;
let table: string;
const T0 = Date.parse('2030-01-01T00:00:00Z');

beforeAll(async () => {
  em = await startEmulators();
  table = await em.createTable('workflows');
  store = new DynamoWorkflowStore(em.dynamo, table);
});
afterAll(async () => em?.stop());

const key64 = (i: number) => `k${String(i).padStart(63, '.')}`;
const spec = (i: number, extra: Partial<WorkflowJobSpec> = {}): WorkflowJobSpec => ({
  key: { shard: i % 7, dueMs: T0, jobId: `j1.wf.${i % 7}.${T0}.w.job${i}` },
  tenant: 'wf',
  workflowId: 'wf1.wf.1.x.y',
  jobKey: `job-${i}`,
  payload: `{"n": ${i}, "text": "é \\u00e9"}`,
  priority: 5,
  cancellable: true,
  parents: [],
  children: [],
  ...extra,
});

describe('workflow specs, records and claims in the table', () => {
  it('a job of 1,000 parents and 1,000 children (64-character keys) with a 200 KiB payload reads back whole', async () => {
    const payload = JSON.stringify({ blob: 'x'.repeat(200 * 1024) }).replace('{', '{ ');
    const big = spec(1, {
      payload,
      priority: 9,
      cancellable: false,
      parents: Array.from({ length: 1_000 }, (_, i) => key64(i)),
      children: Array.from({ length: 1_000 }, (_, i) => ({ jobKey: key64(1_000 + i), index: i % 17 })),
    });
    await store.putSpecs([big]);
    expect(await store.getSpec(big.key)).toEqual(big);
  });

  it('writes 60 specs in batches; a retry writes the same again; another key reads as none', async () => {
    const specs = Array.from({ length: 60 }, (_, i) => spec(100 + i, { parents: i > 0 ? [`job-${99 + i}`] : [] }));
    await store.putSpecs(specs);
    await store.putSpecs(specs);
    for (const s of [specs[0]!, specs[33]!, specs[59]!]) expect(await store.getSpec(s.key)).toEqual(s);
    expect(await store.getSpec({ shard: 1, dueMs: T0, jobId: 'j1.wf.1.none' })).toBeUndefined();
    // The payload is kept as its text (a default priority and cancellable are not stored).
    const raw = await em.dynamo.send(
      new GetItemCommand({
        TableName: table,
        Key: { pk: { S: specPartition(specs[1]!.key.shard) }, sk: { S: sortKey(T0, specs[1]!.key.jobId) } },
      }),
    );
    expect(raw.Item?.payload?.S).toBe(specs[1]!.payload);
    expect(raw.Item?.prio).toBeUndefined();
    expect(raw.Item?.nc).toBeUndefined();
  });

  it("a workflow reads back with its jobs in the request's order; another tenant's or an unknown id reads as none", async () => {
    const jobs = new Map(Array.from({ length: 1_000 }, (_, i) => [key64(999 - i), `j1.wf.3.${T0}.w.id${i}`] as const));
    await store.putWorkflow({ workflowId: 'wf1.wf.7', tenant: 'wf', createdMs: T0, jobs });
    const back = await store.getWorkflow('wf', 'wf1.wf.7');
    expect(back?.createdMs).toBe(T0);
    expect([...back!.jobs]).toEqual([...jobs]);
    expect(await store.getWorkflow('other', 'wf1.wf.7')).toBeUndefined();
    expect(await store.getWorkflow('wf', 'wf1.wf.8')).toBeUndefined();
  });

  it('the first claim of an idempotency key stands, for any number of claims at once', async () => {
    const claims = Array.from({ length: 20 }, (_, i) => ({
      workflowId: `wf1.wf.${i}`,
      createdMs: T0 + i,
      fingerprint: `fp${i % 2}`,
      shardCount: 8 + i,
    }));
    const answers = await Promise.all(claims.map((c) => store.claim('wf', 'nightly-2030-01-31', c)));
    const winner = answers[0]!;
    expect(claims).toContainEqual(winner);
    for (const a of answers) expect(a).toEqual(winner);
    // The same key of another tenant is another claim.
    expect(await store.claim('other', 'nightly-2030-01-31', claims[5]!)).toEqual(claims[5]);
  });
});
