/**
 * DYNEIN_FAULTS's injector (local/faults.ts) on the real SDK clients against the emulators:
 * the errors are AWS's (names, statuses, network error shapes), the SDK's own retry strategy
 * retries each kind and absorbs most of them, and the faults that strike after the emulator
 * applied a request leave the write in place while the caller sees an error.
 */
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultInjector, type Fault } from '../../local/faults.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { seededRandom } from '../../bench/sim/clock.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

/** A seeded random source, so that a run injects the same faults every time. */
const seeded = seededRandom;

function faultyDynamo(rate: number, maxAttempts: number, faults: Fault[]) {
  const injector = new FaultInjector({ rates: { dynamodb: rate }, timeoutMs: 5 }, { random: seeded(21), onFault: (f) => faults.push(f) });
  return injector.attach(new DynamoDBClient({ endpoint: em.dynamoEndpoint, region: 'us-east-1', credentials, maxAttempts }));
}

/** How the SDK's standard retry strategy tells a retryable error (by name, status or network code). */
function retryKind(e: { name: string; code?: string; $metadata?: { httpStatusCode?: number } }): string | undefined {
  if (['ProvisionedThroughputExceededException', 'ThrottlingException'].includes(e.name)) return 'throttle';
  if (e.$metadata?.httpStatusCode === 500) return 'serverError';
  if (e.code === 'ECONNRESET') return 'reset';
  if (e.name === 'TimeoutError') return 'timeout';
  return undefined;
}

async function stored(table: string, i: number): Promise<boolean> {
  const r = await em.dynamo.send(
    new GetItemCommand({ TableName: table, Key: { pk: { S: `f#${i}` }, sk: { S: 'x' } }, ConsistentRead: true }),
  );
  return r.Item !== undefined;
}

describe.concurrent('DYNEIN_FAULTS on DynamoDB at 30 %', () => {
  it('fails calls as AWS does: each kind, retryable, and some after the write was applied', async () => {
    const table = await em.createTable('faults');
    const faults: Fault[] = [];
    const dynamo = faultyDynamo(0.3, 1, faults); // no retries: the caller sees every fault
    const outcomes: { i: number; error?: { name: string; code?: string; $metadata?: { httpStatusCode?: number } } }[] = [];
    for (let i = 0; i < 300; i++) {
      try {
        await dynamo.send(new PutItemCommand({ TableName: table, Item: { pk: { S: `f#${i}` }, sk: { S: 'x' } } }));
        outcomes.push({ i });
      } catch (error) {
        outcomes.push({ i, error: error as { name: string } });
      }
    }
    const failed = outcomes.filter((o) => o.error);
    expect(failed).toHaveLength(faults.length);
    expect(failed.length / outcomes.length).toBeGreaterThan(0.2);
    expect(failed.length / outcomes.length).toBeLessThan(0.4);
    // Each error is one the SDK's retry strategy retries, and every kind occurs.
    expect(failed.filter((o) => retryKind(o.error!) === undefined)).toEqual([]);
    expect(new Set(failed.map((o) => o.error!.name))).toEqual(
      new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'InternalServerError', 'TimeoutError']),
    );
    expect(new Set(failed.map((o) => retryKind(o.error!)))).toEqual(new Set(['throttle', 'serverError', 'timeout', 'reset']));
    // Throttles never apply; the others applied the write when they struck after the emulator answered.
    for (const [o, f] of failed.map((o, k) => [o, faults[k]!] as const)) {
      expect(retryKind(o.error!)).toBe(f.kind);
      expect(await stored(table, o.i)).toBe(f.after);
    }
    expect(faults.some((f) => f.after)).toBe(true);
    // Only a timeout may strike after the write (a reset never left the client).
    expect(faults.filter((f) => f.after).every((f) => f.kind === 'timeout')).toBe(true);
    expect(faults.some((f) => !f.after && f.kind !== 'throttle')).toBe(true);
    for (const o of outcomes.filter((x) => !x.error)) expect(await stored(table, o.i)).toBe(true);
  });

  it("the SDK's retries absorb most of them", async () => {
    const table = await em.createTable('faults');
    const faults: Fault[] = [];
    const dynamo = faultyDynamo(0.3, 3, faults); // the SDK's default: three attempts
    let failed = 0;
    const calls = 120;
    for (let i = 0; i < calls; i++) {
      try {
        await dynamo.send(new PutItemCommand({ TableName: table, Item: { pk: { S: `f#${i}` }, sk: { S: 'x' } } }));
        expect(await stored(table, i)).toBe(true);
      } catch (error) {
        failed++;
        expect(retryKind(error as { name: string })).toBeDefined();
      }
    }
    // About 30 % of attempts failed; about 0.3^3 = 2.7 % of calls did after three attempts.
    expect(faults.length).toBeGreaterThan(calls * 0.25);
    expect(new Set(faults.map((f) => f.kind))).toEqual(new Set(['throttle', 'serverError', 'timeout', 'reset']));
    expect(failed).toBeLessThan(calls * 0.08);
  });
});

describe.concurrent('DYNEIN_FAULTS on SQS at 30 %', () => {
  it('retried sends deliver every message, some twice (a fault after the send was applied)', async () => {
    const { url } = await em.createQueue('faults');
    const faults: Fault[] = [];
    const injector = new FaultInjector({ rates: { sqs: 0.3 }, timeoutMs: 5 }, { random: seeded(5), onFault: (f) => faults.push(f) });
    const sqs = injector.attach(new SQSClient({ endpoint: em.sqsEndpoint, region: 'us-east-1', credentials, maxAttempts: 10 }));
    for (let i = 0; i < 40; i++) await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: `m${i}` }));
    const bodies: string[] = [];
    for (;;) {
      const r = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
      if (!r.Messages?.length) break;
      bodies.push(...r.Messages.map((m) => m.Body!));
    }
    expect(new Set(bodies).size).toBe(40);
    const appliedTwice = faults.filter((f) => f.operation === 'SendMessage' && f.after).length;
    expect(appliedTwice).toBeGreaterThan(0);
    expect(bodies.length).toBe(40 + appliedTwice);
    expect(new Set(faults.map((f) => f.error))).toContain('RequestThrottled');
  });
});
