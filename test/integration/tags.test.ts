import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseInboundJobs, inboundBody } from '../../core/model/index.js';
import { statusHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, type TestSystem } from '../support/system.js';

/**
 * Job tags (#26): a job's `tags` travel through the inbound queue to its row, show in GET and in
 * listings, and `?tag=` finds the jobs that carry one; bad tags are a 400 that writes nothing.
 */

let em: Emulators;
let sys: TestSystem;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['demo'] });
});
afterAll(async () => em?.stop());

const HOUR = 3_600_000;

/** Every item of the table (a few here), to show a refusal wrote none. */
const items = async () => (await em.dynamo.send(new ScanCommand({ TableName: sys.tableName, ConsistentRead: true }))).Items ?? [];

async function post(path: string, body: string) {
  const res = await submitHandler(sys.w)(httpEvent('POST', path, { pathParameters: { tenant: 'demo' }, body }));
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
}

async function get(jobId: string) {
  const res = await statusHandler(sys.w)(httpEvent('GET', `/v1/tenants/demo/jobs/${jobId}`, { pathParameters: { tenant: 'demo', jobId } }));
  return JSON.parse(res.body) as Record<string, any>;
}

/** Waits until ingest stored every job (GET answers SCHEDULED). */
async function stored(ids: readonly string[]): Promise<void> {
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    const states = await Promise.all(ids.map(async (id) => (await get(id)).state));
    if (states.every((s) => s === 'SCHEDULED')) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('jobs not stored in 10 s');
}

