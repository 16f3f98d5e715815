import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { connect } from 'node:net';
import { type SQSClient } from '@aws-sdk/client-sqs';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { consume } from '../support/system.js';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { specSign } from '../support/specSigner.js';

/**
 * `npm start` end to end, as a user runs it: two tenants, SigV4-signed jobs, cancels, plain SQS
 * consumers, and the gateway's auth matrix.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let sqs: SQSClient;

beforeAll(async () => {
  // A 1 s lookahead (the lease at least twice that), as a user may set them (docs/local.md): the
  // delivery test's jobs go through the table, and can be cancelled, until 1 s before they are due.
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_LOOKAHEAD_MS: '1000', DYNEIN_LEASE_MS: '3000' }, { npmStart: true });
  local = await stack.waitForLocalJson();
  sqs = localSqs(local);
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
          // Due 11 to 17 s after its request: past the 1 s lookahead (through the table), and still
          // cancellable once all 200 are in, however loaded the machine (10 s of submits were seen):
          // the cut-off is 10 s or more after its request, as it was due 15 s out with a 5 s lookahead.
          const runAt = new Date(Date.now() + 11_000 + Math.floor(Math.random() * 6_000)).toISOString();
          const res = await signedFetch(
            local.endpoint,
            local.tenants[tenant]!,
            'POST',
            `/v1/tenants/${tenant}/jobs`,
            JSON.stringify({ payload: { n: i + k }, runAt }),
          );
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
    const status = await signedFetch(
      local.endpoint,
      local.tenants[toCancel[0]!.tenant]!,
      'GET',
      `/v1/tenants/${toCancel[0]!.tenant}/jobs/${toCancel[0]!.jobId}`,
    );
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

  it('collapses debounced submits into one job, delivered once with the last payload (replies checked against the OpenAPI document)', async () => {
    const alpha = local.tenants.alpha!;
    const queue = consume(sqs, alpha.queueUrl);
    const submit = (n: number) =>
      signedFetch(
        local.endpoint,
        alpha,
        'POST',
        '/v1/tenants/alpha/jobs',
        `{"payload":{"n":${n}},"debounce":{"key":"e2e","periodSeconds":2}}`,
      );
    const replies = [await submit(0), await submit(1), await submit(2)];
    expect(replies.map((r) => [r.status, r.json.debounced])).toEqual([
      [201, false],
      [200, true],
      [200, true],
    ]);
    const jobId = replies[0]!.json.jobId as string;
    const got = await signedFetch(local.endpoint, alpha, 'GET', `/v1/tenants/alpha/jobs/${jobId}`);
    expect(got.json).toMatchObject({ jobId, state: 'SCHEDULED', debounceKey: 'e2e', runAt: replies[2]!.json.runAt });
    await queue.waitFor((d) => d.some((x) => x.jobId === jobId), 20_000);
    await new Promise((r) => setTimeout(r, 1_000));
    await queue.stop();
    expect(queue.deliveries.filter((d) => d.jobId === jobId).map((d) => d.payload)).toEqual([{ n: 2 }]);
  }, 40_000);

  it('answers the auth matrix as API Gateway does', async () => {
    const alpha = local.tenants.alpha!;
    const beta = local.tenants.beta!;
    const body = JSON.stringify({ payload: 1, delaySeconds: 60 });
    const unsigned = await fetch(`${local.endpoint}/v1/tenants/alpha/jobs`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    });
    expect(unsigned.status).toBe(403);
    expect(await unsigned.json()).toEqual({ message: 'Forbidden' });

    const unknownKey = await signedFetch(
      local.endpoint,
      { accessKeyId: 'AKIA0000000000000000', secretAccessKey: 'nope' },
      'POST',
      '/v1/tenants/alpha/jobs',
      body,
    );
    expect([unknownKey.status, unknownKey.json.message]).toEqual([403, 'The security token included in the request is invalid.']);

    const wrongSecret = await signedFetch(
      local.endpoint,
      { accessKeyId: alpha.accessKeyId, secretAccessKey: beta.secretAccessKey },
      'POST',
      '/v1/tenants/alpha/jobs',
      body,
    );
    expect(wrongSecret.status).toBe(403);
    expect(wrongSecret.json.message).toMatch(/signature we calculated does not match/);

    const tampered = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, {
      tamper: (_h, b) => b!.replace('60', '61'),
    });
    expect(tampered.status).toBe(403);
    expect(tampered.json.message).toMatch(/signature we calculated does not match/);

    const stale = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, {
      date: new Date(Date.now() - 6 * 60_000),
    });
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
    expect((await signedFetch(local.endpoint, alpha, 'GET', `/v1/tenants/alpha/jobs/${mine.json.jobId}`)).json.state).toMatch(
      /^(SCHEDULED|UNKNOWN)$/,
    );

    const noRoute = await signedFetch(local.endpoint, alpha, 'PUT', '/v1/tenants/alpha/jobs', body);
    expect([noRoute.status, noRoute.json]).toEqual([404, { message: 'Not Found' }]);
  }, 30_000);

  it('checks SigV4 as API Gateway does: region, session token and encoded paths, with the SDK, an independent signer and curl', async () => {
    const alpha = local.tenants.alpha!;
    const host = new URL(local.endpoint).host;
    const body = JSON.stringify({ payload: 1, delaySeconds: 60 });

    const otherRegion = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, { region: 'us-west-2' });
    expect([otherRegion.status, otherRegion.json]).toEqual([
      403,
      { message: "Credential should be scoped to a valid region, not 'us-west-2'. " },
    ]);
    const madeUpToken = await signedFetch(local.endpoint, alpha, 'POST', '/v1/tenants/alpha/jobs', body, {
      sessionToken: 'IQoJb3JpZ2luX2VjEMadeUpToken',
    });
    expect([madeUpToken.status, madeUpToken.json]).toEqual([403, { message: 'The security token included in the request is invalid.' }]);

    // Encoded and literal paths verify: the status handler answers (the id is not a job id),
    // never the gateway's 403. Sent byte for byte as written (no URL normalization).
    const paths = [
      `/v1/tenants/alpha/jobs/${encodeURIComponent('not a job: é+😀/x')}`,
      '/v1/tenants/alpha/jobs/a:b@c(d)!e*f',
      '/v1/tenants/alpha/jobs/caf%c3%a9',
      '/v1/tenants/%61lpha/jobs/x%7Ey',
    ];
    for (const wirePath of paths) {
      const sdk = await rawRequest(local.endpoint, 'GET', wirePath, await sdkHeaders(alpha, 'GET', host, wirePath));
      const spec = await rawRequest(
        local.endpoint,
        'GET',
        wirePath,
        specSign({ method: 'GET', host, wirePath, ...alpha, region: local.region }),
      );
      for (const r of [sdk, spec]) {
        expect([wirePath, r.status]).toEqual([wirePath, 400]);
        expect(JSON.parse(r.body).error.code).toBeTruthy();
      }
    }
    const changed = await rawRequest(
      local.endpoint,
      'GET',
      '/v1/tenants/alpha/jobs/a%20B',
      specSign({ method: 'GET', host, wirePath: '/v1/tenants/alpha/jobs/a%20b', ...alpha, region: local.region }),
    );
    expect([changed.status, JSON.parse(changed.body).message]).toEqual([
      403,
      expect.stringMatching(/signature we calculated does not match/),
    ]);

    // curl's own SigV4 signer, an independent client (plain paths: curl before 8.x signs paths verbatim).
    const url = `${local.endpoint}/v1/tenants/alpha/jobs`;
    const byCurl = await curl([
      '--aws-sigv4',
      `aws:amz:${local.region}:execute-api`,
      '--user',
      `${alpha.accessKeyId}:${alpha.secretAccessKey}`,
      '-H',
      'content-type: application/json',
      '-d',
      body,
      url,
    ]);
    expect(byCurl.status).toBe(201);
    expect(JSON.parse(byCurl.body).state).toBe('SCHEDULED');
    const curlRegion = await curl([
      '--aws-sigv4',
      'aws:amz:us-west-2:execute-api',
      '--user',
      `${alpha.accessKeyId}:${alpha.secretAccessKey}`,
      '-H',
      'content-type: application/json',
      '-d',
      body,
      url,
    ]);
    expect([curlRegion.status, JSON.parse(curlRegion.body)]).toEqual([
      403,
      { message: "Credential should be scoped to a valid region, not 'us-west-2'. " },
    ]);
    const curlToken = await curl([
      '--aws-sigv4',
      `aws:amz:${local.region}:execute-api`,
      '--user',
      `${alpha.accessKeyId}:${alpha.secretAccessKey}`,
      '-H',
      'x-amz-security-token: made-up',
      '-H',
      'content-type: application/json',
      '-d',
      body,
      url,
    ]);
    expect([curlToken.status, JSON.parse(curlToken.body)]).toEqual([
      403,
      { message: 'The security token included in the request is invalid.' },
    ]);
  }, 30_000);

  it('answers 413 past 10 MB while the body streams, before authentication, and 431 for oversized headers', async () => {
    const alpha = local.tenants.alpha!;
    const host = new URL(local.endpoint).host;
    const tooBig = Buffer.alloc(10 * 1024 * 1024 + 1, 0x20);
    const path = '/v1/tenants/alpha/jobs';
    const entity = { status: 413, body: { message: 'Request Entity Too Large' } };
    const asJson = (r: { status: number; body: string }) => ({ status: r.status, body: JSON.parse(r.body) as unknown });

    // Signed, declared length: refused for its size, not its signature.
    const signed = specSign({
      method: 'POST',
      host,
      wirePath: path,
      body: tooBig,
      headers: { 'content-type': 'application/json' },
      ...alpha,
      region: local.region,
    });
    expect(asJson(await rawRequest(local.endpoint, 'POST', path, signed, tooBig))).toEqual(entity);
    // Unsigned and chunked (no length declared): counted while streaming, 413 before any 403.
    expect(
      asJson(await rawRequest(local.endpoint, 'POST', path, { 'content-type': 'application/json' }, tooBig, { chunked: true })),
    ).toEqual(entity);
    // A declared length past the limit is answered before a byte of the body is sent.
    const early = await new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(local.endpoint);
      const socket = connect(Number(port), hostname, () =>
        socket.write(
          `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${tooBig.length}\r\n\r\n`,
        ),
      );
      let got = '';
      socket.on('data', (d) => {
        got += d;
        const end = got.indexOf('\r\n\r\n');
        const length = /content-length: (\d+)/i.exec(got)?.[1];
        if (end >= 0 && length !== undefined && got.length >= end + 4 + Number(length)) {
          socket.destroy();
          resolve(got);
        }
      });
      socket.on('error', reject);
    });
    expect(early).toMatch(/^HTTP\/1\.1 413 /);
    expect(early.slice(early.indexOf('\r\n\r\n') + 4)).toBe('{"message":"Request Entity Too Large"}');

    // Request line and header values past API Gateway's 10,240 bytes: 431, whatever the size.
    for (const size of [11_000, 100_000]) {
      const r = await rawRequest(local.endpoint, 'GET', '/v1/tenants/alpha/jobs/x', { 'x-padding': 'p'.repeat(size) });
      expect(asJson(r)).toEqual({ status: 431, body: { message: 'Request Header Fields Too Large' } });
    }
    // The stack still serves.
    expect((await signedFetch(local.endpoint, alpha, 'POST', path, JSON.stringify({ payload: 2, delaySeconds: 60 }))).status).toBe(201);
  }, 60_000);
});

/** Headers the AWS SDK's signer produces for a request whose wire path is `wirePath`. */
async function sdkHeaders(
  c: { accessKeyId: string; secretAccessKey: string },
  method: string,
  host: string,
  wirePath: string,
): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 'execute-api', region: local.region, credentials: c, sha256: Hash.bind(null, 'sha256') });
  const [hostname, port] = host.split(':');
  const signed = await signer.sign({
    method,
    protocol: 'http:',
    hostname: hostname!,
    port: Number(port),
    path: wirePath,
    query: {},
    headers: { host },
  });
  return signed.headers as Record<string, string>;
}

/** One HTTP request with the path sent exactly as given. */
function rawRequest(
  endpoint: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
  opts: { chunked?: boolean } = {},
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(endpoint);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    if (!body || !opts.chunked) return void req.end(body);
    let at = 0;
    const pump = () => {
      while (at < body.length) {
        const more = req.write(body.subarray(at, at + 64 * 1024));
        at += 64 * 1024;
        if (!more) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

function curl(args: string[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) =>
    execFile('curl', ['-s', '-w', '\n%{http_code}', ...args], (err, stdout) => {
      if (err) return reject(err);
      const i = stdout.lastIndexOf('\n');
      resolve({ status: Number(stdout.slice(i + 1)), body: stdout.slice(0, i) });
    }),
  );
}
