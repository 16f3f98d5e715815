/**
 * Phase 18: concurrency by key (docs/flow-control.md, issue #26). `jobs` jobs spread over `keys`
 * keys (`k-<i % keys>`, each with `concurrencyLimit` `limit`), all due the same millisecond past
 * the lookahead, are submitted in batches of 100 and go through the inbound queue and ingest into
 * the table on the emulators, with the dispatchers running. A worker as the SDK's Worker would
 * run one, but with no cap of its own (only the keys' limits bound it): receive loops on the
 * tenant queue (one per 10 slots, as a Worker of that concurrency polls), each job "worked"
 * `workMs`, its message deleted, then its outcome `SUCCEEDED` reported with its `concurrencyKey`
 * through the outcomes route in process (`OutcomeReporter.reportNow`, as the Worker reports a
 * keyed job: at once, reports made together sharing requests).
 *
 * Measured: the most runs of one key that overlapped (target ≤ the limit), runs started before
 * their due time (early, target 0), jobs never delivered within the timeout (lost, target 0),
 * duplicates, and the throughput ratio: jobs ÷ (the last run's end − the due time), over the
 * ideal keys × limit ÷ the work time (target ≥ 0.8). Beside them, where a slot's time goes between
 * two jobs (the report, the dispatcher's wait for its next ask, the send and the receive), the
 * dispatchers' slot takes granted and refused, and the CPU the emulators and this process used
 * while the jobs ran.
 */
