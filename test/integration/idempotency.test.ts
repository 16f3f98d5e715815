/**
 * Issue #12 item 4: the idempotency key alone names the job within a 24-hour window. The same
 * key and the same request answer the same job (201 first, 200 after) even with delaySeconds,
 * whose runAt moves; the same key with another payload, schedule or cancellable answers 409
 * IdempotencyKeyReused and writes nothing. Requests go through the real submit handler over
 * dynalite and fauxqs; crashes and refusals are injected at the port level.
 */
import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock, QueueSender } from '../../core/model/ports.js';
import { Submitter } from '../../core/submit/submitter.js';
import { submitHandler } from '../../lambdas/runtime/handlers.js';
import type { Wiring } from '../../lambdas/runtime/wiring.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess } from '../support/faults.js';
import { consume, createSystem, httpEvent, runAllGroups, waitForEmptyQueue, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const HOUR = 3_600_000;
const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 4, groupCount: 1 };

interface Reply {
  status: number;
  body: {
    jobId?: string;
    runAt?: string;
    state?: string;
    error?: { code: string; message: string };
    results?: { jobId?: string; runAt?: string; error?: { code: string; message: string } }[];
  };
}

/** POSTs a body to the single-job (or batch) route through the real handler, as API Gateway would. */
async function post(w: Wiring, body: unknown, opts: { tenant?: string; batch?: boolean } = {}): Promise<Reply> {
  const tenant = opts.tenant ?? 'demo';
  const routeKey = opts.batch ? 'POST /v1/tenants/{tenant}/jobs/batch' : 'POST /v1/tenants/{tenant}/jobs';
  const path = `/v1/tenants/${tenant}/jobs${opts.batch ? '/batch' : ''}`;
  const res = await submitHandler(w)(
    httpEvent('POST', path, { routeKey, pathParameters: { tenant }, body: typeof body === 'string' ? body : JSON.stringify(body) }),
  );
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

async function scanAll(sys: TestSystem): Promise<Record<string, AttributeValue>[]> {
  const res = await em.dynamo.send(new ScanCommand({ TableName: sys.tableName, ConsistentRead: true }));
  return (res.Items ?? []).sort((a, b) => `${a.pk?.S}|${a.sk?.S}`.localeCompare(`${b.pk?.S}|${b.sk?.S}`));
}

/** Job rows (partition keys that are shard numbers). */
const jobRows = async (sys: TestSystem) => (await scanAll(sys)).filter((i) => /^\d+$/.test(i.pk!.S!)).map((i) => i.sk!.S!);

async function queueTotal(url: string): Promise<number> {
  const a = (await em.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }))).Attributes ?? {};
  return (
    Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible) + Number(a.ApproximateNumberOfMessagesDelayed)
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('idempotency keys', () => {
  it('a retry with delaySeconds gets the same job (201, then 200 with the same jobId and runAt), stored and delivered once', async () => {
    const sys = await createSystem(em, { settings });
    const body = { payload: { order: 42 }, delaySeconds: 2, idempotencyKey: 'order-42' };
    const first = await post(sys.w, body);
    expect(first.status).toBe(201);
    await pause(20); // the retry's "now" is later: its runAt would move
    const retry = await post(sys.w, body);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    // A retry of the same body with the key inside a batch: the same job too.
    const inBatch = await post(sys.w, { jobs: [body, body] }, { batch: true });
    expect(inBatch.status).toBe(200);
    expect(inBatch.body.results).toEqual([first.body, first.body]);

    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const dispatch = runAllGroups(sys.w.dispatch);
    await consumer.waitFor((d) => d.length >= 1, 10_000);
    await pause(1_500); // time for a second copy to show up, if there were one
    await dispatch.stop();
    await consumer.stop();
    await ingest.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([first.body.jobId]);
  }, 30_000);

  it('the same key with another payload, runAt, delay or cancellable answers 409 IdempotencyKeyReused and writes nothing', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo', 'other'] });
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const original = { payload: { order: 42, amount: 1.0 }, runAt, idempotencyKey: 'k-1' };
    const first = await post(sys.w, JSON.stringify(original).replace('"amount":1', '"amount":1.0'));
    expect(first.status).toBe(201);
    const tableBefore = await scanAll(sys);
    const inboundBefore = await queueTotal(sys.inboundUrl);
    const variants: [string, unknown][] = [
      ['another payload', { ...original, payload: { order: 43, amount: 1.0 } }],
      ['the payload written differently (1 for 1.0)', { ...original, payload: { order: 42, amount: 1 } }],
      ['another runAt', { ...original, runAt: new Date(Date.parse(runAt) + 1).toISOString() }],
      ['delaySeconds instead of runAt', { payload: original.payload, delaySeconds: 3_600, idempotencyKey: 'k-1' }],
      ['cancellable false', { ...original, cancellable: false }],
    ];
    for (const [what, body] of variants) {
      const res = await post(sys.w, body);
      expect({ what, status: res.status, code: res.body.error?.code }).toEqual({ what, status: 409, code: 'IdempotencyKeyReused' });
      expect(res.body.error?.message).toMatch(/k-1.*new key/);
    }
    // In a batch: only the job that reuses the key is refused.
    const batch = await post(
      sys.w,
      {
        jobs: [
          { ...original, payload: 'changed' },
          { payload: 1, delaySeconds: 60 },
        ],
      },
      { batch: true },
    );
    expect(batch.body.results?.map((r) => r.error?.code ?? 'accepted')).toEqual(['IdempotencyKeyReused', 'accepted']);
    expect(batch.body.results?.[0]?.error?.message).toMatch(/^jobs\[0\]: /);
    // Nothing written for the refused ones: the table is unchanged and only the accepted job went inbound.
    expect(await scanAll(sys)).toEqual(tableBefore);
    expect(await queueTotal(sys.inboundUrl)).toBe(inboundBefore + 1);

    // The same request again still answers its job; the key under another tenant is another job.
    const again = await post(sys.w, JSON.stringify(original).replace('"amount":1', '"amount":1.0'));
    expect(again).toEqual({ status: 200, body: first.body });
    const equivalentRunAt = await post(
      sys.w,
      JSON.stringify({ ...original, runAt: runAt.replace('Z', '+00:00') }).replace('"amount":1', '"amount":1.0'),
    );
    expect(equivalentRunAt).toEqual({ status: 200, body: first.body });
    const otherTenant = await post(sys.w, original, { tenant: 'other' });
    expect(otherTenant.status).toBe(201);
    expect(otherTenant.body.jobId).not.toBe(first.body.jobId);
    // Two keys in one batch that differ: two jobs.
    const two = await post(
      sys.w,
      {
        jobs: [
          { ...original, idempotencyKey: 'k-2' },
          { ...original, payload: 'x', idempotencyKey: 'k-3' },
        ],
      },
      { batch: true },
    );
    expect(new Set(two.body.results?.map((r) => r.jobId)).size).toBe(2);
  });

  it('concurrent identical requests store one job', async () => {
    const sys = await createSystem(em, { settings });
    const body = { payload: { n: 1 }, delaySeconds: 3_600, idempotencyKey: 'concurrent' };
    const replies = await Promise.all(Array.from({ length: 10 }, () => post(sys.w, body)));
    const ids = new Set(replies.map((r) => r.body.jobId));
    expect(ids.size).toBe(1);
    expect(replies.filter((r) => r.status === 201).length).toBe(1);
    const ingest = sys.startIngest();
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    await ingest.stop();
    expect(await jobRows(sys)).toEqual([expect.stringMatching(new RegExp(`#${[...ids][0]!.replace(/[.]/g, '\\.')}$`))]);
  });

  it('a direct job retried after it was sent is not sent again', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const body = { payload: 'once', delaySeconds: 0, idempotencyKey: 'direct-once' };
    const first = await post(sys.w, body);
    expect(first.body.state).toBe('QUEUED');
    const retry = await post(sys.w, body);
    expect(retry).toEqual({ status: 200, body: first.body });
    await consumer.waitFor((d) => d.length >= 1, 5_000);
    await pause(1_500);
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId)).toEqual([first.body.jobId]);
  });

  it('nothing is lost when the first request dies between its record and its send: the retry sends the job', async () => {
    const sys = await createSystem(em, { settings });
    // The first "Lambda" dies as it sends: its SendMessageBatch never happens, it never replies.
    const proc = new SimProcess();
    const dying = inProcess<QueueSender>(sys.w.dispatch.sender, proc, {
      sendBatch: () => {
        proc.kill();
        return new Promise(() => {});
      },
    });
    const crashed = new Submitter({ ...sys.w.submitter.deps, sender: dying });
    const body = JSON.stringify({ payload: { n: 7 }, delaySeconds: 2, idempotencyKey: 'crash' });
    void crashed.submit('demo', body); // never settles
    for (let tries = 0; tries < 100 && !proc.dead; tries++) await pause(10);
    expect(proc.dead).toBe(true);
    expect(await queueTotal(sys.inboundUrl)).toBe(0);
    expect((await scanAll(sys)).filter((i) => i.pk!.S!.startsWith('idem#'))).toHaveLength(1);

    const retry = await post(sys.w, body);
    expect(retry.status).toBe(200); // the key already named a job: the one the dead request planned
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const dispatch = runAllGroups(sys.w.dispatch);
    await consumer.waitFor((d) => d.length >= 1, 10_000);
    await pause(1_000);
    await dispatch.stop();
    await consumer.stop();
    await ingest.stop();
    expect(consumer.deliveries.map((d) => [d.jobId, d.payload])).toEqual([[retry.body.jobId, { n: 7 }]]);
  }, 30_000);

  it('a job SQS refused frees its key', async () => {
    const sys = await createSystem(em, { settings });
    // SQS's per-entry refusals cannot be produced by the emulator for valid text: refuse here.
    const refusing = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) =>
        messages.some((m) => m.body.includes('refuse-me'))
          ? messages.map((m) => ({ id: m.id, retryable: false, message: 'InvalidMessageContents (injected)' }))
          : orig(url, messages),
    });
    const submitter = new Submitter({ ...sys.w.submitter.deps, sender: refusing });
    await expect(
      submitter.submit('demo', JSON.stringify({ payload: 'refuse-me', delaySeconds: 60, idempotencyKey: 'free-again' })),
    ).rejects.toMatchObject({ status: 400, code: 'ValidationError' });
    expect((await scanAll(sys)).filter((i) => i.pk!.S!.startsWith('idem#'))).toHaveLength(0);
    const fixed = await post(sys.w, { payload: 'fixed', delaySeconds: 60, idempotencyKey: 'free-again' });
    expect(fixed.status).toBe(201);
  });

  it('the window: a key is remembered for 24 hours, then names a new job', async () => {
    let now = Date.now();
    const clock: Clock = { now: () => now };
    const sys = await createSystem(em, { settings, clock });
    const first = await post(sys.w, { payload: 1, delaySeconds: 3_600, idempotencyKey: 'daily' });
    expect(first.status).toBe(201);
    now += 24 * HOUR - 1_000;
    expect((await post(sys.w, { payload: 2, delaySeconds: 3_600, idempotencyKey: 'daily' })).status).toBe(409);
    expect(await post(sys.w, { payload: 1, delaySeconds: 3_600, idempotencyKey: 'daily' })).toEqual({ status: 200, body: first.body });
    now += 3_000; // the record's end is kept in whole seconds (rounded up): the window is 24 h to 24 h + 2 s
    const next = await post(sys.w, { payload: 2, delaySeconds: 3_600, idempotencyKey: 'daily' });
    expect(next.status).toBe(201);
    expect(next.body.jobId).not.toBe(first.body.jobId);
  });

  it('costs one conditional PutItem per keyed job and one BatchWriteItem per 25 of a request; a retry one PutItem and one GetItem, no send', async () => {
    const sys = await createSystem(em, { settings });
    const jobs = Array.from({ length: 100 }, (_, i) => ({ payload: { i }, delaySeconds: 3_600, idempotencyKey: `cost-${i}` }));
    const before = em.counter.snapshot();
    const res = await post(sys.w, { jobs }, { batch: true });
    expect(res.body.results?.every((r) => r.jobId)).toBe(true);
    const mid = em.counter.snapshot();
    const delta = (a: Record<string, number>, b: Record<string, number>, k: string) => (b[k] ?? 0) - (a[k] ?? 0);
    expect(delta(before, mid, 'DynamoDB.PutItem')).toBe(100);
    expect(delta(before, mid, 'DynamoDB.BatchWriteItem')).toBe(4);
    expect(delta(before, mid, 'DynamoDB.GetItem')).toBeLessThanOrEqual(2); // the tenant registry and its controls (issue #15), each cached
    expect(delta(before, mid, 'SQS.SendMessageBatch')).toBe(1);
    const retry = await post(sys.w, jobs[0]);
    expect(retry.status).toBe(200);
    const after = em.counter.snapshot();
    expect(delta(mid, after, 'DynamoDB.PutItem')).toBe(1);
    expect(delta(mid, after, 'DynamoDB.GetItem')).toBe(1); // dynalite ignores ReturnValuesOnConditionCheckFailure; DynamoDB saves this read
    expect(delta(mid, after, 'SQS.SendMessageBatch')).toBe(0);
    expect(delta(mid, after, 'DynamoDB.BatchWriteItem')).toBe(0);
  });
});
