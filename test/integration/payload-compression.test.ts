import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, runAllGroups, submitJobs, waitForEmptyQueue } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** DynamoDB's item size: attribute names plus values (strings and binaries by length, numbers ~ digits). */
function itemBytes(item: Record<string, AttributeValue>): number {
  let n = 0;
  for (const [k, v] of Object.entries(item)) {
    n += Buffer.byteLength(k);
    if (v.S !== undefined) n += Buffer.byteLength(v.S);
    else if (v.B !== undefined) n += v.B.length;
    else if (v.N !== undefined) n += Math.ceil(v.N.length / 2) + 1;
  }
  return n;
}

/** A 1 KB payload shaped like a real one (ids, words, numbers). */
function payload(i: number) {
  const words = ['invoice', 'reminder', 'customer', 'renewal', 'shipment', 'account', 'balance', 'overdue'];
  const p = {
    type: 'invoice.reminder',
    seq: i,
    customerId: randomUUID(),
    orderId: randomUUID(),
    amountCents: 123_456 + i,
    tags: [] as string[],
  };
  while (JSON.stringify(p).length < 1_000) p.tags.push(`${words[p.tags.length % words.length]}-${(p.tags.length * 7919) % 10_000}`);
  return p;
}

describe('payload storage', () => {
  it('stores a 1 KB payload deflated so the row fits one write unit, and delivers it byte for byte', async () => {
    const sys = await createSystem(em, { settings: { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 4, groupCount: 1 } });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const big = payload(1);
    const jobs = await submitJobs(sys, 'demo', [
      { payload: big, runAt: new Date(Date.now() + 2_500).toISOString() },
      { payload: { small: true }, runAt: new Date(Date.now() + 2_500).toISOString() },
    ]);
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    const rows = ((await em.dynamo.send(new ScanCommand({ TableName: sys.tableName }))).Items ?? []).filter((i) => /^\d+$/.test(i.pk!.S!));
    const bigRow = rows.find((r) => r.sk!.S!.endsWith(jobs[0]!.jobId))!;
    const smallRow = rows.find((r) => r.sk!.S!.endsWith(jobs[1]!.jobId))!;
    expect(JSON.stringify(big).length).toBeGreaterThanOrEqual(1_000);
    expect(bigRow.payload).toBeUndefined();
    expect(bigRow.payloadZ?.B).toBeDefined();
    expect(itemBytes(bigRow)).toBeLessThanOrEqual(1_024);
    expect(smallRow.payload?.S).toBe('{"small":true}');

    const dispatch = runAllGroups(sys.w.dispatch);
    await consumer.waitFor((d) => d.length >= 2, 10_000);
    await dispatch.stop();
    await consumer.stop();
    await ingest.stop();
    const byId = new Map(consumer.deliveries.map((d) => [d.jobId, d.payload]));
    expect(byId.get(jobs[0]!.jobId)).toEqual(big);
    expect(byId.get(jobs[1]!.jobId)).toEqual({ small: true });
  });
});