import { DeleteMessageCommand, ReceiveMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import { RequestCounter } from '../adapters/requestCounter.js';
import { OutcomeReporter, outcomeReport } from '../client/outcomes.js';
import type { KeyFull, KeySlots } from '../core/model/index.js';
import type { KeyedFigures } from './sim/engine.js';
import { outcomesHandler, statusHandler } from '../lambdas/runtime/handlers.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, httpEvent, runAllGroups, submitJobs, waitForEmptyQueue, type TestSystem } from '../test/support/system.js';
import { inProcessOutcomes, processCpuUs, progress, sleep, summarize } from './support.js';

export interface FlowControlShape {
  readonly keys: number;
  /** Every key's concurrencyLimit. */
  readonly limit: number;
  readonly jobs: number;
  /** How long the worker "works" on each job. */
  readonly workMs: number;
}

export interface FlowControlResult {
  keys: number;
  keyLimit: number;
  jobs: number;
  workMs: number;
  /** The most runs of one key that overlapped at any moment (target ≤ keyLimit). */
  maxConcurrentPerKey: number;
  /** Distinct jobs delivered. */
  delivered: number;
  duplicates: number;
  /** Runs started before their due time (target 0). */
  early: number;
  /** Jobs submitted and never delivered within the timeout (target 0). */
  lost: number;
  /** The first 10 lost jobs as the API shows them at the timeout, and whether each holds its key's slot. */
  lostJobs: { jobId: string; key: string; state: string; holdsSlot: boolean }[];
  /** The timeout after the due time (lost: not delivered by then). */
  timeoutSeconds: number;
  /** Jobs per second achieved (jobs ÷ (last end − due)) over the ideal (keys × limit ÷ work seconds); target ≥ 0.8. */
  throughputRatio: number;
  jobsPerSec: number;
  idealJobsPerSec: number;
  /** From the due time until the last run ended. */
  drainSeconds: number;
  /** From the first submit until ingest had stored every job. */
  storedSeconds: number;
  /** From the due time until the first run started, ms. */
  firstStartMs: number;
  /**
   * A slot between two jobs of its key, p50 / p95 ms: `report` the end of the work until the
   * outcome report was answered (the message deleted first), `wait` that answer until the
   * dispatcher's next take of the key's slot succeeded (negative when the take came between the
   * release and the answer), `delivery` that take until the worker received the job (the send,
   * the queue and the receive).
   */
  handoff: Record<'report' | 'wait' | 'delivery', { p50Ms: number; p95Ms: number; meanMs: number }>;
  /** The dispatchers' slot takes: first takes granted, refused asks, evicted holders, and each take's mean time (ms). */
  takes: { granted: number; refused: number; evicted: number; meanMs: number };
  /** Outcome report requests (each one API request and invocation) and their handler's mean time, ms. */
  reports: { requests: number; handlerMsMean: number; failed: number };
  /**
   * Requests of the dispatchers and the outcomes route while the jobs ran, by operation, DynamoDB's
   * per second and per job delivered (the acquire, the slot's take, refused asks, the renewal
   * before the send, the release, and the dispatchers' polling of their shards meanwhile).
   */
  requestsWhileRunning: { byOperation: Record<string, number>; dynamodbPerSec: number; dynamodbPerJob: number };
  /** CPU used while the jobs ran, as a share of one core: dynalite, fauxqs, this process (dispatchers, route, worker). */
  cpuShareWhileRunning: { dynalite?: number; fauxqs?: number; bench: number };
  /**
   * The same load on the simulated AWS deployment (bench/sim: one cell at its defaults, the real
   * dispatch code against the simulated table's key items, the worker's receive and report as
   * bench/sim/run.ts `AWS_WORKER`), where the emulators' requests per second do not bind; and the
   * ratio a slot's hand-over allows at best (its medians: the report, the next take, the renewal,
   * the send and the receive, with no wait for the ask).
   */
  simulatedAws?: KeyedFigures & { lost: number; early: number; duplicates: number; handoffFloorMs: number; ratioBound: number };
}

/** One delivery of a job to the worker, times in ms since the epoch. */
interface Run {
  readonly jobId: string;
  readonly key: string | undefined;
  readonly runAt: number;
  readonly start: number;
  end?: number;
  /** When the outcome report was answered. */
  reportedAt?: number;
}

export async function runFlowControl(
  em: Emulators & { pids?: { dynamo?: number; sqs?: number } },
  shape: FlowControlShape,
): Promise<FlowControlResult> {
  const sys = await createSystem(em, { tenants: ['demo'] });
  // The dispatchers' and the route's requests (the worker's receives and deletes are a consumer's).
  const counter = new RequestCounter();
  const dispatchWiring = await sys.another(em.newClients(counter));
  const slots = new CountedSlots(dispatchWiring.dispatch.keySlots!);
  const reportWiring = await sys.another({ dynamo: em.newClients(counter).dynamo });
  const { sink, calls } = inProcessOutcomes(outcomesHandler(reportWiring));
  const worker = new KeyedWorker(em.newClients(new RequestCounter()).sqs, sys.tenants.demo!.url, 'demo', {
    workMs: shape.workMs,
    pollers: Math.ceil((shape.keys * shape.limit) / 10),
    reporter: new OutcomeReporter(sink),
  });
  const ingest = sys.startIngest();
  const dispatch = runAllGroups({ ...dispatchWiring.dispatch, keySlots: slots });
  try {
    const submitStart = Date.now();
    // Past the lookahead once the submits and their ingest are done (about 3 ms a job here).
    const dueMs = submitStart + Math.max(5_000, shape.jobs * 4) + sys.w.dispatch.settings.lookaheadMs + 1_000;
    const runAt = new Date(dueMs).toISOString();
    progress(
      `flowControl: submitting ${shape.jobs.toLocaleString('en-US')} jobs over ${shape.keys} keys (limit ${shape.limit}) due at ${runAt}`,
    );
    const submitted = await submitJobs(
      sys,
      'demo',
      Array.from({ length: shape.jobs }, (_, i) => ({
        payload: { i },
        runAt,
        concurrencyKey: `k-${i % shape.keys}`,
        concurrencyLimit: shape.limit,
      })),
    );
    await waitForEmptyQueue(em.sqs, sys.inboundUrl, Math.max(60_000, dueMs - Date.now()));
    const storedSeconds = Math.round((Date.now() - submitStart) / 100) / 10;
    if (Date.now() + 1_000 > dueMs)
      throw new Error(`the submits and their ingest took ${storedSeconds} s: too long for jobs due at ${runAt}`);
    progress(`flowControl: submitted and stored in ${storedSeconds} s; the jobs fall due in ${((dueMs - Date.now()) / 1000).toFixed(1)} s`);

    await sleep(dueMs - Date.now());
    const before = { requests: counter.snapshot(), cpu: cpuNow(em.pids) };
    const idealJobsPerSec = (shape.keys * shape.limit) / (shape.workMs / 1000);
    // Lost means never delivered, not slow: 40 ms a job at the least (25 jobs/s; a 2-core machine
    // whose emulators are the binding limit carries about 60 keyed jobs/s, see docs/performance.md).
    const timeoutMs = Math.max(30_000, (20 * 1000 * shape.jobs) / idealJobsPerSec, 40 * shape.jobs);
    await worker.waitForSettled(submitted.length, timeoutMs);
    const after = { requests: counter.snapshot(), cpu: cpuNow(em.pids) };
    await sleep(500); // a duplicate delivered late is counted
    const received = new Set(worker.runs.map((r) => r.jobId));
    const lostJobs = await Promise.all(
      submitted
        .map((s, i) => ({ jobId: s.jobId, key: `k-${i % shape.keys}` }))
        .filter((j) => !received.has(j.jobId))
        .slice(0, 10)
        .map(async (j) => ({ ...j, state: await stateOf(sys, j.jobId), holdsSlot: await slots.holds('demo', j.key, j.jobId) })),
    );
    return summarizeRuns(shape, worker.runs, {
      lostJobs,
      timeoutSeconds: Math.round(timeoutMs / 1000),
      jobIds: submitted.map((s) => s.jobId),
      dueMs,
      storedSeconds,
      slots,
      reports: {
        requests: calls.reports,
        handlerMsMean: calls.reports ? Math.round(calls.handlerMs / calls.reports) : 0,
        failed: worker.failedReports,
      },
      requests: diff(after.requests, before.requests),
      cpu: { before: before.cpu, after: after.cpu },
    });
  } finally {
    await worker.stop();
    await dispatch.stop();
    await ingest.stop();
  }
}

/** A job's state as `GET .../jobs/{id}` answers it (its status code when not 200). */
async function stateOf(sys: TestSystem, jobId: string): Promise<string> {
  const res = await statusHandler(sys.w)(httpEvent('GET', `/v1/tenants/demo/jobs/${jobId}`, { pathParameters: { tenant: 'demo', jobId } }));
  return res.statusCode === 200 ? String((JSON.parse(res.body) as { state?: unknown }).state) : `HTTP ${res.statusCode}`;
}

interface RunContext {
  readonly lostJobs: FlowControlResult['lostJobs'];
  readonly timeoutSeconds: number;
  readonly jobIds: readonly string[];
  readonly dueMs: number;
  readonly storedSeconds: number;
  readonly slots: CountedSlots;
  readonly reports: FlowControlResult['reports'];
  readonly requests: Record<string, number>;
  readonly cpu: { before: CpuSample; after: CpuSample };
}

/** The phase's figures from the worker's runs and what the dispatchers and route did. */
function summarizeRuns(shape: FlowControlShape, runs: readonly Run[], ctx: RunContext): FlowControlResult {
  const delivered = new Set(runs.map((r) => r.jobId));
  const lastEnd = Math.max(ctx.dueMs, ...runs.map((r) => r.end ?? 0));
  const drainMs = Math.max(1, lastEnd - ctx.dueMs);
  const done = new Set(runs.filter((r) => r.end !== undefined).map((r) => r.jobId)).size;
  const idealJobsPerSec = (shape.keys * shape.limit) / (shape.workMs / 1000);
  const jobsPerSec = done / (drainMs / 1000);
  const dynamoRequests = Object.entries(ctx.requests)
    .filter(([op]) => op.startsWith('DynamoDB.'))
    .reduce((a, [, n]) => a + n, 0);
  const share = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : +((b - a) / 1000 / drainMs).toFixed(2));
  const { cpu } = ctx;
  return {
    keys: shape.keys,
    keyLimit: shape.limit,
    jobs: ctx.jobIds.length,
    workMs: shape.workMs,
    maxConcurrentPerKey: Math.max(0, ...[...new Set(runs.map((r) => r.key))].map((k) => maxOverlap(runs.filter((r) => r.key === k)))),
    delivered: delivered.size,
    duplicates: runs.length - delivered.size,
    early: runs.filter((r) => r.start < r.runAt).length,
    lost: ctx.jobIds.filter((id) => !delivered.has(id)).length,
    lostJobs: ctx.lostJobs,
    timeoutSeconds: ctx.timeoutSeconds,
    throughputRatio: +(jobsPerSec / idealJobsPerSec).toFixed(2),
    jobsPerSec: Math.round(jobsPerSec),
    idealJobsPerSec: Math.round(idealJobsPerSec),
    drainSeconds: +(drainMs / 1000).toFixed(2),
    storedSeconds: ctx.storedSeconds,
    firstStartMs: runs.length ? Math.min(...runs.map((r) => r.start)) - ctx.dueMs : 0,
    handoff: handoffs(runs, ctx.slots.takenAt, shape.limit),
    takes: {
      granted: ctx.slots.takenAt.size,
      refused: ctx.slots.refused,
      evicted: ctx.slots.evicted,
      meanMs: ctx.slots.takes ? +(ctx.slots.takeMs / ctx.slots.takes).toFixed(1) : 0,
    },
    reports: ctx.reports,
    requestsWhileRunning: {
      byOperation: ctx.requests,
      dynamodbPerSec: Math.round(dynamoRequests / (drainMs / 1000)),
      dynamodbPerJob: +(dynamoRequests / Math.max(1, delivered.size)).toFixed(2),
    },
    cpuShareWhileRunning: {
      dynalite: share(cpu.before.dynalite, cpu.after.dynalite),
      fauxqs: share(cpu.before.fauxqs, cpu.after.fauxqs),
      bench: share(cpu.before.bench, cpu.after.bench)!,
    },
  };
}

