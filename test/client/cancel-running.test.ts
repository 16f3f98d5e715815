import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { mkdtempSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AlreadyQueuedError,
  DyneinClient,
  JobCancelledError,
  TenantNotFoundError,
  ValidationError,
  Worker,
  type OutcomeSink,
  type WorkerEvent,
} from '../../client/index.js';
import { main } from '../../client/cli/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { deliveryMessage } from '../../core/model/messages.js';
import { cancelHandler, outcomesHandler, statusHandler, submitHandler } from '../../lambdas/runtime/handlers.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { serveApi } from '../support/localApi.js';
import { refused, scriptedSink, stored } from '../support/outcomeSinks.js';
import { createSystem, queueDepth, waitForEmptyQueue, type TestSystem } from '../support/system.js';
import { waitUntil } from './support.js';

/**
 * Cancel a running job from the client side (docs/flow-control.md "Cancel a running job"): the SDK
 * against the submit, status, cancel and outcomes handlers behind the local API server on the
 * emulators (every reply checked against docs/openapi.yaml: test/contract/replies.setup.ts), a
 * Worker whose handler waits on its signal, and the Lambda wrapper under the local event source.
 * Jobs due now go straight to their tenant queue (with the `dynein-history` attribute for a
 * history tenant), so no dispatcher runs here.
 */
let em: Emulators;
let sys: TestSystem;
let server: Server;
let endpoint: string;
const keys = {
  hist: { accessKeyId: 'AKIDHIST', secretAccessKey: 'hist-secret' },
  lam: { accessKeyId: 'AKIDLAM', secretAccessKey: 'lam-secret' },
  // Its own queue: a stopped event source's last long poll may still take a message of the queue it polled.
  lamrun: { accessKeyId: 'AKIDLAMRUN', secretAccessKey: 'lamrun-secret' },
  plain: { accessKeyId: 'AKIDPLAIN', secretAccessKey: 'plain-secret' },
  // Signed for, never registered: TenantNotFound.
  ghost: { accessKeyId: 'AKIDGHOST', secretAccessKey: 'ghost-secret' },
};
const HEARTBEAT_MS = 300;
const dataDir = mkdtempSync(join(tmpdir(), 'dynein-cancel-running-'));

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['hist', 'lam', 'lamrun', 'plain'] });
  for (const name of ['hist', 'lam', 'lamrun'])
    await sys.w.store.putTenant({ name, queueUrl: sys.tenants[name]!.url, dlqUrl: sys.tenants[name]!.dlqUrl, historyTtlMs: 86_400_000 });
  ({ server, endpoint } = await serveApi(em, sys, {
    keys,
    handlers: {
      submit: submitHandler(sys.w),
      status: statusHandler(sys.w),
      cancel: cancelHandler(sys.w),
      outcomes: outcomesHandler(sys.w),
    },
    dataDir,
    localTenants: ['hist'],
  }));
});
afterAll(async () => {
  server?.close();
  await em?.stop();
});

const api = (tenant: keyof typeof keys) => new DyneinClient({ endpoint, region: 'us-east-1', credentials: keys[tenant] });

/** The CLI in process, against the local API server (local.json in `dataDir`). */
async function dynein(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--data-dir', dataDir], { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(l) });
  return { code, out, err };
}

/** The client, with each heartbeat request's job ids recorded. */
function recordingClient(client: DyneinClient): OutcomeSink & { beats: string[][] } {
  const beats: string[][] = [];
  return {
    beats,
    reportOutcomes: (tenant, outcomes) => client.reportOutcomes(tenant, outcomes),
    heartbeats: (tenant, jobIds, opts) => {
      beats.push([...jobIds].sort());
      return client.heartbeats(tenant, jobIds, opts);
    },
  };
}

