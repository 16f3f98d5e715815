import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import { SqsSender } from '../../adapters/sqsSender.js';
import { JobIdCodec, type QueueSender } from '../../core/model/index.js';
import { ControlsCache, DEFAULT_CONTROLS } from '../../core/tenants/index.js';
import {
  handOff,
  HandOffError,
  type HandOffDeps,
  type ReadyJob,
  STALE_HANDOFF_MS,
  type WorkflowJobSpec,
} from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, runAllGroups, type TestSystem, waitForEmptyQueue } from '../support/system.js';

/**
 * Handing workflow jobs over once their due time is known (issue #25), on the emulators through the
 * real SDK: a job due within the lookahead goes straight to the tenant queue (QUEUING, then
 * QUEUING), one due later through the inbound queue to the table (RELEASING); each is delivered
 * once, never early, with its workflow fields; a cancelled record sends nothing; a repeated
 * hand-over (a retry after a crash) sends a table-path job once more and ingest stores it once.
 */
let em: Emulators;
let sys: TestSystem;
let waiting: DynamoWaitingChildren;
let codec: JobIdCodec;
let deps: HandOffDeps;

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { settings: { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 } });
  waiting = new DynamoWaitingChildren(em.dynamo, sys.tableName);
  codec = new JobIdCodec(sys.idKey);
  deps = {
    waiting,
    sender: new SqsSender(em.sqs),
    inboundQueueUrl: sys.inboundUrl,
    settings: { lookaheadMs: 2_000 },
    clock: { now: () => Date.now() },
  };
});
afterAll(async () => em?.stop());

const workflow = () => codec.parseWorkflowId(codec.workflowId('demo', Date.now()))!;

/** A workflow job's spec and its waiting record (no parents: due once handed over). */
async function job(key: string, payload: string, extra: Partial<WorkflowJobSpec> = {}): Promise<WorkflowJobSpec> {
  const wf = extra.workflowId ? codec.parseWorkflowId(extra.workflowId)! : workflow();
  const jobId = codec.workflowJobId(wf, key, 4);
  const id = codec.parse(jobId);
  const spec: WorkflowJobSpec = {
    key: { shard: id.shard, dueMs: id.dueMs, jobId },
    tenant: 'demo',
    workflowId: wf.workflowId,
    jobKey: key,
    payload,
    priority: 5,
    cancellable: true,
    parents: [],
    children: [],
    ...extra,
  };
  await waiting.create([{ key: spec.key, tenant: 'demo', parents: 0, timing: { kind: 'now' }, onParentFailure: 'cancel' }]);
  return spec;
}