/** The most runs that overlapped at any moment (a run without an end runs on). */
export function maxOverlap(runs: readonly Pick<Run, 'start' | 'end'>[]): number {
  const events = runs
    .flatMap((r): [number, number][] => [
      [r.start, 1],
      [r.end ?? Infinity, -1],
    ])
    // An end before a start at the same millisecond: back to back is not overlap.
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let max = 0;
  for (const [, d] of events) max = Math.max(max, (now += d));
  return max;
}

/**
 * Where a slot's time goes between two jobs of a key: the n-th report answered of a key is paired
 * with its (limit + n)-th take (the take a freed slot allowed: no key holds more than `limit`).
 */
export function handoffs(runs: readonly Run[], takenAt: ReadonlyMap<string, number>, limit: number): FlowControlResult['handoff'] {
  const report: number[] = [];
  const wait: number[] = [];
  const delivery: number[] = [];
  const byKey = new Map<string | undefined, Run[]>();
  for (const r of runs) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
  for (const keyRuns of byKey.values()) {
    const answered = keyRuns.flatMap((r) => (r.end !== undefined && r.reportedAt !== undefined ? [r] : []));
    for (const r of answered) report.push(r.reportedAt! - r.end!);
    const releases = answered.map((r) => r.reportedAt!).sort((a, b) => a - b);
    const takes = keyRuns.flatMap((r) => (takenAt.has(r.jobId) ? [takenAt.get(r.jobId)!] : [])).sort((a, b) => a - b);
    takes.slice(limit).forEach((t, i) => {
      if (releases[i] !== undefined) wait.push(t - releases[i]);
    });
    for (const r of keyRuns) if (takenAt.has(r.jobId)) delivery.push(r.start - takenAt.get(r.jobId)!);
  }
  const of = (xs: number[]) => {
    const s = summarize(xs);
    return { p50Ms: s.p50Ms, p95Ms: s.p95Ms, meanMs: s.meanMs };
  };
  return { report: of(report), wait: of(wait), delivery: of(delivery) };
}

