import { randomBytes } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { ChangeMessageVisibilityCommand, SQSClient } from '@aws-sdk/client-sqs';
import { SqsDeadLetters } from '../../adapters/sqsDeadLetters.js';
import { withoutSdkLogger } from '../../adapters/sdkClients.js';
import { DeadLetterService } from '../../core/deadLetters/index.js';
import { DynamoDeadLetterEdits } from '../../adapters/dynamoDeadLetterEdits.js';
import { DynamoControlsStore } from '../../adapters/dynamoControlsStore.js';
import { DynamoScheduleStore } from '../../adapters/dynamoScheduleStore.js';
import { EventBridgeTrigger } from '../../adapters/eventBridgeTrigger.js';
import { type AuditReport, auditOccurrences, type RecurringDeps, SchedulesService } from '../../core/recurring/index.js';
import { DynamoIdempotencyStore } from '../../adapters/dynamoIdempotencyStore.js';
import { DynamoHistoryStore } from '../../adapters/dynamoHistoryStore.js';
import { DynamoJobStore } from '../../adapters/dynamoJobStore.js';
import { DynamoRateCounterStore } from '../../adapters/dynamoRateCounter.js';
import { ControlsCache, type ControlsStore, TenantRegistry } from '../../core/tenants/index.js';
import { SubmitRateLimiter, Submitter } from '../../core/submit/index.js';
import { HISTORY_STATES, JobLister, JobsService, OutcomesService } from '../../core/jobs/index.js';
import { SqsSender } from '../../adapters/sqsSender.js';
import { type DispatchDeps, ParkedTenants, ProcessFlow } from '../../core/dispatch/index.js';
import {
  type Clock,
  ConfigError,
  type DispatchStarter,
  JobIdCodec,
  type QueueSender,
  RowWakes,
  type SpanSink,
  systemClock,
} from '../../core/model/index.js';
import { OtlpHttpSpanSink } from '../../adapters/otlpSpans.js';
import { type OperationDeps, OperationsService } from '../../core/operations/index.js';
import { DynamoOperationStore } from '../../adapters/dynamoOperationStore.js';
import { DynamoDebounces } from '../../adapters/dynamoDebounces.js';
import { DynamoKeySlots } from '../../adapters/dynamoKeySlots.js';
import { DynamoCancelRequests } from '../../adapters/dynamoCancelRequests.js';
import type { IngestDeps } from '../../core/ingest/index.js';
import {
  type ProgressDeps,
  WORKFLOW_OUTCOME_RETENTION_MS,
  workflowJobs,
  workflowOutcomes,
  WorkflowService,
} from '../../core/workflows/index.js';
import { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import { DynamoWorkflowStore } from '../../adapters/dynamoWorkflowStore.js';
import { StepFunctionsStarter } from '../../adapters/sfnDispatchStarter.js';
import type { LambdaConfig } from './config.js';

/** Everything a handler needs, built once per Lambda instance (clients at module load). */
export interface Wiring {
  readonly config: LambdaConfig;
  readonly store: DynamoJobStore;
  readonly codec: JobIdCodec;
  readonly submitter: Submitter;
  readonly jobs: JobsService;
  /** `POST /v1/tenants/{tenant}/jobs/outcomes` (docs/history.md). */
  readonly outcomes: OutcomesService;
  /** `GET /v1/tenants/{tenant}/jobs` (the status function). */
  readonly lister: JobLister;
  readonly ingest: IngestDeps;
  readonly dispatch: DispatchDeps;
  /** What a firing needs to materialise occurrences (ingest). */
  readonly recurring: RecurringDeps;
  /** The recurring-schedule API (only where the scheduler's clock is configured: the schedules function). */
  readonly schedules?: SchedulesService;
  /** The never-fired check of the recurring schedules' occurrences (core/recurring/audit.ts; the schedules function). */
  readonly auditOccurrences: () => Promise<AuditReport>;
  /** The tenants' dead-letter queues: peek, redrive, delete (the dlq function). */
  readonly deadLetters: DeadLetterService;
  /** The tenant registry through its cache (the admin function checks the tenant exists). */
  readonly tenants: TenantRegistry;
  /** Tenants' controls, read and written by the operator API (the admin function). */
  readonly controlsStore: ControlsStore;
  /** The controls cache submit, cancel and dispatch share (its failed reads are the `ControlReadFailures` metric). */
  readonly controls: ControlsCache;
  /** Workflows: submit, GET and cancel (the workflows function). */
  readonly workflows: WorkflowService;
  /** Bulk cancels: their passes and ingest's settling of jobs written after them (ingest). */
  readonly operations: OperationDeps;
  /** `POST .../jobs/cancel` and `GET .../operations/{operationId}` (the cancel function). */
  readonly operationsService: OperationsService;
  /** Sends to queues (ingest sends an unfinished bulk-cancel pass on). */
  readonly sender: QueueSender;
  /** Makes an inbound message (its receipt handle) visible again in `seconds` (ingest, after a failure). */
  readonly inboundRetry?: (receiptHandle: string, seconds: number) => Promise<void>;
  /** Where the scheduler's spans go (docs/tracing.md): flushed by each function before it returns. Absent: tracing off. */
  readonly spans?: SpanSink;
}

export interface WiringOptions {
  readonly dynamo?: DynamoDBClient;
  readonly sqs?: SQSClient;
  readonly scheduler?: SchedulerClient;
  readonly clock?: Clock;
  /** The job id key itself (skips Secrets Manager). */
  readonly idKey?: Buffer;
  readonly log?: DispatchDeps['log'];
  /** Where the spans go (the local stack's memory and exporter); default: an OTLP exporter when `config.otlpEndpoint` is set. */
  readonly spans?: SpanSink;
  /** Starts a cell's tick (the local stack's, in process); default: Step Functions when `config.tickStateMachines` is set. */
  readonly starter?: DispatchStarter;
}

/** Builds the core over the AWS adapters. Reads the id key from Secrets Manager when configured so. */
export async function wire(config: LambdaConfig, opts: WiringOptions = {}): Promise<Wiring> {
  const dynamo = opts.dynamo ?? withoutSdkLogger(new DynamoDBClient(config.dynamodbEndpoint ? { endpoint: config.dynamodbEndpoint } : {}));
  const sqs = opts.sqs ?? withoutSdkLogger(new SQSClient(config.sqsEndpoint ? { endpoint: config.sqsEndpoint } : {}));
  const clock = opts.clock ?? systemClock;
  const store = new DynamoJobStore(config.tableName, dynamo);
  const spans =
    opts.spans ??
    (config.otlpEndpoint
      ? new OtlpHttpSpanSink({
          endpoint: config.otlpEndpoint,
          resource: process.env.AWS_LAMBDA_FUNCTION_NAME ? { 'faas.name': process.env.AWS_LAMBDA_FUNCTION_NAME } : {},
          log: (message, fields) => console.error(JSON.stringify({ level: 'WARN', message, ...fields })),
        })
      : undefined);
  const codec = new JobIdCodec(opts.idKey ?? (await loadIdKey(config)));
  // Registry items naming queues that are not the tenant's own are not used (parked, 404).
  const tenants = new TenantRegistry(store, {
    clock,
    ...(config.tenantQueues ? { queues: config.tenantQueues } : {}),
    onRefused: (tenant, reason) =>
      console.error(JSON.stringify({ level: 'ERROR', message: 'tenant registration refused: its jobs stay parked', tenant, reason })),
  });
  const sender = new SqsSender(sqs);
  const { settings } = config;
  const history = new DynamoHistoryStore(config.tableName, dynamo);
  // Every writer of rows wakes their groups if they rest (docs/design-dispatch.md, "Rest"), and
  // starts a dispatcher for a sleeping one ("Sleep").
  const starter = opts.starter ?? (config.tickStateMachines ? new StepFunctionsStarter(config.tickStateMachines) : undefined);
  const wakes = new RowWakes(
    store,
    settings,
    undefined,
    starter && {
      starter,
      now: () => clock.now(),
      log: (message, fields) => console.error(JSON.stringify({ level: 'ERROR', message, ...fields })),
    },
  );
  const scheduleStore = new DynamoScheduleStore(config.tableName, dynamo);
  // Tenant controls (pause, limits, weight): one store, one 5 s cache for submit, cancel and dispatch.
  const controlsStore = new DynamoControlsStore(config.tableName, dynamo);
  const controls = new ControlsCache(controlsStore, { clock });
  const clockConfig = config.scheduler;
  const schedules = clockConfig
    ? new SchedulesService({
        store,
        schedules: scheduleStore,
        trigger: new EventBridgeTrigger(
          clockConfig,
          opts.scheduler ?? withoutSdkLogger(new SchedulerClient(clockConfig.endpoint ? { endpoint: clockConfig.endpoint } : {})),
          () => clock.now(),
        ),
        tenants,
        wakes,
        codec,
        clock,
        settings,
        ...(spans ? { spans } : {}),
        audits: scheduleStore,
      })
    : undefined;
  // Workflows (docs/workflows.md): their jobs' status, cancel and outcomes go through the same
  // services as every job's, which hand a workflow job (id path w) to these.
  const waiting = new DynamoWaitingChildren(dynamo, config.tableName);
  const workflowStore = new DynamoWorkflowStore(dynamo, config.tableName);
  const handOff = { sender, inboundQueueUrl: config.inboundQueueUrl, controls, ...(spans ? { spans } : {}) };
  const progress: ProgressDeps = { store: workflowStore, waiting, codec, settings, clock, handOff, outcomes: history };
  const edits = new DynamoDeadLetterEdits(config.tableName, dynamo);
  const cancelRequests = new DynamoCancelRequests(config.tableName, dynamo);
  // Concurrency keys' slots (docs/flow-control.md): ingest keeps their limits, dispatch takes them, reports free them.
  const keySlots = new DynamoKeySlots(config.tableName, dynamo);
  // Debounced jobs' pointers and generations (docs/flow-control.md#debounce): submit writes them,
  // dispatch claims them, status, cancel and bulk cancels read and cancel them.
  const debounces = new DynamoDebounces(config.tableName, dynamo);
  const operations: OperationDeps = { store: new DynamoOperationStore(config.tableName, dynamo), settings, clock, keySlots, debounces };
  const jobs = new JobsService({
    store,
    codec,
    tenants,
    clock,
    settings,
    history,
    edits,
    controls,
    workflows: workflowJobs(progress),
    cancelRequests,
    keySlots,
    debounces,
  });
  return {
    ...(config.inboundQueueUrl
      ? {
          inboundRetry: async (receiptHandle: string, seconds: number) =>
            void (await sqs.send(
              new ChangeMessageVisibilityCommand({
                QueueUrl: config.inboundQueueUrl,
                ReceiptHandle: receiptHandle,
                VisibilityTimeout: seconds,
              }),
            )),
        }
      : {}),
    config,
    store,
    codec,
    workflows: new WorkflowService({
      rows: store,
      store: workflowStore,
      waiting,
      codec,
      tenants,
      settings,
      clock,
      handOff,
      outcomes: history,
      jobs,
      ...(spans ? { spans } : {}),
    }),
    auditOccurrences: () =>
      auditOccurrences({
        schedules: scheduleStore,
        audits: scheduleStore,
        rows: store,
        codec,
        clock,
        paused: async (tenant) => (await controls.get(tenant)).paused,
      }),
    submitter: new Submitter({
      settings,
      codec,
      tenants,
      sender,
      inboundQueueUrl: config.inboundQueueUrl,
      clock,
      idempotency: new DynamoIdempotencyStore(config.tableName, dynamo),
      // A paused tenant's jobs never take the direct path (read fresh for jobs due soon).
      controls,
      // maxSubmitsPerSecond: the controls through a 5 s cache; counters only for limited tenants.
      rateLimit: new SubmitRateLimiter({
        controls,
        counters: new DynamoRateCounterStore(config.tableName, dynamo),
        clock,
      }),
      debounce: { debounces, rows: store, wakes },
      ...(spans ? { spans } : {}),
    }),
    jobs,
    outcomes: new OutcomesService({
      history,
      rows: store,
      codec,
      tenants,
      clock,
      workflows: workflowOutcomes({ ...progress, rows: store, retentionMs: WORKFLOW_OUTCOME_RETENTION_MS }),
      keySlots,
      controls,
      ...(spans ? { spans } : {}),
    }),
    // History states read outcome records (h#<shard>) for tenants with history on (docs/history.md).
    lister: new JobLister({ store, codec, tenants, clock, settings, states: HISTORY_STATES }),
    ingest: { store, codec, clock, settings, keySlots, wakes, ...(spans ? { spans } : {}) },
    operations,
    operationsService: new OperationsService({ ...operations, tenants, sender, inboundQueueUrl: config.inboundQueueUrl }),
    sender,
    recurring: { store, codec, clock, settings, schedules: scheduleStore, wakes, ...(spans ? { spans } : {}) },
    ...(schedules ? { schedules } : {}),
    tenants,
    controlsStore,
    controls,
    deadLetters: new DeadLetterService({
      queues: new SqsDeadLetters(sqs),
      tenants,
      codec,
      clock,
      settings,
      edits,
    }),
    // Unregistered tenants, hold-lane scans and the calls in flight are per instance, across steps.
    dispatch: {
      store,
      sender,
      tenants,
      clock,
      settings,
      log: opts.log,
      parked: new ParkedTenants(),
      controls,
      holdScans: new Map(),
      resting: store,
      restIntents: new Map(),
      ...(config.groupsSleep ? { groupsSleep: true } : {}),
      flow: new ProcessFlow(() => clock.now()),
      keySlots,
      debounces,
      ...(spans ? { spans } : {}),
    },
    ...(spans ? { spans } : {}),
  };
}

async function loadIdKey(config: LambdaConfig): Promise<Buffer> {
  // dispatch and tick never sign or verify ids, so they get no key (and no secret access): a
  // throwaway key keeps the wiring's shape.
  if (!config.idKey) return randomBytes(32);
  if ('base64' in config.idKey) return Buffer.from(config.idKey.base64, 'base64');
  const client = new SecretsManagerClient({});
  try {
    const res = await client.send(new GetSecretValueCommand({ SecretId: config.idKey.secretArn }));
    // The secret's string itself is the key (CDK generates 64 random characters).
    const key = Buffer.from(res.SecretString ?? '', 'utf8');
    if (key.length < 32) throw new ConfigError(`secret ${config.idKey.secretArn} must hold a string of at least 32 bytes`);
    return key;
  } finally {
    client.destroy();
  }
}
