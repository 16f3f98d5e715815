/**
 * Dollars from billing units: pure functions over the price table (bench/prices.ts), so every
 * figure in the results can be recomputed by hand.
 *
 * @example
 * costPerMillion({ dynamodbWru: 3, dynamodbRru: 0, sqsRequests: 0.4, lambdaInvocations: 0.11, lambdaGbSeconds: 0.001, apiRequests: 0.01 }).totalUsd
 */
import { dollars, PRICES, type Price, type PriceTable } from './prices.js';

/** Billing units one job uses, by service. */
export interface PerJobUsage {
  /** DynamoDB write request units (1 KB each). */
  readonly dynamodbWru: number;
  /** DynamoDB read request units (4 KB each, eventually consistent 0.5). */
  readonly dynamodbRru: number;
  /** SQS billed requests (each 64 KB chunk of payload is one). */
  readonly sqsRequests: number;
  /** Lambda invocations. */
  readonly lambdaInvocations: number;
  /** Lambda GB-seconds (arm64). */
  readonly lambdaGbSeconds: number;
  /** API Gateway HTTP API billed requests (each 512 KB is one). */
  readonly apiRequests: number;
  /** EventBridge Scheduler invocations. */
  readonly schedulerInvocations?: number;
}

export interface Cost {
  readonly totalUsd: number;
  readonly byServiceUsd: Record<string, number>;
}

const round = (x: number, digits = 4) => +x.toFixed(digits);

/** Dollars per million jobs for a per-job usage. */
export function costPerMillion(u: PerJobUsage, prices: PriceTable = PRICES): Cost {
  const m = 1e6;
  const byServiceUsd = {
    dynamodb: dollars(prices.dynamodbWrite, u.dynamodbWru * m) + dollars(prices.dynamodbRead, u.dynamodbRru * m),
    sqs: dollars(prices.sqsRequest, u.sqsRequests * m),
    lambda: dollars(prices.lambdaRequest, u.lambdaInvocations * m) + dollars(prices.lambdaArmGbSecond, u.lambdaGbSeconds * m),
    apiGateway: dollars(prices.httpApiRequest, u.apiRequests * m),
    eventBridgeScheduler: dollars(prices.eventBridgeSchedulerInvocation, (u.schedulerInvocations ?? 0) * m),
  };
  const totalUsd = Object.values(byServiceUsd).reduce((a, b) => a + b, 0);
  return { totalUsd: round(totalUsd), byServiceUsd: Object.fromEntries(Object.entries(byServiceUsd).map(([k, v]) => [k, round(v)])) };
}

/** Write request units of one write of an item of `bytes` (DynamoDB rounds up to 1 KB). */
export const wruOf = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));
/** Read request units of reading `bytes` eventually consistently (4 KB units, halved; 0.5 minimum). */
export const rruOf = (bytes: number) => Math.max(1, Math.ceil(bytes / 4096)) * 0.5;

/**
 * Dynein's request pattern (Airbnb's design on EC2): per job, a put, a share of a query that
 * returns 10 due jobs, a conditional update (acquire) and a delete, each writing the whole row;
 * unbatched SQS: SendMessage to the inbound queue, ReceiveMessage and DeleteMessage by the
 * scheduler, SendMessage to the destination queue. Its servers (EC2) are not included.
 */
export function dyneinPatternUsage(rowBytes: number): PerJobUsage {
  return {
    dynamodbWru: 3 * wruOf(rowBytes),
    dynamodbRru: rruOf(10 * rowBytes) / 10,
    sqsRequests: 4 * Math.max(1, Math.ceil(rowBytes / 65_536)),
    lambdaInvocations: 0,
    lambdaGbSeconds: 0,
    apiRequests: 0,
  };
}

/**
 * EventBridge Scheduler one-time schedules (`at(...)`, `ActionAfterCompletion: DELETE`) with an
 * SQS target: one invocation per job (per 64 KB of payload) plus the SendMessage it makes to the
 * queue. CreateSchedule calls are not billed. Its schedules fire within the minute, not at the
 * millisecond.
 */
