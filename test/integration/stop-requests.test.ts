import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelHandler, outcomesHandler, statusHandler, workflowsHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, submitJobs, type TestSystem } from '../support/system.js';

/**
 * Stopping a running job (#26, docs/flow-control.md), the server's side: `DELETE` of a delivered
 * job whose outcomes are reported answers 202 `CANCEL_REQUESTED` and records the request; the
 * workers' heartbeats (`POST .../jobs/heartbeats`) name it; the outcome `CANCELLED` ends it, and
 * status shows each step. Jobs whose outcomes are not reported keep their 409.
 */

let em: Emulators;
let sys: TestSystem;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['hist', 'plain'] });
  await sys.w.store.putTenant({
    name: 'hist',
    queueUrl: sys.tenants.hist!.url,
    dlqUrl: sys.tenants.hist!.dlqUrl,
    historyTtlMs: 86_400_000,
  });
});
afterAll(async () => em?.stop());

const HOUR = 3_600_000;

async function call(
  handler: ReturnType<typeof cancelHandler>,
  method: string,
  path: string,
  params: Record<string, string>,
  body?: unknown,
) {
  const res = await handler(
    httpEvent(method, path, {
      pathParameters: params,
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    }),
  );
  return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, any> };
}
const del = (tenant: string, jobId: string) =>
  call(cancelHandler(sys.w), 'DELETE', `/v1/tenants/${tenant}/jobs/${jobId}`, { tenant, jobId });
const get = async (tenant: string, jobId: string) =>
  (await call(statusHandler(sys.w), 'GET', `/v1/tenants/${tenant}/jobs/${jobId}`, { tenant, jobId })).body;
const heartbeats = (tenant: string, body: unknown) =>
  call(outcomesHandler(sys.w), 'POST', `/v1/tenants/${tenant}/jobs/heartbeats`, { tenant }, body);
const report = (tenant: string, jobId: string, outcome: string) =>
  call(
    outcomesHandler(sys.w),
    'POST',
    `/v1/tenants/${tenant}/jobs/outcomes`,
    { tenant },
    {
      // Received 50 ms ago and ended now: after any stop request made before the report (a run that
      // ended 30 ms ago could end before a request a fast machine made 20 ms ago).
      outcomes: [{ jobId, outcome, attempts: 1, receivedAt: new Date(Date.now() - 50).toISOString(), durationMs: 50 }],
    },
  );

/** Jobs due in an hour, their delivered markers written (as a round that sent them would). */
async function delivered(tenant: string, n: number): Promise<string[]> {
  const jobs = await submitJobs(
    sys,
    tenant,
    Array.from({ length: n }, (_, i) => ({ payload: i, runAt: new Date(Date.now() + HOUR).toISOString() })),
  );
  const rows = jobs.map((j) => {
    const id = sys.w.codec.parse(j.jobId);
    return { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId, tenant, expiresAtMs: id.dueMs + 86_400_000 };
  });
  expect(await sys.w.store.markDelivered(rows, Date.now())).toEqual([]);
  return jobs.map((j) => j.jobId);
}

