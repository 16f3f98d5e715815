import { createHash, randomBytes } from 'node:crypto';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDeadLetterEdits } from '../../adapters/dynamoDeadLetterEdits.js';
import { SqsDeadLetters } from '../../adapters/sqsDeadLetters.js';
import { DeadLetterService, type DeadLetterQueues } from '../../core/deadLetters/index.js';
import { deliveryMessage, systemClock } from '../../core/model/index.js';
import { dlqHandler, outcomesHandler, statusHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, queueDepth, receiveAll as receiveQueue, type TestSystem } from '../support/system.js';

/**
 * Editing a dead letter (`POST .../dlq/edit`): the message back on the tenant queue with the new
 * payload's text byte for byte and every other byte of its body kept, gone from the DLQ, an audit
 * entry (`GET .../dlq/audit`, and the job's timeline for a history tenant); bad input changes
 * nothing.
 */

let em: Emulators;
let sys: TestSystem;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['demo', 'other'] });
  // demo keeps history: its jobs' timelines show their edits.
  await sys.w.store.putTenant({
    name: 'demo',
    queueUrl: sys.tenants.demo!.url,
    dlqUrl: sys.tenants.demo!.dlqUrl,
    historyTtlMs: 86_400_000,
  });
});
afterAll(async () => em?.stop());

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** A dead letter as a worker that gave up leaves it: a Dynein delivery of `tenant` with its runAt and the worker's error. */
async function deadLetter(tenant: string, payload: string, opts: { schedule?: string } = {}): Promise<{ jobId: string; body: string }> {
  const dueMs = Date.now() - 60_000;
  const jobId = sys.w.codec.encode({ tenant, shard: 1, dueMs, path: 't', random: randomBytes(12).toString('base64url') });
  const m = deliveryMessage('0', { jobId, tenant, dueMs, payload, ...opts }, undefined, { history: tenant === 'demo' });
  await em.sqs.send(
    new SendMessageCommand({
      QueueUrl: sys.tenants[tenant]!.dlqUrl,
      MessageBody: m.body,
      MessageAttributes: {
        ...Object.fromEntries(Object.entries(m.attributes ?? {}).map(([k, v]) => [k, { DataType: 'String', StringValue: v }])),
        dyneinError: { DataType: 'String', StringValue: 'handler threw: boom' },
      },
    }),
  );
  return { jobId, body: m.body };
}

async function call(
  method: 'GET' | 'POST',
  path: string,
  body?: string,
  opts: { query?: Record<string, string>; queues?: DeadLetterQueues } = {},
) {
  const tenant = /tenants\/([^/]+)/.exec(path)![1]!;
  const event = httpEvent(method, path, { pathParameters: { tenant }, ...(body !== undefined ? { body } : {}) });
  const w = opts.queues
    ? { ...sys.w, deadLetters: new DeadLetterService({ ...sys.w, ...editDeps(), queues: opts.queues, clock: systemClock }) }
    : sys.w;
  const res = await dlqHandler(w)({
    ...event,
    ...(opts.query ? { queryStringParameters: opts.query } : {}),
    requestContext: { ...event.requestContext, authorizer: { iam: { userArn: 'arn:aws:iam::123456789012:user/ops' } } } as never,
  });
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
}

/** The audit trail and settings the wiring gives the service, for one built around other queues. */
const editDeps = () => ({ edits: new DynamoDeadLetterEdits(sys.tableName, em.dynamo), settings: sys.w.config.settings });

/** The handle GET .../dlq shows for the message of `jobId`. */
async function handleOf(tenant: string, jobId: string): Promise<string> {
  for (let i = 0; i < 5; i++) {
    const peek = await call('GET', `/v1/tenants/${tenant}/dlq`);
    const found = (peek.body.messages as { jobId?: string; handle: string }[]).find((m) => m.jobId === jobId);
    if (found) return found.handle;
  }
  throw new Error(`no dead letter of ${jobId}`);
}

async function depth(url: string): Promise<number> {
  const { visible, hidden } = await queueDepth(em.sqs, url);
  return visible + hidden;
}

const receiveAll = (url: string) => receiveQueue(em.sqs, url);

