/**
 * The SDK side of issue #12 items 1 and 4: `payloadJson` travels byte for byte and the Worker's
 * parse exposes it as `payloadText`; a retried `schedule` (delaySeconds, reply lost) names the same
 * job and delivers it once; a reused key is a typed `IdempotencyKeyReusedError`. DyneinClient
 * signs real requests to the local API server (in process), whose handlers run over dynalite and
 * fauxqs; deliveries are read raw from the tenant queue with the real SQS client.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { ReceiveMessageCommand, DeleteMessageBatchCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, IdempotencyKeyReusedError, parseDelivery, ValidationError } from '../../client/index.js';
import { cancelHandler, statusHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { startApiServer } from '../../local/apiServer.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, runAllGroups, type TestSystem } from '../support/system.js';

let em: Emulators;
let sys: TestSystem;
let api: Server;
let endpoint: string;
const keys = { accessKeyId: 'AKIDPAYLOADTEST', secretAccessKey: randomBytes(20).toString('hex') };
let submits = 0;

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { settings: { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 4, groupCount: 1 } });
  const submit = submitHandler(sys.w);
  api = await startApiServer({
    port: 0,
    region: 'us-east-1',
    keys: { demo: keys },
    handlers: { submit: (e) => (submits++, submit(e)), status: statusHandler(sys.w), cancel: cancelHandler(sys.w) },
    metrics: () => ({}),
  });
  endpoint = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((r) => api?.close(() => r()));
  await em?.stop();
});

const client = (url = endpoint) =>
  new DyneinClient({ endpoint: url, region: 'us-east-1', credentials: keys, retry: { baseMs: 5, capMs: 20 } });

/** Raw bodies from the tenant queue until `n` arrived, then `settleMs` more for stray copies. */
async function receiveRaw(n: number, timeoutMs: number, settleMs = 0): Promise<string[]> {
  const url = sys.tenants.demo!.url;
  const bodies: string[] = [];
  const until = Date.now() + timeoutMs;
  let settleUntil = Number.POSITIVE_INFINITY;
  while (Date.now() < Math.min(until, settleUntil)) {
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    const msgs = res.Messages ?? [];
    bodies.push(...msgs.map((m) => m.Body ?? ''));
    if (msgs.length > 0)
      await em.sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: url, Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }),
      );
    if (bodies.length >= n && settleUntil === Number.POSITIVE_INFINITY) settleUntil = Date.now() + settleMs;
  }
  return bodies;
}

describe('payloads through the SDK', () => {
  it('payloadJson is delivered byte for byte; parseDelivery gives the text and the parsed value', async () => {
    const text = '{"id": 9007199254740993, "ratio": 1.0, "dup": 1, "dup": 2, "big": 1e400, "neg": -0}';
    const direct = await client().schedule('demo', { payloadJson: text, delaySeconds: 0 });
    const [got] = await receiveRaw(1, 10_000);
    expect(got).toBe(`{"jobId":"${direct.jobId}","tenant":"demo","runAt":"${direct.runAt}","payload":${text}}`);
    const job = parseDelivery<Record<string, number>>(got);
    expect(job.payloadText).toBe(text);
    expect(job.payload).toEqual(JSON.parse(text));
    expect(job).toMatchObject({ jobId: direct.jobId, tenant: 'demo', runAt: direct.runAt });

    // In a batch too, through the table.
    const ingest = sys.startIngest();
    const dispatch = runAllGroups(sys.w.dispatch);
    const texts = ['1.0', '[ 1 , 2 ]', '"😀 \\uFFFF"', '{"b":1,"a":2}'];
    const results = await client().scheduleBatch(
      'demo',
      texts.map((t) => ({ payloadJson: t, delaySeconds: 2 })),
    );
    const bodies = await receiveRaw(texts.length, 15_000);
    await dispatch.stop();
    await ingest.stop();
    expect(bodies.map((b) => parseDelivery(b).payloadText).sort()).toEqual([...texts].sort());
    expect(results.every((r) => r.ok)).toBe(true);
  }, 30_000);

  it('a payload value holding U+FFFF arrives equal (the SDK escapes what SQS refuses raw)', async () => {
    const payload = { note: 'a\uFFFF\uFFFEb', emoji: '😀' };
    await client().schedule('demo', { payload, delaySeconds: 0 });
    const [got] = await receiveRaw(1, 10_000);
    expect(parseDelivery(got).payload).toEqual(payload);
    expect(parseDelivery(got).payloadText).toBe('{"note":"a\\uFFFF\\uFFFEb","emoji":"😀"}');
  });

  it('refuses payloadJson that cannot be valid before sending anything', async () => {
    const before = submits;
    for (const job of [
      { payloadJson: '{"a":', delaySeconds: 1 },
      { payloadJson: '"\uFFFF"', delaySeconds: 1 },
      { payloadJson: '1', payload: 1, delaySeconds: 1 },
    ]) {
      await expect(client().schedule('demo', job)).rejects.toBeInstanceOf(ValidationError);
    }
    expect(submits).toBe(before);
  });

  it('a retried schedule with delaySeconds whose first reply was lost gets the same job, delivered once', async () => {
    // A proxy that passes the first submit on but loses its reply (503), as a gateway timeout would.
    let first = true;
    let hidden: { jobId: string } | undefined;
    const upstream = new URL(endpoint);
    const proxy: Server = createServer(async (req, res) => {
      let body = '';
      for await (const c of req) body += c;
      const forwarded = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        async (up) => {
          let text = '';
          for await (const c of up) text += c;
          if (first) {
            first = false;
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
    try {
      // Due at once: straight to the tenant queue, where nothing could dedupe a second send.
      const job = await client(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`).schedule('demo', {
        payload: { once: true },
        delaySeconds: 0.5,
      });
      expect(hidden?.jobId).toBe(job.jobId);
      expect(job.state).toBe('QUEUED');
      const bodies = await receiveRaw(1, 10_000, 2_000);
      expect(bodies.map((b) => parseDelivery(b).jobId)).toEqual([job.jobId]);
    } finally {
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  }, 20_000);

  it('a key reused for another request is an IdempotencyKeyReusedError (409)', async () => {
    await client().schedule('demo', { payload: 1, delaySeconds: 3_600, idempotencyKey: 'sdk-reuse' });
    const err = await client()
      .schedule('demo', { payload: 2, delaySeconds: 3_600, idempotencyKey: 'sdk-reuse' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyKeyReusedError);
    expect(err).toMatchObject({ status: 409, code: 'IdempotencyKeyReused', retryable: false });
    const [r] = await client().scheduleBatch('demo', [{ payload: 3, delaySeconds: 3_600, idempotencyKey: 'sdk-reuse' }]);
    expect(r!.ok === false && r!.error).toBeInstanceOf(IdempotencyKeyReusedError);
  });
});
