/**
 * Phase 16: workflows (docs/workflows.md). Three shapes run one after the other on the emulators,
 * with ingest and dispatch running and the client library's Worker consuming and reporting each
 * outcome through the outcomes handler (in-process, as the workflows function runs it): a fan-out
 * of one job to `fan` children, a fan-in of `fan` parents to one child, and a chain of `depth`
 * jobs. Every job is due at once once its parents succeeded, so a child goes straight to its
 * queue from the report that ends its last parent.
 *
 * Child latency, as the issue defines it: the child's send (SQS's `SentTimestamp` of its message,
 * read from the Worker's receives) minus the moment its last parent's report reached the handler;
 * its receive by the Worker minus that moment is kept beside it (`childReceive*`: it adds the
 * Worker's own pace, which its reports set). Early: a child sent or received before that moment;
 * lost: a job never received; duplicates: receives past one.
 * Per job, every request the system makes for these jobs, priced by the cost model: the submit's
 * and the reports' DynamoDB and SQS calls, API requests and invocations, and the dispatcher's
 * writes and sends, should a job take the table. A job here is due at once, so it goes straight to
 * its queue (a root from the submit, a child from the report that ended its last parent) and never
 * takes the one-off path (inbound queue, ingest, the table's put, acquire and delete): this is the
 * whole cost of such a job, not an increment (a job due later takes that path too: bench/run.ts
 * prices it apart). Neither the dispatcher's polling reads (the tick's fixed cost) nor the Worker's
 * receives and deletes (a consumer's, left out of ours too) are counted.
 */
import { BatchGetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type ReceiveMessageCommandOutput, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { RequestCounter } from '../adapters/requestCounter.js';
import { Worker } from '../client/worker.js';
import { waitingPartition } from '../adapters/dynamoWaitingChildren.js';
import { type JobIdCodec, sortKey } from '../core/model/index.js';
import { keyOfId } from '../core/workflows/index.js';
import { outcomesHandler, workflowsHandler } from '../lambdas/runtime/handlers.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, httpEvent, runAllGroups } from '../test/support/system.js';
import { costPerMillion, type PerJobUsage } from './cost.js';
import { inProcessOutcomes, progress, sleep, summarize } from './support.js';

/** The workflows function's memory (lib/dyneinScheduler.ts's default). */
const HANDLER_MEMORY_GB = 256 / 1024;

export interface WorkflowsShape {
  /** Children of the fan-out, parents of the fan-in. */
  readonly fan: number;
  /** Jobs of the chain. */
  readonly depth: number;
}

export interface WorkflowsResult {
  jobs: number;
  shapes: { fanOut: number; fanIn: number; chain: number };
  childLatencyP50Ms: number;
  childLatencyP95Ms: number;
  childLatencyP99Ms: number;
  childLatencyMaxMs: number;
  /** The child's receive by the Worker minus its last parent's report, p50 and p95. */
  childReceiveP50Ms: number;
  childReceiveP95Ms: number;
  /**
   * The emulators' floor for the fan-out, with nothing else running: reading its children's specs
   * (a hundred a request, ten requests at once) and sending that many messages (ten a request),
   * no state written. The time from the start to each send, p50 and p95.
   */
  fanOutFloor: { p50Ms: number; p95Ms: number };
  /** Children measured (every job with parents). */
  children: number;
  /** Child latency of each shape (fanOut, fanIn, chain), ms. */
  byShape: Record<string, { p50Ms: number; p95Ms: number }>;
  early: number;
  lost: number;
  duplicates: number;
  /** Per job: everything the system did for it (edges, outcome reports and sends included). */
  usagePerJob: PerJobUsage;
  requestsPerJob: Record<string, number>;
  /** {@link usagePerJob} priced: a job due at once run inside a workflow, per million. */
  costPerMillionUsd: number;
}

interface Spec {
  key: string;
  payload: unknown;
  delaySeconds?: number;
  after?: string[];
}

export async function runWorkflows(em: Emulators, shape: WorkflowsShape): Promise<WorkflowsResult> {
  const sys = await createSystem(em, { tenants: ['demo'], settings: { lookaheadMs: 2_000 } });
  const counter = new RequestCounter();
  const items = { written: 0, read: 0 };
  const clients = em.newClients(counter);
  countItems(clients.dynamo, items, { reads: true });
  const handlerWiring = await sys.another({ dynamo: clients.dynamo, sqs: clients.sqs });
  // The dispatcher's writes and sends are counted too; its polling reads are not (the tick's fixed cost).
  const dispatchCounter = new RequestCounter();
  const dispatchClients = em.newClients(dispatchCounter);
  countItems(dispatchClients.dynamo, items, { reads: false });
  const dispatchWiring = await sys.another({ dynamo: dispatchClients.dynamo, sqs: dispatchClients.sqs });
  const submitHandle = workflowsHandler(handlerWiring);
  const reportHandle = outcomesHandler(handlerWiring);
  // The submits' invocations and time; the reports' are counted by the sink.
  let submitMs = 0;
  let submits = 0;
  const reportedAt = new Map<string, number>();
  const { sink, calls } = inProcessOutcomes(reportHandle, (outcomes) => {
    const at = Date.now();
    for (const o of outcomes) if (o.outcome === 'SUCCEEDED' && !reportedAt.has(o.jobId)) reportedAt.set(o.jobId, at);
  });
  const received = new Map<string, number[]>();
  const workerSqs = em.newClients(new RequestCounter()).sqs;
  const sentAt = recordSentTimestamps(workerSqs);
  const worker = new Worker({
    queueUrl: sys.tenants.demo!.url,
    sqs: workerSqs,
    concurrency: 50,
    waitTimeSeconds: 1,
    handleSignals: false,
    client: sink,
    handler: (job) => {
      const at = Date.now();
      received.set(job.jobId, [...(received.get(job.jobId) ?? []), at]);
      return { done: job.jobId.slice(-6) };
    },
  });
  const running = worker.run();
  const ingest = sys.startIngest();
  const dispatch = runAllGroups(dispatchWiring.dispatch);
  const root = (key: string): Spec => ({ key, payload: { key }, delaySeconds: 0 });
  const shapes: Record<'fanOut' | 'fanIn' | 'chain', Spec[]> = {
    fanOut: [root('root'), ...Array.from({ length: shape.fan }, (_, i) => ({ key: `c${i}`, payload: { i }, after: ['root'] }))],
    fanIn: [
      ...Array.from({ length: shape.fan }, (_, i) => root(`p${i}`)),
      { key: 'sink', payload: null, after: Array.from({ length: shape.fan }, (_, i) => `p${i}`) },
    ],
    chain: Array.from({ length: shape.depth }, (_, i) => (i === 0 ? root('s0') : { key: `s${i}`, payload: { i }, after: [`s${i - 1}`] })),
  };
  const parentsOf = new Map<string, string[]>();
  const shapeOf = new Map<string, string>();
  const all: string[] = [];
  try {
    for (const [name, jobs] of Object.entries(shapes)) {
      const t0 = performance.now();
      const res = await submitHandle(
        httpEvent('POST', '/v1/tenants/demo/workflows', { body: JSON.stringify({ jobs }), pathParameters: { tenant: 'demo' } }),
      );
      submitMs += performance.now() - t0;
      submits++;
      if (res.statusCode !== 201) throw new Error(`workflow submit answered ${res.statusCode}: ${res.body}`);
      const ids = (JSON.parse(res.body) as { jobs: Record<string, string> }).jobs;
      for (const job of jobs) {
        all.push(ids[job.key]!);
        if (job.after)
          parentsOf.set(
            ids[job.key]!,
            job.after.map((k) => ids[k]!),
          );
        shapeOf.set(ids[job.key]!, name);
      }
      const until = Date.now() + 120_000;
      const mine = jobs.map((j) => ids[j.key]!);
      while (mine.some((id) => !received.has(id) || !reportedAt.has(id)) && Date.now() < until) await sleep(50);
      progress(`workflows: ${name} of ${jobs.length} jobs done`);
    }
    await sleep(1_500); // duplicates, if any, arrive
  } finally {
    await worker.stop();
    await running;
    await dispatch.stop();
    await ingest.stop();
  }
  const fanOutFloor = await floor(
    em,
    sys.tableName,
    sys.w.codec,
    [...parentsOf.keys()].filter((id) => shapeOf.get(id) === 'fanOut'),
  );
  const latencies: number[] = [];
  const receives: number[] = [];
  const byShape: Record<string, number[]> = {};
  let early = 0;
  for (const [child, parents] of parentsOf) {
    const got = received.get(child)?.[0];
    const sent = sentAt.get(child);
    const last = Math.max(...parents.map((p) => reportedAt.get(p) ?? Infinity));
    if (got === undefined || sent === undefined || !Number.isFinite(last)) continue;
    if (got < last || sent < last) early++;
    latencies.push(Math.max(0, sent - last));
    receives.push(Math.max(0, got - last));
    (byShape[shapeOf.get(child)!] ??= []).push(Math.max(0, sent - last));
  }
  const s = summarize(latencies);
  const r = summarize(receives);
  const jobs = all.length;
  const per = (n: number) => +(n / jobs).toFixed(4);
  const requests = counter.snapshot();
  const invocations = submits + calls.reports;
  const handlerMs = submitMs + calls.handlerMs;
  const usagePerJob: PerJobUsage = {
    dynamodbWru: per(items.written),
    dynamodbRru: per(items.read),
    sqsRequests: per(counter.total('SQS') + dispatchCounter.total('SQS')),
    lambdaInvocations: per(invocations),
    lambdaGbSeconds: +(((handlerMs / 1000) * HANDLER_MEMORY_GB) / jobs).toFixed(7),
    apiRequests: per(invocations),
  };
  return {
    jobs,
    shapes: { fanOut: shapes.fanOut.length, fanIn: shapes.fanIn.length, chain: shapes.chain.length },
    childLatencyP50Ms: s.p50Ms,
    childLatencyP95Ms: s.p95Ms,
    childLatencyP99Ms: s.p99Ms,
    childLatencyMaxMs: s.maxMs,
    childReceiveP50Ms: r.p50Ms,
    childReceiveP95Ms: r.p95Ms,
    fanOutFloor,
    children: latencies.length,
    byShape: Object.fromEntries(Object.entries(byShape).map(([k, xs]) => [k, { p50Ms: summarize(xs).p50Ms, p95Ms: summarize(xs).p95Ms }])),
    early,
    lost: all.filter((id) => !received.has(id)).length,
    duplicates: [...received.values()].reduce((n, at) => n + at.length - 1, 0),
    usagePerJob,
    requestsPerJob: Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, per(v)])),
    costPerMillionUsd: costPerMillion(usagePerJob).totalUsd,
  };
}

