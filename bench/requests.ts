/**
 * Phase 3: AWS requests per job, by service and operation, counted by the SDK middleware on
 * compute's own clients (submit, the inbound event source with ingest, dispatch), as
 * test/integration/requests-per-job.test.ts counts them, and turned into billing units by
 * {@link BillingMeter}.
 *
 * Two deployments side by side (each its own table, queues, clients and counters): one takes
 * batch submits of 100, the other single POSTs, both through the submit handler at 100 jobs/s,
 * each job due 6 to 7 s after its submission at a random millisecond (100 jobs/s coming due).
 * A third deployment gets no jobs: its dispatch loop is the fixed polling of an idle
 * deployment. What the dispatch does whatever the load (due-range queries, group-lease writes)
 * and the event source's empty long polls are polling, reported apart from per-job figures.
 */
import { setMaxListeners } from 'node:events';
import type { SQSEvent } from 'aws-lambda';
import { RequestCounter } from '../adapters/requestCounter.js';
import type { DispatchStepResult } from '../core/dispatch/loop.js';
import { parseInboundBody } from '../core/model/messages.js';
import type { JobStore } from '../core/model/ports.js';
import { ingestHandler, submitHandler } from '../lambdas/runtime/handlers.js';
import { startSqsEventSource } from '../local/sqsEventSource.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, httpEvent } from '../test/support/system.js';
import { costPerMillion, type PerJobUsage } from './cost.js';
import { BillingMeter, consumeQueue, progress, realisticPayload, runTicks, sleep, steadyLoad, summarize } from './support.js';

/** Memory of the submit and ingest functions (lib/dyneinScheduler.ts's default). */
const HANDLER_MEMORY_GB = 256 / 1024;
const API_UNIT_BYTES = 512 * 1024;

export interface ServiceFigures {
  dynamodbRead: number;
  dynamodbWrite: number;
  sqs: number;
  lambda: number;
  apiGateway: number;
}

export interface ModeResult {
  mode: 'batch' | 'single';
  jobs: number;
  delivered: number;
  /** Requests per job by service, polling excluded. */
  requestsPerJob: ServiceFigures;
  /** The same with the polling in this window included (due-range queries, lease writes, empty receives). */
  requestsPerJobInclPolling: ServiceFigures;
  /** Items written per job (put, acquire, delivered marker: markers in batches of 25 are one write each; late-lane pointers and their deletes too). */
  itemWritesPerJob: number;
  /** Late-lane pointers ingest wrote per job (jobs ingested too close to their due time; each costs 2 more writes). */
  latePointersPerJob: number;
  /** Requests per job by `Service.Operation`, everything counted. */
  byOperation: Record<string, number>;
  /** Billing units per job, polling excluded: what the cost is computed from. */
  usagePerJob: PerJobUsage;
  lambda: {
    submitInvocations: number;
    submitMs: number;
    ingestInvocations: number;
    ingestMs: number;
    ingestRecordsPerInvocation: number;
    ingestJobsPerInvocation: number;
  };
  polling: { queries: number; leaseWrites: number; emptyReceives: number; windowMs: number };
  /** Dispatchers each tick execution planned (core/dispatch/plan.ts), in order. */
  dispatchersPlanned: number[];
}

export interface IdlePolling {
  windowMs: number;
  steps: number;
  /** Median wall time of an idle dispatch step (lease write and one query per shard of its group). */
  stepMs: number;
  queriesPerStep: number;
  leaseWritesPerStep: number;
  /** Queries per second of an idle deployment. */
  queriesPerSecond: number;
}

export interface RequestsResult {
  batch: ModeResult;
  single: ModeResult;
  idle: IdlePolling;
  payloadBytes: number;
}

interface Deployment {
  counter: RequestCounter;
  meter: BillingMeter;
  run: Promise<ModeResult>;
}

