import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelHandler, listHandler, statusHandler, submitHandler, workflowsHandler } from '../../lambdas/runtime/handlers.js';
import type { Emulators } from '../support/emulators.js';
import { httpApiEvent } from '../support/lambdaEvents.js';
import { consume, httpEvent, startRunningSystem, type Delivery, type RunningSystem, type TestSystem } from '../support/system.js';

/**
 * Debounce (docs/flow-control.md#debounce) through submit, dispatch, status, cancel and bulk
 * cancel on the emulators: a key's submits collapse into one pending job, delivered once with
 * the last payload, never before its last runAt; a cancelled one never; bad input writes nothing.
 */
let em: Emulators;
let sys: TestSystem;
let running: RunningSystem;
let queue: ReturnType<typeof consume>;
beforeAll(async () => {
  running = await startRunningSystem({ tenants: ['alpha'] });
  ({ em, sys } = running);
  queue = consume(em.sqs, sys.tenants.alpha!.url);
});
afterAll(async () => {
  await queue?.stop();
  await running?.stop();
});

async function call(
  handler: ReturnType<typeof submitHandler>,
  method: string,
  path: string,
  params: Record<string, string>,
  body?: string,
) {
  const res = await handler(httpEvent(method, path, { pathParameters: params, ...(body !== undefined ? { body } : {}) }));
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
}