/**
 * What the emulators take, alone, to read the specs of `children` (kept on their waiting records:
 * small ones) a hundred a BatchGetItem, ten at once, and send as many messages to a scratch queue ten a batch as
 * each read returns: the floor under the fan-out's child latency here, whatever the design.
 */
async function floor(
  em: Emulators,
  table: string,
  codec: JobIdCodec,
  children: readonly string[],
): Promise<{ p50Ms: number; p95Ms: number }> {
  const { dynamo, sqs } = em.newClients(new RequestCounter());
  const queue = await em.createQueue('wf-floor');
  const keys = children.map((jobId) => {
    const key = keyOfId(codec, jobId);
    return { pk: { S: waitingPartition(key.shard) }, sk: { S: sortKey(key.dueMs, jobId) } };
  });
  const t0 = performance.now();
  const sentAt: number[] = [];
  const batches = Array.from({ length: Math.ceil(keys.length / 100) }, (_, b) => keys.slice(b * 100, b * 100 + 100));
  await Promise.all(
    batches.map(async (batch) => {
      const res = await dynamo.send(new BatchGetItemCommand({ RequestItems: { [table]: { Keys: batch, ConsistentRead: true } } }));
      const items = res.Responses?.[table] ?? [];
      if (items.length !== batch.length) throw new Error(`the floor read ${items.length} of ${batch.length} specs`);
      await Promise.all(
        Array.from({ length: Math.ceil(items.length / 10) }, async (_, s) => {
          const entries = items.slice(s * 10, s * 10 + 10).map((item, j) => ({ Id: String(j), MessageBody: item.payload?.S ?? '{}' }));
          await sqs.send(new SendMessageBatchCommand({ QueueUrl: queue.url, Entries: entries }));
          for (const _ of entries) sentAt.push(performance.now() - t0);
        }),
      );
    }),
  );
  const s = summarize(sentAt);
  return { p50Ms: Math.round(s.p50Ms), p95Ms: Math.round(s.p95Ms) };
}

