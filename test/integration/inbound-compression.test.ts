/**
 * Inbound messages of version 4 (core/model/messages.ts inboundMessageBody): a batch of 100 jobs of
 * about 1 KB is about 110 KB as version 2 text, two billed 64 KiB chunks on the send and two on
 * the receive; deflated it travels in one. Real SDK clients on dynalite and fauxqs: the requests
 * compute makes are counted with the bytes SQS bills them by, and what the worker receives is
 * the payload text submitted, byte for byte. Messages of earlier versions (1 and 2) still in the
 * queue after an upgrade are ingested as before.
 */
import { randomUUID } from 'node:crypto';
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboundBody, parseInboundBody, SQS_BILLING_CHUNK_BYTES } from '../../core/model/messages.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { ALTERED_BY_PARSE } from '../support/payloads.js';
import { createSystem, runAllGroups, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 5_000, shardCount: 8, groupCount: 1 };

/** About 1 KB of JSON text shaped like a real payload (ids, words, numbers), with odd spacing. */
function payloadText(i: number): string {
  const words = ['invoice', 'reminder', 'customer', 'renewal', 'shipment', 'account', 'balance', 'overdue'];
  const tags: string[] = [];
  let text = '';
  do {
    tags.push(`${words[(i + tags.length) % words.length]}-${(tags.length * 7919 + i) % 10_000}`);
    text = `{"seq":${i}, "customerId":"${randomUUID()}","orderId":"${randomUUID()}","amount":1.50,"tags":${JSON.stringify(tags)}}`;
  } while (text.length < 1_000);
  return text;
}

/** 100 payload texts: the ones JSON.parse would alter, the rest realistic. */
const PAYLOADS = Array.from({ length: 100 }, (_, i) => (i < ALTERED_BY_PARSE.length ? ALTERED_BY_PARSE[i]! : payloadText(i)));

/** SQS requests of `client`, each with the bytes SQS bills it by (message bodies sent or received). */
function meter(client: SQSClient) {
  const calls: { op: string; bodies: string[] }[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const res = await next(args);
      const op = (context.commandName ?? '').replace(/Command$/, '');
      const input = args.input as { MessageBody?: string; Entries?: { MessageBody?: string }[] };
      const bodies =
        op === 'SendMessageBatch'
          ? (input.Entries ?? []).map((e) => e.MessageBody ?? '')
          : op === 'SendMessage'
            ? [input.MessageBody ?? '']
            : op === 'ReceiveMessage'
              ? ((res.output as { Messages?: { Body?: string }[] }).Messages ?? []).map((m) => m.Body ?? '')
              : [];
      calls.push({ op, bodies });
      return res;
    },
    { step: 'initialize', name: 'testSqsMeter' },
  );
  /** Billed units: one per 64 KiB chunk of the bodies a call carries, at least one. */
  const units = (c: { bodies: string[] }) =>
    Math.max(1, Math.ceil(c.bodies.reduce((n, b) => n + Buffer.byteLength(b), 0) / SQS_BILLING_CHUNK_BYTES));
  return { calls, units };
}

async function submitHundred(sys: TestSystem, submitter = sys.w.submitter) {
  const runAt = new Date(Date.now() + 4_000).toISOString();
  const body = `{"jobs":[${PAYLOADS.map((p) => `{"payload":${p},"runAt":"${runAt}"}`).join(',')}]}`;
  expect(Buffer.byteLength(body)).toBeGreaterThan(SQS_BILLING_CHUNK_BYTES);
  const { results } = await submitter.submitBatch('demo', body);
  const replies = results as { jobId: string; runAt: string }[];
  expect(replies.every((r) => typeof r.jobId === 'string')).toBe(true);
  return replies;
}

/** Reads raw bodies from a queue until `n` distinct jobs arrived, deleting them. */
async function receiveBodies(sqs: SQSClient, url: string, n: number, timeoutMs: number): Promise<Map<string, string>> {
  const byJob = new Map<string, string>();
  const until = Date.now() + timeoutMs;
  while (byJob.size < n && Date.now() < until) {
    const res = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    for (const m of res.Messages ?? []) {
      byJob.set((JSON.parse(m.Body!) as { jobId: string }).jobId, m.Body!);
      await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
    }
  }
  return byJob;
}

