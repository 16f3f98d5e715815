import { describe, expect, it } from 'vitest';
import { expectedOf, KINDS, perOccurrenceUsage } from '../../bench/recurring.js';
import { clocks } from '../support/cronOracle.js';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
const kind = (expression: string) => KINDS.find((k) => k.expression === expression)!;

describe("the recurring benchmark's expected occurrences", () => {
  const from = at('2026-11-23T11:00:00.000Z');
  const to = at('2026-11-23T11:05:00.000Z');
  const history = (zone: string) => new Map([[zone, clocks(zone, from - 26 * 3_600_000, to)]]);

  it('counts a rate from its startAt, keeping its milliseconds, within [from, to)', () => {
    const p = {
      tenant: 'demo',
      name: 'r',
      zone: 'Asia/Kathmandu',
      kind: kind('rate(2 minutes)'),
      startAtMs: at('2026-11-23T10:57:30.250Z'),
    };
    expect(expectedOf(p, from, to, new Map()).map(iso)).toEqual(['2026-11-23T11:01:30.250Z', '2026-11-23T11:03:30.250Z']);
    const first = { ...p, kind: kind('rate(1 minute)'), startAtMs: at('2026-11-23T11:00:00.000Z') };
    expect(expectedOf(first, from, to, new Map())).toHaveLength(5);
  });

  it('runs cron(0/2 * * * ? *) on even local minutes: odd UTC minutes in Kathmandu (+05:45), even in Lord Howe (+11:00)', () => {
    const cron = kind('cron(0/2 * * * ? *)');
    const kathmandu = expectedOf({ tenant: 'demo', name: 'c', zone: 'Asia/Kathmandu', kind: cron }, from, to, history('Asia/Kathmandu'));
    expect(kathmandu.map(iso)).toEqual(['2026-11-23T11:01:00.000Z', '2026-11-23T11:03:00.000Z']);
    const lordHowe = expectedOf(
      { tenant: 'demo', name: 'c', zone: 'Australia/Lord_Howe', kind: cron },
      from,
      to,
      history('Australia/Lord_Howe'),
    );
    expect(lordHowe.map(iso)).toEqual(['2026-11-23T11:00:00.000Z', '2026-11-23T11:02:00.000Z', '2026-11-23T11:04:00.000Z']);
    const everyMinute = expectedOf({ tenant: 'demo', name: 'c', zone: 'UTC', kind: kind('cron(* * * * ? *)') }, from, to, history('UTC'));
    expect(everyMinute).toHaveLength(5);
  });
});

describe("the recurring benchmark's usage per occurrence", () => {
  it('leaves out queries and lease writes, adds the Scheduler invocation and its SQS send', () => {
    const measured = {
      'DynamoDB.GetItem': 100,
      'DynamoDB.PutItem': 100,
      'DynamoDB.UpdateItem': 260,
      'DynamoDB.BatchWriteItem': 20,
      'DynamoDB.Query': 5_000,
      'SQS.ReceiveMessage': 112,
      'SQS.DeleteMessageBatch': 50,
      'SQS.SendMessageBatch': 60,
    };
    const idle = { 'DynamoDB.Query': 1_000, 'DynamoDB.UpdateItem': 30, 'SQS.ReceiveMessage': 2 };
    const u = perOccurrenceUsage(measured, idle, 10_000, 60_000, 100);
    expect(u.usage).toEqual({
      dynamodbWru: 4, // occurrence put, acquire, watermark advance, delivered marker
      dynamodbRru: 1,
      sqsRequests: 1 + 2.1, // the Scheduler's send, then 100 receives (net of 12 idle ones), 50 deletes, 60 sends
      lambdaInvocations: 0.5,
      lambdaGbSeconds: +((0.5 * 0.03 * 256) / 1024).toFixed(7),
      apiRequests: 0,
      schedulerInvocations: 1,
    });
    expect(u.leaseWritesPerSecond).toBe(1);
    expect(u.requestsPerOccurrence['DynamoDB.Query']).toBeUndefined();
    expect(u.requestsPerOccurrence['DynamoDB.UpdateItem']).toBe(2);
  });
});
