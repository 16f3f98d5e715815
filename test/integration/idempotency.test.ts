import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, submitJobs, waitForEmptyQueue, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** Job rows in the table (partition keys that are shard numbers). */
async function jobRows(sys: TestSystem): Promise<string[]> {
  const res = await em.dynamo.send(new ScanCommand({ TableName: sys.tableName, ConsistentRead: true }));
  return (res.Items ?? []).filter((i) => /^\d+$/.test(i.pk!.S!)).map((i) => i.sk!.S!);
}

describe('idempotency keys', () => {
  it('stores one job for the same key and runAt, sent twice and concurrently', async () => {
    const sys = await createSystem(em, { tenants: ['demo', 'other'] });
    const ingest = sys.startIngest();
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const body = { payload: { order: 42 }, runAt, idempotencyKey: 'order-42-reminder' };

    const first = await sys.w.submitter.submit('demo', JSON.stringify(body));
    const second = await sys.w.submitter.submit('demo', JSON.stringify(body));
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => sys.w.submitter.submit('demo', JSON.stringify(body))));
    const inBatch = await submitJobs(sys, 'demo', [body, body]);
    for (const r of [second, ...concurrent, ...inBatch]) expect(r.jobId).toBe(first.jobId);

    // The same key with another runAt is another job; so is the same key for another tenant.
    const later = await sys.w.submitter.submit('demo', JSON.stringify({ ...body, runAt: new Date(Date.parse(runAt) + 1).toISOString() }));
    const otherTenant = await sys.w.submitter.submit('other', JSON.stringify(body));
    const plain = await sys.w.submitter.submit('demo', JSON.stringify({ payload: 1, runAt }));
    const plainAgain = await sys.w.submitter.submit('demo', JSON.stringify({ payload: 1, runAt }));
    expect(new Set([first.jobId, later.jobId, otherTenant.jobId, plain.jobId, plainAgain.jobId]).size).toBe(5);

    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    await ingest.stop();
    const rows = await jobRows(sys);
    for (const id of [first.jobId, later.jobId, otherTenant.jobId, plain.jobId, plainAgain.jobId]) {
      expect(rows.filter((sk) => sk.endsWith(`#${id}`))).toHaveLength(1);
    }
    expect(rows).toHaveLength(5);
  });
});