/** Every audit item of the table (both partitions), to show that a refused edit wrote none. */
async function auditItems(): Promise<number> {
  let n = 0;
  for (const pk of ['dlqa#demo', 'dlqa#other', 'h#e#1']) {
    const res = await em.dynamo.send(
      new QueryCommand({ TableName: sys.tableName, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': { S: pk } } }),
    );
    n += res.Count ?? 0;
  }
  return n;
}

describe('editing a dead letter', () => {
  it('puts it back with the new payload text byte for byte, every other byte kept, deletes it from the DLQ, and audits it', async () => {
    const oldPayload = '{"order":42,"amount":1.50}';
    const { jobId, body } = await deadLetter('other', oldPayload, { schedule: 'nightly' });
    const handle = await handleOf('other', jobId);
    // Spacing, a trailing zero, a non-ASCII character and an escape: kept as sent.
    const newPayload = '{ "order" : 42, "amount":1.50 , "note":"caf\u00e9 \\u00e9" }';
    const before = Date.now();
    const res = await call('POST', '/v1/tenants/other/dlq/edit', `{"handle":${JSON.stringify(handle)},"payload":${newPayload}}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      jobId,
      editedAt: expect.any(String),
      oldPayloadSha256: sha(oldPayload),
      newPayloadSha256: sha(newPayload),
    });
    expect(Date.parse(res.body.editedAt)).toBeGreaterThanOrEqual(before - 1);

    const [sent, ...more] = await receiveAll(sys.tenants.other!.url);
    expect(more).toEqual([]);
    expect(sent!.Body).toBe(body.slice(0, body.length - oldPayload.length - 1) + newPayload + '}');
    expect(JSON.parse(sent!.Body!).schedule).toBe('nightly');
    // Its attributes, the worker's error of the failed attempt apart.
    expect(Object.keys(sent!.MessageAttributes ?? {}).sort()).toEqual(['runAt', 'schedule', 'traceparent']);
    expect(await depth(sys.tenants.other!.dlqUrl)).toBe(0);

    // The audit: the caller, the payloads' hashes, the message edited; newest first.
    const audit = await call('GET', '/v1/tenants/other/dlq/audit');
    expect(audit.status).toBe(200);
    expect(audit.body.edits).toEqual([
      {
        at: res.body.editedAt,
        jobId,
        by: 'arn:aws:iam::123456789012:user/ops',
        oldPayloadSha256: sha(oldPayload),
        newPayloadSha256: sha(newPayload),
        messageId: expect.any(String),
      },
    ]);
    // The handle is spent: a second edit finds nothing.
    const again = await call('POST', '/v1/tenants/other/dlq/edit', JSON.stringify({ handle, payload: 1 }));
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('DeadLetterNotFound');
  });

  it("shows the edit in a history tenant's job timeline, after the attempt that failed", async () => {
    const { jobId } = await deadLetter('demo', '{"v":1}');
    const id = sys.w.codec.parse(jobId);
    expect(
      await sys.w.store.markDelivered(
        [{ shard: id.shard, dueMs: id.dueMs, jobId, tenant: 'demo', expiresAtMs: Date.now() + 86_400_000 }],
        Date.now(),
      ),
    ).toEqual([]);
    const reported = await outcomesHandler(sys.w)(
      httpEvent('POST', '/v1/tenants/demo/jobs/outcomes', {
        pathParameters: { tenant: 'demo' },
        body: JSON.stringify({
          outcomes: [
            { jobId, outcome: 'DEAD', attempts: 3, receivedAt: new Date(Date.now() - 1_000).toISOString(), durationMs: 5, error: 'boom' },
          ],
        }),
      }),
    );
    expect(reported.statusCode).toBe(200);
    const edit = await call(
      'POST',
      '/v1/tenants/demo/dlq/edit',
      JSON.stringify({ handle: await handleOf('demo', jobId), payload: { v: 2 } }),
    );
    expect(edit.status).toBe(200);
    const status = await statusHandler(sys.w)(
      httpEvent('GET', `/v1/tenants/demo/jobs/${jobId}`, { pathParameters: { tenant: 'demo', jobId } }),
    );
    const timeline = (JSON.parse(status.body) as { timeline: Record<string, unknown>[] }).timeline;
    expect(timeline.map((e) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'DEAD', 'EDITED']);
    expect(timeline.at(-1)).toEqual({
      at: edit.body.editedAt,
      event: 'EDITED',
      by: 'arn:aws:iam::123456789012:user/ops',
      oldPayloadSha256: sha('{"v":1}'),
      newPayloadSha256: sha('{"v":2}'),
    });
  });

  it('pages the audit newest first with cursors that only this tenant can use', async () => {
    for (let i = 0; i < 3; i++) {
      const { jobId } = await deadLetter('other', `{"n":${i}}`);
      expect(
        (
          await call(
            'POST',
            '/v1/tenants/other/dlq/edit',
            JSON.stringify({ handle: await handleOf('other', jobId), payload: { n: i + 10 } }),
          )
        ).status,
      ).toBe(200);
    }
    const first = await call('GET', '/v1/tenants/other/dlq/audit', undefined, { query: { limit: '2' } });
    expect(first.body.edits).toHaveLength(2);
    const second = await call('GET', '/v1/tenants/other/dlq/audit', undefined, { query: { limit: '2', cursor: first.body.cursor } });
    const all = [...first.body.edits, ...second.body.edits] as { at: string; newPayloadSha256: string }[];
    expect(all.slice(0, 3).map((e) => e.newPayloadSha256)).toEqual([sha('{"n":12}'), sha('{"n":11}'), sha('{"n":10}')]);
    expect([...all.map((e) => e.at)].sort().reverse()).toEqual(all.map((e) => e.at));
    const foreign = await call('GET', '/v1/tenants/demo/dlq/audit', undefined, { query: { cursor: first.body.cursor } });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.message).toMatch(/cursor/);
    const bad = await call('GET', '/v1/tenants/other/dlq/audit', undefined, { query: { limit: '0' } });
    expect(bad.status).toBe(400);
  });

  it('refuses bad input with a 4xx that says what is wrong, and changes nothing', async () => {
    // The earlier tests' edits out of the way (left invisible).
    await receiveAll(sys.tenants.other!.url);
    const { jobId } = await deadLetter('other', '{"keep":true}');
    const handle = await handleOf('other', jobId);
    // A message that is not a Dynein delivery (sent to the queue by something else).
    await em.sqs.send(new SendMessageCommand({ QueueUrl: sys.tenants.other!.dlqUrl, MessageBody: 'not json' }));
    const peek = await call('GET', '/v1/tenants/other/dlq');
    const foreign = (peek.body.messages as { body: string; handle: string }[]).find((m) => m.body === 'not json')!.handle;
    const itemsBefore = await auditItems();
    const cases: [string, string, number, string, RegExp][] = [
      ['not JSON', 'nope', 400, 'ValidationError', /not JSON/],
      ['no payload', JSON.stringify({ handle }), 400, 'ValidationError', /payload is missing/],
      ['no handle', JSON.stringify({ payload: 1 }), 400, 'ValidationError', /handle/],
      ['an unknown field', JSON.stringify({ handle, payload: 1, runAt: 'x' }), 400, 'ValidationError', /unknown field runAt/],
      ['a forged handle', JSON.stringify({ handle: `${handle.split('.')[0]}.AAAA`, payload: 1 }), 400, 'ValidationError', /not a handle/],
      [
        'a payload too deep',
        `{"handle":${JSON.stringify(handle)},"payload":${'['.repeat(1_001)}${']'.repeat(1_001)}}`,
        400,
        'ValidationError',
        /nests/,
      ],
      ['a payload too large', JSON.stringify({ handle, payload: 'x'.repeat(241 * 1024) }), 413, 'PayloadTooLarge', /above the limit/],
      ['a message that is not a delivery', JSON.stringify({ handle: foreign, payload: 1 }), 409, 'NotADelivery', /redrive or delete it/],
    ];
    for (const [what, body, status, code, message] of cases) {
      const res = await call('POST', '/v1/tenants/other/dlq/edit', body);
      expect([what, res.status, res.body.error?.code]).toEqual([what, status, code]);
      expect(res.body.error.message).toMatch(message);
    }
    // Another tenant's handle is not this tenant's.
    const cross = await call('POST', '/v1/tenants/demo/dlq/edit', JSON.stringify({ handle, payload: 1 }));
    expect(cross.status).toBe(400);
    // Nothing was sent, deleted or audited: both messages still in the DLQ, as they were.
    expect(await auditItems()).toBe(itemsBefore);
    expect(await receiveAll(sys.tenants.other!.url)).toEqual([]);
    const left = (await receiveAll(sys.tenants.other!.dlqUrl)).map((m) => m.Body!);
    expect(left).toHaveLength(2);
    expect(left).toContain('not json');
    expect(left.find((b) => b !== 'not json')).toMatch(/"payload":\{"keep":true\}\}$/);
  });

  it('a send that fails leaves the dead letter in the DLQ, unchanged (500); a delete that fails says sentNotDeleted', async () => {
    await receiveAll(sys.tenants.other!.url);
    const real = new SqsDeadLetters(em.sqs);
    const { jobId } = await deadLetter('other', '{"try":1}');
    const handle = await handleOf('other', jobId);
    // SQS's refusals, which the emulator cannot be made to produce: the adapter's answers replaced.
    const sendFails: DeadLetterQueues = Object.assign(Object.create(real) as DeadLetterQueues, {
      send: async () => {
        throw new Error('throttled');
      },
    });
    const failed = await call('POST', '/v1/tenants/other/dlq/edit', JSON.stringify({ handle, payload: 2 }), { queues: sendFails });
    expect(failed.status).toBe(500);
    expect(failed.body.error.message).toMatch(/still in the DLQ, unchanged/);
    expect(await receiveAll(sys.tenants.other!.url)).toEqual([]);

    const deleteFails: DeadLetterQueues = Object.assign(Object.create(real) as DeadLetterQueues, {
      delete: async (_url: string, handles: readonly string[]) => [...handles],
    });
    const half = await call('POST', '/v1/tenants/other/dlq/edit', JSON.stringify({ handle, payload: 3 }), { queues: deleteFails });
    expect(half.status).toBe(200);
    expect(half.body.sentNotDeleted).toBe(true);
    const sent = await receiveAll(sys.tenants.other!.url);
    expect(sent.map((m) => JSON.parse(m.Body!).payload)).toEqual([3]);
    const left = (await receiveAll(sys.tenants.other!.dlqUrl)).filter((m) => m.Body!.includes(jobId));
    expect(left.map((m) => JSON.parse(m.Body!).payload)).toEqual([{ try: 1 }]);
  });
});
