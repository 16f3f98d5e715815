import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  AlreadyQueuedError,
  DyneinApiError,
  DyneinClient,
  ForbiddenError,
  InvalidJobIdError,
  JobNotFoundError,
  NetworkError,
  NotCancellableError,
  PayloadTooLargeError,
  RouteNotFoundError,
  ServerError,
  TenantNotFoundError,
  TenantPausedError,
  ThrottledError,
  ValidationError,
  parseRetryAfter,
  type DyneinClientOptions,
} from '../../client/index.js';

/**
 * The client's HTTP behaviour against a scripted HTTP server: every error shape the API and its
 * gateway answer, signing, and the retry policy (which status codes, `Retry-After`, bounds).
 */
interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
}
type Reply = { status: number; body?: unknown; headers?: Record<string, string> } | 'destroy';

let server: Server | undefined;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

/** Answers the scripted replies in turn (the last one repeats); records every request. */
async function stub(replies: Reply[]): Promise<{ endpoint: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    for await (const c of req) body += c;
    seen.push({ method: req.method!, url: req.url!, headers: req.headers, body, at: Date.now() });
    const reply = replies[Math.min(seen.length - 1, replies.length - 1)]!;
    if (reply === 'destroy') return void req.socket.destroy();
    const text = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body ?? {});
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(text);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return { endpoint: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, seen };
}

const creds = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' };
const make = (endpoint: string, opts: Partial<DyneinClientOptions> = {}) =>
  new DyneinClient({ endpoint, region: 'eu-west-1', credentials: creds, retry: { baseMs: 5, capMs: 20 }, ...opts });
const job = { jobId: 'j1.demo.1.2.t.x.y', tenant: 'demo', runAt: '2030-01-01T00:00:00.000Z', state: 'SCHEDULED' };
const handlerError = (code: string, message = `${code} happened`) => ({ error: { code, message } });

