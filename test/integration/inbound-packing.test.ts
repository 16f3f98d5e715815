/**
 * Table-path jobs of one submit share inbound messages (core/model/messages.ts packInbound): one send,
 * one receive and one delete for a batch of small jobs. These tests check what that must not
 * change: every job is written once, a message that SQS refuses fails exactly its own jobs, and a
 * message whose ingest fails part-way is retried whole without a second row.
 */
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Submitter } from '../../core/submit/submitter.js';
import { ThrottledError } from '../../core/model/errors.js';
import { parseInboundBody } from '../../core/model/messages.js';
import type { JobStore, QueueSender } from '../../core/model/ports.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess } from '../support/faults.js';
import { createSystem, submitJobs, waitForEmptyQueue, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 2_000, shardCount: 8, groupCount: 2 };
const kb = (i: number) => ({ i, text: 'x'.repeat(1_000) });

async function receiveAll(url: string, expected: number) {
  const bodies: { body: string; messageId: string; receiptHandle: string }[] = [];
  for (let tries = 0; tries < 10 && bodies.length < expected; tries++) {
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    for (const m of res.Messages ?? []) bodies.push({ body: m.Body!, messageId: m.MessageId!, receiptHandle: m.ReceiptHandle! });
  }
  return bodies;
}

/** The job's row state in the table (status alone cannot tell: a job still inbound answers SCHEDULED too). */
async function rowState(sys: TestSystem, jobId: string) {
  const id = sys.w.codec.parse(jobId);
  return (await sys.w.store.getRow({ shard: id.shard, dueMs: id.dueMs, jobId }))?.state;
}

