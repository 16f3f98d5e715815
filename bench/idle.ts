/**
 * Phase `idle` (#28, docs/design-dispatch.md#sleep): what a deployment costs with nothing to do.
 * The local stack (its own `npm start`) with two tenants registered, a recurring schedule whose
 * next occurrence is hours away and `rows` jobs due next week, left alone: once its groups sleep
 * (no dispatch step for 20 s), every AWS call compute makes over `minutes` is recorded (the SDK
 * request counter, plus the tick executions and dispatch steps, which are Step Functions and
 * Lambda on AWS) and priced at the list prices of bench/prices.ts, as a month of the same.
 *
 * Then `wake`: into the sleeping deployment, at once, `wakeJobs` jobs due 1 to 30 s ahead (a writer
 * starts the tick) and `farJobs` due `farMinutes` ahead (the tick's minute rule plans them after
 * the deployment fell asleep again): each job's lateness (received − runAt), early and lost.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { localSqs, signedFetch, startLocalStack, type LocalJson } from '../test/support/localStack.js';
import { DEFAULT_TICK, MONTH_SECONDS } from './cost.js';
import { dollars, PRICES } from './prices.js';

const round = (x: number, digits: number) => +x.toFixed(digits);

export interface IdleShape {
  /** Jobs due next week, stored before the window. */
  readonly rows: number;
  /** The measured window, minutes. */
  readonly minutes: number;
  /** Jobs due 1 to 30 s after their submit into the sleeping deployment. */
  readonly wakeJobs: number;
  /** Jobs due `farMinutes` after their submit (none: 0). */
  readonly farJobs: number;
  readonly farMinutes: number;
}

/** Lateness of jobs submitted into a sleeping deployment (received − runAt). */
export interface WakeFigures {
  readonly jobs: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Received before their runAt. */
  readonly early: number;
  /** Not received a minute after the last runAt. */
  readonly lost: number;
  /**
   * The same by path: `direct`, the jobs due within the lookahead, which submit sends straight to
   * their queue with SQS's whole-second delay, rounded up (so up to a second late by design:
   * docs/api.md); `table`, the others, which a dispatcher sends at their millisecond.
   */
  readonly byPath?: { readonly direct: PathFigures; readonly table: PathFigures };
}

/** Lateness of one path's jobs. */
export interface PathFigures {
  readonly jobs: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly maxMs: number;
}

export interface IdleResult {
  readonly rows: number;
  readonly windowS: number;
  /** From the last job stored to the first 20 s without a dispatch step. */
  readonly settleS: number;
  /** Every call in the window, per minute, by `Service.Operation` (the tick's executions and the Lambda invocations included). */
  readonly requestsPerMinute: Record<string, number>;
  /** A month of the window's calls at list prices, by service, and in all. */
  readonly byServiceUsd: Record<string, number>;
  readonly monthlyUsd: number;
  /** Tick executions in the window that planned no dispatcher (every group asleep), of all. */
  readonly executionsAsleep: number;
  readonly executions: number;
  /** Jobs due 1 to 30 s after their submit into the sleeping deployment (targets: p95 ≤ 100 ms, early 0, lost 0). */
  wake?: WakeFigures;
  /** Jobs due `farMinutes` after their submit into the sleeping deployment. */
  wakeFar?: WakeFigures & { readonly aheadMinutes: number };
}

interface Metrics {
  readonly requests: Record<string, number>;
  readonly jobs: { readonly ingested: number };
  readonly invocations: { readonly tickExecutions: number; readonly tickExecutionsAsleep: number; readonly dispatchSteps: number };
}

