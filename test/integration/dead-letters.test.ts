import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SendMessageBatchCommand, SendMessageCommand, type SendMessageBatchCommandInput } from '@aws-sdk/client-sqs';
import { SqsDeadLetters } from '../../adapters/sqsDeadLetters.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient } from '../../client/client.js';
import { ValidationError as ClientValidationError } from '../../client/errors.js';
import { DeadLetterService, type DeadLetterQueues } from '../../core/deadLetters/deadLetterService.js';
import { systemClock } from '../../core/model/ports.js';
import { dlqHandler } from '../../lambdas/runtime/handlers.js';
import { startApiServer } from '../../local/apiServer.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, queueDepth, receiveAll, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** Puts dead letters in a DLQ as the tenant queue's redrive would: Dynein deliveries (and one foreign body). */
async function fill(url: string, tenant: string, n: number, extra: { foreign?: boolean } = {}): Promise<string[]> {
  const entries = Array.from({ length: n }, (_, i) => {
    const runAt = new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString();
    return {
      Id: String(i),
      MessageBody: JSON.stringify({ jobId: `job-${i}`, tenant, runAt, payload: { i } }),
      MessageAttributes: {
        runAt: { DataType: 'String', StringValue: runAt },
        dyneinError: { DataType: 'String', StringValue: `boom ${i}` },
      },
    };
  });
  if (extra.foreign) entries.push({ Id: 'f', MessageBody: 'not json', MessageAttributes: {} as never });
  const ids: string[] = [];
  for (let i = 0; i < entries.length; i += 10) {
    const res = await em.sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries.slice(i, i + 10) }));
    expect(res.Failed ?? []).toEqual([]);
    ids.push(...(res.Successful ?? []).map((s) => s.MessageId!));
  }
  return ids;
}

const depth = (url: string) => queueDepth(em.sqs, url);
const drain = (url: string) => receiveAll(em.sqs, url);