describe('stopping a running job', () => {
  it("a history tenant's delivered job: 202 CANCEL_REQUESTED, named by heartbeats, ended by the outcome CANCELLED", async () => {
    const [a, b, c] = await delivered('hist', 3);
    const first = await del('hist', a!);
    expect(first).toEqual({ status: 202, body: { jobId: a, state: 'CANCEL_REQUESTED' } });
    expect((await del('hist', a!)).status).toBe(202);
    // A job sent straight to its queue is delivered too.
    const [direct] = await submitJobs(sys, 'hist', [{ payload: 'now', delaySeconds: 0 }]);
    expect(direct!.state).toBe('QUEUED');
    expect((await del('hist', direct!.jobId)).body.state).toBe('CANCEL_REQUESTED');

    const beat = await heartbeats('hist', { jobIds: [a, b, c, direct!.jobId, a] });
    expect(beat.status).toBe(200);
    expect(beat.body.cancelRequested.sort()).toEqual([a, direct!.jobId].sort());

    const running = await get('hist', a!);
    expect(running).toMatchObject({ state: 'DELIVERED', cancelRequested: true });
    expect(running.timeline.map((e: { event: string }) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'CANCEL_REQUESTED']);
    expect(await get('hist', b!)).not.toHaveProperty('cancelRequested');

    // The worker stops it and reports CANCELLED: final, shown, and a later DELETE is a 409.
    expect((await report('hist', a!, 'CANCELLED')).body.results).toEqual([{ jobId: a, state: 'CANCELLED' }]);
    const ended = await get('hist', a!);
    expect(ended.state).toBe('CANCELLED');
    expect(ended).not.toHaveProperty('cancelRequested');
    expect(ended.timeline.map((e: { event: string }) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'CANCEL_REQUESTED', 'CANCELLED']);
    const again = await del('hist', a!);
    expect([again.status, again.body.error.code]).toEqual([409, 'AlreadyQueued']);
    expect(again.body.error.message).toMatch(/ended CANCELLED/);

    // A job that ended otherwise cannot be asked to stop; a FAILED attempt is not an end.
    await report('hist', b!, 'SUCCEEDED');
    expect((await del('hist', b!)).body.error.message).toMatch(/ended SUCCEEDED/);
    await report('hist', c!, 'FAILED');
    expect((await del('hist', c!)).status).toBe(202);
  });

  it('a tenant without history keeps its 409 for a delivered job, and its heartbeats name nothing', async () => {
    const [a] = await delivered('plain', 1);
    const res = await del('plain', a!);
    expect([res.status, res.body.error.code]).toEqual([409, 'AlreadyQueued']);
    expect((await heartbeats('plain', { jobIds: [a] })).body).toEqual({ cancelRequested: [] });
    // A job still scheduled is cancelled as before (200 CANCELLED), history or not.
    const [later] = await submitJobs(sys, 'hist', [{ payload: 1, runAt: new Date(Date.now() + HOUR).toISOString() }]);
    expect(await del('hist', later!.jobId)).toEqual({ status: 200, body: { jobId: later!.jobId, state: 'CANCELLED' } });
  });

  it("a workflow's job handed to its queue: 202 whatever the tenant's history, and CANCELLED carries on to its children", async () => {
    const res = await workflowsHandler(sys.w)(
      httpEvent('POST', '/v1/tenants/plain/workflows', {
        pathParameters: { tenant: 'plain' },
        body: JSON.stringify({
          jobs: [
            { key: 'a', payload: 1, delaySeconds: 0 },
            { key: 'b', payload: 2, after: ['a'] },
          ],
        }),
      }),
    );
    expect(res.statusCode, res.body).toBe(201);
    const { jobs } = JSON.parse(res.body) as { jobs: Record<string, string> };
    expect((await del('plain', jobs.a!)).body).toEqual({ jobId: jobs.a, state: 'CANCEL_REQUESTED' });
    expect(await get('plain', jobs.a!)).toMatchObject({ state: 'QUEUED', cancelRequested: true });
    expect((await heartbeats('plain', { jobIds: [jobs.a, jobs.b] })).body).toEqual({ cancelRequested: [jobs.a] });
    expect((await report('plain', jobs.a!, 'CANCELLED')).body.results).toEqual([{ jobId: jobs.a, state: 'CANCELLED' }]);
    // Its child waited on it: a cancelled parent cancels it (onParentFailure's default).
    expect((await get('plain', jobs.b!)).state).toBe('CANCELLED');
    expect((await get('plain', jobs.a!)).state).toBe('CANCELLED');
  });

  it('refuses bad heartbeats with a 400 naming the problem', async () => {
    const [own] = await delivered('hist', 1);
    const [other] = await delivered('plain', 1);
    const cases: [unknown, RegExp][] = [
      ['', /empty/],
      ['[]', /JSON object/],
      [{}, /jobIds must be an array/],
      [{ jobIds: [] }, /1 to 100/],
      [{ jobIds: Array(101).fill(own) }, /1 to 100/],
      [{ jobIds: [own], extra: 1 }, /unknown field extra/],
      [{ jobIds: ['nope'] }, /jobIds\[0\] is not a job id/],
      [{ jobIds: [own, 7] }, /jobIds\[1\] is not a job id/],
      [{ jobIds: [other] }, /jobIds\[0\] is not a job of tenant 'hist'/],
      ['{"jobIds": [], "jobIds": []}', /more than once/],
    ];
    for (const [body, message] of cases) {
      const res = await heartbeats('hist', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'ValidationError', message: expect.stringMatching(message) });
    }
    expect((await heartbeats('nobody', { jobIds: [own] })).status).toBe(404);
  });
});
