/**
 * The local stack's compute process: the API (as API Gateway + the submit, status and cancel
 * Lambdas), the inbound event source (Lambda's SQS mapping into ingest) and the tick (the CDK
 * stack's state machine running tick and dispatch). It holds no state of its own: it may be
 * killed with SIGKILL at any moment, as a Lambda instance may die, and `npm start` starts another.
 *
 * Reads its configuration from the environment the Lambdas read on AWS (DYNEIN_TABLE, ...)
 * plus the services' endpoints, set by `local/start.ts`.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoJobStore } from '../adapters/dynamoJobStore.js';
import { fanOut, MemorySpanSink } from '../adapters/memorySpans.js';
import { OtlpHttpSpanSink } from '../adapters/otlpSpans.js';
import { RequestCounter } from '../adapters/requestCounter.js';
import { readConfig, type LambdaConfig } from '../lambdas/runtime/config.js';
import {
  adminHandler,
  cancelHandler,
  dispatchHandler,
  dlqHandler,
  ingestHandler,
  schedulesHandler,
  workflowsHandler,
  statusHandler,
  outcomesHandler,
  submitHandler,
  occurrenceAuditHandler,
  tickHandler,
} from '../lambdas/runtime/handlers.js';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { wire } from '../lambdas/runtime/wiring.js';
import { startApiServer } from './apiServer.js';
import { FaultInjector } from './faults.js';
import { LocalMetrics } from './metrics.js';
import { INGEST_BATCHING_WINDOW_MS } from '../adapters/resources.js';
import { withoutSdkLogger } from '../adapters/sdkClients.js';
import { EXIT_CONFIG, localSettings, type LocalSecrets, type LocalSettings } from './settings.js';
import { startSqsEventSource } from './sqsEventSource.js';
import { startLocalTick } from './tick.js';

// Installed first: a parent that dies during start-up never leaves an orphan holding the port.
process.on('disconnect', () => process.exit(0));

let settings: LocalSettings;
let config: LambdaConfig;
try {
  settings = localSettings();
  config = readConfig(process.env, { inboundQueue: true });
  // A writer starts a sleeping group's tick for a row due within WAKE_WINDOW_MS (sized for AWS's
  // every-minute rule); a rarer local tick would come too late for rows due after it: no sleep then.
  if (settings.tickEveryMs > 60_000) config = { ...config, groupsSleep: false };
} catch (err) {
  console.error(`dynein compute: ${(err as Error).message}`);
  process.exit(EXIT_CONFIG);
}
const secrets = JSON.parse(readFileSync(join(settings.dataDir, 'secrets.json'), 'utf8')) as LocalSecrets;
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const counter = new RequestCounter();
// DYNEIN_FAULTS (a test facility): a share of every call to the emulators fails as AWS's do.
const faults = settings.faults ? new FaultInjector(settings.faults) : undefined;
const client = <C extends Parameters<RequestCounter['attach']>[0]>(c: C): C => counter.attach(faults ? faults.attach(c) : c);
const dynamo = client(withoutSdkLogger(new DynamoDBClient({ endpoint: config.dynamodbEndpoint, region: settings.region, credentials })));
const sqs = client(withoutSdkLogger(new SQSClient({ endpoint: config.sqsEndpoint, region: settings.region, credentials })));
const metrics = new LocalMetrics(counter);
const t = metrics.telemetry();
const scheduler = config.scheduler?.endpoint
  ? client(withoutSdkLogger(new SchedulerClient({ endpoint: config.scheduler.endpoint, region: settings.region, credentials })))
  : undefined;
// The last 10,000 spans (`GET /local/traces/<traceId>`, `dynein show --trace`), and an OTLP
// receiver's when DYNEIN_OTLP_ENDPOINT names one (docs/tracing.md).
// DYNEIN_SPANS=false keeps none (with no endpoint either, no span is built, as on AWS by default).
const spans = settings.keepSpans ? new MemorySpanSink(10_000) : undefined;
const exporter = config.otlpEndpoint
  ? new OtlpHttpSpanSink({
      endpoint: config.otlpEndpoint,
      serviceName: 'dynein-local',
      log: (message, fields) => console.error(`dynein compute: ${message} ${JSON.stringify(fields ?? {})}`),
    })
  : undefined;
const sinks = [spans, exporter].filter((s) => s !== undefined);
// A writer of a row due soon into a sleeping group starts its cell's tick (docs/design-dispatch.md#sleep).
let ticks: ReturnType<typeof startLocalTick>[] = [];
const w = await wire(config, {
  dynamo,
  sqs,
  starter: { start: async (cell) => ticks[cell]?.startNow() },
  ...(sinks.length > 0 ? { spans: sinks.length === 1 ? sinks[0]! : fanOut(sinks) } : {}),
  ...(scheduler ? { scheduler } : {}),
  log: (message, fields) => console.error(`dynein dispatch: ${message} ${JSON.stringify(fields ?? {})}`),
});

/**
 * Items read from the table, for `GET /local/metrics` (bench/lateness.ts's items read per job):
 * `dispatchItems` is the dispatch store's count (DynamoDB's ScannedCount of every query it made:
 * due-range reads, late-lane and hold-lane reads, group marks; the API's listing reads too, none in
 * the benchmark), `planItems` the tick's plan's; `byRead` splits dispatch's reads by kind (items
 * returned, calls), which says where the reads go.
 */