export function eventBridgeSchedulerUsage(payloadBytes: number): PerJobUsage {
  const chunks = Math.max(1, Math.ceil(payloadBytes / 65_536));
  return {
    dynamodbWru: 0,
    dynamodbRru: 0,
    sqsRequests: chunks,
    lambdaInvocations: 0,
    lambdaGbSeconds: 0,
    apiRequests: 0,
    schedulerInvocations: chunks,
  };
}

/** Settings the fixed cost of the tick depends on (defaults: DESIGN.md's). */
export interface TickModel {
  /** Shard groups (each with its lease); the tick packs them into dispatchers. @default 8 */
  readonly groups: number;
  /** Due rows per second one dispatcher (Map iteration, dispatch Lambda) is planned to carry. @default 200 */
  readonly dispatcherRowsPerSecond: number;
  /** Shards. @default 64 */
  readonly shards: number;
  /** A tick execution starts this often. @default 60 */
  readonly executionEverySeconds: number;
  /** Each execution runs this long. @default 90 */
  readonly executionRunSeconds: number;
  /** Wait after an idle dispatch step (lookahead − 2 s). @default 3 */
  readonly idleWaitSeconds: number;
  /** Wall time of an idle dispatch step (lease write and one query per shard). @default 0.05 */
  readonly idleStepSeconds: number;
  /** Re-query interval while busy. @default 0.5 */
  readonly busyQueryIntervalSeconds: number;
  /** Group lease renewal while busy. @default 5 */
  readonly leaseRenewSeconds: number;
  /** @default 1024 */
  readonly dispatchMemoryMb: number;
  /** The tick (plan) Lambda. @default 256 and 0.01 s */
  readonly tickMemoryMb: number;
  readonly tickSeconds: number;
  /** Step Functions Express bills at least 64 MB. @default 64 */
  readonly stepFunctionsMemoryMb: number;
  /** Billed duration of an execution whose groups all sleep (the plan alone, no dispatcher). @default 0.3 */
  readonly sleepingExecutionSeconds: number;
  /** Lambda's SQS event source polls the inbound queue with this many long-polls (20 s) while idle. @default 5 */
  readonly ingestIdlePollers: number;
}

export const DEFAULT_TICK: TickModel = {
  groups: 8,
  dispatcherRowsPerSecond: 200,
  shards: 64,
  executionEverySeconds: 60,
  executionRunSeconds: 90,
  idleWaitSeconds: 3,
  idleStepSeconds: 0.05,
  busyQueryIntervalSeconds: 0.5,
  leaseRenewSeconds: 5,
  dispatchMemoryMb: 1024,
  tickMemoryMb: 256,
  tickSeconds: 0.01,
  stepFunctionsMemoryMb: 64,
  sleepingExecutionSeconds: 0.3,
  ingestIdlePollers: 5,
};

/**
 * Read units of one look at a shard that finds nothing new (DynamoDB bills a query at least 1 RRU
 * strongly consistent, 0.5 eventually consistent): while busy, the due-range read (strongly
 * consistent: a read position must not pass a row it could not see) and the late lane (eventually
 * consistent: read whole every time); an idle step adds the probe before it ends (strongly
 * consistent, one item at most). The plan's sample per group: the lease item's marks and a
 * due-range read.
 */
export const BUSY_LOOK_RRU_PER_SHARD = 1 + 0.5;

/** AWS prices a month as 730 hours. */
export const MONTH_SECONDS = 730 * 3600;

/** Dispatchers the tick plans for a steady `jobsPerSec` (core/dispatch/plan.ts): 1 to `groups`. */
export function dispatchersAt(jobsPerSec: number, t: TickModel = DEFAULT_TICK): number {
  if (t.dispatcherRowsPerSecond === 0) return t.groups;
  return Math.min(t.groups, Math.max(1, Math.ceil(jobsPerSec / t.dispatcherRowsPerSecond)));
}