const submit = (body: string) => call(submitHandler(sys.w), 'POST', '/v1/tenants/alpha/jobs', { tenant: 'alpha' }, body);
const status = (jobId: string) => call(statusHandler(sys.w), 'GET', `/v1/tenants/alpha/jobs/${jobId}`, { tenant: 'alpha', jobId });
const cancel = (jobId: string) => call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/alpha/jobs/${jobId}`, { tenant: 'alpha', jobId });
const debounced = (key: string, payload: string, periodSeconds: number, extra = '') =>
  submit(`{"payload":${payload},"debounce":{"key":${JSON.stringify(key)},"periodSeconds":${periodSeconds}${extra}}}`);

const deliveriesOf = (jobId: string): Delivery[] => queue.deliveries.filter((d) => d.jobId === jobId);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Items of the debounce partitions (pointers and generations). */
async function debounceItems(): Promise<number> {
  const res = await em.dynamo.send(
    new ScanCommand({
      TableName: sys.tableName,
      FilterExpression: 'begins_with(pk, :a) OR begins_with(pk, :b)',
      ExpressionAttributeValues: { ':a': { S: 'db#' }, ':b': { S: 'dg#' } },
    }),
  );
  return res.Count ?? 0;
}

// The tests share one system and one consumer, each with its own keys and jobs. Three run at once:
// the maxWait, burst and DELETE tests, whose submits must each come before the job's cut-off (its
// due time, 2-3 s after the submit before); the others, alone.
describe.concurrent('debounce', () => {
  // Alone: it counts every debounce item in the table before and after.
  it('refuses bad input with a 400 naming the field, and writes nothing', { concurrent: false }, async () => {
    const before = await debounceItems();
    const cases: [string, RegExp][] = [
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5},"delaySeconds":3}', /leave out delaySeconds/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5},"runAt":"2030-01-01T00:00:00Z"}', /leave out runAt/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5},"idempotencyKey":"i"}', /idempotencyKey cannot be combined/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5},"cancellable":false}', /cancellable: false/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5},"concurrencyKey":"c"}', /concurrencyKey/],
      ['{"payload":1,"debounce":{"key":"","periodSeconds":5}}', /debounce.key/],
      ['{"payload":1,"debounce":{"key":"a\\u0001","periodSeconds":5}}', /control character/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":0}}', /periodSeconds must be a number of seconds from 1 to 86400/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":86401}}', /periodSeconds/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":60,"maxWaitSeconds":30}}', /maxWaitSeconds must be a number of seconds from 60/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5,"period":1}}', /unknown field 'period' in debounce/],
      ['{"payload":1,"debounce":"k"}', /debounce must be an object/],
      ['{"payload":1,"debounce":{"key":"k","periodSeconds":5,"key":"j"}}', /more than once/],
    ];
    for (const [body, message] of cases) {
      const res = await submit(body);
      expect(res.status, body).toBe(400);
      expect(res.body.error.code).toBe('ValidationError');
      expect(res.body.error.message, body).toMatch(message);
    }
    const wf = await call(
      workflowsHandler(sys.w),
      'POST',
      '/v1/tenants/alpha/workflows',
      { tenant: 'alpha' },
      '{"jobs":[{"key":"a","payload":1,"debounce":{"key":"k","periodSeconds":5}}]}',
    );
    expect(wf.status).toBeGreaterThanOrEqual(400);
    expect(await debounceItems()).toBe(before);
  });

  it('never moves a job past its first submit plus maxWaitSeconds', async () => {
    const first = await debounced('capped', '{"n":0}', 3, ',"maxWaitSeconds":4');
    const cap = Date.parse(first.body.runAt as string) - 3_000 + 4_000;
    await sleep(1_500);
    const second = await debounced('capped', '{"n":1}', 3);
    expect(second.status).toBe(200);
    expect(Date.parse(second.body.runAt as string)).toBeLessThanOrEqual(cap);
    expect(Date.parse(second.body.runAt as string)).toBeGreaterThan(cap - 100);
    const jobId = first.body.jobId as string;
    await queue.waitFor(() => deliveriesOf(jobId).length > 0, 20_000);
    expect(deliveriesOf(jobId)[0]!.payload).toEqual({ n: 1 });
  });

  it('collapses a burst of submits into one job, delivered once with the last payload, never before its last runAt', async () => {
    const replies = [];
    for (let i = 0; i < 6; i++) {
      replies.push(await debounced('profile-7', `{"n":${i},"text":"caf\\u00e9 \\ud83d\\ude00"}`, 2));
      await sleep(150);
    }
    expect(replies.map((r) => r.status)).toEqual([201, 200, 200, 200, 200, 200]);
    expect(replies[0]!.body.debounced).toBe(false);
    expect(replies.slice(1).every((r) => r.body.debounced === true)).toBe(true);
    const jobId = replies[0]!.body.jobId as string;
    expect(new Set(replies.map((r) => r.body.jobId))).toEqual(new Set([jobId]));
    const runAts = replies.map((r) => Date.parse(r.body.runAt as string));
    for (let i = 1; i < runAts.length; i++) expect(runAts[i]).toBeGreaterThan(runAts[i - 1]!);

    const pending = await status(jobId);
    expect(pending.body).toMatchObject({ jobId, debounceKey: 'profile-7', runAt: replies.at(-1)!.body.runAt });
    expect(['SCHEDULED', 'ACQUIRED']).toContain(pending.body.state);
    // Listings show the key too (a replaced row a dispatcher already held shows until it drops it).
    const listed = await call(listHandler(sys.w), 'GET', '/v1/tenants/alpha/jobs', { tenant: 'alpha' });
    const mine = (listed.body.jobs as Record<string, any>[]).filter((j) => j.jobId === jobId);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((j) => j.debounceKey === 'profile-7')).toBe(true);

    await queue.waitFor(() => deliveriesOf(jobId).length > 0, 20_000);
    await sleep(1_500); // a second delivery (an old version) would have come by now
    const got = deliveriesOf(jobId);
    expect(got).toHaveLength(1);
    expect(JSON.stringify(got[0]!.payload)).toBe(JSON.stringify({ n: 5, text: 'café 😀' }));
    expect(got[0]!.body).toContain('{"n":5,"text":"caf\\u00e9 \\ud83d\\ude00"}');
    expect(got[0]!.firstReceiveAt).toBeGreaterThanOrEqual(runAts.at(-1)!);

    // Past its cut-off, a submit of the key starts a new job.
    const next = await debounced('profile-7', '{"n":6}', 1);
    expect(next.status).toBe(201);
    expect(next.body.jobId).not.toBe(jobId);
    await queue.waitFor(() => deliveriesOf(next.body.jobId as string).length > 0, 20_000);
    expect((await status(jobId)).body.state).toBe('QUEUED');

    // ?debounceKey= lists the key's jobs, delivered ones too (their markers keep the key), no other key's.
    const other = await debounced('profile-8', '{"n":0}', 30);
    const byKey = (key: string) =>
      listHandler(sys.w)(
        httpApiEvent({
          method: 'GET',
          path: '/v1/tenants/alpha/jobs',
          pathParameters: { tenant: 'alpha' },
          queryStringParameters: { debounceKey: key },
        }),
      );
    const listedByKey = JSON.parse((await byKey('profile-7')).body) as { jobs: { jobId: string; debounceKey: string }[] };
    expect(new Set(listedByKey.jobs.map((j) => j.jobId))).toEqual(new Set([jobId, next.body.jobId]));
    expect(listedByKey.jobs.every((j) => j.debounceKey === 'profile-7')).toBe(true);
    expect(JSON.parse((await byKey('profile-8')).body).jobs.map((j: { jobId: string }) => j.jobId)).toEqual([other.body.jobId]);
    const bad = await byKey('');
    expect([bad.statusCode, JSON.parse(bad.body).error.code]).toEqual([400, 'ValidationError']);
    expect(JSON.parse(bad.body).error.message).toMatch(/debounceKey/);
    expect((await cancel(other.body.jobId as string)).status).toBe(200);
  });

  it('cancels a pending job through DELETE: never delivered, and the next submit starts another', async () => {
    const a = await debounced('to-cancel', '{"n":0}', 2);
    await debounced('to-cancel', '{"n":1}', 2);
    const jobId = a.body.jobId as string;
    const res = await cancel(jobId);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ jobId, state: 'CANCELLED' });
    expect((await cancel(jobId)).body.state).toBe('CANCELLED');
    expect((await status(jobId)).body).toMatchObject({ state: 'CANCELLED', debounceKey: 'to-cancel' });
    const again = await debounced('to-cancel', '{"n":2}', 1);
    expect(again.status).toBe(201);
    expect(again.body.jobId).not.toBe(jobId);
    await queue.waitFor(() => deliveriesOf(again.body.jobId as string).length > 0, 20_000);
    await sleep(2_000);
    expect(deliveriesOf(jobId)).toHaveLength(0);
    // Delivered: 409 (a tenant without history keeps no outcome to stop it by).
    expect((await cancel(again.body.jobId as string)).status).toBe(409);
  });

  // Alone: its passes read every shard of the table at once, which held other submits up for
  // seconds (a burst's next submit came after the job's cut-off).
  it('bulk cancel by debounceKey cancels the pending job of that key only, counted once', { concurrent: false }, async () => {
    const mine = await debounced('bulk-a', '{"n":0}', 4);
    await debounced('bulk-a', '{"n":1}', 4);
    const other = await debounced('bulk-b', '{"n":0}', 3);
    const start = await call(
      cancelHandler(sys.w),
      'POST',
      '/v1/tenants/alpha/jobs/cancel',
      { tenant: 'alpha' },
      '{"debounceKey":"bulk-a"}',
    );
    expect(start.status).toBe(202);
    const operationId = start.body.operationId as string;
    let op: Record<string, any> = {};
    for (const until = Date.now() + 30_000; op.state !== 'DONE' && Date.now() < until; await sleep(100))
      op = (await call(cancelHandler(sys.w), 'GET', `/v1/tenants/alpha/operations/${operationId}`, { tenant: 'alpha', operationId })).body;
    expect(op).toMatchObject({ state: 'DONE', matched: 1, cancelled: 1, alreadyQueued: 0, notCancellable: 0 });
    expect((await status(mine.body.jobId as string)).body.state).toBe('CANCELLED');
    await queue.waitFor(() => deliveriesOf(other.body.jobId as string).length > 0, 20_000);
    await sleep(2_000);
    expect(deliveriesOf(mine.body.jobId as string)).toHaveLength(0);
  });

  // Last, alone: its thirty submits at once held other submits up for seconds (a burst's next
  // submit came after the job's cut-off).
  it('collapses concurrent first submits into one job, delivered once', { concurrent: false }, async () => {
    // Thirty at once: the replaces that lose a round count as coming just before the winner's, so
    // none runs out of tries (500) however many arrive together.
    const replies = await Promise.all(Array.from({ length: 30 }, (_, i) => debounced('race', `{"n":${i}}`, 2)));
    expect(replies.filter((r) => r.status !== 200 && r.status !== 201)).toEqual([]);
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
    const ids = new Set(replies.map((r) => r.body.jobId));
    expect(ids.size).toBe(1);
    const [jobId] = [...ids] as string[];
    await queue.waitFor(() => deliveriesOf(jobId!).length > 0, 20_000);
    await sleep(1_500);
    expect(deliveriesOf(jobId!)).toHaveLength(1);
    // One of the payloads sent, never before the latest runAt any reply named.
    const [got] = deliveriesOf(jobId!);
    expect((got!.payload as { n: number }).n).toBeGreaterThanOrEqual(0);
    expect(got!.firstReceiveAt).toBeGreaterThanOrEqual(Math.max(...replies.map((r) => Date.parse(r.body.runAt as string))));
  });
});