const byRead: Record<string, { calls: number; items: number }> = {};
const countReads = <K extends 'readDue' | 'readLate' | 'readHeld' | 'groupMarks'>(
  name: K,
  size: (r: Awaited<ReturnType<DynamoJobStore[K]>>) => number,
) => {
  const orig = w.store[name].bind(w.store) as (...a: unknown[]) => Promise<Awaited<ReturnType<DynamoJobStore[K]>>>;
  (w.store as unknown as Record<string, unknown>)[name] = async (...a: unknown[]) => {
    const r = await orig(...a);
    const c = (byRead[name] ??= { calls: 0, items: 0 });
    c.calls++;
    c.items += size(r);
    return r;
  };
};
countReads('readDue', (r) => r.rows.length);
countReads('readLate', (r) => r.length);
countReads('readHeld', (r) => r.pointers.length);
countReads('groupMarks', () => 1);
// The tick's plan reads through a store of its own (on AWS it is a Lambda of its own), so that
// `dispatchItems` counts what dispatch rounds read and nothing else.
const planStore = new DynamoJobStore(config.tableName, dynamo);
const reads = () => ({ dispatchItems: w.store.stats.itemsRead, planItems: planStore.stats.itemsRead, byRead });

/** The cancel function, telling the dashboard which job each successful cancel was for (a repeat is one job). */
const cancel = cancelHandler(w, t);
const countedCancel: typeof cancel = async (event) => {
  const result = await cancel(event);
  if (result.statusCode === 200 && event.pathParameters?.jobId) metrics.cancelled(event.pathParameters.jobId);
  return result;
};

/**
 * What AWS would bill beside the SDK calls (`GET /local/metrics`, `invocations`; the benchmark's
 * idle phase prices them): tick executions (Step Functions Express), those that planned no
 * dispatcher (every group asleep: docs/design-dispatch.md#sleep), and the dispatch steps (Lambda).
 */