describe('DyneinClient over HTTP', () => {
  it('signs every request with SigV4 for execute-api and sends a JSON body', async () => {
    const { endpoint, seen } = await stub([{ status: 201, body: job }]);
    const reply = await make(endpoint).schedule('demo', { payload: { a: 1 }, runAt: '2030-01-01T00:00:00Z' });
    expect(reply).toEqual(job);
    expect(seen[0]!.method).toBe('POST');
    expect(seen[0]!.url).toBe('/v1/tenants/demo/jobs');
    expect(seen[0]!.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    );
    expect(seen[0]!.headers['x-amz-date']).toMatch(/^\d{8}T\d{6}Z$/);
    expect(seen[0]!.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen[0]!.body)).toMatchObject({
      payload: { a: 1 },
      runAt: '2030-01-01T00:00:00Z',
      idempotencyKey: expect.stringMatching(/^sdk-[0-9a-f-]{36}$/),
    });
  });

  it.each([
    [400, handlerError('ValidationError'), ValidationError, 'ValidationError', 'api'],
    [400, handlerError('InvalidJobId'), InvalidJobIdError, 'InvalidJobId', 'api'],
    [413, handlerError('PayloadTooLarge'), PayloadTooLargeError, 'PayloadTooLarge', 'api'],
    [404, handlerError('TenantNotFound'), TenantNotFoundError, 'TenantNotFound', 'api'],
    [404, handlerError('JobNotFound'), JobNotFoundError, 'JobNotFound', 'api'],
    [409, handlerError('AlreadyQueued'), AlreadyQueuedError, 'AlreadyQueued', 'api'],
    [409, handlerError('NotCancellable'), NotCancellableError, 'NotCancellable', 'api'],
    [409, handlerError('TenantPaused'), TenantPausedError, 'TenantPaused', 'api'],
    [429, handlerError('Throttled'), ThrottledError, 'Throttled', 'api'],
    [500, handlerError('InternalError'), ServerError, 'InternalError', 'api'],
    [418, handlerError('SomethingNew'), DyneinApiError, 'SomethingNew', 'api'],
    [403, { message: 'Forbidden' }, ForbiddenError, 'Forbidden', 'gateway'],
    [403, { message: 'The security token included in the request is invalid.' }, ForbiddenError, 'Forbidden', 'gateway'],
    [404, { message: 'Not Found' }, RouteNotFoundError, 'NotFound', 'gateway'],
    [413, { message: 'Request Entity Too Large' }, PayloadTooLargeError, 'RequestEntityTooLarge', 'gateway'],
    [429, { message: 'Too Many Requests' }, ThrottledError, 'TooManyRequests', 'gateway'],
    [503, { message: 'Service Unavailable' }, ServerError, 'GatewayError', 'gateway'],
    [502, '<html>Bad Gateway</html>', ServerError, 'GatewayError', 'gateway'],
  ] as const)('maps %i %j to its typed error', async (status, body, Type, code, source) => {
    const { endpoint } = await stub([{ status, body, headers: { 'apigw-requestid': 'req-123' } }]);
    const err = await make(endpoint, { retry: { maxAttempts: 1 } })
      .get('demo', 'j1.x')
      .catch((e) => e);
    expect(err).toBeInstanceOf(Type);
    expect(err).toBeInstanceOf(DyneinApiError);
    expect(err).toMatchObject({ status, code, source, requestId: 'req-123', attempts: 1 });
    expect(err.message.length).toBeGreaterThan(0);
  });

  it('retries 429, 5xx and network errors, then returns the success', async () => {
    const { endpoint, seen } = await stub([
      'destroy',
      { status: 500, body: handlerError('InternalError') },
      { status: 429, body: { message: 'Too Many Requests' } },
      { status: 502, body: 'bad gateway' },
      { status: 200, body: job },
    ]);
    expect(await make(endpoint).get('demo', job.jobId)).toEqual(job);
    expect(seen).toHaveLength(5);
    for (const s of seen) expect(s.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 /);
  });

  it('never retries a 4xx other than 429', async () => {
    const { endpoint, seen } = await stub([
      { status: 409, body: handlerError('AlreadyQueued') },
      { status: 200, body: job },
    ]);
    await expect(make(endpoint).cancel('demo', job.jobId)).rejects.toBeInstanceOf(AlreadyQueuedError);
    expect(seen).toHaveLength(1);
  });

  it('honours Retry-After', async () => {
    const { endpoint, seen } = await stub([
      { status: 429, body: { message: 'Too Many Requests' }, headers: { 'retry-after': '1' } },
      { status: 200, body: job },
    ]);
    await make(endpoint).get('demo', job.jobId);
    expect(seen).toHaveLength(2);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(990);
    expect(parseRetryAfter('2', 0)).toBe(2_000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
  });

  it('stops after maxAttempts, with the last error and the attempts it took', async () => {
    const { endpoint, seen } = await stub([{ status: 503, body: { message: 'Service Unavailable' } }]);
    const err = await make(endpoint, { retry: { maxAttempts: 3, baseMs: 5, capMs: 10 } })
      .get('demo', job.jobId)
      .catch((e) => e);
    expect(err).toBeInstanceOf(ServerError);
    expect(err.attempts).toBe(3);
    expect(seen).toHaveLength(3);
  });

  it('stops when the next wait would pass maxElapsedMs', async () => {
    const { endpoint, seen } = await stub([{ status: 429, body: { message: 'Too Many Requests' }, headers: { 'retry-after': '30' } }]);
    const started = Date.now();
    const err = await make(endpoint, { retry: { maxElapsedMs: 1_000 } })
      .get('demo', job.jobId)
      .catch((e) => e);
    expect(err).toBeInstanceOf(ThrottledError);
    expect(err.attempts).toBe(1);
    expect(seen).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('refuses a 2xx that is not JSON without retrying it', async () => {
    const { endpoint, seen } = await stub([{ status: 200, body: '<html>a login page</html>' }]);
    await expect(make(endpoint).get('demo', job.jobId)).rejects.toMatchObject({
      name: 'DyneinApiError',
      code: 'InvalidResponse',
      status: 200,
    });
    expect(seen).toHaveLength(1);
  });

  it('gives a NetworkError when nothing answers', async () => {
    const { endpoint } = await stub([{ status: 200 }]);
    await new Promise<void>((r) => server!.close(() => r()));
    server = undefined;
    const err = await make(endpoint, { retry: { maxAttempts: 2, baseMs: 5, capMs: 5 } })
      .get('demo', job.jobId)
      .catch((e) => e);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err).toMatchObject({ retryable: true, attempts: 2 });
    expect(err.message).toMatch(/ECONNREFUSED/);
  });

  it('turns a delay into an absolute runAt and keeps the body identical across retries', async () => {
    const { endpoint, seen } = await stub([
      { status: 503, body: { message: 'Service Unavailable' } },
      'destroy',
      { status: 201, body: job },
    ]);
    const now = Date.parse('2030-05-01T10:00:00.000Z');
    await make(endpoint, { now: () => now }).schedule('demo', { payload: 1, delaySeconds: 90.5 });
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((s) => s.body)).size).toBe(1);
    const body = JSON.parse(seen[0]!.body);
    expect(body).toEqual({ payload: 1, runAt: '2030-05-01T10:01:30.500Z', idempotencyKey: expect.any(String) });
    expect(body).not.toHaveProperty('delaySeconds');
  });

  it("keeps the caller's idempotency key and refuses an impossible job before sending it", async () => {
    const { endpoint, seen } = await stub([{ status: 201, body: job }]);
    const client = make(endpoint);
    await client.schedule('demo', {
      payload: 1,
      runAt: new Date('2030-01-01T00:00:00Z'),
      idempotencyKey: 'invoice-42',
      cancellable: false,
    });
    expect(JSON.parse(seen[0]!.body)).toEqual({
      payload: 1,
      runAt: '2030-01-01T00:00:00.000Z',
      idempotencyKey: 'invoice-42',
      cancellable: false,
    });
    await expect(client.schedule('demo', { payload: 1 })).rejects.toMatchObject({ name: 'ValidationError', source: 'client', status: 400 });
    await expect(client.schedule('demo', { payload: 1, runAt: '2030-01-01T00:00:00Z', delaySeconds: 5 })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(client.schedule('demo', { payload: 1, delaySeconds: -1 })).rejects.toBeInstanceOf(ValidationError);
    expect(seen).toHaveLength(1);
  });

  it("carries the active OpenTelemetry context's trace headers, signed, on every attempt; none without a context or with otel: false", async () => {
    const { endpoint, seen } = await stub([{ status: 503 }, { status: 201, body: job }]);
    // The application's context manager and W3C propagator (a minimal one: the SDK's writes the same headers).
    otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    otel.propagation.setGlobalPropagator({
      inject(ctx, carrier, setter) {
        const sc = otel.trace.getSpanContext(ctx);
        if (!sc) return;
        setter.set(carrier, 'traceparent', `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags}`);
        setter.set(carrier, 'tracestate', 'team=billing');
      },
      extract: (ctx) => ctx,
      fields: () => ['traceparent', 'tracestate'],
    });
    try {
      const span = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1 };
      const inSpan = otel.trace.setSpanContext(otel.ROOT_CONTEXT, span);
      await otel.context.with(inSpan, () => make(endpoint, { otel }).schedule('demo', { payload: 1, runAt: '2030-01-01T00:00:00Z' }));
      expect(seen).toHaveLength(2);
      for (const s of seen) {
        expect(s.headers.traceparent).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
        expect(s.headers.tracestate).toBe('team=billing');
        expect(s.headers.authorization).toMatch(/SignedHeaders=[^,]*traceparent/);
      }
      // Outside any span, and with otel: false, no header.
      await make(endpoint, { otel }).schedule('demo', { payload: 1, runAt: '2030-01-01T00:00:00Z' });
      await otel.context.with(inSpan, () =>
        make(endpoint, { otel: false }).schedule('demo', { payload: 1, runAt: '2030-01-01T00:00:00Z' }),
      );
      expect(seen.slice(2).map((s) => s.headers.traceparent)).toEqual([undefined, undefined]);
    } finally {
      otel.propagation.disable();
      otel.context.disable();
    }
  });

  it('batch: resends only the jobs that failed with a server error, with the same keys', async () => {
    const ok = (n: number) => ({ ...job, jobId: `id-${n}` });
    const { endpoint, seen } = await stub([
      { status: 200, body: { results: [ok(0), handlerError('InternalError'), handlerError('ValidationError', 'jobs[2]: runAt is bad')] } },
      { status: 200, body: { results: [ok(1)] } },
    ]);
    const progress: number[] = [];
    const results = await make(endpoint).scheduleBatch(
      'demo',
      [{ delaySeconds: 1 }, { delaySeconds: 2 }, { runAt: 'bad' }, { payload: 'neither' }],
      { onProgress: (d) => progress.push(d) },
    );
    expect(results.map((r) => (r.ok ? r.job.jobId : r.error.code))).toEqual(['id-0', 'id-1', 'ValidationError', 'ValidationError']);
    expect(results[3]!.ok ? '' : results[3]!.error.message).toMatch(/^jobs\[3\]: give exactly one of runAt/);
    const first = JSON.parse(seen[0]!.body).jobs;
    const second = JSON.parse(seen[1]!.body).jobs;
    expect(first).toHaveLength(3); // the impossible job is never sent
    expect(second).toEqual([first[1]]);
    expect(progress).toEqual([3, 4]);
  });
});