async function deploy(em: Emulators, mode: 'batch' | 'single', jobs: number, payloads: string[]): Promise<Deployment> {
  const sys = await createSystem(em, { tenants: ['demo'] });
  const counter = new RequestCounter();
  const meter = new BillingMeter();
  const clients = em.newClients(counter);
  meter.attachDynamo(clients.dynamo);
  meter.attachSqs(clients.sqs);
  const w = await sys.another(clients);
  let leaseWrites = 0;
  let queries = 0;
  let recorded = 0;
  let pointersDeleted = 0;
  let latePointers = 0;
  const store = Object.create(w.store) as JobStore & typeof w.store;
  store.takeGroupLease = (...a) => (leaseWrites++, w.store.takeGroupLease(...a));
  store.readDue = (...a) => (queries++, w.store.readDue(...a));
  store.readLate = (...a) => (queries++, w.store.readLate(...a));
  store.markDelivered = async (rows, at) => {
    const left = await w.store.markDelivered(rows, at);
    recorded += rows.length - left.length;
    return left;
  };
  store.deleteLatePointers = async (keys) => {
    const left = await w.store.deleteLatePointers(keys);
    pointersDeleted += keys.length - left.length;
    return left;
  };
  // Ingest's late-lane pointers (jobs ingested too close to their due time), counted per job.
  const ingestStore = Object.create(w.store) as JobStore & typeof w.store;
  ingestStore.putLatePointer = (k) => (latePointers++, w.store.putLatePointer(k));
  const submitMs: number[] = [];
  const ingestMs: number[] = [];
  let ingestRecords = 0;
  let ingestJobs = 0;
  let emptyReceives = 0;
  const submit = submitHandler(w);
  const ingest = ingestHandler({ ...w, ingest: { ...w.ingest, store: ingestStore } });
  // Empty long polls are the event source's fixed cost: count them apart.
  clients.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const res = await next(args);
      if (context.commandName === 'ReceiveMessageCommand' && ((res.output as { Messages?: unknown[] }).Messages ?? []).length === 0)
        emptyReceives++;
      return res;
    },
    { step: 'initialize', name: 'benchEmptyReceives' },
  );
  const eventSource = startSqsEventSource({
    sqs: clients.sqs,
    queueUrl: sys.inboundUrl,
    waitTimeSeconds: 1,
    pollers: 2,
    handler: async (e: SQSEvent) => {
      const t0 = performance.now();
      try {
        return await ingest(e);
      } finally {
        ingestMs.push(performance.now() - t0);
        ingestRecords += e.Records.length;
        for (const r of e.Records) ingestJobs += parseInboundBody(r.body)?.length ?? 0;
      }
    },
  });
  const consumer = consumeQueue(em.sqs, sys.tenants.demo!.url, { pollers: 2 });
  const abort = new AbortController();
  setMaxListeners(100, abort.signal);
  const start = Date.now();
  const deps = { ...w.dispatch, store };
  // The tick as deployed: each execution plans its dispatchers from the rows coming due.
  const dispatchers: number[] = [];
  const ticks = runTicks(deps, {
    name: `bench-${mode}-${start}`,
    signal: abort.signal,
    onPlan: (p) => dispatchers.push(p.dispatchers.length),
  });

  const callSubmit = async (path: string, body: string) => {
    const t0 = performance.now();
    const res = await submit(
      httpEvent('POST', path, {
        body,
        pathParameters: { tenant: 'demo' },
        routeKey: path.endsWith('/batch') ? 'POST /v1/tenants/{tenant}/jobs/batch' : 'POST /v1/tenants/{tenant}/jobs',
      }),
    );
    submitMs.push(performance.now() - t0);
    if (res.statusCode !== 200 && res.statusCode !== 201) throw new Error(`submit answered ${res.statusCode}: ${res.body}`);
    return { res, apiUnits: Math.max(1, Math.ceil(Buffer.byteLength(body) / API_UNIT_BYTES)) };
  };
  const dueOf = () => Date.now() + 6_000 + Math.floor(Math.random() * 1_000);

  const run = (async (): Promise<ModeResult> => {
    let apiUnits = 0;
    let accepted = 0;
    if (mode === 'batch') {
      // One request of 100 jobs a second: 100 jobs/s, like the single POSTs.
      await steadyLoad(
        { rate: 1, durationMs: (jobs / 100) * 1000, minAheadMs: 0, maxAheadMs: 1 },
        async (i) => {
          const batch = Array.from(
            { length: 100 },
            (_, k) => `{"payload":${payloads[(i * 100 + k) % payloads.length]},"runAt":"${new Date(dueOf()).toISOString()}"}`,
          );
          const { res, apiUnits: u } = await callSubmit('/v1/tenants/demo/jobs/batch', `{"jobs":[${batch.join(',')}]}`);
          apiUnits += u;
          accepted += (JSON.parse(res.body!) as { results: { jobId?: string }[] }).results.filter((r) => r.jobId).length;
        },
        `requests/${mode}`,
      );
    } else {
      await steadyLoad(
        { rate: 100, durationMs: (jobs / 100) * 1000, minAheadMs: 0, maxAheadMs: 1 },
        async (i) => {
          const { apiUnits: u } = await callSubmit(
            '/v1/tenants/demo/jobs',
            `{"payload":${payloads[i % payloads.length]},"runAt":"${new Date(dueOf()).toISOString()}"}`,
          );
          apiUnits += u;
          accepted++;
        },
        `requests/${mode}`,
      );
    }
    await consumer.waitFor(accepted, 30_000);
    // Until the last delivered markers are written.
    const until = Date.now() + 10_000;
    while (recorded < accepted && Date.now() < until) await sleep(20);
    const windowMs = Date.now() - start;
    abort.abort();
    await ticks;
    await eventSource.stop();
    await consumer.stop();

    const n = accepted;
    const c = counter.snapshot();
    const billing = meter.snapshot();
    const get = (k: string) => c[k] ?? 0;
    const sum = (prefix: string, ops: string[]) => ops.reduce((a, op) => a + get(`${prefix}.${op}`), 0);
    const ddbReadsAll = sum('DynamoDB', ['GetItem', 'Query', 'Scan', 'BatchGetItem']);
    const ddbWritesAll = sum('DynamoDB', ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);
    const sqsAll = Object.entries(c)
      .filter(([k]) => k.startsWith('SQS.'))
      .reduce((a, [, v]) => a + v, 0);
    const submitInvocations = submitMs.length;
    const ingestInvocations = ingestMs.length;
    const per = (x: number) => +(x / n).toFixed(4);
    const units = (k: string) => billing[k]?.units ?? 0;
    const sqsUnitsAll = Object.entries(billing)
      .filter(([k]) => k.startsWith('SQS.'))
      .reduce((a, [, v]) => a + v.units, 0);
    const wruAll = ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'].reduce((a, op) => a + units(`DynamoDB.${op}`), 0);
    const rruPerJob = units('DynamoDB.GetItem');
    const lambdaGbSeconds =
      ((submitMs.reduce((a, b) => a + Math.ceil(b), 0) + ingestMs.reduce((a, b) => a + Math.ceil(b), 0)) / 1000) * HANDLER_MEMORY_GB;
    const usagePerJob: PerJobUsage = {
      // Group-lease writes are small items (1 WRU each) and polling.
      dynamodbWru: per(wruAll - leaseWrites),
      dynamodbRru: per(rruPerJob),
      sqsRequests: per(sqsUnitsAll - emptyReceives),
      lambdaInvocations: per(submitInvocations + ingestInvocations),
      lambdaGbSeconds: +(lambdaGbSeconds / n).toFixed(7),
      apiRequests: per(apiUnits),
    };
    const inclPolling: ServiceFigures = {
      dynamodbRead: per(ddbReadsAll),
      dynamodbWrite: per(ddbWritesAll),
      sqs: per(sqsAll),
      lambda: per(submitInvocations + ingestInvocations),
      apiGateway: per(submitInvocations),
    };
    return {
      mode,
      jobs: n,
      delivered: new Set(consumer.received.map((r) => r.jobId)).size,
      requestsPerJob: {
        dynamodbRead: per(ddbReadsAll - get('DynamoDB.Query')),
        dynamodbWrite: per(ddbWritesAll - leaseWrites),
        sqs: per(sqsAll - emptyReceives),
        lambda: per(submitInvocations + ingestInvocations),
        apiGateway: per(submitInvocations),
      },
      requestsPerJobInclPolling: inclPolling,
      itemWritesPerJob: per(get('DynamoDB.PutItem') + get('DynamoDB.UpdateItem') - leaseWrites + recorded + pointersDeleted),
      latePointersPerJob: per(latePointers),
      byOperation: Object.fromEntries(Object.entries(c).map(([k, v]) => [k, per(v)])),
      usagePerJob,
      lambda: {
        submitInvocations,
        submitMs: +summarize(submitMs).meanMs.toFixed(1),
        ingestInvocations,
        ingestMs: +summarize(ingestMs).meanMs.toFixed(1),
        ingestRecordsPerInvocation: +(ingestRecords / Math.max(1, ingestInvocations)).toFixed(2),
        ingestJobsPerInvocation: +(ingestJobs / Math.max(1, ingestInvocations)).toFixed(1),
      },
      polling: { queries, leaseWrites, emptyReceives, windowMs },
      dispatchersPlanned: dispatchers,
    };
  })();
  return { counter, meter, run };
}

