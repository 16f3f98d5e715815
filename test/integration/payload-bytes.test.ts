/**
 * Issue #12 items 1 and 2: what a worker receives is the JSON text the user sent for the payload,
 * byte for byte, and a payload SQS could not carry is refused with a 400 naming the character.
 * Requests go through the real submit handler (as API Gateway delivers them, and through the
 * local API server with SigV4 for the UTF-8 check); the bodies are read raw from the tenant queue
 * with real SDK v3 clients against dynalite and fauxqs. The character rule is SQS's documented
 * set, not fauxqs's (which accepts what SQS refuses): the expectations here are written from it.
 */
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteMessageBatchCommand, GetQueueAttributesCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusHandler, cancelHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { startApiServer } from '../../local/apiServer.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, runAllGroups, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 4, groupCount: 1 };
const SINGLE = 'POST /v1/tenants/{tenant}/jobs';
const BATCH = 'POST /v1/tenants/{tenant}/jobs/batch';

/** Payload texts that JSON.parse + JSON.stringify would alter, and some that it would not. */
const PAYLOADS: readonly string[] = [
  '9007199254740993',
  '[9007199254740993, -9223372036854775808, 18446744073709551615]',
  '1e400',
  '-0',
  '1.0',
  '{"a":1,"a":2}',
  '{"b":1,"a":2,"1":3}',
  '{ "spaced" : [ 1 ,\n\t2 ] ,\r\n "x":{} }',
  '"\\u00e9 \\/ \\uFFFF \\ud83d\\ude00"', // escapes stay escapes, \uFFFF included (6 ASCII characters)
  '"é 😀 \u2028"', // raw characters: é, U+1F600 (4 UTF-8 bytes), U+2028
  '{"__proto__":{"x":1}}',
  '0.1000000000000000055511151231257827',
  'null',
  'true',
  '""',
  '{"nested":{"deep":[[[[{"n":1E+2}]]]]}}',
];

function submitEvent(route: typeof SINGLE | typeof BATCH, body: string | undefined, opts: { base64?: boolean } = {}) {
  const path = route === SINGLE ? '/v1/tenants/demo/jobs' : '/v1/tenants/demo/jobs/batch';
  const e = httpEvent('POST', path, { routeKey: route, pathParameters: { tenant: 'demo' }, ...(body !== undefined ? { body } : {}) });
  return opts.base64
    ? { ...e, body: body === undefined ? undefined : Buffer.from(body, 'utf8').toString('base64'), isBase64Encoded: true }
    : e;
}

/** Reads raw message bodies from a queue until `n` arrived (or the time is up), deleting them. */
async function receiveRaw(sqs: SQSClient, url: string, n: number, timeoutMs: number): Promise<string[]> {
  const bodies: string[] = [];
  const until = Date.now() + timeoutMs;
  while (bodies.length < n && Date.now() < until) {
    const res = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    const msgs = res.Messages ?? [];
    bodies.push(...msgs.map((m) => m.Body ?? ''));
    if (msgs.length > 0)
      await sqs.send(
        new DeleteMessageBatchCommand({ QueueUrl: url, Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }),
      );
  }
  return bodies;
}

/** The delivered body the contract promises, built by hand from the reply and the payload text. */
const expectedBody = (reply: { jobId: string; runAt: string }, payloadText: string) =>
  `{"jobId":${JSON.stringify(reply.jobId)},"tenant":"demo","runAt":"${reply.runAt}","payload":${payloadText}}`;

async function scanAll(tableName: string): Promise<Record<string, AttributeValue>[]> {
  return (await em.dynamo.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }))).Items ?? [];
}

async function queueTotal(url: string): Promise<number> {
  const a = (await em.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }))).Attributes ?? {};
  return (
    Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible) + Number(a.ApproximateNumberOfMessagesDelayed)
  );
}