describe('handing workflow jobs over', () => {
  it('sends a job due soon straight to its queue and one due later through the table, each once, never early, with its fields', async () => {
    const tenant = await sys.w.tenants.require('demo');
    const consumer = consume(em.sqs, tenant.queueUrl);
    const ingest = sys.startIngest();
    const soon = await job('soon', '{"a" : 1}');
    const later = await job('later', '{"b" : 2}', { workflowId: soon.workflowId });
    const gone = await job('gone', '{"c" : 3}', { workflowId: soon.workflowId });
    expect(await waiting.transition(gone.key, 'WAITING', 'CANCELLED')).toBe(true);
    const now = Date.now();
    const parents = '[{"key":"soon","jobId":"x","outcome":"SUCCEEDED"}]';
    const ready: ReadyJob[] = [
      { spec: soon, dueMs: now + 1_200 },
      { spec: later, dueMs: now + 5_000, parents },
      { spec: gone, dueMs: now + 1_000 },
    ];
    expect(await handOff(deps, tenant, ready)).toEqual([gone.key.jobId]);
    expect(await waiting.get(soon.key)).toMatchObject({ state: 'QUEUING', dueMs: now + 1_200 });
    expect(await waiting.get(later.key)).toMatchObject({ state: 'RELEASING', dueMs: now + 5_000 });
    expect(await waiting.get(gone.key)).toMatchObject({ state: 'CANCELLED' });
    // A retried hand-over (the caller crashed before it answered): the table-path job goes again.
    expect(await handOff(deps, tenant, ready.slice(1))).toEqual([gone.key.jobId]);
    await waitForEmptyQueue(em.sqs, sys.inboundUrl);
    const dispatch = runAllGroups(sys.w.dispatch);
    await consumer.waitFor((d) => d.length >= 2, 15_000);
    await new Promise((r) => setTimeout(r, 1_500)); // a duplicate would arrive by now
    await dispatch.stop();
    await ingest.stop();
    await consumer.stop();
    expect(consumer.deliveries.map((d) => d.jobId).sort()).toEqual([soon.key.jobId, later.key.jobId].sort());
    const byId = new Map(consumer.deliveries.map((d) => [d.jobId, d]));
    const s = byId.get(soon.key.jobId)!;
    const l = byId.get(later.key.jobId)!;
    expect(s.firstReceiveAt).toBeGreaterThanOrEqual(now + 1_200 - 1_000); // SQS delays in whole seconds, rounded up from the send
    expect(s.receivedAt).toBeGreaterThanOrEqual(now + 1_200);
    expect(l.firstReceiveAt).toBeGreaterThanOrEqual(now + 5_000);
    expect(s.body).toBe(
      `{"jobId":"${soon.key.jobId}","tenant":"demo","runAt":"${new Date(now + 1_200).toISOString()}","workflow":"${soon.workflowId}","payload":{"a" : 1}}`,
    );
    expect(l.body).toBe(
      `{"jobId":"${later.key.jobId}","tenant":"demo","runAt":"${new Date(now + 5_000).toISOString()}","workflow":"${soon.workflowId}","parents":${parents},"payload":{"b" : 2}}`,
    );
    expect(l.attributes.workflow).toBe(soon.workflowId);
  }, 60_000);

  it('holds a paused tenant: its job due soon goes through the table, not straight to its queue', async () => {
    const tenant = await sys.w.tenants.require('demo');
    const spec = await job('paused', 'null');
    const controls = new ControlsCache({ getControls: async () => ({ ...DEFAULT_CONTROLS, paused: true }) });
    const sent: string[] = [];
    const sender: QueueSender = {
      sendBatch: async (url, batch) => {
        sent.push(...batch.map(() => url));
        return [];
      },
    };
    await handOff({ ...deps, controls, sender }, tenant, [{ spec, dueMs: Date.now() + 500 }]);
    expect(sent).toEqual([sys.inboundUrl]);
    expect(await waiting.get(spec.key)).toMatchObject({ state: 'RELEASING' });
  });

  it('sends a job two hand-overs at once found ready once; a hand-over left QUEUING by a dead process is sent again once stale', async () => {
    const tenant = await sys.w.tenants.require('demo');
    const sent: string[] = [];
    const sender: QueueSender = {
      sendBatch: async (url, batch) => {
        await new Promise((r) => setTimeout(r, 100)); // a send takes a while: the other hand-over meets QUEUING
        sent.push(...batch.map((m) => JSON.parse(m.body).jobId as string));
        return deps.sender.sendBatch(url, batch);
      },
    };
    const both = await job('both', 'null');
    const ready = [{ spec: both, dueMs: Date.now() + 60_000 }];
    const direct = { ...deps, sender, settings: { lookaheadMs: 120_000 } };
    // The first moves the record and sends; the others meet QUEUING and fail (their callers retry,
    // and find the first one's note that its sends completed).
    const all = await Promise.allSettled([handOff(direct, tenant, ready), handOff(direct, tenant, ready), handOff(direct, tenant, ready)]);
    expect(all.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected', 'rejected']);
    for (const r of all) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(HandOffError);
    expect(sent).toEqual([both.key.jobId]);
    expect(await waiting.get(both.key)).toMatchObject({ state: 'QUEUING' });

    // A process that moved its record and died before its send: a hand-over within the minute
    // fails (its caller retries); one after it sends the job.
    const orphan = await job('orphan', 'null');
    expect(await waiting.transition(orphan.key, 'WAITING', 'QUEUING', Date.now() + 60_000, Date.now())).toBe(true);
    sent.length = 0;
    await expect(handOff(direct, tenant, [{ spec: orphan, dueMs: Date.now() + 60_000 }])).rejects.toThrow(HandOffError);
    expect(sent).toEqual([]);
    const later = { ...direct, clock: { now: () => Date.now() + STALE_HANDOFF_MS + 1_000 } };
    await handOff(later, tenant, [{ spec: orphan, dueMs: Date.now() + 60_000 }]);
    expect(sent).toEqual([orphan.key.jobId]);
    expect(await waiting.get(orphan.key)).toMatchObject({ state: 'QUEUING' });
  });

  it('fails when SQS refuses a job, leaving its record moved for a retry to send', async () => {
    const tenant = await sys.w.tenants.require('demo');
    const spec = await job('refused', 'null');
    const sender: QueueSender = {
      sendBatch: async (_url, batch) => batch.map((m) => ({ id: m.id, retryable: false, message: 'refused' })),
    };
    await expect(handOff({ ...deps, sender }, tenant, [{ spec, dueMs: Date.now() + 60_000 }])).rejects.toThrow(HandOffError);
    expect(await waiting.get(spec.key)).toMatchObject({ state: 'RELEASING' });
  });
});