const invocations = { tickExecutions: 0, tickExecutionsAsleep: 0, dispatchSteps: 0 };
const keys = Object.fromEntries(settings.tenants.map((name) => [name, secrets.tenants[name]!]));
const api = await startApiServer({
  port: settings.port,
  region: settings.region,
  keys,
  admin: secrets.admin,
  handlers: {
    submit: submitHandler(w, t),
    status: statusHandler(w, t),
    cancel: countedCancel,
    schedules: schedulesHandler(w, t),
    outcomes: outcomesHandler(w, t),
    dlq: dlqHandler(w, t),
    admin: adminHandler(w, t),
    workflows: workflowsHandler(w, t),
  },
  metrics: () => ({
    ...metrics.snapshot(),
    reads: reads(),
    invocations: { ...invocations },
    ...(faults ? { faults: faults.snapshot() } : {}),
  }),
  trace: (traceId) => spans?.trace(traceId) ?? [],
}).catch((err: NodeJS.ErrnoException) => {
  if (err.code !== 'EADDRINUSE') throw err;
  console.error(`dynein compute: port ${settings.port} is in use: stop what uses it or set DYNEIN_PORT`);
  process.exit(EXIT_CONFIG);
});
const ingest = ingestHandler(w, t);
// DYNEIN_INGEST_ENABLED=false: as an event source mapping disabled, the inbound queue just keeps its messages.
const eventSource = !settings.ingestEnabled
  ? { stop: async () => {} }
  : startSqsEventSource({
      sqs,
      queueUrl: config.inboundQueueUrl,
      handler: (e) => ingest(e),
      waitTimeSeconds: 5,
      pollers: 2,
      maxBatchingWindowMs: INGEST_BATCHING_WINDOW_MS,
      onError: (err) => t.error('inbound event source', err),
    });
const dispatchStep = dispatchHandler(w, t);
// One tick loop per cell (DYNEIN_CELLS), as each cell has its own state machine and rule on AWS.
const planRun = tickHandler({ store: planStore, settings: config.settings, clock: w.dispatch.clock }, t);
const plan: typeof planRun = async (input) => {
  invocations.tickExecutions++;
  const p = await planRun(input);
  if (p.items.length === 0) invocations.tickExecutionsAsleep++;
  return p;
};
const dispatch: typeof dispatchStep = async (input, context) => {
  invocations.dispatchSteps++;
  return dispatchStep(input, context);
};
ticks = Array.from({ length: config.settings.cells }, (_, cell) =>
  startLocalTick({
    cell,
    runMs: settings.tickRunMs,
    everyMs: settings.tickEveryMs,
    tick: plan,
    dispatch: (input, context) => dispatch(input, context),
    onError: (err) => t.error(`tick execution failed (cell ${cell})`, err),
  }),
);

// The never-fired check (docs/tracing.md#never-fired), as the rule runs it on AWS: its counts and
// warnings go to the dashboard.
const audit = occurrenceAuditHandler(
  {
    auditOccurrences: async () => {
      const report = await w.auditOccurrences();
      metrics.occurrencesAudited(report);
      return report;
    },
  },
  t,
);
const auditTimer =
  settings.auditEveryMs > 0
    ? setInterval(() => void audit().catch((err: unknown) => t.error('the never-fired check failed', err)), settings.auditEveryMs)
    : undefined;
auditTimer?.unref();

// The port taken (DYNEIN_PORT=0 takes any free one): local.json names it.
const apiPort = (api.address() as AddressInfo).port;
if (process.send) process.send({ type: 'ready', pid: process.pid, port: apiPort });
console.log(`dynein compute: ready (pid ${process.pid})`);

const stop = async () => {
  for (const tick of ticks) tick.stop();
  clearInterval(auditTimer);
  await eventSource.stop();
  api.close();
  // Rows sent just before the stop get their delivered markers within a second (the release
  // timer's batching): wait for that, so that a graceful restart does not send them again (a
  // kill still may: at least once). npm start allows 5 s before it kills.
  await new Promise((r) => setTimeout(r, 1_500));
  process.exit(0);
};
const stopOnSignal = () => {
  stop().catch((err: unknown) => {
    console.error(`dynein compute: stopping failed: ${(err as Error).message}`);
    process.exit(1);
  });
};
process.on('SIGTERM', stopOnSignal);
process.on('SIGINT', stopOnSignal);
if (process.send && !process.connected) process.exit(0);