describe('job tags', () => {
  it('a tagged job (single and batch) keeps its tags on its row: GET shows them, ?tag= finds exactly the jobs with that tag', async () => {
    const ingest = sys.startIngest();
    try {
      const runAt = new Date(Date.now() + HOUR).toISOString();
      const one = await post('/v1/tenants/demo/jobs', JSON.stringify({ payload: 1, runAt, tags: ['order-42', 'reminders'] }));
      expect(one.status).toBe(201);
      const batch = await post(
        '/v1/tenants/demo/jobs/batch',
        JSON.stringify({
          jobs: [
            { payload: 2, runAt, tags: ['order-42'] },
            { payload: 3, runAt, tags: ['order-7', 'é ünïcode tag'] },
            { payload: 4, runAt },
          ],
        }),
      );
      expect(batch.status).toBe(200);
      const [two, three, four] = (batch.body.results as { jobId: string }[]).map((r) => r.jobId);
      await stored([one.body.jobId, two!, three!, four!]);

      expect((await get(one.body.jobId)).tags).toEqual(['order-42', 'reminders']);
      expect((await get(three!)).tags).toEqual(['order-7', 'é ünïcode tag']);
      expect(await get(four!)).not.toHaveProperty('tags');

      const byTag = async (tag: string) => (await sys.w.lister.list('demo', { tag })).jobs.map((j) => j.jobId).sort();
      expect(await byTag('order-42')).toEqual([one.body.jobId, two].sort());
      expect(await byTag('é ünïcode tag')).toEqual([three]);
      expect(await byTag('order')).toEqual([]);
      // With other filters, and the listing shows each job's tags.
      const page = await sys.w.lister.list('demo', { tag: 'reminders', state: 'SCHEDULED' });
      expect(page.jobs).toEqual([expect.objectContaining({ jobId: one.body.jobId, tags: ['order-42', 'reminders'] })]);
      // A cursor is bound to its tag.
      const first = await sys.w.lister.list('demo', { tag: 'order-42', limit: '1' });
      expect(first.nextCursor).toBeDefined();
      await expect(sys.w.lister.list('demo', { tag: 'order-7', limit: '1', cursor: first.nextCursor })).rejects.toThrow(/cursor/);
      const second = await sys.w.lister.list('demo', { tag: 'order-42', limit: '1', cursor: first.nextCursor });
      expect([...first.jobs, ...second.jobs].map((j) => j.jobId).sort()).toEqual([one.body.jobId, two].sort());
    } finally {
      await ingest.stop();
    }
  });

  it('a delivered job keeps its tags on its marker: GET (QUEUED) shows them, ?tag= still finds it', async () => {
    // The row as ingest writes it (the inbound path is the first test's), then as a dispatcher
    // goes on: the acquire reads the row (its tags with it), the marker replaces it once sent.
    const dueMs = Date.now() + HOUR;
    const jobId = sys.w.codec.encode({ tenant: 'demo', shard: 3, dueMs, path: 't', random: 'deliveredTags000' });
    const key = { shard: 3, dueMs, jobId };
    expect(await sys.w.store.putJob({ ...key, tenant: 'demo', payload: '"soon"', tags: ['sent-42'] })).toBe('created');
    const row = await sys.w.store.acquire(key, dueMs, dueMs + 30_000);
    expect(row?.tags).toEqual(['sent-42']);
    expect(await sys.w.store.markDelivered([{ ...row!, expiresAtMs: dueMs + HOUR }], Date.now())).toEqual([]);
    expect(await get(jobId)).toMatchObject({ state: 'QUEUED', tags: ['sent-42'], deliveredAt: expect.any(String) });
    const listed = (await sys.w.lister.list('demo', { tag: 'sent-42' })).jobs;
    expect(listed).toEqual([expect.objectContaining({ jobId, state: 'QUEUED', tags: ['sent-42'] })]);
  });

  it('the same idempotency key with other tags is another request (409); with the same tags, the same job', async () => {
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const first = await post('/v1/tenants/demo/jobs', JSON.stringify({ payload: 1, runAt, idempotencyKey: 'tagged-1', tags: ['a', 'b'] }));
    expect(first.status).toBe(201);
    const same = await post('/v1/tenants/demo/jobs', JSON.stringify({ payload: 1, runAt, idempotencyKey: 'tagged-1', tags: ['a', 'b'] }));
    expect([same.status, same.body.jobId]).toEqual([200, first.body.jobId]);
    for (const tags of [['b', 'a'], ['a'], undefined]) {
      const other = await post(
        '/v1/tenants/demo/jobs',
        JSON.stringify({ payload: 1, runAt, idempotencyKey: 'tagged-1', ...(tags ? { tags } : {}) }),
      );
      expect([other.status, other.body.error?.code]).toEqual([409, 'IdempotencyKeyReused']);
    }
  });

  it('refuses bad tags with a 400 naming the tag, and writes nothing', async () => {
    const before = await items();
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const cases: [unknown, RegExp][] = [
      ['order-42', /tags must be an array of up to 10/],
      [Array.from({ length: 11 }, (_, i) => `t${i}`), /up to 10/],
      [[''], /tags\[0\] must be a string of 1 to 64/],
      [['x'.repeat(65)], /tags\[0\] must be a string of 1 to 64/],
      [['ok', 7], /tags\[1\] must be a string/],
      [['a', 'a'], /tags\[1\] repeats "a"/],
      [['tab\there'], /tags\[0\] holds a control character/],
    ];
    for (const [tags, message] of cases) {
      const one = await post('/v1/tenants/demo/jobs', JSON.stringify({ payload: 1, runAt, tags }));
      expect([one.status, one.body.error?.code], JSON.stringify(tags)).toEqual([400, 'ValidationError']);
      expect(one.body.error.message).toMatch(message);
      const batch = await post('/v1/tenants/demo/jobs/batch', JSON.stringify({ jobs: [{ payload: 1, runAt, tags }] }));
      expect(JSON.stringify(batch.body)).toMatch(message.source.replace(/\\/g, '').slice(0, 12));
    }
    await expect(sys.w.lister.list('demo', { tag: '' })).rejects.toThrow(/tag must be 1 to 64/);
    await expect(sys.w.lister.list('demo', { tag: 'x'.repeat(65) })).rejects.toThrow(/tag must be 1 to 64/);
    expect(await items()).toEqual(before);
  });
});

describe('an inbound entry with tags', () => {
  it('round-trips them, and an entry whose tags are not strings is refused (undefined in its place)', () => {
    const job = { jobId: 'j', tenant: 't', shard: 1, dueMs: 5, payload: '{"a":1}', tags: ['x', 'y'] };
    expect(parseInboundJobs(inboundBody([job, { ...job, jobId: 'k', tags: undefined }]))).toEqual(
      [job, { ...job, jobId: 'k', tags: undefined }].map(({ tags, ...rest }) => (tags ? { ...rest, tags } : rest)),
    );
    expect(parseInboundJobs('{"v":2,"jobs":[{"jobId":"j","tenant":"t","shard":1,"dueMs":5,"tags":[1],"payload":1}]}')).toEqual([undefined]);
  });
});