/**
 * Each job's first `SentTimestamp` (epoch ms: when SQS took its message), from the messages a
 * client receives; the Worker asks for that attribute.
 */
function recordSentTimestamps(client: SQSClient): Map<string, number> {
  const sent = new Map<string, number>();
  const mw = (next: (args: unknown) => Promise<{ output: ReceiveMessageCommandOutput }>, context: { commandName?: string }) =>
    (async (args: unknown) => {
      const out = await next(args);
      if (context.commandName !== 'ReceiveMessageCommand') return out;
      for (const m of out.output.Messages ?? []) {
        const jobId = (JSON.parse(m.Body ?? '{}') as { jobId?: string }).jobId;
        const at = Number(m.Attributes?.SentTimestamp);
        if (jobId !== undefined && Number.isFinite(at) && !sent.has(jobId)) sent.set(jobId, at);
      }
      return out;
    }) as never;
  (client.middlewareStack.add as (mw: unknown, opts: unknown) => void)(mw, { step: 'initialize', name: 'benchSentTimestamps' });
  return sent;
}

/**
 * Counts the capacity units a DynamoDB client's requests consume, as DynamoDB bills them: each
 * request asks for `ReturnConsumedCapacity: TOTAL` and its answer's units are added (a write costs
 * 1 KB units of the larger of the old and new item, a strongly consistent read 4 KB units, so a
 * fan-in's child record that grows with every parent's end counts what it weighs). A conditional
 * write that fails answers no units; DynamoDB still bills it, counted here as one unit.
 */
function countItems(client: DynamoDBClient, items: { written: number; read: number }, opts: { reads: boolean }): void {
  const reads = new Set(['GetItem', 'BatchGetItem', 'Query', 'Scan']);
  const writes = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);
  type Consumed = { CapacityUnits?: number } | { CapacityUnits?: number }[] | undefined;
  const mw = (
    next: (args: { input: Record<string, unknown> }) => Promise<{ output: { ConsumedCapacity?: Consumed } }>,
    context: { commandName?: string },
  ) =>
    (async (args: { input: Record<string, unknown> }) => {
      const name = (context.commandName ?? '').replace(/Command$/, '');
      if (!writes.has(name) && !(opts.reads && reads.has(name))) return next(args);
      args.input.ReturnConsumedCapacity ??= 'TOTAL';
      try {
        const out = await next(args);
        const consumed = out.output.ConsumedCapacity;
        const units = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []).reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
        if (writes.has(name)) items.written += units;
        else items.read += units;
        return out;
      } catch (err) {
        if ((err as { name?: string }).name === 'ConditionalCheckFailedException') items.written += 1;
        throw err;
      }
    }) as never;
  (client.middlewareStack.add as (mw: unknown, opts: unknown) => void)(mw, { step: 'initialize', name: 'benchItemCounter' });
}
