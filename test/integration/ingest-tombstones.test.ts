import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardsOfGroup } from '../../core/config.js';
import { dispatchRound, type DispatchDeps } from '../../core/dispatch.js';
import { ingest } from '../../core/ingest.js';
import type { JobStore } from '../../core/ports.js';
import { ingestHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { gate, inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, submitJobs, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1, tombstoneGraceMs: 300 };

/** Takes the inbound messages off the queue without ingesting them: the test plays ingest. */
async function takeInbound(sys: TestSystem, n: number): Promise<string[]> {
  const bodies: string[] = [];
  while (bodies.length < n) {
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.inboundUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    for (const m of res.Messages ?? []) {
      bodies.push(m.Body!);
      await em.sqs.send(new DeleteMessageCommand({ QueueUrl: sys.inboundUrl, ReceiptHandle: m.ReceiptHandle! }));
    }
  }
  return bodies;
}

const keyOf = (jobId: string, sys: TestSystem) => {
  const id = sys.w.codec.parse(jobId);
  return { shard: id.shard, dueMs: id.dueMs, jobId };
};

/** A job cancelled while still inbound (a tombstone), its inbound body in hand, now due + grace. */
async function cancelledPastGrace() {
  const sys = await createSystem(em, { settings });
  const [job] = await submitJobs(sys, 'demo', [{ payload: { late: true }, runAt: new Date(Date.now() + 1_200).toISOString() }]);
  const [body] = await takeInbound(sys, 1);
  const key = keyOf(job!.jobId, sys);
  await sys.w.jobs.cancel('demo', job!.jobId);
  await sleepMs(key.dueMs + settings.tombstoneGraceMs + 50 - Date.now());
  return { sys, job: job!, body: body!, key };
}

const round = (deps: DispatchDeps) => dispatchRound(deps, { shards: shardsOfGroup(0, settings), deadlineMs: Date.now() + 5_000 });

describe('ingest', () => {
  it('is idempotent: a redelivered message never creates a second row nor resets an acquired one', async () => {
    const sys = await createSystem(em, { settings });
    const [job] = await submitJobs(sys, 'demo', [{ payload: { a: 1 }, delaySeconds: 60 }]);
    const [body] = await takeInbound(sys, 1);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['created']);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    const key = keyOf(job!.jobId, sys);
    const now = Date.now();
    expect(await sys.w.store.acquire(key, now, now + 10_000)).toBeDefined();
    // Redelivered twice more, once in the same SQS batch: no failure reported, the row stays ACQUIRED.
    const handler = ingestHandler(sys.w);
    const record = (id: string) => ({ messageId: id, body: body! }) as never;
    expect(await handler({ Records: [record('m1'), record('m2')] })).toEqual({ batchItemFailures: [] });
    expect((await sys.w.store.getRow(key))?.state).toBe('ACQUIRED');
    // A malformed message is reported as failed (so it ends in the DLQ), the good one is not.
    const res = await handler({ Records: [record('ok'), { messageId: 'bad', body: '{"v":1,"jobId":"nope"}' } as never] });
    expect(res.batchItemFailures).toEqual([{ itemIdentifier: 'bad' }]);
  });

  it('an early cancel leaves a tombstone that fails the ingest, and a moved tombstone is never revived by a late ingest', async () => {
    const sys = await createSystem(em, { settings });
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const [job] = await submitJobs(sys, 'demo', [{ payload: { b: 1 }, runAt: new Date(Date.now() + 1_500).toISOString() }]);
    const [body] = await takeInbound(sys, 1);
    const key = keyOf(job!.jobId, sys);

    expect(await sys.w.jobs.cancel('demo', job!.jobId)).toEqual({ jobId: job!.jobId, state: 'CANCELLED' });
    expect((await sys.w.store.getRow(key))?.state).toBe('CANCELLED');
    expect(await ingest(sys.w.ingest, body!)).toEqual(['duplicate']);
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('CANCELLED');

    // Once due + grace, a round moves the tombstone out of the due range into a cancel record.
    await sleepMs(key.dueMs + settings.tombstoneGraceMs + 50 - Date.now());
    const r = await round(sys.w.dispatch);
    expect(r.tombstonesMoved).toBe(1);
    expect(await sys.w.store.getRow(key)).toBeUndefined();
    expect((await sys.w.store.getCancelRecord(key))?.kind).toBe('CANCELLED');
    expect((await sys.w.jobs.status('demo', job!.jobId)).state).toBe('CANCELLED');
    expect((await sys.w.jobs.cancel('demo', job!.jobId)).state).toBe('CANCELLED');

    // The inbound message comes back late (redelivery): it must not revive the job.
    expect(await ingest(sys.w.ingest, body!)).toEqual(['cancelled']);
    expect(await sys.w.store.getRow(key)).toBeUndefined();
    await round(sys.w.dispatch);
    await sleepMs(300);
    await consumer.stop();
    expect(consumer.deliveries).toEqual([]);
  });

  it('a late ingest that claims first makes the round back off; the tombstone fails its put', async () => {
    const { sys, job, body, key } = await cancelledPastGrace();

    // Ingest pauses between its claim and its put; a round runs in that gap.
    const pause = gate();
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      putCancelRecord: async (orig, ...args) => {
        const ok = await orig(...args);
        await pause.hold();
        return ok;
      },
    });
    const lateIngest = ingest({ ...sys.w.ingest, store }, body!);
    await pause.reached;
    const r1 = await round(sys.w.dispatch);
    expect(r1.tombstonesMoved).toBe(0); // the claim is young: the round leaves the tombstone
    expect((await sys.w.store.getRow(key))?.state).toBe('CANCELLED');
    pause.release();
    expect(await lateIngest).toEqual(['duplicate']); // its put met the tombstone
    expect((await sys.w.store.getRow(key))?.state).toBe('CANCELLED');

    // Once the claim is older than the grace, a round turns it into the cancel record.
    await sleepMs(settings.tombstoneGraceMs + 50);
    const r2 = await round(sys.w.dispatch);
    expect(r2.tombstonesMoved).toBe(1);
    expect(await sys.w.store.getRow(key)).toBeUndefined();
    expect((await sys.w.store.getCancelRecord(key))?.kind).toBe('CANCELLED');
    expect((await sys.w.jobs.status('demo', job.jobId)).state).toBe('CANCELLED');
  });

  it('a late ingest that arrives while the round moves the tombstone backs off', async () => {
    const { sys, body, key } = await cancelledPastGrace();

    // The round has written the cancel record and pauses before deleting the tombstone.
    const pause = gate();
    const store = inProcess<JobStore>(sys.w.store, new SimProcess(), {
      deleteTombstone: async (orig, k) => {
        await pause.hold();
        return orig(k);
      },
    });
    const moving = round({ ...sys.w.dispatch, store });
    await pause.reached;
    expect(await ingest(sys.w.ingest, body!)).toEqual(['cancelled']);
    pause.release();
    expect((await moving).tombstonesMoved).toBe(1);
    expect(await ingest(sys.w.ingest, body!)).toEqual(['cancelled']);
    expect(await sys.w.store.getRow(key)).toBeUndefined();
  });
});