/** The dispatchers' key slots, counting their takes (granted, refused) and timing them. */
class CountedSlots implements KeySlots {
  /** When each job's first take succeeded. */
  readonly takenAt = new Map<string, number>();
  takes = 0;
  takeMs = 0;
  refused = 0;
  evicted = 0;

  constructor(private readonly inner: KeySlots) {}

  setLimit(tenant: string, key: string, limit: number, atMs: number): Promise<void> {
    return this.inner.setLimit(tenant, key, limit, atMs);
  }

  async take(tenant: string, key: string, jobId: string, untilMs: number, limit: number, nowMs: number): Promise<true | KeyFull> {
    const t0 = performance.now();
    const got = await this.inner.take(tenant, key, jobId, untilMs, limit, nowMs);
    this.takes++;
    this.takeMs += performance.now() - t0;
    if (got !== true) this.refused++;
    else if (!this.takenAt.has(jobId)) this.takenAt.set(jobId, Date.now());
    return got;
  }

  async evict(tenant: string, key: string, holders: ReadonlyMap<string, number>): Promise<number> {
    const n = await this.inner.evict(tenant, key, holders);
    this.evicted += n;
    return n;
  }

  release(tenant: string, key: string, jobId: string): Promise<void> {
    return this.inner.release(tenant, key, jobId);
  }

