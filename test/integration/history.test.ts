import { DeleteItemCommand, GetItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOfGroup } from '../../core/model/config.js';
import { dispatchRound } from '../../core/dispatch/round.js';
import { sortKey } from '../../core/model/jobId.js';
import { DynamoHistoryStore } from '../../adapters/dynamoHistoryStore.js';
import { DynamoJobStore } from '../../adapters/dynamoJobStore.js';
import type { RegistrationProperties } from '../../core/tenants/registration.js';
import { registerHandler } from '../../lambdas/register.js';
import { outcomesHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, submitJobs, type TestSystem } from '../support/system.js';

let em: Emulators;
let sys: TestSystem;
const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1 };
const TTL_MS = 2 * 86_400_000;
let batchWrites = 0;

beforeAll(async () => {
  em = await startEmulators();
  em.dynamo.middlewareStack.add(
    (next, ctx) => async (args) => {
      if (ctx.commandName === 'BatchWriteItemCommand') {
        const items = Object.values(
          (args.input as { RequestItems: Record<string, { PutRequest?: { Item: { pk: { S: string } } } }[]> }).RequestItems,
        )[0]!;
        if (items.some((w) => w.PutRequest?.Item.pk.S.startsWith('h#'))) batchWrites++;
      }
      return next(args);
    },
    { step: 'initialize', name: 'countHistoryWrites' },
  );
  sys = await createSystem(em, { tenants: ['hist', 'plain'], settings });
  await sys.w.store.putTenant({ name: 'hist', queueUrl: sys.tenants.hist!.url, dlqUrl: sys.tenants.hist!.dlqUrl, historyTtlMs: TTL_MS });
});
afterAll(async () => em?.stop());

const report = (tenant: string, body: unknown) =>
  outcomesHandler(sys.w)(
    httpEvent('POST', `/v1/tenants/${tenant}/jobs/outcomes`, {
      body: typeof body === 'string' ? body : JSON.stringify(body),
      pathParameters: { tenant },
    }),
  );

/** Writes the dispatcher's delivered markers of `jobs` (as a round that sent them would). */
async function deliver(jobs: readonly { jobId: string }[], tenant = 'hist'): Promise<void> {
  const rows = jobs.map((j) => {
    const id = sys.w.codec.parse(j.jobId);
    return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId, tenant, expiresAtMs: id.dueMs + 86_400_000 };
  });
  expect(await sys.w.store.markDelivered(rows, Date.now())).toEqual([]);
}

async function receiveOnce(url: string): Promise<Message[]> {
  const res = await em.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, MessageAttributeNames: ['All'] }),
  );
  return res.Messages ?? [];
}

const outcome = (jobId: string, o: Record<string, unknown> = {}) => ({
  jobId,
  outcome: 'SUCCEEDED',
  attempts: 1,
  receivedAt: new Date(Date.now() - 100).toISOString(),
  durationMs: 42,
  ...o,
});

