import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelHandler, outcomesHandler, statusHandler } from '../../lambdas/runtime/handlers.js';
import type { Emulators } from '../support/emulators.js';
import { httpEvent, startRunningSystem, submitJobs, type RunningSystem, type TestSystem } from '../support/system.js';

/**
 * Concurrency by key (docs/flow-control.md) through submit, ingest, dispatch and the outcomes
 * route: never more of a key's jobs running than its limit, every job delivered once and never
 * early, another key and unkeyed jobs unhindered, and a slot freed by the worker's outcome (or,
 * with none, by its lease running out).
 */
let em: Emulators;
let sys: TestSystem;
let running: RunningSystem;
beforeAll(async () => {
  running = await startRunningSystem({ tenants: ['alpha', 'beta'] });
  ({ em, sys } = running);
});
afterAll(async () => running?.stop());

async function call(
  handler: ReturnType<typeof outcomesHandler>,
  method: string,
  path: string,
  params: Record<string, string>,
  body?: unknown,
) {
  const res = await handler(
    httpEvent(method, path, { pathParameters: params, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) }),
  );
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
}

const report = (tenant: string, jobId: string, outcome: string, concurrencyKey?: string) =>
  call(
    outcomesHandler(sys.w),
    'POST',
    `/v1/tenants/${tenant}/jobs/outcomes`,
    { tenant },
    {
      outcomes: [
        { jobId, outcome, attempts: 1, receivedAt: new Date().toISOString(), durationMs: 5, ...(concurrencyKey ? { concurrencyKey } : {}) },
      ],
    },
  );

/** A bulk cancel by concurrency key (`POST .../jobs/cancel`), followed until its operation is DONE. */
async function cancelByKey(tenant: string, concurrencyKey: string): Promise<Record<string, any>> {
  const start = await call(cancelHandler(sys.w), 'POST', `/v1/tenants/${tenant}/jobs/cancel`, { tenant }, { concurrencyKey });
  expect(start.status).toBe(202);
  const operationId = start.body.operationId as string;
  let op: Record<string, any> = {};
  for (const until = Date.now() + 30_000; op.state !== 'DONE' && Date.now() < until; await new Promise((r) => setTimeout(r, 100)))
    op = (await call(cancelHandler(sys.w), 'GET', `/v1/tenants/${tenant}/operations/${operationId}`, { tenant, operationId })).body;
  return op;
}

interface Run {
  readonly jobId: string;
  readonly key: string | undefined;
  readonly runAt: number;
  readonly start: number;
  end?: number;
}

/**
 * A worker: receives the tenant's messages, runs each for `workMs`, deletes it and reports its
 * outcome with its key (as the SDK's Worker does). Records when each job ran.
 */
function worker(tenant: string, workMs: number) {
  const runs: Run[] = [];
  const abort = new AbortController();
  const running = new Set<Promise<void>>();
  const url = sys.tenants[tenant]!.url;
  const loop = (async () => {
    while (!abort.signal.aborted) {
      const res = await em.sqs
        .send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }), {
          abortSignal: abort.signal,
        })
        .catch(() => ({ Messages: [] }));
      for (const m of res.Messages ?? []) {
        const body = JSON.parse(m.Body!);
        const key = m.MessageAttributes?.concurrencyKey?.StringValue;
        const run: Run = { jobId: body.jobId, key, runAt: Date.parse(body.runAt), start: Date.now() };
        runs.push(run);
        const p = (async () => {
          await new Promise((r) => setTimeout(r, workMs));
          run.end = Date.now();
          await em.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
          // Only keyed jobs' outcomes are reported (the tenant keeps no history).
          if (key !== undefined)
            expect((await report(tenant, body.jobId, 'SUCCEEDED', key)).body.results).toEqual([{ jobId: body.jobId, state: 'SUCCEEDED' }]);
        })();
        running.add(p);
        void p.finally(() => running.delete(p));
      }
    }
  })();
  return {
    runs,
    async waitFor(n: number, timeoutMs: number) {
      const until = Date.now() + timeoutMs;
      while (runs.filter((r) => r.end !== undefined).length < n && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    },
    async stop() {
      abort.abort();
      await loop;
      await Promise.all([...running]);
    },
  };
}