const call = async (
  sys: TestSystem,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  query?: Record<string, string>,
  queues?: DeadLetterQueues,
) => {
  const tenant = /tenants\/([^/]+)/.exec(path)![1]!;
  const event = httpEvent(method, path, {
    pathParameters: { tenant },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const w = queues ? { ...sys.w, deadLetters: new DeadLetterService({ ...sys.w, queues, clock: systemClock }) } : sys.w;
  const res = await dlqHandler(w)({ ...event, ...(query ? { queryStringParameters: query } : {}) });
  return { status: res.statusCode, body: JSON.parse(res.body) };
};

describe('a tenant dead-letter queue through the API', () => {
  it('peek shows the messages with their attributes, receive count, times and job, and leaves them visible', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const dlq = sys.tenants.demo!.dlqUrl;
    const ids = await fill(dlq, 'demo', 3, { foreign: true });
    const before = Date.now();

    const peek = await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '10' });
    expect(peek.status).toBe(200);
    expect(peek.body.approximateDepth).toBe(4);
    const messages = peek.body.messages as Record<string, any>[];
    expect(messages.map((m) => m.messageId).sort()).toEqual([...ids].sort());
    const job1 = messages.find((m) => m.jobId === 'job-1')!;
    expect(job1).toMatchObject({
      runAt: '2030-01-01T00:00:01.000Z',
      attributes: { runAt: '2030-01-01T00:00:01.000Z', dyneinError: 'boom 1' },
      receiveCount: 1,
    });
    expect(JSON.parse(job1.body)).toEqual({ jobId: 'job-1', tenant: 'demo', runAt: '2030-01-01T00:00:01.000Z', payload: { i: 1 } });
    expect(Date.parse(job1.sentAt)).toBeLessThanOrEqual(before + 1000);
    expect(job1.handle).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    const foreign = messages.find((m) => m.body === 'not json')!;
    expect(foreign.jobId).toBeUndefined();

    // Left in place and visible at once: a second peek sees them all again, with the same handles.
    expect(await depth(dlq)).toEqual({ visible: 4, hidden: 0 });
    const again = await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '10' });
    expect((again.body.messages as { handle: string }[]).map((m) => m.handle).sort()).toEqual(messages.map((m) => m.handle).sort());
    const one = await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '1' });
    expect(one.body.messages).toHaveLength(1);
  });

  it('redrives some messages to the tenant queue with their attributes (not the worker error), and deletes others', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const { url, dlqUrl } = sys.tenants.demo!;
    await fill(dlqUrl, 'demo', 12);
    const all = (await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '10' })).body.messages as Record<string, any>[];
    const byJob = (j: string) => all.find((m) => m.jobId === j);
    const [a, b, c] = all.slice(0, 3) as Record<string, any>[];

    const redrive = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { handles: [a!.handle, b!.handle] });
    expect(redrive.status).toBe(200);
    expect(redrive.body).toEqual({ redriven: [a!.handle, b!.handle], notFound: [] });
    const moved = await drain(url);
    expect(moved.map((m) => JSON.parse(m.Body!).jobId).sort()).toEqual([a!.jobId, b!.jobId].sort());
    for (const m of moved) {
      expect(m.MessageAttributes?.runAt?.StringValue).toBe(JSON.parse(m.Body!).runAt);
      expect(m.MessageAttributes?.dyneinError).toBeUndefined();
    }
    expect(await depth(dlqUrl)).toEqual({ visible: 10, hidden: 0 });

    const del = await call(sys, 'POST', '/v1/tenants/demo/dlq/delete', { handles: [c!.handle] });
    expect(del.body).toEqual({ deleted: [c!.handle], notFound: [] });
    expect(await depth(dlqUrl)).toEqual({ visible: 9, hidden: 0 });
    // A handle of a message no longer there: not found, nothing else touched.
    const gone = await call(sys, 'POST', '/v1/tenants/demo/dlq/delete', { handles: [a!.handle] });
    expect(gone.body).toEqual({ deleted: [], notFound: [a!.handle] });
    expect(await depth(dlqUrl)).toEqual({ visible: 9, hidden: 0 });
    expect(byJob(c!.jobId)).toBeDefined();
  });

  it('redrives everything with {"all": true} (receive, send, delete where SQS has no move task)', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const { url, dlqUrl } = sys.tenants.demo!;
    await fill(dlqUrl, 'demo', 15);
    const res = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { all: true });
    expect(res.body).toEqual({ method: 'copy', moved: 15, complete: true });
    expect(await depth(dlqUrl)).toEqual({ visible: 0, hidden: 0 });
    expect((await drain(url)).map((m) => JSON.parse(m.Body!).jobId).sort()).toEqual(
      Array.from({ length: 15 }, (_, i) => `job-${i}`).sort(),
    );
  });

  it('refuses a forged handle or another tenant’s with 400 naming it, and touches nothing', async () => {
    const sys = await createSystem(em, { tenants: ['demo', 'other'] });
    const demo = sys.tenants.demo!;
    const other = sys.tenants.other!;
    await fill(demo.dlqUrl, 'demo', 3);
    await fill(other.dlqUrl, 'other', 2);
    const mine = (await call(sys, 'GET', '/v1/tenants/demo/dlq')).body.messages as { handle: string; messageId: string }[];
    const theirs = (await call(sys, 'GET', '/v1/tenants/other/dlq')).body.messages as { handle: string }[];
    const forged = `${Buffer.from(mine[0]!.messageId).toString('base64url')}.AAAAAAAAAAAAAAAAAAAAAA`;

    const cases: [string, unknown, RegExp][] = [
      ['/v1/tenants/demo/dlq/redrive', { handles: [mine[0]!.handle, theirs[0]!.handle] }, /handles\[1\]/],
      ['/v1/tenants/demo/dlq/delete', { handles: [forged] }, /handles\[0\]/],
      ['/v1/tenants/demo/dlq/delete', { handles: [mine[1]!.handle, 'x'] }, /handles\[1\]/],
      ['/v1/tenants/demo/dlq/delete', { handles: [] }, /handles/],
      ['/v1/tenants/demo/dlq/delete', { handles: [mine[0]!.handle, mine[0]!.handle] }, /handles/],
      ['/v1/tenants/demo/dlq/delete', { all: true }, /all/],
      ['/v1/tenants/demo/dlq/redrive', { all: true, handles: [mine[0]!.handle] }, /all or handles/],
      ['/v1/tenants/demo/dlq/redrive', { all: 'yes' }, /all must be true/],
      ['/v1/tenants/demo/dlq/redrive', 'not json', /JSON/],
      ['/v1/tenants/demo/dlq/redrive', undefined, /JSON/],
    ];
    for (const [path, body, message] of cases) {
      const res = await call(sys, 'POST', path, body);
      expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.error.code).toBe('ValidationError');
      expect(res.body.error.message).toMatch(message);
    }
    for (const max of ['0', '11', 'ten', '1.5']) {
      const res = await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max });
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/max/);
    }
    expect(await depth(demo.dlqUrl)).toEqual({ visible: 3, hidden: 0 });
    expect(await depth(other.dlqUrl)).toEqual({ visible: 2, hidden: 0 });
    expect(await depth(demo.url)).toEqual({ visible: 0, hidden: 0 });
    expect((await call(sys, 'GET', '/v1/tenants/nobody/dlq')).status).toBe(404);
    expect((await call(sys, 'GET', '/v1/tenants/Bad_Name/dlq')).status).toBe(400);
  });

  it('serves the routes on the local API, signed, through the SDK; a key reaches its own tenant only', async () => {
    const sys = await createSystem(em, { tenants: ['demo', 'other'] });
    await fill(sys.tenants.demo!.dlqUrl, 'demo', 4);
    const keys = {
      demo: { accessKeyId: 'AKIDDEMO', secretAccessKey: 'demo-secret' },
      other: { accessKeyId: 'AKIDOTHER', secretAccessKey: 'other-secret' },
    };
    const unused = () => Promise.reject(new Error('not in this test'));
    const server: Server = await startApiServer({
      port: 0,
      region: 'us-east-1',
      keys,
      handlers: { submit: unused, status: unused, cancel: unused, dlq: dlqHandler(sys.w) },
      metrics: () => ({}),
    });
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const client = new DyneinClient({ endpoint, region: 'us-east-1', credentials: keys.demo, retry: { maxAttempts: 1 } });
      const peek = await client.peekDeadLetters('demo', { max: 10 });
      expect(peek.messages).toHaveLength(4);
      const [a, b] = peek.messages;
      expect(await client.redriveDeadLetters('demo', { handles: [a!.handle] })).toEqual({ redriven: [a!.handle], notFound: [] });
      expect(await client.deleteDeadLetters('demo', [b!.handle])).toEqual({ deleted: [b!.handle], notFound: [] });
      expect(await client.redriveDeadLetters('demo', { all: true })).toEqual({ method: 'copy', moved: 2, complete: true });
      await expect(client.deleteDeadLetters('demo', ['forged.handle'])).rejects.toBeInstanceOf(ClientValidationError);
      // demo's key on other's DLQ: the gateway's 403, as the IAM grant.
      await expect(client.peekDeadLetters('other')).rejects.toMatchObject({ status: 403 });
    } finally {
      server.close();
    }
  });
});