describe('the payload is delivered byte for byte', () => {
  it('through the table and straight to the queue, single and batch submits', async () => {
    const sys = await createSystem(em, { settings });
    const ingest = sys.startIngest();
    const submit = submitHandler(sys.w);
    const expected: string[] = [];
    const at = (ms: number) => new Date(Date.now() + ms).toISOString();
    for (const p of PAYLOADS) {
      // 2.5 s ahead: through the inbound queue and the table; 0.3 s: straight to the queue.
      for (const ahead of [2_500, 300]) {
        const res = await submit(submitEvent(SINGLE, `{"payload": ${p} ,"runAt":"${at(ahead)}"}`));
        expect(res.statusCode, res.body).toBe(201);
        expected.push(expectedBody(JSON.parse(res.body), p));
      }
    }
    const batch = await submit(
      submitEvent(
        BATCH,
        `{"jobs":[${PAYLOADS.map((p, i) => `{"runAt":"${at(2_500)}",\n"payload":\t${p}${i % 2 ? ' ' : ''}}`).join(' , ')}]}`,
      ),
    );
    expect(batch.statusCode, batch.body).toBe(200);
    const { results } = JSON.parse(batch.body) as { results: { jobId: string; runAt: string }[] };
    results.forEach((r, i) => expected.push(expectedBody(r, PAYLOADS[i]!)));
    // An omitted payload and an explicit null are both delivered as null.
    for (const body of [`{"runAt":"${at(2_500)}"}`, `{"payload":null,"runAt":"${at(300)}"}`]) {
      const res = await submit(submitEvent(SINGLE, body));
      expect(res.statusCode, res.body).toBe(201);
      expected.push(expectedBody(JSON.parse(res.body), 'null'));
    }

    const dispatch = runAllGroups(sys.w.dispatch);
    const got = await receiveRaw(em.sqs, sys.tenants.demo!.url, expected.length, 20_000);
    await dispatch.stop();
    await ingest.stop();
    expect([...got].sort()).toEqual([...expected].sort());
  }, 40_000);

  it('stores the payload text in the row as sent (payload or deflated payloadZ)', async () => {
    const sys = await createSystem(em, { settings });
    const ingest = sys.startIngest();
    const big = `{"n": 9007199254740993, "pad": "${'x'.repeat(1_000)}",  "z": 1.0}`;
    const submit = submitHandler(sys.w);
    const replies: { jobId: string }[] = [];
    for (const p of ['1.0', big]) {
      const res = await submit(submitEvent(SINGLE, `{"payload":${p},"delaySeconds":3600}`));
      replies.push(JSON.parse(res.body));
    }
    const until = Date.now() + 10_000;
    let rows: Record<string, AttributeValue>[] = [];
    while (rows.length < 2 && Date.now() < until) {
      rows = (await scanAll(sys.tableName)).filter((r) => /^\d+$/.test(r.pk!.S!));
      await new Promise((r) => setTimeout(r, 50));
    }
    await ingest.stop();
    const rowOf = (id: string) => rows.find((r) => r.sk!.S!.endsWith(`#${id}`))!;
    expect(rowOf(replies[0]!.jobId).payload?.S).toBe('1.0');
    const { inflateRawSync } = await import('node:zlib');
    expect(inflateRawSync(rowOf(replies[1]!.jobId).payloadZ!.B!).toString('utf8')).toBe(big);
  }, 20_000);
});

