import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';

/**
 * The dead-letter routes on the local stack (the compute process's dlq handler behind the local API
 * Gateway): signed requests, the per-tenant key rule, and `dynein dlq` against the running stack.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let sqs: SQSClient;

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta' });
  local = await stack.waitForLocalJson();
  sqs = localSqs(local);
}, 60_000);

afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
});

const depth = async (url: string) =>
  Number(
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }))).Attributes!
      .ApproximateNumberOfMessages,
  );

describe('dead letters on the local stack', () => {
  it('peeks, redrives by handle and refuses another tenant’s key; dynein dlq works against it', async () => {
    const alpha = local.tenants.alpha!;
    const runAt = '2030-01-01T00:00:00.000Z';
    for (const i of [1, 2])
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: alpha.dlqUrl,
          MessageBody: JSON.stringify({ jobId: `job-${i}`, tenant: 'alpha', runAt, payload: { i } }),
          MessageAttributes: { runAt: { DataType: 'String', StringValue: runAt } },
        }),
      );
    const peek = await signedFetch(local.endpoint, alpha, 'GET', '/v1/tenants/alpha/dlq?max=5', undefined, { region: local.region });
    expect(peek.status).toBe(200);
    expect(peek.json.messages.map((m: { jobId: string }) => m.jobId).sort()).toEqual(['job-1', 'job-2']);
    const handle = peek.json.messages.find((m: { jobId: string }) => m.jobId === 'job-1').handle as string;

    const denied = await signedFetch(local.endpoint, local.tenants.beta!, 'GET', '/v1/tenants/alpha/dlq', undefined, {
      region: local.region,
    });
    expect(denied.status).toBe(403);
    const redrive = await signedFetch(
      local.endpoint,
      alpha,
      'POST',
      '/v1/tenants/alpha/dlq/redrive',
      JSON.stringify({ handles: [handle] }),
      { region: local.region },
    );
    expect(redrive).toMatchObject({ status: 200, json: { redriven: [handle], notFound: [] } });
    expect(await depth(alpha.dlqUrl)).toBe(1);

    const out: string[] = [];
    const code = await main(['dlq', 'peek', '--tenant', 'alpha', '--json', '--data-dir', stack.dataDir], {
      out: (l) => out.push(l),
      err: () => {},
    });
    expect(code).toBe(0);
    expect(JSON.parse(out[0]!).messages.map((m: { jobId: string }) => m.jobId)).toEqual(['job-2']);
  });
});
