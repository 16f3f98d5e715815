/**
 * Issue #15: a tenant over its `maxSubmitsPerSecond` gets 429 `Throttled` with `Retry-After`; the
 * SDK waits at least that long (plus jitter) and retries, a bounded number of times, then throws
 * the typed error carrying the code. Against a signed stub standing in for the API.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DyneinClient, ThrottledError } from '../../client/index.js';
import { startSignedStub, STUB_CREDENTIALS, STUB_REGION } from '../support/signedStub.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

const job = { jobId: 'j1.demo.1.2.t.x.y', tenant: 'demo', runAt: '2030-01-01T00:00:00.000Z', state: 'SCHEDULED' };
const throttled = "tenant 'demo' is limited to 2 submitted jobs per second (maxSubmitsPerSecond), and this second's allowance is used";

describe('the SDK and 429 Throttled', () => {
  it('waits Retry-After plus jitter, retries with the same bytes, and returns the 201', async () => {
    let n = 0;
    const stub = await startSignedStub((call) => {
      if (n++ === 0) return call.error(429, 'Throttled', throttled, { 'retry-after': '1' });
      call.reply(201, job);
    });
    close = stub.close;
    const at: number[] = [];
    const client = new DyneinClient({
      endpoint: stub.endpoint,
      region: STUB_REGION,
      credentials: STUB_CREDENTIALS,
      retry: { baseMs: 100, capMs: 200 },
      random: () => {
        at.push(Date.now());
        return 0.5;
      },
    });
    const started = Date.now();
    const reply = await client.schedule('demo', { payload: { a: 1 }, runAt: '2030-01-01T00:00:00Z', priority: 9 });
    const waited = Date.now() - started;
    expect(reply).toEqual(job);
    expect(stub.requests).toHaveLength(2);
    // Retry-After (1 s) plus the jittered backoff (0.5 × 100 ms): never before Retry-After.
    expect(waited).toBeGreaterThanOrEqual(1_040);
    expect(at).toHaveLength(1);
    expect(stub.requests[1]!.body).toBe(stub.requests[0]!.body);
    expect(JSON.parse(stub.requests[0]!.body)).toMatchObject({ priority: 9 });
  });

  it('gives up after maxAttempts with a ThrottledError whose code is Throttled', async () => {
    const stub = await startSignedStub((call) => call.error(429, 'Throttled', throttled, { 'retry-after': '1' }));
    close = stub.close;
    const client = new DyneinClient({
      endpoint: stub.endpoint,
      region: STUB_REGION,
      credentials: STUB_CREDENTIALS,
      retry: { maxAttempts: 2, baseMs: 5, capMs: 10 },
    });
    const err = await client.schedule('demo', { payload: 1, delaySeconds: 60 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThrottledError);
    expect(err).toMatchObject({ status: 429, code: 'Throttled', attempts: 2 });
    expect((err as Error).message).toContain('maxSubmitsPerSecond');
    expect(stub.requests).toHaveLength(2);
  });
});