const metricsOf = async (local: LocalJson): Promise<Metrics> =>
  (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as Metrics;

export async function runIdle(shape: IdleShape, progress: (m: string) => void = () => {}): Promise<IdleResult> {
  const stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta' });
  try {
    const local = await stack.waitForLocalJson();
    const keys = local.tenants.alpha!;
    const now = Date.now();
    const schedule = await signedFetch(
      local.endpoint,
      keys,
      'PUT',
      '/v1/tenants/alpha/schedules/nightly',
      JSON.stringify({ expression: 'rate(1 day)', startAt: new Date(now + 6 * 3_600_000).toISOString(), payload: { report: 'nightly' } }),
    );
    if (schedule.status !== 201) throw new Error(`idle: the schedule answered ${schedule.status}: ${JSON.stringify(schedule.json)}`);
    const week = now + 7 * 86_400_000;
    for (let i = 0; i < shape.rows; i += 100) {
      const jobs = Array.from({ length: Math.min(100, shape.rows - i) }, (_, k) => ({
        payload: { n: i + k },
        runAt: new Date(week + (i + k) * 60_000).toISOString(),
      }));
      const res = await signedFetch(local.endpoint, keys, 'POST', '/v1/tenants/alpha/jobs/batch', JSON.stringify({ jobs }));
      if (res.status !== 200) throw new Error(`idle: the batch answered ${res.status}: ${JSON.stringify(res.json)}`);
    }
    for (const until = Date.now() + 300_000; (await metricsOf(local)).jobs.ingested < shape.rows; await sleep(1_000))
      if (Date.now() > until) throw new Error(`idle: ${shape.rows} jobs not stored within 5 minutes`);
    const stored = Date.now();
    progress(`idle: ${shape.rows} jobs due next week stored; waiting for the groups to sleep`);
    // Asleep: no dispatch step for 20 s (an execution's dispatcher ends once its groups sleep).
    let last = (await metricsOf(local)).invocations.dispatchSteps;
    for (let quiet = 0; quiet < 4;) {
      if (Date.now() - stored > 300_000) throw new Error('idle: dispatch still stepping 5 minutes after the jobs were stored');
      await sleep(5_000);
      const steps = (await metricsOf(local)).invocations.dispatchSteps;
      quiet = steps === last ? quiet + 1 : 0;
      last = steps;
    }
    const settleS = Math.round((Date.now() - stored) / 1000);
    progress(`idle: asleep after ${settleS} s; measuring ${shape.minutes} minutes`);
    const before = await metricsOf(local);
    const t0 = Date.now();
    await sleep(shape.minutes * 60_000);
    const after = await metricsOf(local);
    const minutes = (Date.now() - t0) / 60_000;
    const result: IdleResult = price(before, after, minutes, shape.rows, settleS);
    progress(`idle: ${result.monthlyUsd} USD a month; now jobs into the sleeping deployment`);
    return { ...result, ...(await runWake(local, shape)) };
  } finally {
    await stack.stop();
  }
}

/** The window's calls, per minute, and a month of them at list prices. */
export function price(before: Metrics, after: Metrics, minutes: number, rows: number, settleS: number): IdleResult {
  const diff = (a: number | undefined, b: number | undefined) => (a ?? 0) - (b ?? 0);
  const calls: Record<string, number> = {};
  for (const k of new Set([...Object.keys(after.requests), ...Object.keys(before.requests)])) {
    const n = diff(after.requests[k], before.requests[k]);
    if (n > 0) calls[k] = n;
  }
  const executions = diff(after.invocations.tickExecutions, before.invocations.tickExecutions);
  const asleep = diff(after.invocations.tickExecutionsAsleep, before.invocations.tickExecutionsAsleep);
  const steps = diff(after.invocations.dispatchSteps, before.invocations.dispatchSteps);
  if (executions > 0) calls['StepFunctions.Execution'] = executions;
  if (executions > 0) calls['Lambda.Invoke(tick)'] = executions;
  if (steps > 0) calls['Lambda.Invoke(dispatch)'] = steps;
  const perMonth = (n: number) => (n / minutes) * (MONTH_SECONDS / 60);
  const t = DEFAULT_TICK;
  const sum = (prefix: string) => Object.entries(calls).reduce((n, [k, v]) => (k.startsWith(prefix) ? n + v : n), 0);
  // DynamoDB: a write 1 WRU, a read 1 RRU (strongly consistent, small items: the lease items, a
  // query's first page); SQS and EventBridge Scheduler by request; an execution that planned no
  // dispatcher billed for the plan alone, one that did for its whole run.
  const writes = ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'].reduce((n, op) => n + (calls[`DynamoDB.${op}`] ?? 0), 0);
  const reads = sum('DynamoDB.') - writes;
  const gbS = (seconds: number, mb: number) => seconds * (Math.max(64, mb) / 1024);
  const byServiceUsd = {
    dynamodb: dollars(PRICES.dynamodbWrite, perMonth(writes)) + dollars(PRICES.dynamodbRead, perMonth(reads)),
    sqs: dollars(PRICES.sqsRequest, perMonth(sum('SQS.'))),
    stepFunctions:
      dollars(PRICES.stepFunctionsExpressRequest, perMonth(executions)) +
      dollars(
        PRICES.stepFunctionsExpressGbSecond,
        perMonth(
          asleep * gbS(t.sleepingExecutionSeconds, t.stepFunctionsMemoryMb) +
            (executions - asleep) * gbS(t.executionRunSeconds, t.stepFunctionsMemoryMb),
        ),
      ),
    lambda:
      dollars(PRICES.lambdaRequest, perMonth(executions + steps)) +
      dollars(
        PRICES.lambdaArmGbSecond,
        perMonth(executions * gbS(t.tickSeconds, t.tickMemoryMb) + steps * gbS(t.idleStepSeconds, t.dispatchMemoryMb)),
      ),
    eventBridge: dollars(PRICES.eventBridgeScheduledRule, perMonth(executions)),
  };
  const monthlyUsd = Object.values(byServiceUsd).reduce((a, b) => a + b, 0);
  return {
    rows,
    windowS: Math.round(minutes * 60),
    settleS,
    requestsPerMinute: Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, round(v / minutes, 2)])),
    byServiceUsd: Object.fromEntries(Object.entries(byServiceUsd).map(([k, v]) => [k, round(v, 2)])),
    monthlyUsd: round(monthlyUsd, 2),
    executionsAsleep: asleep,
    executions,
  };
}