/** Step Functions Express: `executions` of `seconds` each (billed in 100 ms steps, at least 64 MB). */
function expressCost(executions: number, seconds: number, t: TickModel, prices: PriceTable): number {
  return (
    dollars(prices.stepFunctionsExpressRequest, executions) +
    dollars(
      prices.stepFunctionsExpressGbSecond,
      ((executions * Math.ceil(seconds * 10)) / 10) * (Math.max(64, t.stepFunctionsMemoryMb) / 1024),
    )
  );
}

/**
 * The fixed monthly cost of a deployment whose dispatchers stay up with nothing to send (groups at
 * rest, not asleep: a steady trickle of jobs, or sleep off): the tick's executions (EventBridge →
 * Step Functions Express, ~90 s each, every minute, each plan sampling one shard per group), its
 * idle dispatch steps (every idle wait plus the step itself, per dispatcher: one at idle unless
 * packing is off; each a Lambda invocation writing its groups' leases; its groups at rest, it
 * reads no shard) and the ingest event source's idle long polls.
 */
export function restingMonthlyCost(t: TickModel = DEFAULT_TICK, prices: PriceTable = PRICES): Cost {
  const executions = MONTH_SECONDS / t.executionEverySeconds;
  const dispatchers = dispatchersAt(0, t);
  // Per dispatcher, one step every (wait + step) seconds, plus the older execution's last step,
  // which finds its groups taken by the newer one.
  const steps = dispatchers * (MONTH_SECONDS / (t.idleWaitSeconds + t.idleStepSeconds) + executions);
  const byServiceUsd = {
    eventBridge: dollars(prices.eventBridgeScheduledRule, executions),
    stepFunctions: expressCost(executions, t.executionRunSeconds, t, prices),
    lambda:
      dollars(prices.lambdaRequest, steps + executions) +
      dollars(
        prices.lambdaArmGbSecond,
        steps * t.idleStepSeconds * (t.dispatchMemoryMb / 1024) + executions * t.tickSeconds * (t.tickMemoryMb / 1024),
      ),
    dynamodb:
      dollars(prices.dynamodbWrite, steps * (t.groups / dispatchers)) +
      // At rest (docs/design-dispatch.md#rest) an idle step reads no shard; the tick's plan samples one per group.
      dollars(prices.dynamodbRead, executions * t.groups * 1.5),
    sqs: dollars(prices.sqsRequest, t.ingestIdlePollers * (MONTH_SECONDS / 20)),
  };
  const totalUsd = Object.values(byServiceUsd).reduce((a, b) => a + b, 0);
  return { totalUsd: round(totalUsd, 2), byServiceUsd: Object.fromEntries(Object.entries(byServiceUsd).map(([k, v]) => [k, round(v, 2)])) };
}

/**
 * The fixed monthly cost of an idle deployment: its groups asleep (docs/design-dispatch.md#sleep),
 * each minute's execution runs the plan only (the tick Lambda reads each group's lease item,
 * strongly consistent, and plans no dispatcher), and the ingest event source's idle long polls.
 */
export function idleMonthlyCost(t: TickModel = DEFAULT_TICK, prices: PriceTable = PRICES): Cost {
  const executions = MONTH_SECONDS / t.executionEverySeconds;
  const byServiceUsd = {
    eventBridge: dollars(prices.eventBridgeScheduledRule, executions),
    stepFunctions: expressCost(executions, t.sleepingExecutionSeconds, t, prices),
    lambda:
      dollars(prices.lambdaRequest, executions) + dollars(prices.lambdaArmGbSecond, executions * t.tickSeconds * (t.tickMemoryMb / 1024)),
    // One strongly consistent GetItem of a small item per group: 1 RRU each.
    dynamodb: dollars(prices.dynamodbRead, executions * t.groups),
    sqs: dollars(prices.sqsRequest, t.ingestIdlePollers * (MONTH_SECONDS / 20)),
  };
  const totalUsd = Object.values(byServiceUsd).reduce((a, b) => a + b, 0);
  return { totalUsd: round(totalUsd, 2), byServiceUsd: Object.fromEntries(Object.entries(byServiceUsd).map(([k, v]) => [k, round(v, 2)])) };
}

