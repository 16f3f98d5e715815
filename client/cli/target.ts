import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { sleep } from '../../core/util/index.js';
import { packDeadLetters } from '../../core/deadLetters/index.js';
import type { Credentials } from '../transport.js';
import { UsageError } from './errors.js';

/** `$DYNEIN_DATA_DIR/local.json`, as `npm start` writes it. */
export interface LocalJson {
  readonly endpoint: string;
  readonly region: string;
  readonly sqsEndpoint: string;
  readonly tenants: Readonly<Record<string, { accessKeyId: string; secretAccessKey: string; queueUrl: string; dlqUrl: string }>>;
  /** The operator key (the admin routes only). */
  readonly admin?: { accessKeyId: string; secretAccessKey: string };
}

/** Where the CLI talks to: the API, the tenant's queues, and the credentials for both. */
export interface Target {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: Credentials;
  readonly local: boolean;
  readonly queueUrl?: string;
  readonly dlqUrl?: string;
  /** An SQS client for the tenant's queues (created on first use). */
  sqs(): SQSClient;
  /** Destroys the SQS client, if one was made. */
  close(): void;
}

export interface TargetOptions {
  readonly tenant: string;
  readonly endpoint?: string;
  readonly region?: string;
  readonly profile?: string;
  readonly dataDir?: string;
  readonly queueUrl?: string;
  readonly dlqUrl?: string;
}

/**
 * Without `--endpoint`: the local stack's `local.json` (the tenant's keys and queues). With it:
 * AWS, credentials from the default provider chain (`--profile`), region from `--region`, the
 * environment or the endpoint's host name, and queues from `--queue-url` / `--dlq-url`.
 */
export function resolveTarget(o: TargetOptions, env: NodeJS.ProcessEnv = process.env): Target {
  let sqs: SQSClient | undefined;
  if (o.endpoint) {
    const region =
      o.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com/.exec(o.endpoint)?.[1];
    if (!region) throw new UsageError('no region: pass --region, or set AWS_REGION');
    const credentials = awsCredentials(o.profile);
    return {
      endpoint: o.endpoint,
      region,
      credentials,
      local: false,
      queueUrl: o.queueUrl,
      dlqUrl: o.dlqUrl,
      sqs: () => (sqs ??= new SQSClient({ region, credentials })),
      close: () => sqs?.destroy(),
    };
  }
  const dir = resolve(o.dataDir ?? env.DYNEIN_DATA_DIR ?? '.dynein');
  const file = join(dir, 'local.json');
  if (!existsSync(file))
    throw new Error(
      `no local stack running (${file} not found): start it with \`npx dynein local\` (\`npm start\` in a clone), or pass --endpoint for AWS`,
    );
  let local: LocalJson;
  try {
    local = JSON.parse(readFileSync(file, 'utf8')) as LocalJson;
  } catch (err) {
    throw new Error(`${file} is not valid JSON (${(err as Error).message}): restart the local stack`);
  }
  const tenant = local.tenants?.[o.tenant];
  if (!tenant)
    throw new Error(
      `tenant '${o.tenant}' is not in the local stack (it has ${Object.keys(local.tenants ?? {}).join(', ') || 'none'}): start it with \`dynein local --tenants ${o.tenant}\` (or DYNEIN_TENANTS=${o.tenant} npm start)`,
    );
  const credentials = { accessKeyId: tenant.accessKeyId, secretAccessKey: tenant.secretAccessKey };
  return {
    endpoint: local.endpoint,
    region: local.region,
    credentials,
    local: true,
    queueUrl: o.queueUrl ?? tenant.queueUrl,
    dlqUrl: o.dlqUrl ?? tenant.dlqUrl,
    sqs: () => (sqs ??= new SQSClient({ endpoint: local.sqsEndpoint, region: local.region, credentials })),
    close: () => sqs?.destroy(),
  };
}

/**
 * The AWS default credential chain, of one named profile when given; the failure of a named
 * profile names it (it came from a flag or DYNEIN_PROFILE).
 */
export function awsCredentials(profile?: string): ReturnType<typeof fromNodeProviderChain> {
  if (profile === undefined) return fromNodeProviderChain();
  const chain = fromNodeProviderChain({ profile });
  return async (options) => {
    try {
      return await chain(options);
    } catch (err) {
      throw new Error(`no AWS credentials for profile '${profile}' (--profile or DYNEIN_PROFILE): ${(err as Error).message}`);
    }
  };
}

