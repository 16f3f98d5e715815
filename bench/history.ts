/**
 * Phase 10: what job history adds per job (docs/history.md). A tenant with history on gets a
 * steady load of jobs sent straight to its queue (`delaySeconds: 0`: the delivery path is not
 * what is measured; its message carries the `dynein-history` attribute either way); the client
 * library's Worker consumes them and reports each outcome through the outcomes handler
 * (in-process, as the status function runs it), counted on the handler's own DynamoDB client.
 * Per job: outcome reports (API requests and Lambda invocations), the handler's duration, the
 * BatchWriteItem requests and items, and the write units of an outcome record.
 */
import { RequestCounter } from '../adapters/requestCounter.js';
import { outcomeItem } from '../adapters/dynamoHistoryStore.js';
import { Worker } from '../client/worker.js';
import type { OutcomeRecord } from '../core/jobs/history.js';
import { outcomesHandler } from '../lambdas/runtime/handlers.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem } from '../test/support/system.js';
import { costPerMillion, wruOf, type PerJobUsage } from './cost.js';
import { inProcessOutcomes, progress, sleep, steadyLoad } from './support.js';

/** The status function's memory (lib/dyneinScheduler.ts's default): it serves the outcomes route. */
const HANDLER_MEMORY_GB = 256 / 1024;

export interface HistoryResult {
  jobs: number;
  ratePerSec: number;
  reported: number;
  /** Outcome reports (API requests, each one status-function invocation) per job. */
  reportRequestsPerJob: number;
  batchWriteRequestsPerJob: number;
  /** Outcome records written per job (one per outcome). */
  recordWritesPerJob: number;
  /** Bytes of a typical outcome record (a SUCCEEDED one with a small result), and its write units. */
  recordBytes: number;
  recordWru: number;
  /** Mean duration of the handler per report, ms (in-process, over dynalite). */
  handlerMsPerReport: number;
  /** Billing units history adds per job. */
  usagePerJob: PerJobUsage;
  /** What history adds per million jobs, USD. */
  costPerMillionIncrementUsd: number;
}

/** DynamoDB's item size: attribute names plus values (numbers: about 1 byte per 2 digits, plus 1). */
export function itemBytes(item: Record<string, { S?: string; N?: string }>): number {
  let n = 0;
  for (const [k, v] of Object.entries(item)) {
    n += Buffer.byteLength(k);
    if (v.S !== undefined) n += Buffer.byteLength(v.S);
    if (v.N !== undefined) n += Math.ceil(v.N.replace(/^-/, '').length / 2) + 1;
  }
  return n;
}

export async function runHistory(em: Emulators, opts: { jobs: number; ratePerSec: number }): Promise<HistoryResult> {
  const sys = await createSystem(em, { tenants: ['demo'] });
  const tenant = sys.tenants.demo!;
  await sys.w.store.putTenant({ name: 'demo', queueUrl: tenant.url, dlqUrl: tenant.dlqUrl, historyTtlMs: 7 * 86_400_000 });
  const counter = new RequestCounter();
  const handlerWiring = await sys.another({ dynamo: em.newClients(counter).dynamo });
  const handle = outcomesHandler(handlerWiring);
  const { sink, calls } = inProcessOutcomes(handle);
  let handled = 0;
  const worker = new Worker({
    queueUrl: tenant.url,
    sqs: em.newClients(new RequestCounter()).sqs,
    concurrency: 50,
    waitTimeSeconds: 1,
    handleSignals: false,
    client: sink,
    handler: (job) => {
      handled++;
      return { ok: true, jobId: job.jobId.slice(-6) };
    },
  });
  const running = worker.run();
  const perBatch = 10;
  await steadyLoad(
    { rate: opts.ratePerSec / perBatch, durationMs: (opts.jobs / opts.ratePerSec) * 1000, minAheadMs: 0, maxAheadMs: 0 },
    async () => {
      await sys.w.submitter.submitBatch(
        'demo',
        JSON.stringify({ jobs: Array.from({ length: perBatch }, (_, i) => ({ payload: { i }, delaySeconds: 0 })) }),
      );
    },
    'history',
  );
  const until = Date.now() + 30_000;
  while (handled < opts.jobs && Date.now() < until) await sleep(100);
  await worker.stop();
  await running;
  const { reports, handlerMs, stored: reported } = calls;
  if (reported < opts.jobs) progress(`history: only ${reported} of ${opts.jobs} outcomes were stored`);

  const sample: OutcomeRecord = {
    shard: 37,
    dueMs: Date.now(),
    jobId: `j1.demo.37.1795320629774.d.${'a'.repeat(16)}.${'b'.repeat(22)}`,
    tenant: 'demo',
    outcome: 'SUCCEEDED',
    attempt: 1,
    receivedAtMs: Date.now(),
    durationMs: 123,
    result: JSON.stringify({ ok: true, jobId: 'abcdef' }),
    reportedAtMs: Date.now(),
    expiresAtMs: Date.now() + 7 * 86_400_000,
  };
  const recordBytes = itemBytes(outcomeItem(sample) as Record<string, { S?: string; N?: string }>);
  const jobs = opts.jobs;
  const batchWrites = counter.total('DynamoDB.BatchWriteItem');
  const round = (x: number) => +x.toFixed(4);
  const usagePerJob: PerJobUsage = {
    dynamodbWru: round((reported / jobs) * wruOf(recordBytes)),
    dynamodbRru: 0,
    sqsRequests: 0,
    lambdaInvocations: round(reports / jobs),
    lambdaGbSeconds: round(((reports / jobs) * Math.max(1, Math.ceil(handlerMs / Math.max(1, reports))) * HANDLER_MEMORY_GB) / 1000),
    apiRequests: round(reports / jobs),
  };
  return {
    jobs,
    ratePerSec: opts.ratePerSec,
    reported,
    reportRequestsPerJob: round(reports / jobs),
    batchWriteRequestsPerJob: round(batchWrites / jobs),
    recordWritesPerJob: round(reported / jobs),
    recordBytes,
    recordWru: wruOf(recordBytes),
    handlerMsPerReport: round(handlerMs / Math.max(1, reports)),
    usagePerJob,
    costPerMillionIncrementUsd: costPerMillion(usagePerJob).totalUsd,
  };
}