/**
 * What a busy month adds: while any row of a dispatcher is due within the lookahead, its
 * dispatch Lambda runs without pause (one step per execution), looks at each of its shards
 * every 0.5 s (its due range and its late lane) and renews its groups' leases every 5 s. `busyFraction` is the share of the month
 * that is so; `dispatchers` how many the tick plans.
 */
export function busyMonthlyCost(
  busyFraction: number,
  t: TickModel = DEFAULT_TICK,
  prices: PriceTable = PRICES,
  dispatchers = t.groups,
  shards = t.shards,
): Cost {
  const s = MONTH_SECONDS * busyFraction;
  const byServiceUsd = {
    lambda:
      dollars(prices.lambdaArmGbSecond, dispatchers * s * (t.dispatchMemoryMb / 1024)) +
      dollars(prices.lambdaRequest, (dispatchers * s) / 60),
    dynamodb:
      dollars(prices.dynamodbRead, (shards / t.busyQueryIntervalSeconds) * s * BUSY_LOOK_RRU_PER_SHARD) +
      dollars(prices.dynamodbWrite, (t.groups / t.leaseRenewSeconds) * s),
  };
  const totalUsd = Object.values(byServiceUsd).reduce((a, b) => a + b, 0);
  return { totalUsd: round(totalUsd, 2), byServiceUsd: Object.fromEntries(Object.entries(byServiceUsd).map(([k, v]) => [k, round(v, 2)])) };
}

/**
 * Share of the time a dispatcher has a row due within the lookahead, for jobs due at
 * `jobsPerSecond` spread evenly over `dispatchers` (Poisson arrivals).
 */
export function busyFraction(jobsPerSecond: number, dispatchers: number, lookaheadSeconds: number): number {
  return 1 - Math.exp(-(jobsPerSecond / dispatchers) * lookaheadSeconds);
}

/**
 * Fixed monthly cost at a steady `jobsPerSec`: the dispatchers the tick plans, awake all month (at a
 * steady load nothing sleeps), resting between rows and busy while rows come due.
 */
export function fixedMonthlyCostAt(
  jobsPerSec: number,
  t: TickModel = DEFAULT_TICK,
  prices: PriceTable = PRICES,
  shards = t.shards,
): number {
  const d = dispatchersAt(jobsPerSec, t);
  return (
    restingMonthlyCost({ ...t, shards }, prices).totalUsd + busyMonthlyCost(busyFraction(jobsPerSec, d, 5), t, prices, d, shards).totalUsd
  );
}

type AttributeValue = { S: string } | { N: string } | { B: Uint8Array };

/**
 * DynamoDB's size of an item: attribute names plus values (strings and binaries by their bytes,
 * numbers by about one byte per two significant digits plus one).
 */
export function itemBytes(item: Record<string, AttributeValue>): number {
  let n = 0;
  for (const [name, v] of Object.entries(item)) {
    n += Buffer.byteLength(name);
    if ('S' in v) n += Buffer.byteLength(v.S);
    else if ('N' in v) n += Math.ceil(v.N.replace(/^-|\.|^0+/g, '').length / 2) + 1;
    else n += v.B.length;
  }
  return n;
}

/**
 * A job row as ingest writes it (adapters/dynamoJobStore.ts `putJob`), for a payload of
 * `payloadBytes`; `jobId` a real one (about 80 characters).
 */
export function jobRowBytes(payloadBytes: number, jobId: string, tenant = 'demo'): number {
  return itemBytes({
    pk: { S: '37' },
    sk: { S: `${'1'.repeat(13)}#${jobId}` },
    tenant: { S: tenant },
    state: { S: 'SCHEDULED' },
    leaseUntil: { N: '1795320629774' },
    payload: { S: 'x'.repeat(payloadBytes) },
  });
}

