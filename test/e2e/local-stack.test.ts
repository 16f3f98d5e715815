import { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { consume } from '../support/system.js';
import { signedFetch, startLocalStack, type LocalJson } from '../support/localStack.js';

/**
 * `npm start` end to end, as a user runs it: two tenants, SigV4-signed jobs, cancels, plain SQS
 * consumers, and the gateway's auth matrix.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let sqs: SQSClient;

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta' });
  local = await stack.waitForLocalJson();
  sqs = new SQSClient({ endpoint: local.sqsEndpoint, region: local.region, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
}, 60_000);

afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
  // Ctrl-C removes local.json and stops every process.
  expect(stack.localJson()).toBeUndefined();
});

describe('npm start', () => {
  it('writes local.json with the endpoints, pids, and per-tenant keys and queues', async () => {
    expect(local.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(Object.keys(local.tenants).sort()).toEqual(['alpha', 'beta']);
    for (const t of Object.values(local.tenants)) {
      expect(t.accessKeyId).toMatch(/^AKIA[0-9A-F]{16}$/);
      expect(t.secretAccessKey.length).toBeGreaterThanOrEqual(30);
      expect(t.queueUrl).toMatch(/dynein-tenant-/);
      expect(t.dlqUrl).toMatch(/-dlq$/);
    }
    expect(local.tenants.alpha!.accessKeyId).not.toBe(local.tenants.beta!.accessKeyId);
    for (const pid of [local.pids.services, local.pids.compute]) expect(() => process.kill(pid, 0)).not.toThrow();
    // The banner follows local.json, and reaches us through npm's pipe a moment later.
    await vi.waitFor(() => expect(stack.output()).toMatch(/Dynein Serverless is running locally/), { timeout: 5_000, interval: 50 });
  });

  it('delivers every job that was not cancelled, none early, and never a cancelled one', async () => {
    const consumers = Object.fromEntries(Object.entries(local.tenants).map(([t, v]) => [t, consume(sqs, v.queueUrl)]));
    const jobs: { tenant: string; jobId: string; runAt: number }[] = [];
    const tenants = ['alpha', 'beta'] as const;
    for (let i = 0; i < 200; i += 20) {
      await Promise.all(
        Array.from({ length: 20 }, async (_, k) => {
          const tenant = tenants[(i + k) % 2]!;
          // Due 10 to 22 s after its request: past the 5 s lookahead (through the table) and cancellable for a while.
          const runAt = new Date(Date.now() + 10_000 + Math.floor(Math.random() * 12_000)).toISOString();
          const res = await signedFetch(local.endpoint, local.tenants[tenant]!, 'POST', `/v1/tenants/${tenant}/jobs`, JSON.stringify({ payload: { n: i + k }, runAt }));
          expect(res.status).toBe(201);
          expect(res.json).toMatchObject({ tenant, runAt, state: 'SCHEDULED' });
          expect(res.headers.get('apigw-requestid')).toBeTruthy();
          jobs.push({ tenant, jobId: res.json.jobId, runAt: Date.parse(runAt) });
        }),
      );
    }
    const toCancel = jobs.filter((_, i) => i % 4 === 0);
    const cancelled = new Set<string>();
    await Promise.all(
      toCancel.map(async (j) => {
        const res = await signedFetch(local.endpoint, local.tenants[j.tenant]!, 'DELETE', `/v1/tenants/${j.tenant}/jobs/${j.jobId}`);
        expect(res.status).toBe(200);
        expect(res.json).toEqual({ jobId: j.jobId, state: 'CANCELLED' });
        cancelled.add(j.jobId);
      }),
    );
    const status = await signedFetch(local.endpoint, local.tenants[toCancel[0]!.tenant]!, 'GET', `/v1/tenants/${toCancel[0]!.tenant}/jobs/${toCancel[0]!.jobId}`);
    expect(status.json.state).toBe('CANCELLED');

    const expected = jobs.filter((j) => !cancelled.has(j.jobId));
    const all = () => Object.values(consumers).flatMap((c) => c.deliveries);
    const lastDue = Math.max(...jobs.map((j) => j.runAt));
    while (Date.now() < lastDue + 3_000 || !expected.every((j) => all().some((d) => d.jobId === j.jobId))) {
      if (Date.now() > lastDue + 30_000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await Promise.all(Object.values(consumers).map((c) => c.stop()));

    const received = new Set(all().map((d) => d.jobId));
    expect(expected.filter((j) => !received.has(j.jobId)).map((j) => j.jobId)).toEqual([]);
    expect([...cancelled].filter((id) => received.has(id))).toEqual([]);
    expect(all().filter((d) => d.firstReceiveAt < Date.parse(d.runAt) || d.receivedAt < Date.parse(d.runAt))).toEqual([]);
    // Each tenant's queue holds its own jobs only.
    for (const [tenant, c] of Object.entries(consumers)) expect(c.deliveries.every((d) => d.tenant === tenant)).toBe(true);
    const metrics = (await (await fetch(`${local.endpoint}/local/metrics`)).json()) as { jobs: { dispatched: number; cancelled: number } };
    expect(metrics.jobs.dispatched).toBeGreaterThanOrEqual(expected.length);
    expect(metrics.jobs.cancelled).toBe(cancelled.size);
  }, 90_000);

  it('answers the auth matrix as API Gateway does', async () => {
    const alpha = local.tenants.alpha!;
    const beta = local.tenants.beta!;
    const body = JSON.stringify({ payload: 1, delaySeconds: 60 });
    const unsigned = await fetch(`${local.endpoint}/v1/tenants/alpha/jobs`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(unsigned.status).toBe(403);
    expect(await unsigned.json()).toEqual({ message: 'Forbidden' });

    const unknownKey = await signedFetch(local.endpoint, { accessKeyId: 'AKIA0000000000000000', secretAccessKey: 'nope' }, 'POST', '/v1/tenants/alpha/jobs', body);
    expect([unknownKey.status, unknownKey.json.message]).toEqual([403, 'The security token included in the request is invalid.']);

    const wrongSecret = await signedFetch(local.endpoint, { accessKeyId: alpha.accessKeyId, secretAccessKey: beta.secretAccessKey }, 'POST', '/v1/tenants/alpha/jobs', body);
    expect(wrongSecret.status).toBe(403);
    expect(wrongSecret.json.message).toMatch(/signature we calculated does not match/);

    const tampered = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, { tamper: (_h, b) => b!.replace('60', '61') });
    expect(tampered.status).toBe(403);
    expect(tampered.json.message).toMatch(/signature we calculated does not match/);

    const stale = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, { date: new Date(Date.now() - 6 * 60_000) });
    expect(stale.status).toBe(403);
    expect(stale.json.message).toMatch(/Signature expired/);

    const otherPath = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/beta/jobs', body);
    expect([otherPath.status, otherPath.json]).toEqual([403, { message: 'Forbidden' }]);

    const mine = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body);
    expect(mine.status).toBe(201);
    const othersJob = await signedFetch(local.endpoint, beta, 'GET', `/v1/tenants/beta/jobs/${mine.json.jobId}`);
    expect(othersJob.status).toBe(404);
    expect(othersJob.json.error.code).toBe('JobNotFound');
    const othersCancel = await signedFetch(local.endpoint, beta, 'DELETE', `/v1/tenants/beta/jobs/${mine.json.jobId}`);
    expect(othersCancel.status).toBe(404);
    // UNKNOWN until ingest has stored it (a second or two after submit), then SCHEDULED.
    expect((await signedFetch(local.endpoint, alpha, 'GET', `/v1/tenants/alpha/jobs/${mine.json.jobId}`)).json.state).toMatch(/^(SCHEDULED|UNKNOWN)$/);

    const noRoute = await signedFetch(local.endpoint, alpha, 'PUT', '/v1/tenants/alpha/jobs', body);
    expect([noRoute.status, noRoute.json]).toEqual([404, { message: 'Not Found' }]);
  }, 30_000);
});