/** SQS's limits on one SendMessageBatch call: 10 entries, 262,144 bytes of bodies and attributes (names, types, values). */
const BATCH_BYTES = 262_144;
function batchBytes(input: SendMessageBatchCommandInput): number {
  let n = 0;
  for (const e of input.Entries ?? []) {
    n += Buffer.byteLength(e.MessageBody ?? '');
    for (const [k, a] of Object.entries(e.MessageAttributes ?? {}))
      n +=
        Buffer.byteLength(k) + Buffer.byteLength(a.DataType ?? '') + Buffer.byteLength(a.StringValue ?? '') + (a.BinaryValue?.length ?? 0);
  }
  return n;
}

/**
 * The dlq function's SQS adapter on a client that records every SendMessageBatch it makes. The
 * local SQS enforces only its own 1 MiB limit on a batch, not the 256 KiB one the scheduler
 * builds to: the test checks each recorded call against 256 KiB itself.
 */
function recordingQueues(): { queues: SqsDeadLetters; batches: SendMessageBatchCommandInput[] } {
  const batches: SendMessageBatchCommandInput[] = [];
  const { sqs } = em.newClients();
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'SendMessageBatchCommand') batches.push(args.input as SendMessageBatchCommandInput);
      return next(args);
    },
    { step: 'initialize' },
  );
  return { queues: new SqsDeadLetters(sqs), batches };
}

/** A Dynein delivery of `bytes` UTF-8 bytes (two-byte characters: half as many characters), with its attributes. */
async function fillLarge(url: string, tenant: string, n: number, bytes: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const runAt = new Date(Date.UTC(2030, 0, 1, 0, 0, i)).toISOString();
    const head = JSON.stringify({ jobId: `job-${i}`, tenant, runAt, payload: '' }).slice(0, -2);
    const pad = bytes - Buffer.byteLength(head) - 2; // head ends in the payload's opening quote
    const body = `${head}${'é'.repeat(Math.floor(pad / 2))}${pad % 2 ? 'x' : ''}"}`;
    expect(Buffer.byteLength(body)).toBe(bytes);
    await em.sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: body,
        MessageAttributes: { runAt: { DataType: 'String', StringValue: runAt }, dyneinError: { DataType: 'String', StringValue: 'boom' } },
      }),
    );
  }
}

