import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DyneinClient,
  ForbiddenError,
  InvalidJobIdError,
  JobNotFoundError,
  NotCancellableError,
  PayloadTooLargeError,
  ValidationError,
} from '../../client/index.js';
import { startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { consume } from '../support/system.js';

/**
 * DyneinClient against the local stack (the local API gateway checks SigV4 and answers as API
 * Gateway does), including a proxy that loses the first reply: one job, not two.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let alpha: DyneinClient;
let beta: DyneinClient;

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_LOOKAHEAD_MS: '2000' });
  local = await stack.waitForLocalJson();
  alpha = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.alpha! });
  beta = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.beta! });
}, 60_000);
afterAll(async () => stack?.stop());

/** A job's status once ingest stored it: right after submit, status answers UNKNOWN (the job waits in the inbound queue). */
async function storedStatus(client: DyneinClient, tenant: string, jobId: string): Promise<Awaited<ReturnType<DyneinClient['get']>>> {
  const end = Date.now() + 15_000;
  for (;;) {
    const status = await client.get(tenant, jobId);
    if (status.state !== 'UNKNOWN' || Date.now() > end) return status;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('DyneinClient against the local stack', () => {
  it('schedules, reads and cancels a job with typed replies', async () => {
    const before = Date.now();
    const job = await alpha.schedule('alpha', { payload: { invoice: 42 }, delaySeconds: 60 });
    expect(job).toMatchObject({ tenant: 'alpha', state: 'SCHEDULED', jobId: expect.stringMatching(/^j1\.alpha\./) });
    expect(Date.parse(job.runAt)).toBeGreaterThanOrEqual(before + 60_000);
    expect(Date.parse(job.runAt)).toBeLessThanOrEqual(Date.now() + 60_000);
    expect(await storedStatus(alpha, 'alpha', job.jobId)).toEqual({
      jobId: job.jobId,
      tenant: 'alpha',
      runAt: job.runAt,
      state: 'SCHEDULED',
      traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
    });
    expect(await alpha.cancel('alpha', job.jobId)).toEqual({ jobId: job.jobId, state: 'CANCELLED' });
    expect(await alpha.cancel('alpha', job.jobId)).toEqual({ jobId: job.jobId, state: 'CANCELLED' });
    expect((await alpha.get('alpha', job.jobId)).state).toBe('CANCELLED');

    const at = new Date(Date.now() + 3_600_000);
    const later = await alpha.schedule('alpha', { payload: null, runAt: at });
    expect(later.runAt).toBe(at.toISOString());
  });

  it('answers every refusal with its typed error', async () => {
    const soon = await alpha.schedule('alpha', { payload: 1, delaySeconds: 1 });
    expect(soon.state).toBe('QUEUED');
    const notCancellable = await alpha.cancel('alpha', soon.jobId).catch((e) => e);
    expect(notCancellable).toBeInstanceOf(NotCancellableError);
    expect(notCancellable).toMatchObject({ status: 409, code: 'NotCancellable', source: 'api', requestId: expect.any(String) });

    await expect(alpha.get('alpha', 'not-a-job-id')).rejects.toBeInstanceOf(InvalidJobIdError);
    await expect(beta.get('beta', soon.jobId)).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(alpha.schedule('alpha', { payload: 1, runAt: 'tomorrow' })).rejects.toMatchObject({
      name: 'ValidationError',
      status: 400,
      source: 'api',
    });
    await expect(alpha.schedule('alpha', { payload: 'x'.repeat(241 * 1024), delaySeconds: 60 })).rejects.toBeInstanceOf(
      PayloadTooLargeError,
    );

    const wrongSecret = new DyneinClient({
      endpoint: local.endpoint,
      region: local.region,
      credentials: { accessKeyId: local.tenants.alpha!.accessKeyId, secretAccessKey: 'wrong' },
    });
    const forbidden = await wrongSecret.get('alpha', soon.jobId).catch((e) => e);
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect(forbidden).toMatchObject({ status: 403, source: 'gateway', attempts: 1 });
    expect(forbidden.message).toMatch(/signature we calculated does not match/);
    // Another tenant's path: the gateway's IAM rule, before any handler runs.
    await expect(alpha.schedule('beta', { payload: 1, delaySeconds: 60 })).rejects.toMatchObject({
      name: 'ForbiddenError',
      message: 'Forbidden',
    });
    await expect(alpha.schedule('alpha', { payload: 1 })).rejects.toBeInstanceOf(ValidationError);
  });

  it('takes credentials from the AWS default provider chain when none are given', async () => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = local.tenants.beta!.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = local.tenants.beta!.secretAccessKey;
    try {
      const fromEnv = new DyneinClient({ endpoint: local.endpoint, region: local.region });
      expect((await fromEnv.schedule('beta', { payload: 1, delaySeconds: 30 })).tenant).toBe('beta');
    } finally {
      process.env.AWS_ACCESS_KEY_ID = saved.id;
      process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
    }
  });

  it('schedules a batch of 250 jobs in requests of 100 and reports each job in order', async () => {
    const jobs = Array.from({ length: 250 }, (_, i) =>
      i === 137 ? { payload: i, runAt: 'not a time' } : { payload: i, delaySeconds: 600 + i },
    );
    const progress: number[] = [];
    const results = await alpha.scheduleBatch('alpha', jobs, { onProgress: (done) => progress.push(done), concurrency: 2 });
    expect(results).toHaveLength(250);
    expect(results.filter((r) => r.ok)).toHaveLength(249);
    const bad = results[137]!;
    expect(bad.ok ? undefined : [bad.error.code, bad.error.message.slice(0, 10)]).toEqual(['ValidationError', 'jobs[137]:']);
    expect(progress.sort((a, b) => a - b).at(-1)).toBe(250);
    const last = results[249]!;
    expect(last.ok && (await storedStatus(alpha, 'alpha', last.job.jobId)).state).toBe('SCHEDULED');
  });

  it('a server answering 503 then 201 leads to one job, not two', async () => {
    // A proxy that passes the first submit to the API but loses its reply (503), as a gateway timeout would.
    const bodies: string[] = [];
    let hidden: { jobId: string } | undefined;
    const upstream = new URL(local.endpoint);
    const proxy: Server = createServer(async (req, res) => {
      let body = '';
      for await (const c of req) body += c;
      if (req.url?.endsWith('/jobs')) bodies.push(body);
      const forwarded = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        async (up) => {
          let text = '';
          for await (const c of up) text += c;
          if (req.url?.endsWith('/jobs') && bodies.length === 1) {
            hidden = JSON.parse(text);
            res.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"Service Unavailable"}');
            return;
          }
          res.writeHead(up.statusCode!, up.headers).end(text);
        },
      );
      forwarded.end(body);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    const viaProxy = new DyneinClient({
      endpoint: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      region: local.region,
      credentials: local.tenants.alpha!,
      retry: { baseMs: 10, capMs: 50 },
    });

    const sqs = localSqs(local);
    const consumer = consume(sqs, local.tenants.alpha!.queueUrl);
    try {
      // Due after the lookahead: through the inbound queue and the table, where the id dedupes.
      const job = await viaProxy.schedule('alpha', { payload: { once: true }, delaySeconds: 4 });
      expect(bodies).toHaveLength(2);
      expect(bodies[1]).toBe(bodies[0]); // the same idempotency key and the same absolute runAt
      expect(JSON.parse(bodies[0]!)).toMatchObject({ idempotencyKey: expect.any(String), runAt: job.runAt });
      expect(hidden?.jobId).toBe(job.jobId);
      expect(job.state).toBe('SCHEDULED');
      // UNKNOWN until ingest has stored it (a second or two after submit).
      expect((await alpha.get('alpha', job.jobId)).state).toMatch(/^(SCHEDULED|ACQUIRED|QUEUED|UNKNOWN)$/);

      const mine = () => consumer.deliveries.filter((d) => d.jobId === job.jobId);
      await consumer.waitFor(() => mine().length > 0, 20_000);
      await new Promise((r) => setTimeout(r, 3_000)); // time for a second copy to show up, if there were one
      expect(mine()).toHaveLength(1);
      expect(mine()[0]!.payload).toEqual({ once: true });
    } finally {
      await consumer.stop();
      sqs.destroy();
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  }, 40_000);
});
