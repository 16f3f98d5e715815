import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateTableCommand, DynamoDBClient, type CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import dynalite from 'dynalite';
import { startFauxqs, type FauxqsServer } from 'fauxqs';
import { RequestCounter } from '../../adapters/requestCounter.js';
import { createTableInput } from '../../adapters/tableSchema.js';
import { withoutSdkLogger } from '../../adapters/sdkClients.js';
import { alignFauxqsCharset } from '../../local/fauxqsCharset.js';

const region = 'us-east-1';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

/** dynalite and fauxqs, started in-process on free ports, with SDK clients that count requests. */
export interface Emulators {
  readonly dynamo: DynamoDBClient;
  readonly sqs: SQSClient;
  readonly counter: RequestCounter;
  readonly dynamoEndpoint: string;
  readonly sqsEndpoint: string;
  /**
   * Creates a table with the scheduler's key schema under a unique name (or, with `input`, the
   * table that function describes for the name: an index added, say).
   */
  createTable(prefix?: string, input?: (tableName: string) => CreateTableCommandInput): Promise<string>;
  /** Creates a queue (and, with `dlq`, its DLQ with redrive) under a unique name. */
  createQueue(
    prefix: string,
    opts?: { dlq?: boolean; maxReceiveCount?: number; visibilityTimeout?: number },
  ): Promise<{ url: string; dlqUrl?: string }>;
  /** A fresh SDK client against the emulators (for fault-injecting wrappers and second "processes"). */
  newClients(counter?: RequestCounter): { dynamo: DynamoDBClient; sqs: SQSClient };
  stop(): Promise<void>;
}

export async function startEmulators(): Promise<Emulators> {
  const dyn: Server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    dyn.once('error', reject);
    dyn.listen(0, '127.0.0.1', () => resolve());
  });
  // Idle keep-alive connections held longer than the SDK keeps them (Node's default 5 s closes one
  // as a client reuses it: "socket hang up" under load).
  dyn.keepAliveTimeout = 65_000;
  dyn.headersTimeout = 66_000;
  const inFlight = trackRequests(dyn);
  const fauxqs: FauxqsServer = await startFauxqs({ port: 0, host: '127.0.0.1', logger: false, defaultRegion: region });
  // SQS's documented body character set, emoji included (local/fauxqsCharset.ts).
  await alignFauxqsCharset();
  return emulatorsAt(`http://127.0.0.1:${(dyn.address() as AddressInfo).port}`, `http://127.0.0.1:${fauxqs.port}`, async () => {
    await fauxqs.stop();
    // dynalite closes its database once the last connection ends, but a request whose client
    // went away keeps running (a batch of deletes, say) and then throws "Database is closed"
    // outside any test. Let such requests finish first.
    await inFlight.idle(5_000);
    await new Promise<void>((resolve) => dyn.close(() => resolve()));
  });
}

/** Counts the requests a server is still answering (until it calls `end`, even on a dead socket). */
function trackRequests(server: Server): { idle(maxWaitMs: number): Promise<void> } {
  let n = 0;
  server.prependListener('request', (_req, res) => {
    n++;
    const end = res.end.bind(res) as (...a: unknown[]) => typeof res;
    let done = false;
    res.end = ((...args: unknown[]) => {
      if (!done) {
        done = true;
        n--;
      }
      return end(...args);
    }) as typeof res.end;
  });
  return {
    async idle(maxWaitMs) {
      const until = Date.now() + maxWaitMs;
      while (n > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    },
  };
}

/**
 * The {@link Emulators} interface over DynamoDB and SQS endpoints that are already running
 * (in process here, in child processes in the benchmark); `stopServers` runs after the clients close.
 */
export function emulatorsAt(dynamoEndpoint: string, sqsEndpoint: string, stopServers: () => Promise<void>): Emulators {
  const counter = new RequestCounter();
  const newClients = (c: RequestCounter = counter) => ({
    dynamo: c.attach(withoutSdkLogger(new DynamoDBClient({ endpoint: dynamoEndpoint, region, credentials, maxAttempts: 3 }))),
    sqs: c.attach(withoutSdkLogger(new SQSClient({ endpoint: sqsEndpoint, region, credentials, maxAttempts: 3 }))),
  });
  const { dynamo, sqs } = newClients();
  const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

  return {
    dynamo,
    sqs,
    counter,
    dynamoEndpoint,
    sqsEndpoint,
    newClients,
    async createTable(prefix = 'scheduler', input = createTableInput) {
      const name = unique(prefix);
      await dynamo.send(new CreateTableCommand(input(name)));
      return name;
    },
    async createQueue(prefix, opts = {}) {
      const name = unique(prefix);
      let dlqUrl: string | undefined;
      const attributes: Record<string, string> = { VisibilityTimeout: String(opts.visibilityTimeout ?? 30) };
      if (opts.dlq) {
        dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `${name}-dlq` }))).QueueUrl!;
        const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))).Attributes!
          .QueueArn!;
        attributes.RedrivePolicy = JSON.stringify({ deadLetterTargetArn: arn, maxReceiveCount: opts.maxReceiveCount ?? 5 });
      }
      const url = (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl!;
      return { url, dlqUrl };
    },
    async stop() {
      dynamo.destroy();
      sqs.destroy();
      await stopServers();
    },
  };
}
