import { describe, expect, it } from 'vitest';
import { price } from '../../bench/idle.js';

/**
 * The idle phase's pricing (bench/idle.ts): a window's calls, per minute, as a month (730 hours =
 * 43,800 minutes) at the list prices of bench/prices.ts.
 */
describe('idle phase pricing', () => {
  const metrics = (requests: Record<string, number>, invocations: [number, number, number]) => ({
    requests,
    jobs: { ingested: 0 },
    invocations: { tickExecutions: invocations[0], tickExecutionsAsleep: invocations[1], dispatchSteps: invocations[2] },
  });

  it('a minute asleep: one execution that planned nothing, 8 lease reads, 15 long polls', () => {
    const before = metrics({ 'DynamoDB.GetItem': 100, 'SQS.ReceiveMessage': 50 }, [10, 4, 300]);
    const after = metrics({ 'DynamoDB.GetItem': 108, 'SQS.ReceiveMessage': 65 }, [11, 5, 300]);
    const r = price(before, after, 1, 10_000, 30);
    expect(r.requestsPerMinute).toEqual({
      'DynamoDB.GetItem': 8,
      'SQS.ReceiveMessage': 15,
      'StepFunctions.Execution': 1,
      'Lambda.Invoke(tick)': 1,
    });
    // 43,800 × 8 RRU × $0.125/M = $0.0438; 43,800 × 15 × $0.40/M = $0.2628; 43,800 executions × $1/M = $0.0438
    // + 43,800 × 0.3 s × 64 MB = 821.25 GB-s × $0.00001667 = $0.0137; the tick 43,800 × ($0.20/M + 0.01 s × 0.25 GB × $0.0000133334).
    expect(r.byServiceUsd.dynamodb).toBeCloseTo(0.04, 2);
    expect(r.byServiceUsd.sqs).toBeCloseTo(0.26, 2);
    expect(r.byServiceUsd.stepFunctions).toBeCloseTo(0.06, 2);
    expect(r.byServiceUsd.lambda).toBeCloseTo(0.01, 2);
    expect(r.monthlyUsd).toBeGreaterThan(0.35);
    expect(r.monthlyUsd).toBeLessThan(0.4);
    expect(r).toMatchObject({ executions: 1, executionsAsleep: 1, rows: 10_000, settleS: 30, windowS: 60 });
  });

  it('a dispatcher stepping all month costs what the resting model says, dominated by its steps and lease writes', () => {
    // One execution a minute that planned a dispatcher: 20 steps, each writing 8 lease items.
    const r = price(metrics({}, [0, 0, 0]), metrics({ 'DynamoDB.UpdateItem': 160 }, [1, 0, 20]), 1, 0, 0);
    // 43,800 × 160 WRU × $0.625/M = $4.38; the execution billed its 90 s run: 43,800 × 90 × 0.0625 × $0.00001667 = $4.11 + $0.04.
    expect(r.byServiceUsd.dynamodb).toBeCloseTo(4.38, 2);
    expect(r.byServiceUsd.stepFunctions).toBeCloseTo(4.15, 1);
    expect(r.monthlyUsd).toBeGreaterThan(9);
  });
});