describe('characters SQS cannot carry', () => {
  let sys: TestSystem;
  let submit: ReturnType<typeof submitHandler>;
  beforeAll(async () => {
    sys = await createSystem(em, { settings });
    submit = submitHandler(sys.w);
  });

  it('refuses a raw U+FFFF or U+FFFE with a 400 naming it and its position, writing nothing', async () => {
    const before = await scanAll(sys.tableName);
    for (const [ch, name] of [
      ['\uFFFF', 'U+FFFF'],
      ['\uFFFE', 'U+FFFE'],
    ] as const) {
      for (const ahead of [3_600, 0]) {
        const body = `{"payload":{"note":"ab${ch}"},"delaySeconds":${ahead}}`;
        const res = await submit(submitEvent(SINGLE, body));
        expect(res.statusCode, res.body).toBe(400);
        const { error } = JSON.parse(res.body) as { error: { code: string; message: string } };
        expect(error.code).toBe('ValidationError');
        expect(error.message).toContain(name);
        // Byte 11 of the payload {"note":"ab<char>"}, byte 22 of the request body.
        expect(error.message).toMatch(/byte 11 of the payload/);
        expect(error.message).toMatch(/byte 22 of the request body/);
        expect(error.message).toMatch(/\\u/); // how to fix it: the JSON escape
      }
    }
    expect(await scanAll(sys.tableName)).toEqual(before);
    for (const url of [sys.inboundUrl, sys.tenants.demo!.url]) expect(await queueTotal(url)).toBe(0);
  });

  it('in a batch, refuses only the job that holds one; the others are accepted', async () => {
    const res = await submit(
      submitEvent(
        BATCH,
        `{"jobs":[{"payload":"ok","delaySeconds":1},{"payload":"bad \uFFFF","delaySeconds":1},{"payload":"😀","delaySeconds":1}]}`,
      ),
    );
    expect(res.statusCode).toBe(200);
    const { results } = JSON.parse(res.body) as {
      results: ({ jobId: string; runAt: string } | { error: { code: string; message: string } })[];
    };
    expect(results.map((r) => ('error' in r ? r.error.code : 'accepted'))).toEqual(['accepted', 'ValidationError', 'accepted']);
    expect((results[1] as { error: { message: string } }).error.message).toMatch(/^jobs\[1\]: .*U\+FFFF/);
    const got = await receiveRaw(em.sqs, sys.tenants.demo!.url, 2, 10_000);
    expect(got.sort()).toEqual(
      [
        expectedBody(results[0] as { jobId: string; runAt: string }, '"ok"'),
        expectedBody(results[2] as { jobId: string; runAt: string }, '"😀"'),
      ].sort(),
    );
  });

  it('delivers a U+1F600 payload byte-exact to the tenant queue, through the table too', async () => {
    const ingest = sys.startIngest();
    const payload = '{"emoji":"😀","escaped":"\\ud83d\\ude00","max":"\u{10FFFF}","private":"\uE000","last":"\uFFFD"}';
    const res = await submit(submitEvent(SINGLE, `{"payload":${payload},"runAt":"${new Date(Date.now() + 2_000).toISOString()}"}`));
    expect(res.statusCode, res.body).toBe(201);
    const dispatch = runAllGroups(sys.w.dispatch);
    const got = await receiveRaw(em.sqs, sys.tenants.demo!.url, 1, 15_000);
    await dispatch.stop();
    await ingest.stop();
    expect(got).toEqual([expectedBody(JSON.parse(res.body), payload)]);
    expect(Buffer.from(got[0]!, 'utf8').includes(Buffer.from([0xf0, 0x9f, 0x98, 0x80]))).toBe(true);
  }, 30_000);

  it('refuses a body that is not valid UTF-8 (400, never U+FFFD in its place)', async () => {
    const before = await scanAll(sys.tableName);
    const bad = Buffer.concat([Buffer.from('{"payload":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","delaySeconds":60}')]);
    // As API Gateway delivers a body it does not treat as text: base64.
    const res = await submit({ ...submitEvent(SINGLE, 'x'), body: bad.toString('base64'), isBase64Encoded: true });
    expect(res.statusCode, res.body).toBe(400);
    expect(JSON.parse(res.body).error).toMatchObject({ code: 'ValidationError', message: expect.stringMatching(/UTF-8/) });

    // Through the local API server, signed with an independent SigV4 signer.
    const keys = { accessKeyId: 'AKIDLOCALTEST', secretAccessKey: randomBytes(20).toString('hex') };
    const handlers = { submit, status: statusHandler(sys.w), cancel: cancelHandler(sys.w) };
    const server = await startApiServer({ port: 0, region: 'us-east-1', keys: { demo: keys }, handlers, metrics: () => ({}) });
    try {
      const port = (server.address() as AddressInfo).port;
      const signer = new SignatureV4({ service: 'execute-api', region: 'us-east-1', credentials: keys, sha256: Hash.bind(null, 'sha256') });
      const post = async (body: Buffer) => {
        const signed = await signer.sign({
          method: 'POST',
          protocol: 'http:',
          hostname: '127.0.0.1',
          port,
          path: '/v1/tenants/demo/jobs',
          query: {},
          headers: { host: `127.0.0.1:${port}`, 'content-type': 'application/json' },
          body,
        });
        const headers = { ...(signed.headers as Record<string, string>) };
        delete headers.host;
        const r = await fetch(`http://127.0.0.1:${port}/v1/tenants/demo/jobs`, { method: 'POST', headers, body });
        return { status: r.status, body: await r.text() };
      };
      const refused = await post(bad);
      expect(refused.status, refused.body).toBe(400);
      expect(JSON.parse(refused.body).error.code).toBe('ValidationError');
      // Control: the same request in valid UTF-8 is accepted.
      const ok = await post(Buffer.from('{"payload":"é","delaySeconds":60}'));
      expect(ok.status, ok.body).toBe(201);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    // Only the control was accepted: it waits in the inbound queue (no ingest runs here).
    expect(await scanAll(sys.tableName)).toEqual(before);
    expect(await queueTotal(sys.inboundUrl)).toBe(1);
  });
});