const expectedBody = (reply: { jobId: string; runAt: string }, payload: string) =>
  `{"jobId":${JSON.stringify(reply.jobId)},"tenant":"demo","runAt":"${reply.runAt}","payload":${payload}}`;

describe.concurrent('deflated inbound messages (version 4)', () => {
  it('carry a batch of 100 1 KB jobs in one billed chunk on the send and on the receive, payloads byte for byte', async () => {
    const sys = await createSystem(em, { settings });
    const clients = em.newClients();
    const m = meter(clients.sqs);
    const w = await sys.another(clients);
    const handle = ingestHandler(w);
    const ingest = startSqsEventSource({ sqs: clients.sqs, queueUrl: sys.inboundUrl, handler: (e: SQSEvent) => handle(e), pollers: 1 });

    const replies = await submitHundred(sys, w.submitter);
    const sends = m.calls.filter((c) => c.op === 'SendMessageBatch');
    expect(sends).toHaveLength(1);
    expect(sends[0]!.bodies).toHaveLength(1);
    const inbound = sends[0]!.bodies[0]!;
    expect(inbound.startsWith('{"v":4,"z":"')).toBe(true);
    // The version 2 text it carries is two chunks; the message is one.
    expect(Buffer.byteLength(inboundBody(parseInboundBody(inbound)!))).toBeGreaterThan(SQS_BILLING_CHUNK_BYTES);
    expect(m.units(sends[0]!)).toBe(1);

    const dispatch = runAllGroups(w.dispatch);
    const bodies = await receiveBodies(em.sqs, sys.tenants.demo!.url, 100, 30_000);
    await dispatch.stop();
    await ingest.stop();
    // Byte for byte: each body is the contract's, with the payload text as submitted.
    expect(bodies.size).toBe(100);
    replies.forEach((r, i) => expect(bodies.get(r.jobId)).toBe(expectedBody(r, PAYLOADS[i]!)));

    // The event source received the inbound message once, billed one chunk, and deleted it once.
    const received = m.calls.filter((c) => c.op === 'ReceiveMessage' && c.bodies.some((b) => b.startsWith('{"v":')));
    expect(received).toHaveLength(1);
    expect(m.units(received[0]!)).toBe(1);
    expect(m.calls.filter((c) => c.op === 'DeleteMessageBatch')).toHaveLength(1);
    // Per job on the inbound path: 3 billed requests per 100 jobs (send, receive, delete), not 5.
    const inboundUnits = m.units(sends[0]!) + m.units(received[0]!) + 1;
    expect(inboundUnits / 100).toBe(0.03);
  }, 60_000);

  it('ingest still reads version 1 and version 2 messages left in the queue by an earlier release', async () => {
    const sys = await createSystem(em, { settings });
    // Submit with no ingest running, then put the jobs back in the queue as an earlier release
    // would have written them: the first alone in version 1, the others in one version 2 message.
    const replies = await submitHundred(sys);
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.inboundUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    expect(res.Messages).toHaveLength(1);
    const msg = res.Messages![0]!;
    expect(msg.Body!.startsWith('{"v":4,')).toBe(true);
    const jobs = parseInboundBody(msg.Body!)!;
    expect(jobs.map((j) => j.payload)).toEqual(PAYLOADS);
    await em.sqs.send(new DeleteMessageCommand({ QueueUrl: sys.inboundUrl, ReceiptHandle: msg.ReceiptHandle! }));
    const [first, ...rest] = jobs;
    const v1 = `{"v":1,"jobId":${JSON.stringify(first!.jobId)},"tenant":"demo","shard":${first!.shard},"dueMs":${first!.dueMs},"payload":${first!.payload}}`;
    const v2 = inboundBody(rest);
    expect(v2.startsWith('{"v":2,')).toBe(true);
    for (const body of [v1, v2]) await em.sqs.send(new SendMessageCommand({ QueueUrl: sys.inboundUrl, MessageBody: body }));

    const ingest = sys.startIngest();
    const dispatch = runAllGroups(sys.w.dispatch);
    const bodies = await receiveBodies(em.sqs, sys.tenants.demo!.url, 100, 30_000);
    await dispatch.stop();
    await ingest.stop();
    expect(bodies.size).toBe(100);
    replies.forEach((r, i) => expect(bodies.get(r.jobId)).toBe(expectedBody(r, PAYLOADS[i]!)));
  }, 60_000);
});
