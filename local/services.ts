/**
 * The local stack's services process: DynamoDB (dynalite, data under the data directory) and
 * SQS (fauxqs, in memory), with the scheduler table, the inbound queue and the tenant queues
 * created from the same settings the CDK constructs use, and the tenants registered. It keeps
 * the state while the compute process may be killed and restarted.
 */
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient, ResourceInUseException } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import dynalite from 'dynalite';
import { startFauxqs } from 'fauxqs';
import { DynamoJobStore } from '../adapters/dynamoJobStore.js';
import { QUEUE_SETTINGS } from '../adapters/resources.js';
import { createTableInput } from '../adapters/tableSchema.js';
import { alignFauxqsCharset } from './fauxqsCharset.js';
import { INBOUND_QUEUE, localSettings, TABLE_NAME, tenantQueueName } from './settings.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export interface ServicesReady {
  readonly type: 'ready';
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly tableName: string;
  readonly inboundQueueUrl: string;
  readonly tenants: Record<string, { queueUrl: string; dlqUrl: string }>;
}

const settings = localSettings();
const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
const dbDir = join(settings.dataDir, 'dynamodb');
mkdirSync(dbDir, { recursive: true });

const db = dynalite({ path: dbDir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
await new Promise<void>((resolve, reject) => {
  db.once('error', reject);
  db.listen(Number(process.env.DYNEIN_DYNAMODB_PORT ?? 0), '127.0.0.1', () => resolve());
});
const sqsServer = await startFauxqs({ port: Number(process.env.DYNEIN_SQS_PORT ?? 0), host: '127.0.0.1', logger: false, defaultRegion: settings.region });
// SQS's documented body character set, emoji included (local/fauxqsCharset.ts).
await alignFauxqsCharset();
const dynamodbEndpoint = `http://127.0.0.1:${(db.address() as AddressInfo).port}`;
const sqsEndpoint = `http://127.0.0.1:${sqsServer.port}`;
const dynamo = new DynamoDBClient({ endpoint: dynamodbEndpoint, region: settings.region, credentials });
const sqs = new SQSClient({ endpoint: sqsEndpoint, region: settings.region, credentials });

try {
  await dynamo.send(new CreateTableCommand(createTableInput(TABLE_NAME)));
} catch (err) {
  if (!(err instanceof ResourceInUseException) && (err as Error).name !== 'ResourceInUseException') throw err;
}
await dynamo.send(new DescribeTableCommand({ TableName: TABLE_NAME }));

/** A queue and its DLQ with redrive, as lib/queues.ts builds them. */
async function queueWithDlq(name: string, s: { visibilityTimeoutSeconds: number; maxReceiveCount: number; retentionSeconds: number }) {
  const dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-dlq`, Attributes: { MessageRetentionPeriod: String(QUEUE_SETTINGS.dlqRetentionSeconds) } }))).QueueUrl!;
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
const store = new DynamoJobStore(TABLE_NAME, dynamo);
const tenants: ServicesReady['tenants'] = {};
for (const t of settings.tenants) {
  tenants[t] = await queueWithDlq(tenantQueueName(t), QUEUE_SETTINGS.tenant);
  // Re-registered at every start: queue URLs carry fauxqs's port, which may change.
  await store.putTenant({ name: t, ...tenants[t] });
}

const ready: ServicesReady = { type: 'ready', dynamodbEndpoint, sqsEndpoint, tableName: TABLE_NAME, inboundQueueUrl: inbound.queueUrl, tenants };
if (process.send) process.send(ready);
else console.log(JSON.stringify(ready));

const stop = async () => {
  await sqsServer.stop().catch(() => {});
  await new Promise<void>((r) => db.close(() => r()));
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('disconnect', stop);