/** AWS limits the capacity model plans against (defaults as documented; most are adjustable). */
export const AWS_LIMITS = {
  /** Writes one DynamoDB partition takes per second. */
  partitionWruPerSec: 1_000,
  /** Keep each shard's partition under this share of its limit. */
  partitionHeadroom: 0.7,
  /** On-demand table-level write throughput quota per table (adjustable). */
  tableWruPerSecQuota: 40_000,
  /** A new on-demand table's initial write throughput (set warm throughput above it). */
  newTableWruPerSec: 4_000,
  /** Lambda concurrent executions per account and region (adjustable). */
  lambdaAccountConcurrency: 1_000,
  /** vCPU share of a 1,024 MB Lambda (1,769 MB is one full vCPU). */
  vcpuAt1024Mb: 1024 / 1769,
  /** An inline Map state's concurrency: at most 40 shard groups. */
  maxGroups: 40,
  /** API Gateway account-level throttle, requests per second (adjustable). */
  apiRequestsPerSec: 10_000,
};

export interface CapacityRow {
  jobsPerSec: number;
  /** Writes per second on the table (3 item writes per job). */
  tableWruPerSec: number;
  /** Shards so that each partition stays under the headroom. */
  shardsNeeded: number;
  /** Dispatch groups (Lambdas) the dispatch CPU needs, and whether the 40-group cap holds it. */
  groupsNeeded: number;
  withinGroupCap: boolean;
  lambdaConcurrency: { submit: number; ingest: number; dispatch: number };
  apiRequestsPerSec: number;
  monthlyUsd: number;
  perMillionUsd: number;
  /** Limits to raise or settings to change at this rate. */
  notes: string[];
}

/**
 * What a steady `jobsPerSec` of batch-submitted jobs needs on AWS and costs a month: shards from
 * DynamoDB's per-partition write limit, dispatch groups from the dispatch's measured CPU per job
 * on a 1,024 MB Lambda, Lambda concurrency from assumed AWS durations, and the per-job cost plus
 * the fixed costs.
 */
export function capacityRow(
  jobsPerSec: number,
  m: { usagePerJob: PerJobUsage; wruPerWrite: number; dispatchCpuUsPerJob: number; submitSeconds?: number; ingestSeconds?: number },
  t: TickModel = DEFAULT_TICK,
  prices: PriceTable = PRICES,
): CapacityRow {
  const L = AWS_LIMITS;
  const tableWruPerSec = jobsPerSec * 3 * m.wruPerWrite;
  const shardsNeeded = Math.max(t.shards, Math.ceil(tableWruPerSec / (L.partitionWruPerSec * L.partitionHeadroom)));
  const perGroupJobsPerSec = (L.vcpuAt1024Mb * 1e6) / m.dispatchCpuUsPerJob;
  const groupsNeeded = Math.max(t.groups, Math.ceil(jobsPerSec / (perGroupJobsPerSec * 0.7)));
  const groups = Math.min(groupsNeeded, L.maxGroups);
  const submit = Math.ceil((jobsPerSec / 100) * (m.submitSeconds ?? 0.03));
  // One inbound message per batch of 100 jobs; `ingestSeconds` per message (100 conditional puts, 32 in flight).
  const ingest = Math.ceil((jobsPerSec / 100) * (m.ingestSeconds ?? 0.1));
  const dispatch = 2 * groups;
  const jobsPerMonth = jobsPerSec * MONTH_SECONDS;
  const perJob = costPerMillion(m.usagePerJob, prices).totalUsd * (jobsPerMonth / 1e6);
  const fixed = fixedMonthlyCostAt(jobsPerSec, { ...t, groups }, prices, shardsNeeded);
  const monthlyUsd = perJob + fixed;
  const notes: string[] = [];
  if (shardsNeeded > t.shards) notes.push(`${shardsNeeded} shards (default ${t.shards})`);
  if (tableWruPerSec > L.tableWruPerSecQuota)
    notes.push(
      `raise the table's write quota (${L.tableWruPerSecQuota.toLocaleString('en-US')} WRU/s default) to ${Math.ceil(tableWruPerSec).toLocaleString('en-US')}`,
    );
  if (tableWruPerSec > L.newTableWruPerSec)
    notes.push(`warm throughput ≥ ${Math.ceil(tableWruPerSec).toLocaleString('en-US')} WRU/s on a new table`);
  if (groupsNeeded > t.groups) notes.push(`${Math.min(groupsNeeded, L.maxGroups)} groups (default ${t.groups})`);
  if (groupsNeeded > L.maxGroups)
    notes.push(
      `dispatch needs ${groupsNeeded} groups of 1,024 MB, over the 40-group cap: ${Math.round(L.maxGroups * perGroupJobsPerSec * 0.7).toLocaleString('en-US')} jobs/s is the ceiling without less CPU per job or a second Map`,
    );
  if (submit + ingest + dispatch > L.lambdaAccountConcurrency * 0.8) notes.push('raise the account Lambda concurrency');
  return {
    jobsPerSec,
    tableWruPerSec: Math.round(tableWruPerSec),
    shardsNeeded,
    groupsNeeded,
    withinGroupCap: groupsNeeded <= L.maxGroups,
    lambdaConcurrency: { submit, ingest, dispatch },
    apiRequestsPerSec: Math.ceil(jobsPerSec / 100),
    monthlyUsd: Math.round(monthlyUsd),
    perMillionUsd: +((monthlyUsd / jobsPerMonth) * 1e6).toFixed(3),
    notes,
  };
}