  extend(tenant: string, key: string, jobId: string, untilMs: number): Promise<boolean> {
    return this.inner.extend(tenant, key, jobId, untilMs);
  }

  holds(tenant: string, key: string, jobId: string): Promise<boolean> {
    return this.inner.holds(tenant, key, jobId);
  }
}

/**
 * A worker with no concurrency cap: `pollers` receive loops; each message received runs at once
 * for `workMs`, then its message is deleted and, for a keyed job, its outcome reported with its key
 * as the SDK's Worker does (`reportNow`, up to 5 tries). Records every run.
 */
class KeyedWorker {
  readonly runs: Run[] = [];
  failedReports = 0;
  /** Jobs whose run ended and whose report was answered or given up on. */
  readonly #settled = new Set<string>();
  readonly #abort = new AbortController();
  readonly #running = new Set<Promise<void>>();
  readonly #loops: Promise<void>[];

  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
    private readonly tenant: string,
    private readonly opts: { workMs: number; pollers: number; reporter: OutcomeReporter },
  ) {
    this.#loops = Array.from({ length: opts.pollers }, () => this.#pollLoop());
  }

  /** Waits until `n` jobs have run and had their outcome answered or given up on (or the timeout). */
  async waitForSettled(n: number, timeoutMs: number): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.#settled.size < n && Date.now() < until) await sleep(50);
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.all(this.#loops);
    await Promise.all([...this.#running]);
  }

  async #pollLoop(): Promise<void> {
    while (!this.#abort.signal.aborted) {
      const res = await this.sqs
        .send(
          new ReceiveMessageCommand({
            QueueUrl: this.queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['ApproximateReceiveCount'],
          }),
          { abortSignal: this.#abort.signal },
        )
        .catch(async () => {
          if (!this.#abort.signal.aborted) await sleep(100);
          return { Messages: [] as Message[] };
        });
      const receivedAt = Date.now();
      for (const m of res.Messages ?? []) {
        const p = this.#process(m, receivedAt).catch(() => undefined);
        this.#running.add(p);
        void p.finally(() => this.#running.delete(p));
      }
    }
  }

  async #process(m: Message, receivedAt: number): Promise<void> {
    const body = JSON.parse(m.Body ?? '{}') as { jobId: string; runAt: string };
    const key = m.MessageAttributes?.concurrencyKey?.StringValue;
    const run: Run = { jobId: body.jobId, key, runAt: Date.parse(body.runAt), start: receivedAt };
    this.runs.push(run);
    await sleep(this.opts.workMs);
    run.end = Date.now();
    await this.sqs.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: m.ReceiptHandle! }));
    if (key === undefined) return void this.#settled.add(body.jobId);
    const attempts = Number(m.Attributes?.ApproximateReceiveCount ?? 1);
    const answer = await this.opts.reporter.reportNow(
      this.tenant,
      outcomeReport(body.jobId, 'SUCCEEDED', { attempts, receivedAt, endedAt: run.end }, { concurrencyKey: key }),
      { maxAttempts: 5 },
    );
    if (answer.answered) run.reportedAt = Date.now();
    else this.failedReports++;
    this.#settled.add(body.jobId);
  }
}

interface CpuSample {
  dynalite?: number;
  fauxqs?: number;
  bench: number;
}

function cpuNow(pids: { dynamo?: number; sqs?: number } | undefined): CpuSample {
  const own = process.cpuUsage();
  return { dynalite: processCpuUs(pids?.dynamo), fauxqs: processCpuUs(pids?.sqs), bench: own.user + own.system };
}

function diff(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}