/**
 * Where the operator commands (`dynein tenant ...`) talk to: the local stack with local.json's
 * `admin` key, or with `--endpoint` the API on AWS with the caller's own credentials (a principal
 * given `DyneinScheduler.grantAdmin`).
 */
export function resolveAdminTarget(
  o: Pick<TargetOptions, 'endpoint' | 'region' | 'profile' | 'dataDir'>,
  env: NodeJS.ProcessEnv = process.env,
): { endpoint: string; region: string; credentials: Credentials } {
  if (o.endpoint) {
    const { endpoint, region, credentials } = resolveTarget({ ...o, tenant: '' }, env);
    return { endpoint, region, credentials };
  }
  const local = readLocalJson(o.dataDir, env);
  if (!local.admin?.accessKeyId)
    throw new Error('the local stack wrote no operator key (local.json has no "admin"): restart it with this version (npm start)');
  return { endpoint: local.endpoint, region: local.region, credentials: { ...local.admin } };
}

/** The local stack's `local.json` (`$DYNEIN_DATA_DIR`, else `.dynein`), or an error saying how to start the stack. */
export function readLocalJson(dataDir?: string, env: NodeJS.ProcessEnv = process.env): LocalJson {
  const file = join(resolve(dataDir ?? env.DYNEIN_DATA_DIR ?? '.dynein'), 'local.json');
  if (!existsSync(file))
    throw new Error(
      `no local stack running (${file} not found): start it with \`npx dynein local\` (\`npm start\` in a clone), or pass --endpoint for AWS`,
    );
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LocalJson;
  } catch (err) {
    throw new Error(`${file} is not valid JSON (${(err as Error).message}): restart the local stack`);
  }
}

/**
 * The package's own package.json (name, version, peerDependencies), found by walking up from this
 * file: `client/cli/` in the repository, `dist/client/cli/` in the installed package.
 */
export function packageJson(from: string = fileURLToPath(import.meta.url)): {
  name: string;
  version: string;
  peerDependencies?: Record<string, string>;
} {
  const pkg = JSON.parse(readFileSync(join(packageRoot(from), 'package.json'), 'utf8')) as {
    name: string;
    version: string;
    peerDependencies?: Record<string, string>;
  };
  return pkg;
}

/** The package's root directory (where its package.json, `dist/` and `docs/` are), found by walking up from `from`. */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  for (let dir = dirname(from); ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'dynein-serverless' && typeof pkg.version === 'string') return dir;
    }
    if (dirname(dir) === dir) throw new Error(`no package.json of dynein-serverless above ${from}`);
  }
}

/** Errors SQS (or a stand-in) answers for an action it does not implement. */
const UNSUPPORTED = /InvalidAction|UnsupportedOperation|UnknownOperation|NotImplemented/;

/** Hears the count moved so far and, when known, of how many. */
type RedriveProgress = (moved: number, total?: number) => void;

/**
 * Moves every message of the DLQ back to the queue: `StartMessageMoveTask` where SQS has it
 * (waiting for the task to finish), else a receive, send, delete loop (a message leaves the DLQ
 * only after its copy was sent: a crash duplicates, never loses). `progress` hears the count moved
 * so far and of how many (the task's counts; for the copy, the DLQ's approximate depth at the start).
 */
export async function redrive(
  sqs: SQSClient,
  queueUrl: string,
  dlqUrl: string,
  log: (line: string) => void,
  progress?: RedriveProgress,
): Promise<{ moved: number; method: 'StartMessageMoveTask' | 'copy' }> {
  const arnOf = async (url: string) =>
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn;
  const [sourceArn, destinationArn] = await Promise.all([arnOf(dlqUrl), arnOf(queueUrl)]);
  try {
    return await moveTask(sqs, sourceArn, destinationArn, log, progress);
  } catch (err) {
    if (!UNSUPPORTED.test((err as Error).name ?? '')) throw err;
  }
  return copyBack(sqs, queueUrl, dlqUrl, progress);
}

/** Starts a message move task from the DLQ to the queue and waits for it to end; throws when it did not complete. */
async function moveTask(
  sqs: SQSClient,
  sourceArn: string | undefined,
  destinationArn: string | undefined,
  log: (line: string) => void,
  progress?: RedriveProgress,
): Promise<{ moved: number; method: 'StartMessageMoveTask' }> {
  const { TaskHandle } = await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: sourceArn, DestinationArn: destinationArn }));
  log(`started message move task ${TaskHandle}`);
  for (;;) {
    const [task] = (await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: sourceArn, MaxResults: 1 }))).Results ?? [];
    if (task && task.Status !== 'RUNNING') {
      if (task.Status !== 'COMPLETED')
        throw new Error(`message move task ${task.Status}${task.FailureReason ? `: ${task.FailureReason}` : ''}`);
      return { moved: task.ApproximateNumberOfMessagesMoved ?? 0, method: 'StartMessageMoveTask' };
    }
    if (task) progress?.(task.ApproximateNumberOfMessagesMoved ?? 0, task.ApproximateNumberOfMessagesToMove);
    await sleep(2_000);
  }
}