describe('job history', () => {
  it('marks deliveries of history tenants only (direct and through the table)', async () => {
    const ingest = sys.startIngest();
    try {
      const soon = () => new Date(Date.now() + 2_500).toISOString();
      const [hDirect, hTable] = await submitJobs(sys, 'hist', [
        { payload: 1, delaySeconds: 0 },
        { payload: 2, runAt: soon() },
      ]);
      const [pDirect, pTable] = await submitJobs(sys, 'plain', [
        { payload: 3, delaySeconds: 0 },
        { payload: 4, runAt: soon() },
      ]);
      expect(hDirect!.state).toBe('QUEUED');
      expect(hTable!.state).toBe('SCHEDULED');
      const deadline = Date.now() + 10_000;
      let hist: Message[] = [];
      let plain: Message[] = [];
      while ((hist.length < 2 || plain.length < 2) && Date.now() < deadline) {
        await dispatchRound(sys.w.dispatch, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 2_000 });
        hist = hist.concat(await receiveOnce(sys.tenants.hist!.url));
        plain = plain.concat(await receiveOnce(sys.tenants.plain!.url));
        await new Promise((r) => setTimeout(r, 200));
      }
      const ids = (ms: Message[]) => ms.map((m) => (JSON.parse(m.Body!) as { jobId: string }).jobId).sort();
      expect(ids(hist)).toEqual([hDirect!.jobId, hTable!.jobId].sort());
      expect(ids(plain)).toEqual([pDirect!.jobId, pTable!.jobId].sort());
      for (const m of hist) expect(m.MessageAttributes?.['dynein-history']?.StringValue).toBe('1');
      for (const m of plain) expect(m.MessageAttributes?.['dynein-history']).toBeUndefined();

      // No outcome yet: DELIVERED, with the dispatcher's delivery in the timeline.
      const before = await sys.w.jobs.status('hist', hTable!.jobId);
      expect(before.state).toBe('DELIVERED');
      expect(before.timeline?.map((e) => e.event)).toEqual(['SCHEDULED', 'DELIVERED']);
      const plainStatus = await sys.w.jobs.status('plain', pTable!.jobId);
      expect(plainStatus.state).toBe('QUEUED');
      expect(plainStatus.timeline).toBeUndefined();
      // Listed as delivered (from the dispatcher's marker) while no outcome is reported.
      const deliveredBefore = await sys.w.lister.list('hist', { state: 'DELIVERED' });
      expect(deliveredBefore.jobs.find((j) => j.jobId === hTable!.jobId)).toMatchObject({
        state: 'DELIVERED',
        deliveredAt: before.deliveredAt,
      });

      // A failure, then the retry's success: the record keeps the latest; the timeline shows it.
      const first = await report('hist', { outcomes: [outcome(hTable!.jobId, { outcome: 'FAILED', error: 'boom' })] });
      expect(first.statusCode).toBe(200);
      expect((await sys.w.jobs.status('hist', hTable!.jobId)).state).toBe('FAILED');
      const second = await report('hist', { outcomes: [outcome(hTable!.jobId, { attempts: 2, result: { sent: true } })] });
      expect(JSON.parse(second.body).results).toEqual([{ jobId: hTable!.jobId, state: 'SUCCEEDED' }]);
      const after = await sys.w.jobs.status('hist', hTable!.jobId);
      expect(after.state).toBe('SUCCEEDED');
      expect(after.timeline?.map((e) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'FAILED', 'SUCCEEDED']);
      expect(after.timeline?.[2]).toMatchObject({ attempt: 1, error: 'boom' });
      expect(after.timeline?.[3]).toMatchObject({ attempt: 2, durationMs: 42, result: { sent: true } });

      // The delivered marker expired (TTL): the outcome still answers, without the explanation
      // UNKNOWN carries when nothing is known (a finished job has no "what to do").
      const id = sys.w.codec.parse(hTable!.jobId);
      await em.dynamo.send(
        new DeleteItemCommand({ TableName: sys.tableName, Key: { pk: { S: String(id.shard) }, sk: { S: sortKey(id.dueMs, id.jobId) } } }),
      );
      const expired = await sys.w.jobs.status('hist', hTable!.jobId);
      expect(expired.state).toBe('SUCCEEDED');
      expect(expired).not.toHaveProperty('message');

      // Once reported, it lists under its outcome only, as GET shows it: never DELIVERED beside SUCCEEDED.
      const delivered = await sys.w.lister.list('hist', { state: 'DELIVERED' });
      expect(delivered.jobs.map((j) => j.jobId)).not.toContain(hTable!.jobId);
      const succeeded = await sys.w.lister.list('hist', { state: 'SUCCEEDED' });
      expect(succeeded.jobs.find((j) => j.jobId === hTable!.jobId)).toMatchObject({ state: 'SUCCEEDED' });

      // Outcomes for the other tenant's jobs are refused.
      const foreign = await report('hist', { outcomes: [outcome(pTable!.jobId)] });
      expect(JSON.parse(foreign.body).results[0].error.code).toBe('InvalidJobId');
    } finally {
      await ingest.stop();
    }
  }, 30_000);

  it('refuses, per entry, an outcome for a job not delivered (scheduled, cancelled, not yet due): 409 NotDelivered, nothing stored, status unchanged', async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const [scheduled, cancelled, inbound] = await submitJobs(sys, 'hist', [
      { payload: 'scheduled', runAt },
      { payload: 'cancelled', runAt },
      { payload: 'inbound', runAt },
    ]);
    const [direct] = await submitJobs(sys, 'hist', [{ payload: 'direct', delaySeconds: 0 }]);
    // The first job stored (SCHEDULED), the second cancelled (a tombstone); the third's message still waits.
    const stored = sys.w.codec.parse(scheduled!.jobId);
    expect(
      await sys.w.store.putJob({ shard: stored.shard, dueMs: stored.dueMs, jobId: stored.jobId, tenant: 'hist', payload: '"scheduled"' }),
    ).toBe('created');
    expect(await sys.w.jobs.cancel('hist', cancelled!.jobId)).toEqual({ jobId: cancelled!.jobId, state: 'CANCELLED' });
    expect(direct!.state).toBe('QUEUED');

    const res = await report('hist', {
      outcomes: [
        outcome(scheduled!.jobId),
        outcome(cancelled!.jobId, { outcome: 'FAILED', error: 'x' }),
        outcome(inbound!.jobId),
        outcome(direct!.jobId),
      ],
    });
    expect(res.statusCode).toBe(200);
    const results = JSON.parse(res.body).results as { jobId: string; state?: string; error?: { code: string; message: string } }[];
    expect(results.map((r) => [r.jobId, r.state ?? r.error?.code])).toEqual([
      [scheduled!.jobId, 'NotDelivered'],
      [cancelled!.jobId, 'NotDelivered'],
      [inbound!.jobId, 'NotDelivered'],
      [direct!.jobId, 'SUCCEEDED'],
    ]);
    expect(results[0]!.error?.message).toMatch(/SCHEDULED/);
    expect(results[1]!.error?.message).toMatch(/CANCELLED/);
    expect(results[2]!.error?.message).toMatch(/not due/);
    for (const [job, state] of [
      [scheduled!, 'SCHEDULED'],
      [cancelled!, 'CANCELLED'],
      [inbound!, 'UNKNOWN'],
    ] as const) {
      const s = await sys.w.jobs.status('hist', job.jobId);
      expect({ jobId: job.jobId, state: s.state, events: s.timeline?.map((e) => e.event) }).toEqual({
        jobId: job.jobId,
        state,
        events: ['SCHEDULED'],
      });
      expect(await new DynamoHistoryStore(sys.tableName, em.dynamo).getOutcome(sys.w.codec.parse(job.jobId))).toBeUndefined();
    }
    expect((await sys.w.jobs.status('hist', direct!.jobId)).state).toBe('SUCCEEDED');
  });

  it('writes one record per job, 25 per BatchWriteItem, with the tenant retention as TTL, nothing at the job key', async () => {
    const jobs = await submitJobs(
      sys,
      'hist',
      Array.from({ length: 100 }, (_, i) => ({ payload: i, runAt: new Date(Date.now() + 3_600_000).toISOString() })),
    );
    await deliver(jobs);
    const writesBefore = batchWrites;
    const t0 = Date.now();
    const res = await report('hist', { outcomes: jobs.map((j) => outcome(j.jobId)) });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body).results.every((r: { state?: string }) => r.state === 'SUCCEEDED')).toBe(true);
    expect(batchWrites - writesBefore).toBe(4);
    let items = 0;
    for (const shard of [0, 1]) {
      const page = await em.dynamo.send(
        new QueryCommand({
          TableName: sys.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `h#${shard}` } },
        }),
      );
      items += (page.Items ?? []).filter((i) => jobs.some((j) => i.sk?.S?.endsWith(j.jobId))).length;
    }
    expect(items).toBe(100);
    const { parse } = sys.w.codec;
    const id = parse.call(sys.w.codec, jobs[0]!.jobId);
    const item = await em.dynamo.send(
      new GetItemCommand({ TableName: sys.tableName, Key: { pk: { S: `h#${id.shard}` }, sk: { S: sortKey(id.dueMs, id.jobId) } } }),
    );
    const ttl = Number(item.Item?.expiresAt?.N) * 1000;
    expect(ttl).toBeGreaterThanOrEqual(t0 + TTL_MS - 1000);
    expect(ttl).toBeLessThanOrEqual(Date.now() + TTL_MS + 1000);
    // Nothing is written at the job's own key (the dispatcher's marker lives there).
    const row = await em.dynamo.send(
      new GetItemCommand({ TableName: sys.tableName, Key: { pk: { S: String(id.shard) }, sk: { S: sortKey(id.dueMs, id.jobId) } } }),
    );
    expect(row.Item?.outcome).toBeUndefined();
  });

  it('two reports of one job in a request keep the later attempt; the failure stays in the timeline', async () => {
    const [job] = await submitJobs(sys, 'hist', [{ payload: 0, runAt: new Date(Date.now() + 3_600_000).toISOString() }]);
    await deliver([job!]);
    const res = await report('hist', {
      outcomes: [
        outcome(job!.jobId, { attempts: 3, outcome: 'DEAD', error: 'gave up' }),
        outcome(job!.jobId, { attempts: 2, outcome: 'FAILED' }),
      ],
    });
    expect(JSON.parse(res.body).results).toHaveLength(2);
    const s = await sys.w.jobs.status('hist', job!.jobId);
    expect(s.state).toBe('DEAD');
    expect(s.timeline?.map((e) => [e.event, e.attempt])).toEqual([
      ['SCHEDULED', undefined],
      ['DELIVERED', undefined],
      ['FAILED', 2],
      ['DEAD', 3],
    ]);
    expect(s.timeline?.at(-1)).toMatchObject({ error: 'gave up' });
  });

  it('lists history states from the outcome records, for history tenants only', async () => {
    const base = Date.now() + 7_200_000;
    const jobs = await submitJobs(
      sys,
      'hist',
      [0, 1, 2].map((i) => ({ payload: i, runAt: new Date(base + i).toISOString() })),
    );
    await deliver(jobs);
    await report('hist', {
      outcomes: [outcome(jobs[0]!.jobId), outcome(jobs[1]!.jobId, { outcome: 'FAILED', error: 'x' }), outcome(jobs[2]!.jobId)],
    });
    const window = { from: new Date(base).toISOString(), to: new Date(base + 10).toISOString() };
    const succeeded = await sys.w.lister.list('hist', { state: 'SUCCEEDED', ...window });
    expect(succeeded.jobs.map((j) => [j.jobId, j.state])).toEqual([
      [jobs[0]!.jobId, 'SUCCEEDED'],
      [jobs[2]!.jobId, 'SUCCEEDED'],
    ]);
    const failed = await sys.w.lister.list('hist', { state: 'FAILED', ...window });
    expect(failed.jobs.map((j) => j.jobId)).toEqual([jobs[1]!.jobId]);
    // A retry's success moves the job from FAILED to SUCCEEDED.
    await report('hist', { outcomes: [outcome(jobs[1]!.jobId, { attempts: 2 })] });
    expect((await sys.w.lister.list('hist', { state: 'FAILED', ...window })).jobs).toEqual([]);
    expect(
      (await sys.w.lister.list('hist', { state: 'SUCCEEDED', ...window, order: 'desc', limit: '2' })).jobs.map((j) => j.jobId),
    ).toEqual([jobs[2]!.jobId, jobs[1]!.jobId]);
    await expect(sys.w.lister.list('plain', { state: 'SUCCEEDED' })).rejects.toThrow(
      /state SUCCEEDED: the tenant does not keep job history/,
    );
    await expect(sys.w.lister.list('plain', { state: 'DELIVERED' })).rejects.toMatchObject({ status: 400 });
  });

  it("counts the tenant's failed jobs (FAILED and DEAD) for its dashboard and alarm", async () => {
    const jobs = await submitJobs(
      sys,
      'hist',
      [0, 1, 2].map((i) => ({ payload: i, runAt: new Date(Date.now() + 3_600_000).toISOString() })),
    );
    await deliver(jobs);
    const lines: { tenant: string; counts: Readonly<Record<string, number>> }[] = [];
    const telemetry = {
      count() {},
      values() {},
      error() {},
      tenantMetrics: (tenant: string, counts: Readonly<Record<string, number>>) => void lines.push({ tenant, counts }),
    };
    const res = await outcomesHandler(
      sys.w,
      telemetry,
    )(
      httpEvent('POST', '/v1/tenants/hist/jobs/outcomes', {
        body: JSON.stringify({
          outcomes: [outcome(jobs[0]!.jobId, { outcome: 'FAILED' }), outcome(jobs[1]!.jobId, { outcome: 'DEAD' }), outcome(jobs[2]!.jobId)],
        }),
        pathParameters: { tenant: 'hist' },
      }),
    );
    expect(res.statusCode).toBe(200);
    expect(lines).toEqual([{ tenant: 'hist', counts: { JobsFailed: 2 } }]);
  });

  it('refuses reports when history is off, and bad input with 4xx naming the parameter', async () => {
    const [plainJob] = await submitJobs(sys, 'plain', [{ payload: 0, runAt: new Date(Date.now() + 3_600_000).toISOString() }]);
    const off = await report('plain', { outcomes: [outcome(plainJob!.jobId)] });
    expect(off.statusCode).toBe(409);
    expect(JSON.parse(off.body).error.code).toBe('HistoryOff');

    const notJson = await report('hist', '{');
    expect(notJson.statusCode).toBe(400);
    expect(JSON.parse(notJson.body).error.message).toMatch(/body|outcomes/);
    const empty = await report('hist', { outcomes: [] });
    expect(empty.statusCode).toBe(400);
    expect(JSON.parse(empty.body).error.message).toMatch(/outcomes/);
    const tooMany = await report('hist', { outcomes: Array.from({ length: 101 }, () => outcome('x')) });
    expect(tooMany.statusCode).toBe(400);
    expect(JSON.parse(tooMany.body).error.message).toMatch(/outcomes .*100/);
    const unknownTenant = await report('nobody', { outcomes: [outcome('x')] });
    expect(unknownTenant.statusCode).toBe(404);

    const [job] = await submitJobs(sys, 'hist', [{ payload: 0, runAt: new Date(Date.now() + 3_600_000).toISOString() }]);
    const forged = job!.jobId.slice(0, -3) + (job!.jobId.endsWith('AAA') ? 'BBB' : 'AAA');
    const res = await report('hist', {
      outcomes: [
        outcome(forged),
        outcome(job!.jobId, { outcome: 'MAYBE' }),
        outcome(job!.jobId, { attempts: 0 }),
        outcome(job!.jobId, { receivedAt: 'yesterday' }),
        outcome(job!.jobId, { durationMs: -1 }),
        outcome(job!.jobId, { result: { big: 'x'.repeat(2_000) } }),
      ],
    });
    expect(res.statusCode).toBe(200);
    const errors = (JSON.parse(res.body).results as { error?: { code: string; message: string } }[]).map((r) => r.error);
    expect(errors[0]?.code).toBe('InvalidJobId');
    expect(errors[1]?.message).toMatch(/^outcome/);
    expect(errors[2]?.message).toMatch(/^attempts/);
    expect(errors[3]?.message).toMatch(/^receivedAt/);
    expect(errors[4]?.message).toMatch(/^durationMs/);
    expect(errors[5]?.message).toMatch(/^result/);
    // Nothing was kept for the job.
    expect((await sys.w.jobs.status('hist', job!.jobId)).timeline?.map((e) => e.event)).toEqual(['SCHEDULED']);
  });

  it('the CDK registration writes the retention of a tenant with history on, and an update turning it off drops it', async () => {
    const table = await em.createTable();
    const store = new DynamoJobStore(table, em.dynamo);
    const handler = registerHandler({ dynamo: em.dynamo, respond: async () => {} });
    const props = (history?: string) => ({
      ServiceToken: 'arn:fn',
      TableName: table,
      TenantName: 'pay',
      QueueUrl: 'https://sqs/q',
      DlqUrl: 'https://sqs/dlq',
      ...(history !== undefined ? { HistoryTtlMs: history } : {}),
    });
    const event = (type: 'Create' | 'Update', history?: string): CloudFormationCustomResourceEvent<RegistrationProperties> => {
      const common = {
        StackId: 'arn:aws:cloudformation:eu-west-1:123456789012:stack/Team/1',
        LogicalResourceId: 'Reg',
        RequestId: `r-${type}`,
        ResponseURL: 'https://example.invalid',
        ResourceType: 'Custom::DyneinTenantRegistration',
        ServiceToken: 'arn:fn',
        ResourceProperties: props(history),
      };
      return type === 'Create'
        ? { ...common, RequestType: 'Create' }
        : { ...common, RequestType: 'Update', PhysicalResourceId: 'dynein-tenant-pay', OldResourceProperties: props(String(TTL_MS)) };
    };
    expect((await handler(event('Create', String(TTL_MS)))).Status).toBe('SUCCESS');
    expect((await store.getTenant('pay'))?.historyTtlMs).toBe(TTL_MS);
    expect((await handler(event('Update'))).Status).toBe('SUCCESS');
    expect((await store.getTenant('pay'))?.historyTtlMs).toBeUndefined();
    const bad = await handler(event('Update', 'soon'));
    expect(bad.Status).toBe('FAILED');
    expect(bad.Reason).toMatch(/HistoryTtlMs/);
  });
});