async function idlePolling(em: Emulators, windowMs: number): Promise<IdlePolling> {
  const sys = await createSystem(em, { tenants: ['demo'] });
  const counter = new RequestCounter();
  const w = await sys.another(em.newClients(counter));
  const steps: DispatchStepResult[] = [];
  const abort = new AbortController();
  setMaxListeners(100, abort.signal);
  const start = Date.now();
  const ticks = runTicks(w.dispatch, { name: `bench-idle-${start}`, signal: abort.signal, onStep: (r) => steps.push(r) });
  await sleep(windowMs);
  abort.abort();
  await ticks;
  const elapsed = Date.now() - start;
  const c = counter.snapshot();
  const done = steps.filter((s) => s.idle);
  return {
    windowMs: elapsed,
    steps: done.length,
    stepMs: summarize(done.map((s) => s.durationMs)).p50Ms,
    queriesPerStep: +((c['DynamoDB.Query'] ?? 0) / Math.max(1, steps.length)).toFixed(2),
    leaseWritesPerStep: +((c['DynamoDB.UpdateItem'] ?? 0) / Math.max(1, steps.length)).toFixed(2),
    queriesPerSecond: +((c['DynamoDB.Query'] ?? 0) / (elapsed / 1000)).toFixed(2),
  };
}