/** Seconds in an hour: provisioned capacity is billed per unit-hour. */
const HOUR_SECONDS = 3600;

/**
 * The price table with DynamoDB's per-request prices replaced by what provisioned capacity costs
 * per unit consumed under a steady load, auto scaling holding consumption at
 * `targetUtilizationPercent` of what is provisioned: one unit consumed every second for an hour
 * needs 1 ÷ utilisation units provisioned for that hour, so a WRU costs WCU-hour ÷ 3,600 ÷
 * utilisation (us-east-1 at 70 %: $0.00065 ÷ 3,600 ÷ 0.7 = $0.258 per million, against $0.625 on
 * demand). Everything else is priced as on demand.
 */
export function provisionedPrices(targetUtilizationPercent: number, prices: PriceTable = PRICES): PriceTable {
  const u = targetUtilizationPercent / 100;
  const perUnit = (hour: Price, unit: string): Price => ({
    usd: ((hour.usd / hour.per / HOUR_SECONDS) * 1e6) / u,
    per: 1e6,
    unit,
    source: hour.source,
    checked: hour.checked,
    note: `${hour.usd} per ${hour.unit.split(' (')[0]} ÷ ${HOUR_SECONDS} s ÷ ${targetUtilizationPercent} % target utilisation`,
  });
  return {
    ...prices,
    dynamodbWrite: perUnit(prices.dynamodbProvisionedWcuHour, 'write unit consumed under provisioned capacity at a steady load'),
    dynamodbRead: perUnit(prices.dynamodbProvisionedRcuHour, 'read unit consumed under provisioned capacity at a steady load'),
  };
}

/** A steady load on a provisioned table: the rate, the auto scaling target and the tick's settings at that rate. */
export interface SteadyLoadModel {
  readonly jobsPerSec: number;
  /** Auto scaling's target utilisation, percent (tableCapacity.targetUtilizationPercent). */
  readonly targetUtilizationPercent: number;
  /** The tick at this rate (its fixed costs: executions, dispatchers busy all the time, their shard queries and lease writes). */
  readonly tick: TickModel;
}

/**
 * 10,000 jobs/s, auto scaling at 70 % (the construct's default), 40 groups packed at 250 due rows
 * a second per dispatcher (40 dispatch Lambdas of 1,024 MB, busy all the time: ~1.4 ms of
 * dispatch CPU per job on 0.58 vCPU carries ~400 jobs/s, so 250 leaves 40 % headroom), 64 shards
 * (30,000 WRU/s over 64 partitions: ~470 each, under 70 % of the 1,000 per partition).
 */
