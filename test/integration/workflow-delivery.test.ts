import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { ScanCommand as TableScan } from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboundMessageBody, type InboundJob, JobIdCodec } from '../../core/model/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, runAllGroups, waitForEmptyQueue } from '../support/system.js';

/**
 * A workflow job's delivery fields through the table path (issue #25): an inbound entry carrying
 * `workflow` and `parents` is stored on the row and delivered with both between `runAt` and the
 * payload, byte for byte, and the `workflow` message attribute; a root job carries the workflow
 * alone, an ordinary job neither.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('workflow jobs through ingest and dispatch', () => {
  it('delivers the workflow id and the parents summary as stored, and the workflow attribute', async () => {
    const sys = await createSystem(em, { settings: { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1 } });
    const codec = new JobIdCodec(sys.idKey);
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const dueMs = Date.now() + 2_500;
    const job = (shard: number, extra: Partial<InboundJob>): InboundJob => ({
      jobId: codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random: randomBytes(12).toString('base64url') }),
      tenant: 'demo',
      shard,
      dueMs,
      payload: '{"n" : 1.50}',
      ...extra,
    });
    // A summary past the row's compression threshold (a parent's result of 2 KB), spaced as sent.
    const parents = `[{"key":"extract","jobId":"j1.p","outcome":"SUCCEEDED","result": {"rows" : ${JSON.stringify('r'.repeat(2_000))}}}]`;
    const child = job(0, { workflow: 'wf1.demo.1.abc.def', parents });
    const root = job(1, { workflow: 'wf1.demo.1.abc.def' });
    const plain = job(1, {});
    await em.sqs.send(new SendMessageCommand({ QueueUrl: sys.inboundUrl, MessageBody: inboundMessageBody([child, root, plain]) }));
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    const rows = (await em.dynamo.send(new TableScan({ TableName: sys.tableName }))).Items ?? [];
    const childRow = rows.find((r) => r.sk?.S?.endsWith(child.jobId))!;
    expect(childRow.wf?.S).toBe('wf1.demo.1.abc.def');
    expect(childRow.wpar?.B).toBeDefined(); // deflated: it saves space

    const dispatch = runAllGroups(sys.w.dispatch);
    await consumer.waitFor((d) => d.length >= 3, 10_000);
    await dispatch.stop();
    await consumer.stop();
    await ingest.stop();
    const byId = new Map(consumer.deliveries.map((d) => [d.jobId, d]));
    const runAt = new Date(dueMs).toISOString();
    expect(byId.get(child.jobId)?.body).toBe(
      `{"jobId":"${child.jobId}","tenant":"demo","runAt":"${runAt}","workflow":"wf1.demo.1.abc.def","parents":${parents},"payload":{"n" : 1.50}}`,
    );
    expect(byId.get(child.jobId)?.attributes.workflow).toBe('wf1.demo.1.abc.def');
    expect(byId.get(root.jobId)?.body).toBe(
      `{"jobId":"${root.jobId}","tenant":"demo","runAt":"${runAt}","workflow":"wf1.demo.1.abc.def","payload":{"n" : 1.50}}`,
    );
    expect(byId.get(plain.jobId)?.body).toBe(`{"jobId":"${plain.jobId}","tenant":"demo","runAt":"${runAt}","payload":{"n" : 1.50}}`);
    expect(byId.get(plain.jobId)?.attributes.workflow).toBeUndefined();
    for (const d of consumer.deliveries) expect(d.firstReceiveAt).toBeGreaterThanOrEqual(dueMs);
  });
});