/** Submits jobs into the sleeping deployment (its tenant `beta`: no job of its own yet) and receives them. */
async function runWake(local: LocalJson, shape: IdleShape): Promise<Pick<IdleResult, 'wake' | 'wakeFar'>> {
  const keys = local.tenants.beta!;
  const sqs = localSqs(local);
  const received = new Map<string, number>();
  const abort = new AbortController();
  const receiving = (async () => {
    while (!abort.signal.aborted) {
      const res = await sqs
        .send(new ReceiveMessageCommand({ QueueUrl: keys.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }), {
          abortSignal: abort.signal,
        })
        .catch(() => ({ Messages: [] }));
      const at = Date.now();
      const messages = res.Messages ?? [];
      for (const m of messages) {
        const id = (JSON.parse(m.Body ?? '{}') as { jobId?: string }).jobId;
        if (id && !received.has(id)) received.set(id, at);
      }
      if (messages.length > 0)
        await sqs
          .send(
            new DeleteMessageBatchCommand({
              QueueUrl: keys.queueUrl,
              Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
            }),
          )
          .catch(() => undefined);
    }
  })();
  const submit = async (runAts: readonly number[]) => {
    const out: { jobId: string; runAtMs: number; direct: boolean }[] = [];
    for (let i = 0; i < runAts.length; i += 100) {
      const jobs = runAts.slice(i, i + 100).map((at) => ({ payload: { wake: true }, runAt: new Date(at).toISOString() }));
      const res = await signedFetch(local.endpoint, keys, 'POST', '/v1/tenants/beta/jobs/batch', JSON.stringify({ jobs }));
      if (res.status !== 200) throw new Error(`wake: the batch answered ${res.status}: ${JSON.stringify(res.json)}`);
      for (const r of res.json.results as { jobId: string; runAt: string; state: string }[])
        out.push({ jobId: r.jobId, runAtMs: Date.parse(r.runAt), direct: r.state === 'QUEUED' });
    }
    return out;
  };
  try {
    const now = Date.now();
    // Whole milliseconds apart, spread over 1 to 30 s, and (far) over 10 s from `farMinutes` on.
    const soon = Array.from({ length: shape.wakeJobs }, (_, i) => now + 1_000 + Math.round((29_000 * i) / Math.max(1, shape.wakeJobs - 1)));
    const farAt = now + shape.farMinutes * 60_000;
    const far = Array.from({ length: shape.farJobs }, (_, i) => farAt + Math.round((10_000 * i) / Math.max(1, shape.farJobs)));
    const [soonJobs, farJobs] = [await submit(soon), await submit(far)];
    type Submitted = { jobId: string; runAtMs: number; direct: boolean };
    const lateness = (jobs: readonly Submitted[]) =>
      jobs.filter((j) => received.has(j.jobId)).map((j) => received.get(j.jobId)! - j.runAtMs);
    const percentiles = (late: readonly number[]) => {
      const sorted = [...late].sort((a, b) => a - b);
      const at = (p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!);
      return { p50Ms: at(0.5), p95Ms: at(0.95), p99Ms: at(0.99), maxMs: sorted.at(-1) ?? 0 };
    };
    const path = (jobs: readonly Submitted[]): PathFigures => {
      const { p50Ms, p95Ms, maxMs } = percentiles(lateness(jobs));
      return { jobs: jobs.length, p50Ms, p95Ms, maxMs };
    };
    const figures = async (jobs: readonly Submitted[]): Promise<WakeFigures> => {
      const lastDue = Math.max(0, ...jobs.map((j) => j.runAtMs));
      while (Date.now() < lastDue + 60_000 && jobs.some((j) => !received.has(j.jobId))) await sleep(200);
      const late = lateness(jobs);
      return {
        jobs: jobs.length,
        ...percentiles(late),
        early: late.filter((l) => l < 0).length,
        lost: jobs.length - late.length,
        byPath: { direct: path(jobs.filter((j) => j.direct)), table: path(jobs.filter((j) => !j.direct)) },
      };
    };
    const wake = await figures(soonJobs);
    const wakeFar = farJobs.length > 0 ? { ...(await figures(farJobs)), aheadMinutes: shape.farMinutes } : undefined;
    return { wake, ...(wakeFar ? { wakeFar } : {}) };
  } finally {
    abort.abort();
    await receiving;
    sqs.destroy();
  }
}