describe('dead letters near the size limit', () => {
  const KIB_240 = 240 * 1024;

  it('redrives ten dead letters of 240 KiB by handle in one request, in batches of at most 10 entries and 256 KiB', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const { url, dlqUrl } = sys.tenants.demo!;
    await fillLarge(dlqUrl, 'demo', 10, KIB_240);
    const { queues, batches } = recordingQueues();
    const handles = ((await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '10' })).body.messages as { handle: string }[]).map(
      (m) => m.handle,
    );
    expect(handles).toHaveLength(10);

    const res = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { handles }, undefined, queues);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ redriven: handles, notFound: [] });
    expect(batches.length).toBeGreaterThanOrEqual(10);
    for (const b of batches) {
      expect(b.Entries!.length).toBeLessThanOrEqual(10);
      expect(batchBytes(b)).toBeLessThanOrEqual(BATCH_BYTES);
    }
    const moved = await drain(url);
    expect(moved.map((m) => JSON.parse(m.Body!).jobId).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `job-${i}`).sort());
    expect(moved.every((m) => Buffer.byteLength(m.Body!) === KIB_240)).toBe(true);
    expect(await depth(dlqUrl)).toEqual({ visible: 0, hidden: 0 });
  });

  it('redrives ten dead letters of 240 KiB with {"all": true} (the copy), in batches within 256 KiB', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const { url, dlqUrl } = sys.tenants.demo!;
    await fillLarge(dlqUrl, 'demo', 10, KIB_240);
    const { queues, batches } = recordingQueues();

    const res = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { all: true }, undefined, queues);
    expect(res.body).toEqual({ method: 'copy', moved: 10, complete: true });
    for (const b of batches) expect(batchBytes(b)).toBeLessThanOrEqual(BATCH_BYTES);
    expect(await drain(url)).toHaveLength(10);
    expect(await depth(dlqUrl)).toEqual({ visible: 0, hidden: 0 });
  });
});

/**
 * The dlq function's adapter whose deletes fail: `throw` (the call fails, e.g. a network error)
 * or `refuse` (SQS answers every entry as failed). Injected: the local SQS cannot be made to fail
 * a delete on demand.
 */
function failingDeletes(mode: 'throw' | 'refuse'): DeadLetterQueues {
  const real = new SqsDeadLetters(em.sqs);
  return {
    receive: (...a) => real.receive(...a),
    release: (...a) => real.release(...a),
    send: (...a) => real.send(...a),
    startMove: (...a) => real.startMove(...a),
    moveTasks: (...a) => real.moveTasks(...a),
    depth: (...a) => real.depth(...a),
    delete: async (_url, receiptHandles) => {
      if (mode === 'throw') throw new Error('injected: connection reset');
      return [...receiptHandles];
    },
  };
}

describe('a dead letter sent to the queue whose delete from the DLQ failed', () => {
  for (const mode of ['throw', 'refuse'] as const) {
    it(`is reported sentNotDeleted (not failed), and deleting it by handle leaves exactly one copy (delete ${mode}s)`, async () => {
      const sys = await createSystem(em, { tenants: ['demo'] });
      const { url, dlqUrl } = sys.tenants.demo!;
      await fill(dlqUrl, 'demo', 3);
      const [a, b, c] = (
        (await call(sys, 'GET', '/v1/tenants/demo/dlq', undefined, { max: '10' })).body.messages as { handle: string }[]
      ).map((m) => m.handle);

      const res = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { handles: [a, b] }, undefined, failingDeletes(mode));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ redriven: [], notFound: [], sentNotDeleted: [a, b] });
      // Sent once, and still in the DLQ, visible at once for the delete the reply advises.
      expect(await depth(url)).toEqual({ visible: 2, hidden: 0 });
      expect(await depth(dlqUrl)).toEqual({ visible: 3, hidden: 0 });

      expect((await call(sys, 'POST', '/v1/tenants/demo/dlq/delete', { handles: [a, b] })).body).toEqual({ deleted: [a, b], notFound: [] });
      expect(await depth(dlqUrl)).toEqual({ visible: 1, hidden: 0 });
      expect((await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { handles: [c] })).body).toEqual({ redriven: [c], notFound: [] });
      const jobs = (await drain(url)).map((m) => JSON.parse(m.Body!).jobId as string);
      expect(new Set(jobs).size).toBe(3);
      expect(jobs).toHaveLength(3);
    });
  }

  it('the copy ({"all": true}) counts only messages deleted as moved, stops, and names the others sentNotDeleted', async () => {
    const sys = await createSystem(em, { tenants: ['demo'] });
    const { url, dlqUrl } = sys.tenants.demo!;
    const ids = await fill(dlqUrl, 'demo', 4);

    const res = await call(sys, 'POST', '/v1/tenants/demo/dlq/redrive', { all: true }, undefined, failingDeletes('refuse'));
    expect(res.body).toMatchObject({ method: 'copy', moved: 0, complete: false });
    const named = res.body.sentNotDeleted as string[];
    expect(named.length).toBeGreaterThan(0);
    // Each named message was sent once and is back in the DLQ, visible, for its delete; none sent twice.
    const sent = await drain(url);
    expect(sent).toHaveLength(named.length);
    expect(await depth(dlqUrl)).toEqual({ visible: 4, hidden: 0 });
    const del = await call(sys, 'POST', '/v1/tenants/demo/dlq/delete', { handles: named });
    expect(del.body).toEqual({ deleted: named, notFound: [] });
    expect(await depth(dlqUrl)).toEqual({ visible: 4 - named.length, hidden: 0 });
    expect(ids).toHaveLength(4);
  });
});