export const STEADY_10K_PROVISIONED: SteadyLoadModel = {
  jobsPerSec: 10_000,
  targetUtilizationPercent: 70,
  tick: { ...DEFAULT_TICK, groups: 40, dispatcherRowsPerSecond: 250 },
};

export interface SteadyLoadCost extends Cost {
  readonly billing: 'provisioned' | 'onDemand';
  /** The per-job usage priced (DynamoDB at the provisioned rate), per million jobs. */
  readonly perJobUsd: number;
  /** The fixed monthly cost at this rate (tick, busy dispatchers, idle polls), per million jobs. */
  readonly fixedPerMillionUsd: number;
  readonly fixedMonthlyUsd: number;
  readonly jobsPerMonth: number;
  readonly dispatchers: number;
  /** Capacity auto scaling settles at: consumed per second ÷ target utilisation (what a provisioned table needs; on demand, for comparison). */
  readonly provisionedWcu: number;
  readonly provisionedRcu: number;
  readonly model: SteadyLoadModel;
}

/**
 * Dollars per million jobs at a steady load: the measured per-job usage, plus the fixed monthly
 * cost at that rate spread over the month's jobs, with the table `provisioned` (DynamoDB priced
 * with {@link provisionedPrices} at the model's target utilisation) or `onDemand`. Not counted,
 * as in every figure here: storage, PITR, data transfer, CloudWatch; free tiers; reserved capacity.
 */
export function steadyLoadCost(
  u: PerJobUsage,
  m: SteadyLoadModel = STEADY_10K_PROVISIONED,
  billing: 'provisioned' | 'onDemand' = 'provisioned',
  prices: PriceTable = PRICES,
): SteadyLoadCost {
  const pp = billing === 'provisioned' ? provisionedPrices(m.targetUtilizationPercent, prices) : prices;
  const t = m.tick;
  const perJob = costPerMillion(u, pp);
  const dispatchers = dispatchersAt(m.jobsPerSec, t);
  // At a steady load nothing sleeps: the dispatchers rest between rows.
  const idle = restingMonthlyCost(t, pp);
  const busy = busyMonthlyCost(busyFraction(m.jobsPerSec, dispatchers, 5), t, pp, dispatchers, t.shards);
  const jobsPerMonth = m.jobsPerSec * MONTH_SECONDS;
  const perMillion = (monthly: number) => (monthly / jobsPerMonth) * 1e6;
  const services = new Set([...Object.keys(perJob.byServiceUsd), ...Object.keys(idle.byServiceUsd), ...Object.keys(busy.byServiceUsd)]);
  const byServiceUsd = Object.fromEntries(
    [...services].map((k) => [
      k,
      round((perJob.byServiceUsd[k] ?? 0) + perMillion((idle.byServiceUsd[k] ?? 0) + (busy.byServiceUsd[k] ?? 0))),
    ]),
  );
  const fixedMonthlyUsd = round(idle.totalUsd + busy.totalUsd, 2);
  const fixedPerMillionUsd = perMillion(fixedMonthlyUsd);
  const u100 = m.targetUtilizationPercent / 100;
  // Steady consumption: the jobs' units plus the busy dispatchers' lease writes and shard queries.
  const wruPerSec = m.jobsPerSec * u.dynamodbWru + t.groups / t.leaseRenewSeconds;
  const rruPerSec = m.jobsPerSec * u.dynamodbRru + (t.shards / t.busyQueryIntervalSeconds) * BUSY_LOOK_RRU_PER_SHARD;
  return {
    billing,
    totalUsd: round(perJob.totalUsd + fixedPerMillionUsd),
    byServiceUsd,
    perJobUsd: perJob.totalUsd,
    fixedPerMillionUsd: round(fixedPerMillionUsd),
    fixedMonthlyUsd,
    jobsPerMonth,
    dispatchers,
    provisionedWcu: Math.ceil(wruPerSec / u100),
    provisionedRcu: Math.ceil(rruPerSec / u100),
    model: m,
  };
}
