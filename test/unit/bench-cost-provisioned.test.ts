/**
 * The provisioned-mode cost arithmetic of bench/cost.ts, against figures worked out by hand
 * (us-east-1: $0.00065 per WCU-hour, $0.00013 per RCU-hour; on demand $0.625 per million WRU).
 */
import { describe, expect, it } from 'vitest';
import { costPerMillion, provisionedPrices, STEADY_10K_PROVISIONED, steadyLoadCost, type PerJobUsage } from '../../bench/cost.js';
import { dollars, PRICES } from '../../bench/prices.js';

const only = (u: Partial<PerJobUsage>): PerJobUsage => ({
  dynamodbWru: 0,
  dynamodbRru: 0,
  sqsRequests: 0,
  lambdaInvocations: 0,
  lambdaGbSeconds: 0,
  apiRequests: 0,
  ...u,
});

describe('provisionedPrices', () => {
  it('a unit consumed costs unit-hour ÷ 3,600 ÷ target utilisation', () => {
    const at70 = provisionedPrices(70);
    // 0.00065 / 3600 / 0.7 × 1e6 = 0.25794 per million WRU; 0.00013 / 3600 / 0.7 × 1e6 = 0.05159 per million RRU.
    expect(dollars(at70.dynamodbWrite, 1e6)).toBeCloseTo(0.25794, 5);
    expect(dollars(at70.dynamodbRead, 1e6)).toBeCloseTo(0.05159, 5);
    // At 100 % it is the bare unit-hour rate: 0.00065 / 3600 × 1e6 = 0.18056.
    expect(dollars(provisionedPrices(100).dynamodbWrite, 1e6)).toBeCloseTo(0.18056, 5);
    // Everything else as on demand.
    expect(at70.sqsRequest).toBe(PRICES.sqsRequest);
    expect(at70.lambdaArmGbSecond).toBe(PRICES.lambdaArmGbSecond);
  });
});

describe('steadyLoadCost at 10,000 jobs/s', () => {
  it('3 WRU a job, nothing else: $0.7738 per job-million plus the fixed costs spread over 26.28 billion jobs a month', () => {
    const c = steadyLoadCost(only({ dynamodbWru: 3 }));
    // 3 × 0.257937 = 0.773810.
    expect(c.perJobUsd).toBe(0.7738);
    expect(c.byServiceUsd.sqs).toBe(0);
    // 10,000 × 730 h × 3,600 s.
    expect(c.jobsPerMonth).toBe(26_280_000_000);
    expect(c.dispatchers).toBe(40);
    // Fixed, by hand: 40 dispatchers of 1 GB busy all month 40 × 2,628,000 s × $0.0000133334 = $1,401.61
    // (+ 1,752,000 invocations $0.35); their queries 192 RRU/s × 2,628,000 s × $0.0515873e-6 = $26.03 and
    // lease writes 8/s × 2,628,000 × $0.257937e-6 = $5.42; idle steps and tick ≈ $14.69 (of which
    // Step Functions 43,800 executions × 90 s × 64 MB = $4.15; the idle steps' groups at rest read
    // no shard). ≈ $1,448.1 a month.
    expect(c.fixedMonthlyUsd).toBeGreaterThan(1_447);
    expect(c.fixedMonthlyUsd).toBeLessThan(1_449);
    // $1,448.1 / 26,280 million = $0.0551 per million.
    expect(c.fixedPerMillionUsd).toBeCloseTo(0.0551, 3);
    expect(c.totalUsd).toBeCloseTo(0.7738 + 0.0551, 3);
    // Capacity at the target: (30,000 WRU/s + 8 lease writes/s) ÷ 0.7 = 42,869 WCU (over the
    // default 40,000 per-table quota: docs/capacity.md); (0 + 192) ÷ 0.7 = 275 RCU.
    expect(c.provisionedWcu).toBe(42_869);
    expect(c.provisionedRcu).toBe(275);
  });

  it('the measured batch-submit usage: provisioned at 70 % ≤ $1.10, on demand about twice that', () => {
    // usage.ours of a quick benchmark run (bench/results/quick.json, 2026-11-23).
    const ours = only({
      dynamodbWru: 3,
      dynamodbRru: 0.0025,
      sqsRequests: 0.375,
      lambdaInvocations: 0.02,
      lambdaGbSeconds: 0.0004712,
      apiRequests: 0.01,
    });
    const provisioned = steadyLoadCost(ours);
    // DynamoDB 0.7738 + 0.0001 reads, SQS 0.375 × 0.4 = 0.15, Lambda 0.004 + 0.0063, API 0.01: 0.9442, + 0.0551 fixed.
    expect(provisioned.perJobUsd).toBeCloseTo(0.9442, 4);
    expect(provisioned.totalUsd).toBeCloseTo(0.9993, 3);
    expect(provisioned.totalUsd).toBeLessThanOrEqual(1.1);
    const onDemand = steadyLoadCost(ours, STEADY_10K_PROVISIONED, 'onDemand');
    // The per-job part is costPerMillion's (3 × 0.625 + ... = 2.0456); fixed a little more (DynamoDB on demand).
    expect(onDemand.perJobUsd).toBe(costPerMillion(ours).totalUsd);
    expect(onDemand.perJobUsd).toBeCloseTo(2.0456, 4);
    expect(onDemand.totalUsd).toBeGreaterThan(2.1);
    // A higher target lowers it: 80 % → DynamoDB 3 × 0.225694 = 0.6771.
    const at80 = steadyLoadCost(ours, { ...STEADY_10K_PROVISIONED, targetUtilizationPercent: 80 });
    expect(at80.byServiceUsd.dynamodb! - provisioned.byServiceUsd.dynamodb!).toBeCloseTo(0.6771 - 0.7738, 2);
    expect(at80.provisionedWcu).toBe(37_510);
  });
});
