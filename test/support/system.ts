import { randomBytes } from 'node:crypto';
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, SQSEvent } from 'aws-lambda';
import { resolveSettings, type SchedulerSettings, shardsOfGroup } from '../../core/model/config.js';
import { dispatchLoop } from '../../core/dispatch/loop.js';
import type { Clock } from '../../core/model/ports.js';
import type { LambdaConfig } from '../../lambdas/runtime/config.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { wire, type Wiring } from '../../lambdas/runtime/wiring.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from './emulators.js';
import { httpApiEvent } from './lambdaEvents.js';

export interface TestSystem {
  readonly w: Wiring;
  readonly tableName: string;
  readonly inboundUrl: string;
  readonly tenants: Record<string, { url: string; dlqUrl: string }>;
  readonly idKey: Buffer;
  /** A second, independent wiring over the same resources (another Lambda instance). */
  another(opts?: { dynamo?: import('@aws-sdk/client-dynamodb').DynamoDBClient; sqs?: SQSClient; clock?: Clock }): Promise<Wiring>;
  /** Runs the inbound event source into the ingest handler until stopped. */
  startIngest(): { stop(): Promise<void> };
}

/** Table, inbound queue and tenant queues under unique names, tenants registered, core wired. */
export async function createSystem(
  em: Emulators,
  opts: {
    tenants?: string[];
    settings?: Partial<SchedulerSettings>;
    clock?: Clock;
    /** The DynamoDB client the wiring uses (default `em.dynamo`): one with middleware, say. */
    dynamo?: import('@aws-sdk/client-dynamodb').DynamoDBClient;
    /** The table to create (default: the scheduler's, `createTableInput`). */
    tableInput?: (tableName: string) => import('@aws-sdk/client-dynamodb').CreateTableCommandInput;
    /** Where the wiring's spans go (docs/tracing.md); default none. */
    spans?: import('../../core/model/index.js').SpanSink;
  } = {},
): Promise<TestSystem> {
  const settings = resolveSettings(opts.settings);
  const tableName = await em.createTable(undefined, opts.tableInput);
  // 30 s: ingest's Lambda timeout (AWS sets 180 s); an invocation of 10 packed messages may write 1,000 rows.
  const inbound = await em.createQueue('inbound', { dlq: true, visibilityTimeout: 30 });
  const idKey = randomBytes(32);
  const config: LambdaConfig = { tableName, inboundQueueUrl: inbound.url, settings, idKey: { base64: idKey.toString('base64') } };
  const make = (o: { dynamo?: import('@aws-sdk/client-dynamodb').DynamoDBClient; sqs?: SQSClient; clock?: Clock } = {}) =>
    wire(config, {
      dynamo: o.dynamo ?? opts.dynamo ?? em.dynamo,
      sqs: o.sqs ?? em.sqs,
      clock: o.clock ?? opts.clock,
      idKey,
      ...(opts.spans ? { spans: opts.spans } : {}),
    });
  const w = await make();
  const tenants: TestSystem['tenants'] = {};
  for (const name of opts.tenants ?? ['demo']) {
    const q = await em.createQueue(`tenant-${name}`, { dlq: true });
    tenants[name] = { url: q.url, dlqUrl: q.dlqUrl! };
    await w.store.putTenant({ name, queueUrl: q.url, dlqUrl: q.dlqUrl! });
  }
  return {
    w,
    tableName,
    inboundUrl: inbound.url,
    tenants,
    idKey,
    another: make,
    startIngest: () => {
      const handle = ingestHandler(w);
      return startSqsEventSource({ sqs: em.sqs, queueUrl: inbound.url, handler: (e: SQSEvent) => handle(e), waitTimeSeconds: 1 });
    },
  };
}

export interface Delivery {
  readonly jobId: string;
  readonly tenant: string;
  readonly runAt: string;
  readonly payload: unknown;
  /** Local clock when the receive call returned. */
  readonly receivedAt: number;
  /** SQS's own first-receive timestamp. */
  readonly firstReceiveAt: number;
  readonly attributeRunAt: string | undefined;
  /** The message body as SQS delivered it. */
  readonly body: string;
  /** The message attributes' string values. */
  readonly attributes: Readonly<Record<string, string | undefined>>;
  /** The message id SQS gave it. */
  readonly messageId: string;
}