describe('inbound packing', () => {
  it('sends a batch of 100 small jobs as one inbound message, and ingest writes each job once', async () => {
    const sys = await createSystem(em, { settings });
    const before = em.counter.snapshot()['SQS.SendMessageBatch'] ?? 0;
    const replies = await submitJobs(
      sys,
      'demo',
      Array.from({ length: 100 }, (_, i) => ({ payload: kb(i), delaySeconds: 3_600 })),
    );
    expect((em.counter.snapshot()['SQS.SendMessageBatch'] ?? 0) - before).toBe(1);
    const [msg, ...rest] = await receiveAll(sys.inboundUrl, 1);
    expect(rest).toEqual([]);
    expect(parseInboundBody(msg!.body)?.map((j) => j.jobId)).toEqual(replies.map((r) => r.jobId));

    const handler = ingestHandler(sys.w);
    const record = { messageId: msg!.messageId, body: msg!.body } as never;
    expect(await handler({ Records: [record] } as never)).toEqual({ batchItemFailures: [] });
    for (const r of replies) expect(await rowState(sys, r.jobId)).toBe('SCHEDULED');
    // Redelivered: nothing new, nothing failed.
    expect(await handler({ Records: [record] } as never)).toEqual({ batchItemFailures: [] });
  });

  it('fails exactly the jobs of a message SQS refuses, and writes none of them', async () => {
    const sys = await createSystem(em, { settings });
    // SQS's per-entry failures cannot be produced by the emulator: refuse the inbound entries here.
    const sender = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) =>
        url === sys.inboundUrl
          ? messages.map((m) => ({ id: m.id, retryable: true, message: 'ServiceUnavailable (injected)' }))
          : orig(url, messages),
    });
    const submitter = new Submitter({ ...sys.w.submitter.deps, sender, send: { backoff: { baseMs: 1, capMs: 5 } } });
    const now = Date.now();
    const jobs = [
      { payload: 1, delaySeconds: 600 },
      { payload: 2, runAt: new Date(now + 500).toISOString() }, // within the lookahead: straight to the queue
      { payload: 3, delaySeconds: 900 },
      { payload: 4, delaySeconds: 600, cancellable: false }, // ≤ 900 s and not cancellable: straight to the queue
    ];
    const { results } = await submitter.submitBatch('demo', JSON.stringify({ jobs }));
    expect(results.map((r) => ('error' in r ? r.error.code : r.state))).toEqual(['InternalError', 'QUEUED', 'InternalError', 'QUEUED']);
    for (const r of results) if ('error' in r) expect(r.error.message).toMatch(/not accepted.*injected.*retry/);
    expect(await receiveAll(sys.inboundUrl, 0)).toEqual([]);
    await waitForEmptyQueue(em.sqs, sys.inboundUrl, 2_000);
  });

  it('splits a message SQS refuses, so that every other job of the batch gets through; only the refused job answers an error', async () => {
    const sys = await createSystem(em, { settings });
    // SQS's per-entry refusals cannot be produced by the emulator for valid text: refuse, as a
    // sender fault, every message that carries the job marked "poison".
    let refusals = 0;
    const sender = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) => {
        const bad = messages.filter((m) => m.body.includes('"poison"'));
        refusals += bad.length;
        const failures = await orig(
          url,
          messages.filter((m) => !bad.includes(m)),
        );
        return [...failures, ...bad.map((m) => ({ id: m.id, retryable: false, message: 'InvalidMessageContents (injected)' }))];
      },
    });
    const submitter = new Submitter({ ...sys.w.submitter.deps, sender });
    const jobs = Array.from({ length: 20 }, (_, i) => ({ payload: i === 13 ? 'poison' : kb(i), delaySeconds: 3_600 }));
    const { results } = await submitter.submitBatch('demo', JSON.stringify({ jobs }));
    expect(results.map((r, i) => ('error' in r ? `${i}:${r.error.code}` : r.state))).toEqual(
      jobs.map((_, i) => (i === 13 ? '13:ValidationError' : 'SCHEDULED')),
    );
    expect((results[13] as { error: { message: string } }).error.message).toMatch(
      /^jobs\[13\]: SQS refused the job \(InvalidMessageContents \(injected\)\)/,
    );
    expect(refusals).toBeGreaterThan(1); // the packed message, then halves down to the job alone

    // Every other job is stored: ingest what reached the inbound queue.
    const ingest = sys.startIngest();
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    await ingest.stop();
    for (const [i, r] of results.entries()) if (i !== 13) expect(await rowState(sys, (r as { jobId: string }).jobId)).toBe('SCHEDULED');
    const rows = (await em.dynamo.send(new ScanCommand({ TableName: sys.tableName, ConsistentRead: true }))).Items ?? [];
    expect(rows.filter((row) => /^\d+$/.test(row.pk!.S!))).toHaveLength(19);
  });

  it('sends again the entries SQS failed on its side: a batch whose first send fails is accepted whole', async () => {
    const sys = await createSystem(em, { settings });
    let calls = 0;
    const sender = inProcess<QueueSender>(sys.w.dispatch.sender, new SimProcess(), {
      sendBatch: async (orig, url, messages) => {
        calls++;
        if (calls === 1) return messages.map((m) => ({ id: m.id, retryable: true, message: 'InternalError (injected)' }));
        if (calls === 2) throw new Error('socket hang up (injected)');
        return orig(url, messages);
      },
    });
    const submitter = new Submitter({ ...sys.w.submitter.deps, sender, send: { backoff: { baseMs: 1, capMs: 5 } } });
    const { results } = await submitter.submitBatch(
      'demo',
      JSON.stringify({ jobs: Array.from({ length: 5 }, (_, i) => ({ payload: i, delaySeconds: 3_600 })) }),
    );
    expect(results.map((r) => ('error' in r ? r.error.code : r.state))).toEqual(Array(5).fill('SCHEDULED'));
    expect(calls).toBe(3);
    const [msg, ...rest] = await receiveAll(sys.inboundUrl, 1);
    expect(rest).toEqual([]);
    expect(parseInboundBody(msg!.body)?.map((j) => j.payload)).toEqual(['0', '1', '2', '3', '4']);
  });

  it('writes the well-formed jobs of a message that carries a malformed one (which sends the message to the DLQ)', async () => {
    const sys = await createSystem(em, { settings });
    const [a, b] = await submitJobs(sys, 'demo', [
      { payload: 'a', delaySeconds: 3_600 },
      { payload: 'b', delaySeconds: 3_600 },
    ]);
    const [msg] = await receiveAll(sys.inboundUrl, 1);
    // The second job's entry malformed (its shard a string): not one submit wrote.
    const at = msg!.body.indexOf(b!.jobId);
    const body = msg!.body.slice(0, at) + msg!.body.slice(at).replace(/"shard":(\d+)/, '"shard":"$1"');
    expect(body).not.toBe(msg!.body);
    const handler = ingestHandler(sys.w);
    const reply = await handler({ Records: [{ messageId: msg!.messageId, body } as never] } as never);
    expect(reply).toEqual({ batchItemFailures: [{ itemIdentifier: msg!.messageId }] });
    expect(await rowState(sys, a!.jobId)).toBe('SCHEDULED');
    expect(await rowState(sys, b!.jobId)).toBeUndefined();
  });

  it('retries a message whose ingest failed part-way, without a second row, and reports the rest as duplicates', async () => {
    const sys = await createSystem(em, { settings });
    const replies = await submitJobs(
      sys,
      'demo',
      Array.from({ length: 20 }, (_, i) => ({ payload: kb(i), delaySeconds: 3_600 })),
    );
    const [msg] = await receiveAll(sys.inboundUrl, 1);
    const victim = replies[7]!.jobId;
    let refused = 0;
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      putJob: async (orig, job) => {
        if (job.jobId === victim && refused++ === 0) throw new ThrottledError('ProvisionedThroughputExceededException (injected)');
        return orig(job);
      },
    });
    const counts: Record<string, number> = {};
    const telemetry = { count: (n: string, k: number) => void (counts[n] = (counts[n] ?? 0) + k), values() {}, error() {} };
    const handler = ingestHandler({ ...sys.w, ingest: { ...sys.w.ingest, store } }, telemetry);
    const record = { messageId: msg!.messageId, body: msg!.body } as never;
    expect(await handler({ Records: [record] } as never)).toEqual({ batchItemFailures: [{ itemIdentifier: msg!.messageId }] });
    expect(counts.JobsIngested).toBe(19); // the others were written all the same
    expect(await rowState(sys, victim)).toBeUndefined();
    expect(await handler({ Records: [record] } as never)).toEqual({ batchItemFailures: [] });
    expect(counts.JobsIngested).toBe(20);
    expect(counts.IngestDuplicates).toBe(19);
    for (const r of replies) expect(await rowState(sys, r.jobId)).toBe('SCHEDULED');
  });
});