export async function runRequests(em: Emulators, opts: { jobs: number }): Promise<RequestsResult> {
  const payloads = Array.from({ length: 100 }, (_, i) => JSON.stringify(realisticPayload(i)));
  progress(
    `requests: ${opts.jobs} jobs batch-submitted in 100s and ${opts.jobs} single POSTs, side by side, at 100 jobs/s each; an idle deployment beside them`,
  );
  const [batch, single] = await Promise.all([deploy(em, 'batch', opts.jobs, payloads), deploy(em, 'single', opts.jobs, payloads)]);
  const windowMs = (opts.jobs / 100) * 1000 + 8_000;
  const [b, s, idle] = await Promise.all([batch.run, single.run, idlePolling(em, windowMs)]);
  for (const r of [b, s]) {
    progress(
      `requests/${r.mode}: per job DynamoDB ${r.requestsPerJob.dynamodbWrite} write + ${r.requestsPerJob.dynamodbRead} read requests (${r.itemWritesPerJob} item writes, ${r.usagePerJob.dynamodbWru} WRU), ` +
        `SQS ${r.requestsPerJob.sqs}, Lambda ${r.requestsPerJob.lambda}, API ${r.requestsPerJob.apiGateway}; $${costPerMillion(r.usagePerJob).totalUsd} per million`,
    );
  }
  progress(
    `requests: dispatchers planned per tick execution: batch ${b.dispatchersPlanned.join(', ')}; single ${s.dispatchersPlanned.join(', ')}`,
  );
  progress(
    `requests/idle: ${idle.steps} idle steps in ${(idle.windowMs / 1000).toFixed(1)} s, ${idle.queriesPerStep} queries and ${idle.leaseWritesPerStep} lease writes each, ${idle.stepMs} ms per step`,
  );
  return { batch: b, single: s, idle, payloadBytes: payloads[0]!.length };
}