/** Drains a queue until stopped, recording every delivery (duplicates included). */
export function consume(
  sqs: SQSClient,
  queueUrl: string,
): { deliveries: Delivery[]; stop(): Promise<void>; waitFor(pred: (d: Delivery[]) => boolean, timeoutMs: number): Promise<void> } {
  const deliveries: Delivery[] = [];
  const abort = new AbortController();
  const loop = (async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
            MessageSystemAttributeNames: ['All'],
          }),
          { abortSignal: abort.signal },
        );
        const receivedAt = Date.now();
        const msgs = res.Messages ?? [];
        for (const m of msgs) {
          const body = JSON.parse(m.Body ?? '{}');
          deliveries.push({
            ...body,
            receivedAt,
            messageId: m.MessageId ?? '',
            firstReceiveAt: Number(m.Attributes?.ApproximateFirstReceiveTimestamp ?? 0),
            attributeRunAt: m.MessageAttributes?.runAt?.StringValue,
            body: m.Body ?? '',
            attributes: Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue])),
          });
        }
        if (msgs.length > 0) {
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
            }),
          );
        }
      } catch {
        if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
  return {
    deliveries,
    async stop() {
      abort.abort();
      await loop;
    },
    async waitFor(pred, timeoutMs) {
      const until = Date.now() + timeoutMs;
      while (!pred(deliveries) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    },
  };
}

/** Nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

/** An API Gateway HTTP API v2 event, as the routes deliver it ({@link httpApiEvent}). */
export function httpEvent(
  method: string,
  path: string,
  opts: { body?: string; pathParameters?: Record<string, string>; routeKey?: string } = {},
): APIGatewayProxyEventV2 {
  return httpApiEvent({ method, path, ...opts });
}

/** Submits job bodies through the batch API (chunks of 100); returns the replies in order. */
export async function submitJobs(
  sys: TestSystem,
  tenant: string,
  jobs: readonly object[],
): Promise<{ jobId: string; runAt: string; state: string }[]> {
  const out: { jobId: string; runAt: string; state: string }[] = [];
  for (let i = 0; i < jobs.length; i += 100) {
    const { results } = await sys.w.submitter.submitBatch(tenant, JSON.stringify({ jobs: jobs.slice(i, i + 100) }));
    for (const r of results) {
      if ('error' in r) throw new Error(`submit failed: ${r.error.code} ${r.error.message}`);
      out.push(r);
    }
  }
  return out;
}

/** Waits until a queue holds nothing (visible, in flight or delayed). */
export async function waitForEmptyQueue(sqs: SQSClient, queueUrl: string, timeoutMs = 20_000): Promise<void> {
  const { GetQueueAttributesCommand } = await import('@aws-sdk/client-sqs');
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const a = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }))).Attributes ?? {};
    const n =
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0);
    if (n === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`queue ${queueUrl} still holds messages after ${timeoutMs} ms`);
}

/** Runs the dispatch loop for every group until the returned stop() is called. */
export function runAllGroups(deps: Wiring['dispatch'], opts: { owner?: string; signal?: AbortSignal } = {}): { stop(): Promise<void> } {
  const abort = new AbortController();
  opts.signal?.addEventListener('abort', () => abort.abort(), { once: true });
  const start = Date.now();
  const loops = Promise.all(
    Array.from({ length: deps.settings.groupCount }, (_, group) =>
      dispatchLoop(deps, {
        groups: [group],
        owner: opts.owner ?? `exec-${start}`,
        ownerStartMs: start,
        untilMs: start + 600_000,
        signal: abort.signal,
      }),
    ),
  );
  // A dispatcher's failure fails stop() rather than ending the process as an unhandled rejection.
  loops.catch(() => undefined);
  return {
    async stop() {
      abort.abort();
      await loops;
    },
  };
}

/** Runs the system as deployed: ingest from the inbound queue and every dispatch group; stop() ends both. */
export function runSystem(sys: TestSystem, opts: { owner?: string } = {}): { stop(): Promise<void> } {
  const ingest = sys.startIngest();
  const dispatch = runAllGroups(sys.w.dispatch, opts);
  return {
    async stop() {
      await dispatch.stop();
      await ingest.stop();
    },
  };
}

export interface RunningSystem {
  readonly em: Emulators;
  readonly sys: TestSystem;
  /** Stops dispatch, ingest and the emulators. */
  stop(): Promise<void>;
}

/**
 * Emulators and a running system over them (`createSystem`, then `runSystem`): one call for a test
 * file's `beforeAll`, one `stop()` for its `afterAll`, which also stops the emulators.
 */
export async function startRunningSystem(opts: Parameters<typeof createSystem>[1] = {}): Promise<RunningSystem> {
  const em = await startEmulators();
  try {
    const sys = await createSystem(em, opts);
    const running = runSystem(sys);
    return {
      em,
      sys,
      async stop() {
        await running.stop();
        await em.stop();
      },
    };
  } catch (err) {
    await em.stop();
    throw err;
  }
}

/** A queue's visible and in-flight messages (approximate, as SQS counts them). */
export async function queueDepth(sqs: SQSClient, url: string): Promise<{ visible: number; hidden: number }> {
  const a =
    (
      await sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      )
    ).Attributes ?? {};
  return { visible: Number(a.ApproximateNumberOfMessages ?? 0), hidden: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) };
}

/** Every message a queue holds now, with its attributes (received, left invisible for a minute). */
export async function receiveAll(sqs: SQSClient, url: string): Promise<Message[]> {
  const all: Message[] = [];
  for (;;) {
    const res = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageAttributeNames: ['All'] }),
    );
    if (!res.Messages?.length) return all;
    all.push(...res.Messages);
  }
}

/** A job row for `ingestJob` in the first shard of `group` (tenant `demo`), due at `dueMs`; its payload the JSON text of `random`. */
export function rowInGroup(
  sys: TestSystem,
  settings: Pick<SchedulerSettings, 'shardCount' | 'groupCount'>,
  group: number,
  dueMs: number,
  random: string,
) {
  const shard = shardsOfGroup(group, settings)[0]!;
  return {
    jobId: sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random }),
    tenant: 'demo',
    shard,
    dueMs,
    payload: `"${random}"`,
  };
}