/** Polls `GET` of the job until its state is `state`. */
async function waitForState(client: DyneinClient, tenant: string, jobId: string, state: string, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const status = await client.get(tenant, jobId);
    if (status.state === state) return status;
    if (Date.now() > until) throw new Error(`job ${jobId} is ${status.state}, not ${state}, after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('cancel a running job', () => {
  it('Worker: DELETE answers 202 CANCEL_REQUESTED; the handler’s signal aborts with a JobCancelledError at a heartbeat; CANCELLED is stored, the message deleted (no DLQ); a second DELETE is a 409', async () => {
    const client = api('hist');
    const sink = recordingClient(client);
    const { jobId: doomed } = await client.schedule('hist', { payload: { n: 1 }, delaySeconds: 0 });
    const { jobId: kept } = await client.schedule('hist', { payload: { n: 2 }, delaySeconds: 0 });
    const started = new Set<string>();
    let aborted: { at: number; reason: unknown } | undefined;
    const events: WorkerEvent[] = [];
    const worker = new Worker({
      queueUrl: sys.tenants.hist!.url,
      deadLetterQueueUrl: sys.tenants.hist!.dlqUrl,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      heartbeatMs: HEARTBEAT_MS,
      client: sink,
      onEvent: (e) => events.push(e),
      handler: async (job, { signal }) => {
        started.add(job.jobId);
        if (job.jobId === kept) {
          // Runs on beside the cancelled one, then succeeds.
          await waitUntil(() => aborted !== undefined, 20_000, 'the other job stopped');
          return { ok: true };
        }
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        aborted = { at: Date.now(), reason: signal.reason };
        // A handler winding down takes a moment, then rethrows the reason: still CANCELLED, not FAILED.
        await new Promise((r) => setTimeout(r, 300));
        throw signal.reason;
      },
    });
    const running = worker.run();
    try {
      await waitUntil(() => started.size === 2, 10_000, 'both handlers started');
      const requestedAt = Date.now();
      expect(await client.cancel('hist', doomed)).toEqual({ jobId: doomed, state: 'CANCEL_REQUESTED' });
      // Repeatable: 202 again.
      expect(await client.cancel('hist', doomed)).toEqual({ jobId: doomed, state: 'CANCEL_REQUESTED' });
      const during = await client.get('hist', doomed);
      expect(during).toMatchObject({ jobId: doomed, state: 'DELIVERED', cancelRequested: true });
      expect(during.timeline?.at(-1)?.event).toBe('CANCEL_REQUESTED');

      await waitUntil(() => aborted !== undefined, 5_000, 'the handler’s signal aborted');
      expect(aborted!.reason).toBeInstanceOf(JobCancelledError);
      expect((aborted!.reason as JobCancelledError).jobId).toBe(doomed);
      // Within a couple of heartbeats (and the request's time on a busy machine).
      expect(aborted!.at - requestedAt).toBeLessThan(2 * HEARTBEAT_MS + 1_500);

      await waitUntil(() => events.some((e) => e.type === 'cancelled'), 5_000, 'the cancelled event');
      const ended = await waitForState(client, 'hist', doomed, 'CANCELLED');
      expect(ended.cancelRequested).toBeUndefined();
      const timeline = ended.timeline!.map((e) => e.event);
      expect(timeline.at(-1)).toBe('CANCELLED');
      expect(timeline.indexOf('CANCEL_REQUESTED')).toBeGreaterThan(timeline.indexOf('DELIVERED'));
      expect(timeline.indexOf('CANCEL_REQUESTED')).toBe(timeline.length - 2);
      expect(timeline).not.toContain('FAILED');

      // The other job ran on and succeeded; the heartbeats carried both jobs in one request a tick.
      await waitForState(client, 'hist', kept, 'SUCCEEDED');
      expect(sink.beats.length).toBeGreaterThanOrEqual(1);
      expect(sink.beats[0]).toEqual([doomed, kept].sort());
      for (const ids of sink.beats) expect(ids.every((id) => id === doomed || id === kept)).toBe(true);

      // The message is gone, and not dead-lettered.
      await waitForEmptyQueue(em.sqs, sys.tenants.hist!.url, 5_000);
      expect(await queueDepth(em.sqs, sys.tenants.hist!.dlqUrl)).toEqual({ visible: 0, hidden: 0 });
      expect(events.filter((e) => e.type === 'failed' || e.type === 'dead' || e.type === 'error')).toEqual([]);
      expect(events.find((e) => e.type === 'cancelled')).toMatchObject({ type: 'cancelled', job: { jobId: doomed }, receiveCount: 1 });
      expect([...started].sort()).toEqual([doomed, kept].sort()); // each ran once

      // Ended: nothing left to cancel.
      const again = await client.cancel('hist', doomed).catch((e: unknown) => e);
      expect(again).toBeInstanceOf(AlreadyQueuedError);
      expect((again as AlreadyQueuedError).status).toBe(409);
    } finally {
      await worker.stop();
      await running;
    }
  });

  it('Lambda wrapper: a record whose stop was requested is not run and is reported CANCELLED; the others of its batch run', async () => {
    const client = api('lam');
    const sink = recordingClient(client);
    const { jobId: doomed } = await client.schedule('lam', { payload: { n: 1 }, delaySeconds: 0 });
    const { jobId: kept } = await client.schedule('lam', { payload: { n: 2 }, delaySeconds: 0 });
    // Delivered (in the queue), not yet received: its worker will be told before it starts.
    expect(await client.cancel('lam', doomed)).toEqual({ jobId: doomed, state: 'CANCEL_REQUESTED' });

    const ran: string[] = [];
    const failures: string[][] = [];
    const handler = dyneinLambdaHandler(
      (job) => {
        ran.push(job.jobId);
        return { ran: job.jobId };
      },
      { client: sink },
    );
    const source = startSqsEventSource({
      sqs: em.sqs,
      queueUrl: sys.tenants.lam!.url,
      pollers: 1,
      maxBatchingWindowMs: 500,
      handler: async (event) => {
        const res = await handler(event, { getRemainingTimeInMillis: () => 30_000 });
        failures.push(res.batchItemFailures.map((f) => f.itemIdentifier));
        return res;
      },
    });
    try {
      await waitForEmptyQueue(em.sqs, sys.tenants.lam!.url, 10_000);
    } finally {
      await source.stop();
    }
    expect(ran).toEqual([kept]);
    expect(failures.flat()).toEqual([]);
    expect(await queueDepth(em.sqs, sys.tenants.lam!.dlqUrl)).toEqual({ visible: 0, hidden: 0 });
    // One heartbeat request per batch (the two arrive in one batch, or one each).
    expect(sink.beats.flat().sort()).toEqual([doomed, kept].sort());
    const cancelled = await waitForState(client, 'lam', doomed, 'CANCELLED');
    // The request came before the record was received (a direct job's DELIVERED is its receive, as reported).
    expect(cancelled.timeline?.map((e) => e.event)).toEqual(['SCHEDULED', 'CANCEL_REQUESTED', 'DELIVERED', 'CANCELLED']);
    expect(cancelled.timeline?.at(-1)).toMatchObject({ event: 'CANCELLED', attempt: 1 });
    expect((await waitForState(client, 'lam', kept, 'SUCCEEDED')).timeline?.at(-1)).toMatchObject({
      event: 'SUCCEEDED',
      result: { ran: kept },
    });
  });

  it('Lambda wrapper: a record already running is stopped at its next heartbeat, and reported CANCELLED whatever its handler did', async () => {
    const client = api('lamrun');
    const sink = recordingClient(client);
    const { jobId } = await client.schedule('lamrun', { payload: { n: 3 }, delaySeconds: 0 });
    let started = false;
    let reason: unknown;
    const handler = dyneinLambdaHandler(
      async (_job, { signal }) => {
        started = true;
        // A long job: it runs until its signal aborts, then ends as if it had failed.
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        reason = signal.reason;
        throw new Error('stopped half-way');
      },
      { client: sink, heartbeatMs: HEARTBEAT_MS },
    );
    const failures: string[][] = [];
    const source = startSqsEventSource({
      sqs: em.sqs,
      queueUrl: sys.tenants.lamrun!.url,
      pollers: 1,
      handler: async (event) => {
        const res = await handler(event, { getRemainingTimeInMillis: () => 30_000 });
        failures.push(res.batchItemFailures.map((f) => f.itemIdentifier));
        return res;
      },
    });
    try {
      await waitUntil(() => started, 10_000);
      expect(await client.cancel('lamrun', jobId)).toEqual({ jobId, state: 'CANCEL_REQUESTED' });
      await waitForEmptyQueue(em.sqs, sys.tenants.lamrun!.url, 10_000);
    } finally {
      await source.stop();
    }
    expect(reason).toBeInstanceOf(JobCancelledError);
    expect(failures.flat()).toEqual([]);
    // Heartbeated before it ran and while it ran (at least once more).
    expect(sink.beats.filter((b) => b.includes(jobId)).length).toBeGreaterThanOrEqual(2);
    const cancelled = await waitForState(client, 'lamrun', jobId, 'CANCELLED');
    expect(cancelled.timeline?.at(-1)).toMatchObject({ event: 'CANCELLED', attempt: 1 });
    expect(cancelled.timeline?.some((e) => e.event === 'FAILED')).toBe(false);
  });

  it('Worker, workflow job: a failed heartbeat is an error event and stops nothing; stopped at the next, its CANCELLED report is retried until answered, then the message is deleted', async () => {
    const q = await em.createQueue('cr-wf', { dlq: true });
    const m = deliveryMessage('m', { jobId: 'wf-job', tenant: 'demo', dueMs: Date.now(), payload: 'null', workflow: 'wf-1' });
    const attributes = Object.fromEntries(Object.entries(m.attributes ?? {}).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]));
    await em.sqs.send(new SendMessageCommand({ QueueUrl: q.url, MessageBody: m.body, MessageAttributes: attributes }));
    // The first report of the CANCELLED outcome is throttled: it is retried although the handler's signal aborted.
    const { sink, requests } = scriptedSink((o, call) => (call === 1 ? refused(o, 'Throttled') : stored(o)));
    let beats = 0;
    const events: WorkerEvent[] = [];
    let reason: unknown;
    const worker = new Worker({
      queueUrl: q.url,
      deadLetterQueueUrl: q.dlqUrl,
      sqs: em.newClients().sqs,
      handleSignals: false,
      waitTimeSeconds: 1,
      heartbeatMs: 200,
      client: {
        reportOutcomes: (tenant, outcomes) => sink.reportOutcomes(tenant, outcomes),
        heartbeats: async (tenant, jobIds) => {
          expect([tenant, jobIds]).toEqual(['demo', ['wf-job']]);
          if (++beats === 1) throw new Error('heartbeat refused (test)');
          return { cancelRequested: ['wf-job'] };
        },
      },
      onEvent: (e) => events.push(e),
      handler: async (_job, { signal }) => {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        reason = signal.reason;
        return 'stopped early'; // returned, not thrown: still CANCELLED
      },
    });
    const running = worker.run();
    try {
      await waitUntil(() => events.some((e) => e.type === 'cancelled'), 10_000, 'the cancelled event');
    } finally {
      await worker.stop();
      await running;
    }
    expect(reason).toBeInstanceOf(JobCancelledError);
    expect(beats).toBeGreaterThanOrEqual(2);
    expect(events.filter((e) => e.type === 'error').map((e) => e.type === 'error' && e.operation)).toEqual(['heartbeats']);
    expect(requests.map((r) => r.map((o) => o.outcome))).toEqual([['CANCELLED'], ['CANCELLED']]);
    expect(requests[1]![0]).not.toHaveProperty('result');
    await waitForEmptyQueue(em.sqs, q.url, 5_000);
    expect(await queueDepth(em.sqs, q.dlqUrl!)).toEqual({ visible: 0, hidden: 0 });
  });

  it('CLI: dynein cancel prints CANCEL_REQUESTED for a running job, dynein show says so', async () => {
    const { jobId } = await api('hist').schedule('hist', { payload: null, delaySeconds: 0 });
    for (let i = 0; i < 2; i++) {
      const cancelled = await dynein(['cancel', '--tenant', 'hist', jobId]);
      expect([cancelled.code, cancelled.out]).toEqual([0, [`CANCEL_REQUESTED  ${jobId}`]]);
    }
    const json = await dynein(['cancel', '--tenant', 'hist', jobId, '--json']);
    expect(JSON.parse(json.out[0]!)).toEqual({ jobId, state: 'CANCEL_REQUESTED' });
    const shown = await dynein(['show', '--tenant', 'hist', jobId]);
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('  state  DELIVERED');
    expect(shown.out).toContain('  cancel requested: its worker stops it at its next heartbeat and reports CANCELLED');
    expect(shown.out.some((l) => /CANCEL_REQUESTED/.test(l))).toBe(true);
  });

  it('SDK heartbeats: answers the requested ids; bad input is a typed error (before sending, or the API’s)', async () => {
    const client = api('hist');
    const { jobId } = await client.schedule('hist', { payload: null, delaySeconds: 0 });
    expect(await client.heartbeats('hist', [jobId])).toEqual({ cancelRequested: [] });
    expect(await client.cancel('hist', jobId)).toEqual({ jobId, state: 'CANCEL_REQUESTED' });
    expect(await client.heartbeats('hist', [jobId, jobId])).toEqual({ cancelRequested: [jobId] });

    // Checked before sending.
    // What a caller without types may pass (JSON: not a list of strings).
    const untyped: string[][] = JSON.parse(`[[${JSON.stringify(jobId)}, 42], "x"]`);
    for (const bad of [[], Array.from({ length: 101 }, () => jobId), ...untyped]) {
      const err = await client.heartbeats('hist', bad).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).source).toBe('client');
    }
    // The API's: an id it did not issue, another tenant's, an unknown tenant.
    const forged = await client.heartbeats('hist', [jobId, 'not-a-job-id']).catch((e: unknown) => e);
    expect(forged).toBeInstanceOf(ValidationError);
    expect(forged).toMatchObject({ status: 400, source: 'api' });
    expect((forged as ValidationError).message).toMatch(/^jobIds\[1\] is not a job id this scheduler issued/);
    const foreign = await api('plain')
      .heartbeats('plain', [jobId])
      .catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(ValidationError);
    expect((foreign as ValidationError).message).toMatch(/^jobIds\[0\] /);
    const ghost = await api('ghost')
      .heartbeats('ghost', [jobId])
      .catch((e: unknown) => e);
    expect(ghost).toBeInstanceOf(TenantNotFoundError);
  });
});
