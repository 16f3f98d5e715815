import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SQSEvent } from 'aws-lambda';
import { RequestCounter } from '../../adapters/requestCounter.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, runAllGroups } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('AWS requests per job', () => {
  it('counts every request compute makes for batch-submitted jobs that go through the table', async () => {
    // 16 shards in 4 groups (64 in 8 before): what is checked below (writes and SQS per job) does
    // not depend on the shard count; the due-range queries, a fixed cost per shard and look
    // (docs/performance.md), are printed, not checked, and 64 shards' 1,700 queries while the jobs
    // waited to fall due were a third of this test's CPU.
    const sys = await createSystem(em, { settings: { lookaheadMs: 1_000, leaseMs: 5_000, shardCount: 16, groupCount: 4 } });
    // Compute (submit, event source + ingest, dispatch) gets its own clients and counter; the
    // test's consumer uses the shared ones and is not counted.
    const counter = new RequestCounter();
    const clients = em.newClients(counter);
    const w = await sys.another(clients);
    const handle = ingestHandler(w);
    const ingest = startSqsEventSource({
      sqs: clients.sqs,
      queueUrl: sys.inboundUrl,
      handler: (e: SQSEvent) => handle(e),
      waitTimeSeconds: 1,
      pollers: 2,
    });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const dispatch = runAllGroups(w.dispatch);

    // Five inbound messages of 100 jobs: enough for every ratio below, and stored in half the time
    // of 1,000 (3.4 s for 1,000 on an idle machine, from the first submit).
    const n = 500;
    const start = Date.now();
    const jobs = Array.from({ length: n }, (_, i) => ({
      payload: { i, pad: 'x'.repeat(1000) },
      // Due 10 to 11.5 s ahead: on a loaded machine (CI runs the suite beside the consumer checks)
      // ingest still stores every job well before its time, so no late-lane pointer is written
      // (one is for a row stored less than 1.5 s before it is due; 1,000 jobs due 8 s ahead: a
      // loaded run stored a third of them late, 1,524 puts for 1,000 jobs).
      runAt: new Date(start + 10_000 + Math.floor((i / n) * 1_500)).toISOString(),
    }));
    const replies: { jobId: string }[] = [];
    for (let i = 0; i < n; i += 100) {
      const { results } = await w.submitter.submitBatch('demo', JSON.stringify({ jobs: jobs.slice(i, i + 100) }));
      replies.push(...(results as { jobId: string }[]));
    }
    await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= n, 30_000);
    await dispatch.stop();
    await ingest.stop();
    await consumer.stop();
    expect(new Set(consumer.deliveries.map((d) => d.jobId)).size).toBe(n);

    const c = counter.snapshot();
    const per = (k: string) => (c[k] ?? 0) / n;
    console.log('requests per job:', Object.fromEntries(Object.entries(c).map(([k, v]) => [k, +(v / n).toFixed(3)])));
    // Writes: one conditional put (ingest; jobs are ingested well before they are due, so no
    // late-ingest claim) and one conditional acquire per job, deletes in batches of 25.
    expect(c['DynamoDB.PutItem']).toBe(n);
    expect(c['DynamoDB.UpdateItem']).toBeGreaterThanOrEqual(n);
    expect(per('DynamoDB.BatchWriteItem')).toBeLessThanOrEqual(1);
    expect(c['DynamoDB.BatchWriteItem']).toBeGreaterThanOrEqual(n / 25);
    // SQS: a batch of 100 small jobs is one inbound message (one send, one delete); the tenant
    // queue gets sends of up to 10 rows due together.
    expect(c['SQS.DeleteMessageBatch']).toBeLessThanOrEqual(n / 100);
    expect(per('SQS.SendMessageBatch')).toBeLessThanOrEqual(1.01);
    expect(c['SQS.SendMessageBatch']).toBeGreaterThanOrEqual(n / 100 + n / 10);
    expect(replies).toHaveLength(n);
  }, 90_000);
});