/** The receive, send, delete loop of an SQS without `StartMessageMoveTask`, until the DLQ answers empty twice. */
async function copyBack(
  sqs: SQSClient,
  queueUrl: string,
  dlqUrl: string,
  progress?: RedriveProgress,
): Promise<{ moved: number; method: 'copy' }> {
  let moved = 0;
  const total = progress
    ? Number(
        (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['ApproximateNumberOfMessages'] }))).Attributes
          ?.ApproximateNumberOfMessages,
      )
    : undefined;
  for (let empty = 0; empty < 2;) {
    const { Messages: msgs = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 60,
        MessageAttributeNames: ['All'],
      }),
    );
    if (msgs.length === 0) {
      empty++;
      continue;
    }
    empty = 0;
    const { ok, refused } = await sendCopies(sqs, queueUrl, msgs);
    // A message leaves the DLQ only after its copy was sent; one whose delete fails is in both.
    const notDeleted = await deleteSent(sqs, dlqUrl, ok);
    moved += ok.length - notDeleted.length;
    progress?.(moved, Number.isFinite(total) ? total : undefined);
    if (notDeleted.length > 0) {
      // Visible again at once, so that `dynein dlq peek` shows them for their delete.
      await sqs
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: dlqUrl,
            Entries: notDeleted.slice(0, 10).map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle!, VisibilityTimeout: 0 })),
          }),
        )
        .catch(() => undefined);
      throw new Error(
        `moved ${moved} message(s); ${notDeleted.length} more were sent to the queue but are still in the DLQ (the delete failed): ` +
          `message ids ${notDeleted.map((m) => m.MessageId).join(' ')}. Delete those from the DLQ (dynein dlq peek shows their handles, ` +
          'then dynein dlq delete); do not redrive them again: they would be delivered twice',
      );
    }
    if (refused.length > 0)
      throw new Error(`moved ${moved} message(s); could not send ${refused.length} to the queue: ${refused[0]} (they stay in the DLQ)`);
  }
  return { moved, method: 'copy' };
}

/** Sends copies of DLQ messages to the queue (without their `dyneinError`): those sent, and the errors of those refused. */
async function sendCopies(sqs: SQSClient, queueUrl: string, msgs: readonly Message[]): Promise<{ ok: Message[]; refused: string[] }> {
  // SendMessageBatch calls of at most 10 entries and 256 KiB (bodies and attributes).
  const copies = msgs.map((m, i) => {
    const { dyneinError: _dropped, ...attributes } = m.MessageAttributes ?? {};
    const sized = Object.fromEntries(
      Object.entries(attributes).map(([k, a]) => [
        k,
        { dataType: a.DataType ?? 'String', value: a.StringValue ?? Buffer.from(a.BinaryValue ?? new Uint8Array()).toString('base64') },
      ]),
    );
    return { id: String(i), body: m.Body ?? '', attributes: sized, sqsAttributes: attributes };
  });
  const ok: Message[] = [];
  const refused: string[] = [];
  for (const batch of packDeadLetters(copies)) {
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((c) => ({ Id: c.id, MessageBody: c.body, MessageAttributes: c.sqsAttributes })),
      }),
    );
    ok.push(...(sent.Successful ?? []).map((s) => msgs[Number(s.Id)]!));
    refused.push(...(sent.Failed ?? []).map((f) => `${f.Code}: ${f.Message ?? ''}`));
  }
  return { ok, refused };
}

/** Deletes from the DLQ the messages whose copies were sent; answers those not deleted. */
async function deleteSent(sqs: SQSClient, dlqUrl: string, ok: readonly Message[]): Promise<Message[]> {
  const notDeleted: Message[] = [];
  for (let i = 0; i < ok.length; i += 10) {
    const chunk = ok.slice(i, i + 10);
    try {
      const res = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: dlqUrl,
          Entries: chunk.map((m, j) => ({ Id: String(j), ReceiptHandle: m.ReceiptHandle! })),
        }),
      );
      notDeleted.push(...(res.Failed ?? []).map((f) => chunk[Number(f.Id)]!));
    } catch {
      notDeleted.push(...chunk);
    }
  }
  return notDeleted;
}
