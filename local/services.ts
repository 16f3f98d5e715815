/**
 * The local stack's services process: DynamoDB (dynalite, data under the data directory, in a
 * child process of its own: local/tableService.ts) and
 * SQS (fauxqs, in memory; the inbound queue journaled under the data directory), with the scheduler table, the inbound queue and the tenant queues
 * created from the same settings the CDK constructs use, and the tenants registered. It keeps
 * the state while the compute process may be killed and restarted.
 */
import { fork } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient, ResourceInUseException } from '@aws-sdk/client-dynamodb';
import { CreateScheduleGroupCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import { DynamoJobStore } from '../adapters/dynamoJobStore.js';
import { TENANT_PLACEHOLDER, tenantQueueUrls, type TenantQueueUrls } from '../core/tenants/index.js';
import { QUEUE_SETTINGS } from '../adapters/resources.js';
import { createTableInput } from '../adapters/tableSchema.js';
import { alignFauxqsCharset } from './fauxqsCharset.js';
import { FaultInjector } from './faults.js';
import { restoreInboundJournal } from './inboundJournal.js';
import { startLocalScheduler, sqsQueueUrlResolver } from './scheduler/index.js';
import { stopRequests } from './stopRequests.js';
import { withoutSdkLogger } from '../adapters/sdkClients.js';
import {
  INBOUND_QUEUE,
  localSettings,
  LOCAL_ACCOUNT,
  SCHEDULE_GROUP,
  SCHEDULER_ROLE_ARN,
  TABLE_NAME,
  tenantQueueName,
} from './settings.js';

export interface ServicesReady {
  readonly type: 'ready';
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly tableName: string;
  readonly inboundQueueUrl: string;
  readonly tenants: Record<string, { queueUrl: string; dlqUrl: string }>;
  /** Where every tenant's queues are (`{tenant}` for the name): compute uses no registration naming others. */
  readonly tenantQueues: TenantQueueUrls;
  /** The EventBridge Scheduler stand-in (local/scheduler), the recurring schedules' clock. */
  readonly scheduler: { readonly endpoint: string; readonly groupName: string; readonly roleArn: string; readonly targetArn: string };
}

const requests = stopRequests();

const settings = localSettings();
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const dbDir = join(settings.dataDir, 'dynamodb');
mkdirSync(dbDir, { recursive: true });

// The table in its own process (local/tableService.ts): its work never holds up the queues' answers.
const fromSource = import.meta.url.endsWith('.ts');
const table = fork(fileURLToPath(new URL(fromSource ? './tableService.ts' : './tableService.mjs', import.meta.url)), [], {
  execArgv: fromSource ? ['--import', 'tsx'] : ['--enable-source-maps'],
  env: { ...process.env, DYNEIN_DYNAMODB_DIR: dbDir },
  stdio: 'inherit',
});
const tablePort = await new Promise<number>((resolve, reject) => {
  table.once('message', (m) => resolve((m as { port: number }).port));
  table.once('exit', (code, signal) => reject(new Error(`the table process exited before it was ready (${signal ?? `code ${code}`})`)));
});
const tableExited = new Promise<void>((r) => table.once('exit', () => r()));
table.once('exit', (code, signal) => {
  if (stopping) return;
  console.error(`dynein services: the table process died (${signal ?? `code ${code}`}); stopping`);
  requests.request();
});
// The message spy (one event kept) is where the inbound journal hooks in (local/inboundJournal.ts).
const sqsServer = await startFauxqs({
  port: Number(process.env.DYNEIN_SQS_PORT ?? 0),
  host: '127.0.0.1',
  logger: false,
  defaultRegion: settings.region,
  messageSpies: { bufferSize: 1 },
});
// SQS's documented body character set, emoji included (local/fauxqsCharset.ts).
await alignFauxqsCharset();
const dynamodbEndpoint = `http://127.0.0.1:${tablePort}`;
const sqsEndpoint = `http://127.0.0.1:${sqsServer.port}`;
const dynamo = withoutSdkLogger(new DynamoDBClient({ endpoint: dynamodbEndpoint, region: settings.region, credentials }));
const sqs = withoutSdkLogger(new SQSClient({ endpoint: sqsEndpoint, region: settings.region, credentials }));

try {
  await dynamo.send(new CreateTableCommand(createTableInput(TABLE_NAME)));
} catch (err) {
  if (!(err instanceof ResourceInUseException) && (err as Error).name !== 'ResourceInUseException') throw err;
}
await dynamo.send(new DescribeTableCommand({ TableName: TABLE_NAME }));

/** A queue and its DLQ with redrive, as lib/queues.ts builds them. */
async function queueWithDlq(name: string, s: { visibilityTimeoutSeconds: number; maxReceiveCount: number; retentionSeconds: number }) {
  const dlqUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: `${name}-dlq`,
        Attributes: { MessageRetentionPeriod: String(QUEUE_SETTINGS.dlqRetentionSeconds) },
      }),
    )
  ).QueueUrl!;
  const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
  const queueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: name,
        Attributes: {
          VisibilityTimeout: String(s.visibilityTimeoutSeconds),
          MessageRetentionPeriod: String(s.retentionSeconds),
          RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: s.maxReceiveCount }),
        },
      }),
    )
  ).QueueUrl!;
  return { queueUrl, dlqUrl };
}