/** The most runs of `key` that overlapped at any moment. */
function maxConcurrent(runs: readonly Run[], key: string): number {
  const events = runs
    .filter((r) => r.key === key)
    .flatMap((r) => [
      [r.start, 1],
      [r.end ?? Infinity, -1],
    ])
    .sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let now = 0;
  let max = 0;
  for (const [, d] of events) max = Math.max(max, (now += d!));
  return max;
}

describe('concurrency by key', () => {
  it('runs at most the limit of a key at a time, every job once, never early; another key and unkeyed jobs do not wait', async () => {
    const w = worker('alpha', 300);
    try {
      // Beyond the lookahead (5 s): every job goes through the table, sent at its millisecond.
      const due = Date.now() + 6_000;
      const runAt = new Date(due).toISOString();
      const jobs = [
        ...Array.from({ length: 8 }, (_, i) => ({ payload: { i }, runAt, concurrencyKey: 'customer-1', concurrencyLimit: 2 })),
        ...Array.from({ length: 3 }, (_, i) => ({ payload: { j: i }, runAt, concurrencyKey: 'customer-2' })),
        ...Array.from({ length: 4 }, (_, i) => ({ payload: { free: i }, runAt })),
      ];
      const replies = await submitJobs(sys, 'alpha', jobs);
      await w.waitFor(jobs.length, 30_000);
      const { runs } = w;
      expect(runs.map((r) => r.jobId).sort()).toEqual(replies.map((r) => r.jobId).sort());
      for (const r of runs) expect(r.start).toBeGreaterThanOrEqual(r.runAt);
      expect(maxConcurrent(runs, 'customer-1')).toBeLessThanOrEqual(2);
      expect(maxConcurrent(runs, 'customer-2')).toBe(1);
      // The unkeyed jobs did not queue behind a key: each went out before customer-1's first job
      // that had to wait for a slot (its third), which started only once one of the first two ended.
      const c1 = runs.filter((r) => r.key === 'customer-1').sort((a, b) => a.start - b.start);
      const unkeyed = runs.filter((r) => r.key === undefined);
      expect(unkeyed).toHaveLength(4);
      for (const r of unkeyed) expect(r.start).toBeLessThan(c1[2]!.start);
      expect(c1[2]!.start).toBeGreaterThanOrEqual(Math.min(c1[0]!.end!, c1[1]!.end!));
      // customer-1's 8 jobs ran two at a time: at least four rounds of 300 ms after the first start.
      expect(Math.max(...c1.map((r) => r.end!)) - Math.min(...c1.map((r) => r.start))).toBeGreaterThanOrEqual(4 * 300);
    } finally {
      await w.stop();
    }
  });

  it('shows the key and limit while scheduled; a keyed job’s report is taken without history; a bad key is a 400', async () => {
    const [job] = await submitJobs(sys, 'beta', [
      { payload: 1, runAt: new Date(Date.now() + 3_600_000).toISOString(), concurrencyKey: 'k', concurrencyLimit: 3 },
    ]);
    let status: Record<string, any> = {};
    for (let i = 0; i < 100 && status.state !== 'SCHEDULED'; i++) {
      status = (await call(statusHandler(sys.w), 'GET', `/v1/tenants/beta/jobs/${job!.jobId}`, { tenant: 'beta', jobId: job!.jobId })).body;
      if (status.state !== 'SCHEDULED') await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toMatchObject({ state: 'SCHEDULED', concurrencyKey: 'k', concurrencyLimit: 3 });
    // Without a key, a tenant without history keeps no outcome: 409 as before.
    const plain = await report('beta', job!.jobId, 'SUCCEEDED');
    expect(plain.status).toBe(409);
    const bad = await report('beta', job!.jobId, 'SUCCEEDED', 'x'.repeat(129));
    expect(bad.body.results[0].error.code).toBe('ValidationError');
    expect(bad.body.results[0].error.message).toMatch(/concurrencyKey must be a string of 1 to 128 characters/);
    // Submits with a bad key or a limit alone: 400, nothing written.
    for (const body of [
      { payload: 1, delaySeconds: 60, concurrencyKey: '' },
      { payload: 1, delaySeconds: 60, concurrencyKey: 'k', concurrencyLimit: 0 },
      { payload: 1, delaySeconds: 60, concurrencyLimit: 2 },
      { payload: 1, delaySeconds: 60, concurrencyKey: 'k\u0001' },
    ]) {
      await expect(sys.w.submitter.submit('beta', JSON.stringify(body))).rejects.toMatchObject({ status: 400 });
    }
    // Cancel before it is due: as any job.
    const del = await call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/beta/jobs/${job!.jobId}`, { tenant: 'beta', jobId: job!.jobId });
    expect(del.body.state).toBe('CANCELLED');
  });

  it('a slot whose worker never reports is taken over once its lease runs out; a running keyed job can be asked to stop', async () => {
    const slots = sys.w.dispatch.keySlots!;
    // A job that "ran" and never reported: it holds customer-9's only slot, its lease just over.
    const now = Date.now();
    await slots.setLimit('alpha', 'customer-9', 1, now);
    expect(await slots.take('alpha', 'customer-9', 'ghost', now + 300, 1, now)).toBe(true);
    const [job] = await submitJobs(sys, 'alpha', [{ payload: 'after the ghost', delaySeconds: 2, concurrencyKey: 'customer-9' }]);
    const received: { jobId: string; key?: string }[] = [];
    const url = sys.tenants.alpha!.url;
    for (const until = Date.now() + 20_000; received.length === 0 && Date.now() < until;) {
      const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }));
      for (const m of res.Messages ?? [])
        received.push({ jobId: JSON.parse(m.Body!).jobId, key: m.MessageAttributes?.concurrencyKey?.StringValue });
    }
    expect(received).toEqual([{ jobId: job!.jobId, key: 'customer-9' }]);
    // It holds the slot now: a DELETE asks its worker to stop it; the heartbeat names it and renews the slot.
    const del = await call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/alpha/jobs/${job!.jobId}`, { tenant: 'alpha', jobId: job!.jobId });
    expect(del).toMatchObject({ status: 202, body: { state: 'CANCEL_REQUESTED' } });
    const beat = await call(
      outcomesHandler(sys.w),
      'POST',
      '/v1/tenants/alpha/jobs/heartbeats',
      { tenant: 'alpha' },
      {
        jobIds: [job!.jobId],
        concurrencyKeys: { [job!.jobId]: 'customer-9' },
      },
    );
    expect(beat.body).toEqual({ cancelRequested: [job!.jobId] });
    const getJob = async () =>
      (await call(statusHandler(sys.w), 'GET', `/v1/tenants/alpha/jobs/${job!.jobId}`, { tenant: 'alpha', jobId: job!.jobId })).body;
    // Its marker is written within a second or so of the send.
    let shown: Record<string, any> = {};
    for (const until = Date.now() + 10_000; shown.state !== 'QUEUED' && Date.now() < until; await new Promise((r) => setTimeout(r, 100)))
      shown = await getJob();
    expect(shown).toMatchObject({ state: 'QUEUED', concurrencyKey: 'customer-9', concurrencyLimit: 1, cancelRequested: true });
    // The worker stops it: CANCELLED frees the slot, and a second DELETE is a 409.
    expect((await report('alpha', job!.jobId, 'CANCELLED', 'customer-9')).body.results[0].state).toBe('CANCELLED');
    expect(await slots.holds('alpha', 'customer-9', job!.jobId)).toBe(false);
    expect((await getJob()).cancelRequested).toBeUndefined();
    const again = await call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/alpha/jobs/${job!.jobId}`, {
      tenant: 'alpha',
      jobId: job!.jobId,
    });
    expect(again.status).toBe(409);
  });

  it('a bulk cancel by concurrencyKey cancels that key’s pending jobs and no other', async () => {
    const runAt = new Date(Date.now() + 3_600_000).toISOString();
    const stored = await submitJobs(
      sys,
      'beta',
      Array.from({ length: 5 }, (_, i) => ({ payload: i, runAt, concurrencyKey: 'order-42' })),
    );
    const other = await submitJobs(sys, 'beta', [
      { payload: 'x', runAt, concurrencyKey: 'order-43' },
      { payload: 'y', runAt },
    ]);
    const get = async (jobId: string) =>
      (await call(statusHandler(sys.w), 'GET', `/v1/tenants/beta/jobs/${jobId}`, { tenant: 'beta', jobId })).body.state as string;
    for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 50)))
      if ((await Promise.all([...stored, ...other].map((j) => get(j.jobId)))).every((st) => st === 'SCHEDULED')) break;
    // Listed by key: the key's five jobs, each with its key and limit; another key's and unkeyed jobs not.
    const list = async (query: Record<string, string>) => {
      const event = {
        ...httpEvent('GET', '/v1/tenants/beta/jobs', { pathParameters: { tenant: 'beta' }, routeKey: 'GET /v1/tenants/{tenant}/jobs' }),
        queryStringParameters: query,
      };
      const res = await statusHandler(sys.w)(event);
      return { status: res.statusCode, body: JSON.parse(res.body) as { jobs: Record<string, any>[] } };
    };
    const listed = await list({ concurrencyKey: 'order-42', limit: '100' });
    expect(listed.body.jobs.map((j) => j.jobId).sort()).toEqual(stored.map((j) => j.jobId).sort());
    for (const j of listed.body.jobs) expect(j).toMatchObject({ state: 'SCHEDULED', concurrencyKey: 'order-42', concurrencyLimit: 1 });
    expect((await list({ concurrencyKey: '' })).status).toBe(400);
    const op = await cancelByKey('beta', 'order-42');
    expect(op).toMatchObject({ state: 'DONE', matched: 5, cancelled: 5 });
    const after = await list({ concurrencyKey: 'order-42', state: 'CANCELLED', limit: '100' });
    expect(after.body.jobs).toHaveLength(5);
    for (const j of after.body.jobs) expect(j).toMatchObject({ state: 'CANCELLED', concurrencyKey: 'order-42' });
    expect(await Promise.all(stored.map((j) => get(j.jobId)))).toEqual(Array(5).fill('CANCELLED'));
    expect(await Promise.all(other.map((j) => get(j.jobId)))).toEqual(['SCHEDULED', 'SCHEDULED']);
  });

  it('cancels a job past its due time that waits for its key’s slot, and it is never delivered', async () => {
    const slots = sys.w.dispatch.keySlots!;
    const now = Date.now();
    // customer-7's only slot is held by a job still running (its lease an hour ahead).
    await slots.setLimit('beta', 'customer-7', 1, now);
    expect(await slots.take('beta', 'customer-7', 'running', now + 3_600_000, 1, now)).toBe(true);
    const [job] = await submitJobs(sys, 'beta', [{ payload: 'waits', delaySeconds: 1, concurrencyKey: 'customer-7' }]);
    const get = async () =>
      (await call(statusHandler(sys.w), 'GET', `/v1/tenants/beta/jobs/${job!.jobId}`, { tenant: 'beta', jobId: job!.jobId })).body;
    // Past its due time, a dispatcher holds it (ACQUIRED) while it waits for the slot.
    let status: Record<string, any> = {};
    for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
      status = await get();
      if (status.state === 'ACQUIRED' && Date.now() > Date.parse(status.runAt) + 500) break;
    }
    expect(status.state).toBe('ACQUIRED');
    const del = await call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/beta/jobs/${job!.jobId}`, { tenant: 'beta', jobId: job!.jobId });
    expect(del).toMatchObject({ status: 200, body: { state: 'CANCELLED' } });
    // The slot frees: the cancelled job does not take it, and nothing reaches the queue.
    await slots.release('beta', 'customer-7', 'running');
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.tenants.beta!.url, WaitTimeSeconds: 2 }));
    expect(res.Messages ?? []).toEqual([]);
    expect((await get()).state).toBe('CANCELLED');
    expect(await slots.holds('beta', 'customer-7', job!.jobId)).toBe(false);
  });

  it('a bulk cancel by concurrencyKey cancels the key’s jobs waiting for a slot past their due time too', async () => {
    const slots = sys.w.dispatch.keySlots!;
    const now = Date.now();
    await slots.setLimit('beta', 'customer-8', 1, now);
    expect(await slots.take('beta', 'customer-8', 'running', now + 3_600_000, 1, now)).toBe(true);
    const jobs = await submitJobs(sys, 'beta', [
      { payload: 'w1', delaySeconds: 1, concurrencyKey: 'customer-8' },
      { payload: 'w2', delaySeconds: 1, concurrencyKey: 'customer-8' },
    ]);
    const get = async (jobId: string) =>
      (await call(statusHandler(sys.w), 'GET', `/v1/tenants/beta/jobs/${jobId}`, { tenant: 'beta', jobId })).body;
    for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100))) {
      const states = await Promise.all(jobs.map((j) => get(j.jobId)));
      if (states.every((st) => st.state === 'ACQUIRED' && Date.now() > Date.parse(st.runAt) + 500)) break;
    }
    const op = await cancelByKey('beta', 'customer-8');
    expect(op).toMatchObject({ state: 'DONE', matched: 2, cancelled: 2, alreadyQueued: 0 });
    await slots.release('beta', 'customer-8', 'running');
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.tenants.beta!.url, WaitTimeSeconds: 2 }));
    expect(res.Messages ?? []).toEqual([]);
    expect((await Promise.all(jobs.map((j) => get(j.jobId)))).map((st) => st.state)).toEqual(['CANCELLED', 'CANCELLED']);
  });

  it('workflow jobs with a key: at most the limit at once, handed over through the table; their reports free the slot', async () => {
    const w = worker('alpha', 200);
    try {
      const key = { concurrencyKey: 'wf-key', concurrencyLimit: 1 };
      const body = {
        jobs: [
          // Roots due at once: without a key they would go straight to the queue; with one, one at a time.
          { key: 'a', payload: 'a', delaySeconds: 1, ...key },
          { key: 'b', payload: 'b', delaySeconds: 1, ...key },
          { key: 'c', payload: 'c', delaySeconds: 1, ...key },
          { key: 'last', payload: 'last', after: ['a', 'b', 'c'], ...key },
        ],
      };
      const { status, reply } = await sys.w.workflows.submit('alpha', JSON.stringify(body));
      expect(status).toBe(201);
      await w.waitFor(4, 30_000);
      const runs = w.runs.filter((r) => r.key === 'wf-key');
      expect(runs.map((r) => r.jobId).sort()).toEqual(Object.values(reply.jobs).sort());
      expect(maxConcurrent(runs, 'wf-key')).toBe(1);
      const last = runs.find((r) => r.jobId === reply.jobs.last)!;
      for (const r of runs) if (r !== last) expect(last.start).toBeGreaterThanOrEqual(r.end!);
      // A retry of the request with another limit is another request: 409.
      const other = { ...body, idempotencyKey: 'wk-1' };
      expect((await sys.w.workflows.submit('alpha', JSON.stringify(other))).status).toBe(201);
      const changed = { ...other, jobs: other.jobs.map((j) => ({ ...j, concurrencyLimit: 2 })) };
      await expect(sys.w.workflows.submit('alpha', JSON.stringify(changed))).rejects.toMatchObject({ status: 409 });
    } finally {
      await w.stop();
    }
  });
});
