import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readConfig } from '../../lambdas/runtime/config.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { lambdaContext } from '../support/lambdaEvents.js';
import { consume, createSystem, httpEvent, type TestSystem } from '../support/system.js';

/**
 * The Lambda entry files as Lambda loads them: configuration from the environment at cold start,
 * middy with Powertools around the handler, clients created once at module load.
 */
let em: Emulators;
let sys: TestSystem;
const context = (ms = 60_000) => lambdaContext({ functionVersion: '1', getRemainingTimeInMillis: () => ms });

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { settings: { lookaheadMs: 1_000, leaseMs: 3_000 } });
  Object.assign(process.env, {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    DYNEIN_TABLE: sys.tableName,
    DYNEIN_INBOUND_QUEUE_URL: sys.inboundUrl,
    DYNEIN_ID_KEY: sys.idKey.toString('base64'),
    DYNEIN_LOOKAHEAD_MS: '1000',
    DYNEIN_LEASE_MS: '3000',
    DYNEIN_DYNAMODB_ENDPOINT: em.dynamoEndpoint,
    DYNEIN_SQS_ENDPOINT: em.sqsEndpoint,
  });
});
afterAll(async () => em?.stop());

describe('Lambda entry files', () => {
  it('submit, ingest, dispatch, status, cancel and workflows work as deployed', async () => {
    const submit = (await import('../../lambdas/submit.js')).handler;
    const status = (await import('../../lambdas/status.js')).handler;
    const cancel = (await import('../../lambdas/cancel.js')).handler;
    const workflows = (await import('../../lambdas/workflows.js')).handler;
    const ingest = (await import('../../lambdas/ingest.js')).handler;
    const dispatch = (await import('../../lambdas/dispatch.js')).handler;
    const tick = (await import('../../lambdas/tick.js')).handler;

    const runAt = new Date(Date.now() + 2_000).toISOString();
    const created = await submit(
      httpEvent('POST', '/v1/tenants/demo/jobs', {
        pathParameters: { tenant: 'demo' },
        body: JSON.stringify({ payload: { hello: 'world' }, runAt }),
      }),
      context(),
    );
    expect(created.statusCode).toBe(201);
    const job = JSON.parse(created.body!);
    expect(job).toMatchObject({ tenant: 'demo', runAt, state: 'SCHEDULED' });
    const other = JSON.parse(
      (
        await submit(
          httpEvent('POST', '/v1/tenants/demo/jobs', {
            pathParameters: { tenant: 'demo' },
            body: JSON.stringify({ payload: 2, delaySeconds: 600 }),
          }),
          context(),
        )
      ).body!,
    );

    // The inbound queue, as Lambda's event source would hand it over.
    const { ReceiveMessageCommand } = await import('@aws-sdk/client-sqs');
    const msgs =
      (await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.inboundUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }))).Messages ??
      [];
    expect(msgs).toHaveLength(2);
    const res = await ingest(
      { Records: msgs.map((m) => ({ messageId: m.MessageId!, receiptHandle: m.ReceiptHandle!, body: m.Body! })) } as never,
      context(),
    );
    expect(res).toEqual({ batchItemFailures: [] });
    const { DeleteMessageBatchCommand } = await import('@aws-sdk/client-sqs');
    await em.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: sys.inboundUrl,
        Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );

    const get = async (jobId: string) =>
      JSON.parse(
        (await status(httpEvent('GET', `/v1/tenants/demo/jobs/${jobId}`, { pathParameters: { tenant: 'demo', jobId } }), context())).body!,
      );
    expect((await get(job.jobId)).state).toBe('SCHEDULED');
    // The workflows function serves outcome reports (docs/history.md): demo keeps no history, and
    // a report without a workflow job's outcome is refused whole.
    const outcomes = await workflows(
      httpEvent('POST', '/v1/tenants/demo/jobs/outcomes', { body: '{"outcomes": []}', pathParameters: { tenant: 'demo' } }),
      context(),
    );
    expect(outcomes.statusCode).toBe(409);
    expect(JSON.parse(outcomes.body!).error.code).toBe('HistoryOff');
    const del = await cancel(
      httpEvent('DELETE', `/v1/tenants/demo/jobs/${other.jobId}`, { pathParameters: { tenant: 'demo', jobId: other.jobId } }),
      context(),
    );
    expect(del.statusCode).toBe(200);
    expect(JSON.parse(del.body!)).toEqual({ jobId: other.jobId, state: 'CANCELLED' });

    // The tick samples the table (one row coming due): one dispatcher carries every group, and
    // dispatching it delivers the job, not before runAt.
    const plan = await tick({ executionName: 'exec-1', executionStartTime: new Date().toISOString() }, context());
    expect(plan).toMatchObject({ reason: 'sampled' });
    expect(plan.items.map((i) => i.groups)).toEqual([Array.from({ length: 8 }, (_, i) => i)]);
    expect(plan.items[0]!.shards).toBe(64);
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    await new Promise((r) => setTimeout(r, Date.parse(runAt) - 1_000 + 50 - Date.now()));
    const results = await Promise.all(plan.items.map(({ shards: _, ...step }) => dispatch(step, context(6_000))));
    // Each result is the next step's input, as the state machine passes it on.
    for (const [i, r] of results.entries())
      expect(r).toMatchObject({ groups: plan.items[i]!.groups, owner: 'exec-1', untilMs: plan.items[i]!.untilMs, done: false });
    let sent = results.reduce((n, r) => n + r.sent, 0);
    // On a loaded machine a step may end before the job is due: the next ones run, as the state
    // machine runs them, until it is sent.
    for (let next = results, i = 0; sent === 0 && i < 5; i++) {
      next = await Promise.all(next.map((r) => dispatch(r, context(6_000))));
      sent += next.reduce((n, r) => n + r.sent, 0);
    }
    expect(sent).toBe(1);
    await consumer.waitFor((d) => d.length >= 1, 5_000);
    await consumer.stop();
    expect(consumer.deliveries.map((d) => [d.jobId, d.payload])).toEqual([[job.jobId, { hello: 'world' }]]);
    expect(consumer.deliveries[0]!.firstReceiveAt).toBeGreaterThanOrEqual(Date.parse(runAt));
    expect((await get(job.jobId)).state).toBe('QUEUED');
    expect((await get(other.jobId)).state).toBe('CANCELLED');
    // ... and the workflow routes (docs/workflows.md).
    const wf = await workflows(
      httpEvent('POST', '/v1/tenants/demo/workflows', {
        body: JSON.stringify({
          jobs: [
            { key: 'a', payload: 1, delaySeconds: 3_600 },
            { key: 'b', payload: 2, after: ['a'] },
          ],
        }),
        pathParameters: { tenant: 'demo' },
      }),
      context(),
    );
    expect(wf.statusCode).toBe(201);
    const { workflowId } = JSON.parse(wf.body!) as { workflowId: string };
    const view = await workflows(
      httpEvent('GET', `/v1/tenants/demo/workflows/${workflowId}`, { pathParameters: { tenant: 'demo', workflowId } }),
      context(),
    );
    expect(JSON.parse(view.body!)).toMatchObject({
      workflowId,
      state: 'RUNNING',
      jobs: [{ key: 'a' }, { key: 'b', state: 'WAITING', after: ['a'] }],
    });

    // The shape definitions before packing read, for an execution that starts mid-deploy.
    expect(plan.groups.map((g) => [g.group, g.shards, g.owner])).toEqual(Array.from({ length: 8 }, (_, i) => [i, 8, 'exec-1']));
    const legacy = await dispatch({ ...plan.groups[5]!, untilMs: Date.now() + 1_500 }, context(6_000));
    expect(legacy).toMatchObject({ group: 5, groups: [5] });
  });

  it('fails a cold start with every configuration problem listed', async () => {
    expect(() =>
      readConfig(
        { DYNEIN_SHARDS: 'many', DYNEIN_LEASE_MS: '-1', DYNEIN_ID_KEY: randomBytes(8).toString('base64') },
        { inboundQueue: true },
      ),
    ).toThrowError(
      /DYNEIN_TABLE is required[\s\S]*DYNEIN_INBOUND_QUEUE_URL is required[\s\S]*DYNEIN_ID_KEY must be base64 of at least 32 bytes[\s\S]*DYNEIN_SHARDS must be a whole number[\s\S]*DYNEIN_LEASE_MS must be a whole number/,
    );
    expect(() => readConfig({ DYNEIN_TABLE: 't', DYNEIN_ID_KEY: randomBytes(32).toString('base64'), DYNEIN_GROUPS: '41' })).toThrowError(
      /groupCount must be an integer from 1 to 40/,
    );
    vi.resetModules();
    const saved = process.env.DYNEIN_TABLE;
    delete process.env.DYNEIN_TABLE;
    try {
      await expect(import('../../lambdas/status.js')).rejects.toThrowError(/DYNEIN_TABLE is required/);
    } finally {
      process.env.DYNEIN_TABLE = saved;
    }
  });
});
