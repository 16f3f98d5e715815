/**
 * A client-only consumer, end to end, as a plain node script: schedule a job, read its status,
 * cancel another one, then consume the tenant's queue with a Worker until the first job arrives.
 * It needs only `npm install dynein-serverless` (no CDK).
 *
 * Against the local stack (`npx dynein local` in another terminal): keys and queue URL come from
 * `.dynein/local.json` (or $DYNEIN_DATA_DIR/local.json). Against a deployment: set
 * DYNEIN_ENDPOINT (and AWS_REGION, DYNEIN_QUEUE_URL); credentials come from the AWS default chain.
 *
 *   npx tsc && node dist/client-quickstart.js   # DYNEIN_TENANT=demo by default
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SQSClient } from '@aws-sdk/client-sqs';
import { AlreadyQueuedError, DyneinClient, NotCancellableError, Worker, type Credentials } from 'dynein-serverless';

interface Target {
  endpoint: string;
  region: string;
  credentials?: Credentials;
  queueUrl: string;
  sqs: SQSClient;
}

const tenant = process.env.DYNEIN_TENANT ?? 'demo';

/** Where to talk to: $DYNEIN_ENDPOINT on AWS, else the local stack's local.json. */
function target(): Target {
  const endpoint = process.env.DYNEIN_ENDPOINT;
  if (endpoint) {
    const region = process.env.AWS_REGION ?? 'us-east-1';
    const queueUrl = process.env.DYNEIN_QUEUE_URL;
    if (!queueUrl) throw new Error(`set DYNEIN_QUEUE_URL to tenant ${tenant}'s queue`);
    return { endpoint, region, queueUrl, sqs: new SQSClient({ region }) };
  }
  const file = join(process.env.DYNEIN_DATA_DIR ?? '.dynein', 'local.json');
  if (!existsSync(file)) throw new Error(`${file} not found: start the local stack (npx dynein local), or set DYNEIN_ENDPOINT`);
  const local = JSON.parse(readFileSync(file, 'utf8')) as {
    endpoint: string;
    region: string;
    sqsEndpoint: string;
    tenants: Record<string, { accessKeyId: string; secretAccessKey: string; queueUrl: string } | undefined>;
  };
  const keys = local.tenants[tenant];
  if (!keys) throw new Error(`tenant ${tenant} is not in the local stack: npx dynein local --tenants ${tenant}`);
  const credentials = { accessKeyId: keys.accessKeyId, secretAccessKey: keys.secretAccessKey };
  return {
    endpoint: local.endpoint,
    region: local.region,
    credentials,
    queueUrl: keys.queueUrl,
    sqs: new SQSClient({ endpoint: local.sqsEndpoint, region: local.region, credentials }),
  };
}

const t = target();
const client = new DyneinClient({ endpoint: t.endpoint, region: t.region, ...(t.credentials ? { credentials: t.credentials } : {}) });

// Schedule a job in 2 seconds and read its status.
const job = await client.schedule(tenant, { payload: { greeting: 'hello from the quickstart' }, delaySeconds: 2 });
console.log(`scheduled ${job.jobId} for ${job.runAt}`);
console.log(`status: ${(await client.get(tenant, job.jobId)).state}`);

// Schedule another one in an hour, and cancel it.
const later = await client.schedule(tenant, { payload: { greeting: 'never delivered' }, delaySeconds: 3600 });
try {
  console.log(`cancelled: ${(await client.cancel(tenant, later.jobId)).state}`);
} catch (err) {
  if (err instanceof AlreadyQueuedError || err instanceof NotCancellableError) console.log('too late to cancel');
  else throw err;
}

// Consume the tenant's queue until the first job arrives (at most a minute).
const worker = new Worker<{ greeting: string }>({
  queueUrl: t.queueUrl,
  sqs: t.sqs,
  waitTimeSeconds: 1,
  handler: async (delivered, { latenessMs }) => {
    console.log(`received ${delivered.jobId}: ${delivered.payload.greeting} (${latenessMs} ms after its runAt)`);
    if (delivered.jobId === job.jobId) void worker.stop();
  },
});
const timeout = setTimeout(() => {
  console.error('no delivery within 60 s');
  process.exitCode = 1;
  void worker.stop();
}, 60_000);
await worker.run();
clearTimeout(timeout);
t.sqs.destroy();