const inbound = await queueWithDlq(INBOUND_QUEUE, QUEUE_SETTINGS.inbound);
// fauxqs keeps queues in memory: the inbound queue and its DLQ are journaled in the data
// directory, so that jobs accepted but not yet ingested survive a SIGKILL, as in SQS.
const restored = await restoreInboundJournal({
  file: join(settings.dataDir, 'inbound-queue.journal'),
  spy: sqsServer.spy,
  queues: { [INBOUND_QUEUE]: inbound.queueUrl, [`${INBOUND_QUEUE}-dlq`]: inbound.dlqUrl },
  sqs,
});
if (restored > 0) console.log(`dynein services: restored ${restored} inbound message(s) from the journal`);
const store = new DynamoJobStore(TABLE_NAME, dynamo);
const tenants: ServicesReady['tenants'] = {};
// The emulator's URL of a queue is its base URL and the name, as the inbound queue's.
const queueBase = inbound.queueUrl.slice(0, -INBOUND_QUEUE.length);
const tenantQueues: TenantQueueUrls = {
  queueUrl: `${queueBase}${tenantQueueName(TENANT_PLACEHOLDER)}`,
  dlqUrl: `${queueBase}${tenantQueueName(TENANT_PLACEHOLDER)}-dlq`,
};
for (const t of settings.tenants) {
  tenants[t] = await queueWithDlq(tenantQueueName(t), QUEUE_SETTINGS.tenant);
  const expected = tenantQueueUrls(tenantQueues, t);
  if (expected.queueUrl !== tenants[t].queueUrl || expected.dlqUrl !== tenants[t].dlqUrl)
    throw new Error(`dynein services: tenant '${t}''s queues are at ${tenants[t].queueUrl}, not at ${expected.queueUrl} as expected`);
  // Re-registered at every start: queue URLs carry fauxqs's port, which may change.
  const historyTtlMs = settings.history?.[t];
  await store.putTenant({ name: t, ...tenants[t], ...(historyTtlMs !== undefined ? { historyTtlMs } : {}) });
}

// The recurring schedules' clock: it fires into the inbound queue (through DYNEIN_FAULTS's faults,
// if set: the clock retries as EventBridge Scheduler does; the set-up above is the deployment's). Firings that fell while the
// stack was stopped are sent at start, late (on AWS, EventBridge Scheduler never stops: its
// firings wait in the inbound queue while ingest is down, and each catches up what it missed).
const clockSqs = settings.faults
  ? new FaultInjector(settings.faults).attach(new SQSClient({ endpoint: sqsEndpoint, region: settings.region, credentials }))
  : sqs;
const scheduler = await startLocalScheduler({
  port: Number(process.env.DYNEIN_SCHEDULER_PORT ?? 0),
  dataDir: join(settings.dataDir, 'scheduler'),
  region: settings.region,
  accountId: LOCAL_ACCOUNT,
  sqs: clockSqs,
  resolveQueueUrl: sqsQueueUrlResolver(clockSqs),
  missedOccurrences: 'fire',
  log: (m) => console.error(`dynein scheduler: ${m}`),
});
const schedulerClient = withoutSdkLogger(new SchedulerClient({ endpoint: scheduler.endpoint, region: settings.region, credentials }));
try {
  await schedulerClient.send(new CreateScheduleGroupCommand({ Name: SCHEDULE_GROUP }));
} catch (err) {
  if ((err as Error).name !== 'ConflictException') throw err;
}
const inboundArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: inbound.queueUrl, AttributeNames: ['QueueArn'] }))).Attributes!
  .QueueArn!;

const ready: ServicesReady = {
  type: 'ready',
  dynamodbEndpoint,
  sqsEndpoint,
  tableName: TABLE_NAME,
  inboundQueueUrl: inbound.queueUrl,
  tenants,
  tenantQueues,
  scheduler: { endpoint: scheduler.endpoint, groupName: SCHEDULE_GROUP, roleArn: SCHEDULER_ROLE_ARN, targetArn: inboundArn },
};
if (process.send) process.send(ready);
else console.log(JSON.stringify(ready));

let stopping: Promise<void> | undefined;
requests.onStop(
  () =>
    (stopping ??= (async () => {
      await scheduler.stop().catch(() => {});
      await sqsServer.stop().catch(() => {});
      // The table process closes its database once the requests it is answering are done (≤ 5 s).
      if (table.exitCode === null && table.signalCode === null) table.kill('SIGTERM');
      await Promise.race([tableExited, new Promise((r) => setTimeout(r, 7_000))]);
      process.exit(0);
    })()),
);
