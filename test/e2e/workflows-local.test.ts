import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DyneinClient,
  type DeliveredJob,
  Worker,
  type WorkflowJobRequest,
  WorkflowNotFoundError,
  type WorkflowRequest,
} from '../../client/index.js';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';

/**
 * Workflows end to end on the local stack (`npm start`'s processes), through the SDK and a Worker
 * that reports outcomes (the tenant keeps no history): a DAG runs in order with its parents'
 * results in each child's delivery, never a child before its parents' success; GET and DELETE of a
 * workflow; and a fan-in whose reports are cut by a SIGKILL of the compute process (the API and
 * the Lambdas) mid-reports still delivers its child exactly once, after the last parent's report.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let client: DyneinClient;

beforeAll(async () => {
  // The shortest lease the lookahead allows (twice it): the rows a SIGKILLed compute held (acquired,
  // or sent without their delivered marker yet) are sent again once it expires, 4 s after the kill
  // rather than 30 s (the default), which was most of the fan-in test's time. A parent sent just
  // before the kill may so be delivered, and reported, twice (at least once after a crash).
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_LOOKAHEAD_MS: '2000', DYNEIN_LEASE_MS: '4000' });
  local = await stack.waitForLocalJson();
  client = new DyneinClient({
    endpoint: local.endpoint,
    region: local.region,
    credentials: { accessKeyId: local.tenants.alpha!.accessKeyId, secretAccessKey: local.tenants.alpha!.secretAccessKey },
    retry: { maxAttempts: 8, maxElapsedMs: 60_000 },
  });
}, 60_000);
afterAll(async () => stack?.stop());

interface Seen {
  readonly job: DeliveredJob;
  readonly at: number;
}

/** A Worker over alpha's queue that records each delivery and returns `{ from: <key> }`-like results. */
function startWorker(result: (job: DeliveredJob) => unknown = (job) => ({ job: job.jobId.slice(-6) })) {
  const seen: Seen[] = [];
  const sqs = localSqs(local);
  const worker = new Worker({
    queueUrl: local.tenants.alpha!.queueUrl,
    sqs,
    handleSignals: false,
    waitTimeSeconds: 1,
    concurrency: 16,
    client,
    handler: (job) => {
      seen.push({ job, at: Date.now() });
      return result(job);
    },
  });
  const running = worker.run();
  return {
    seen,
    stop: async () => {
      await worker.stop();
      await running;
      sqs.destroy();
    },
  };
}

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('workflows on the local stack', () => {
  it('runs a DAG in order, each child with its parents’ results; GET shows it SUCCEEDED; DELETE then counts every job queued', async () => {
    const worker = startWorker((job) => ({ ran: (job.payload as { step: string }).step }));
    try {
      const submitted = await client.submitWorkflow('alpha', {
        idempotencyKey: `dag-${Date.now()}`,
        jobs: [
          { key: 'extract', payload: { step: 'extract' }, delaySeconds: 1 },
          { key: 'transform', payload: { step: 'transform' }, after: ['extract'] },
          { key: 'load-eu', payload: { step: 'load-eu' }, after: ['transform'], delaySeconds: 1 },
          { key: 'load-us', payload: { step: 'load-us' }, after: ['transform'] },
          { key: 'report', payloadJson: '{"step":"report","n":1.0}', after: ['load-eu', 'load-us'], onParentFailure: 'run' },
        ],
      });
      expect(submitted.created).toBe(true);
      const ids = submitted.jobs;
      expect(Object.keys(ids)).toEqual(['extract', 'transform', 'load-eu', 'load-us', 'report']);
      await waitFor('the report job', () => worker.seen.some((s) => s.job.jobId === ids.report), 30_000);
      const at = (key: string) => worker.seen.find((s) => s.job.jobId === ids[key])!;
      for (const [child, parent] of [
        ['transform', 'extract'],
        ['load-eu', 'transform'],
        ['load-us', 'transform'],
        ['report', 'load-eu'],
        ['report', 'load-us'],
      ] as const)
        expect(at(child).at, `${child} after ${parent}`).toBeGreaterThan(at(parent).at);
      // load-eu's delay counts from its parent's end: at least 1 s after transform ran.
      expect(at('load-eu').at - at('transform').at).toBeGreaterThanOrEqual(1_000);
      const report = at('report').job;
      expect(report.payloadText).toBe('{"step":"report","n":1.0}');
      expect(report.workflow).toBe(submitted.workflowId);
      expect(report.parents).toEqual([
        { key: 'load-eu', jobId: ids['load-eu'], outcome: 'SUCCEEDED', result: { ran: 'load-eu' } },
        { key: 'load-us', jobId: ids['load-us'], outcome: 'SUCCEEDED', result: { ran: 'load-us' } },
      ]);
      expect(worker.seen.filter((s) => Object.values(ids).includes(s.job.jobId))).toHaveLength(5); // once each

      await waitFor(
        'the workflow to succeed',
        async () => (await client.getWorkflow('alpha', submitted.workflowId)).state === 'SUCCEEDED',
        15_000,
      );
      expect((await client.get('alpha', ids.extract!)).result).toEqual({ ran: 'extract' });
      // The listing of its jobs, two a page: in its order, each as GET of it answers.
      const listed = [];
      for await (const job of client.jobs('alpha', { workflow: submitted.workflowId, limit: 2 })) listed.push(job);
      expect(listed.map((j) => [j.jobId, j.state])).toEqual(Object.values(ids).map((id) => [id, 'SUCCEEDED']));
      expect(await client.cancelWorkflow('alpha', submitted.workflowId)).toEqual({
        workflowId: submitted.workflowId,
        state: 'CANCELLED',
        cancelled: 0,
        alreadyQueued: 5,
      });
      // The same request again: the same workflow, nothing new.
      const again = await client.submitWorkflow('alpha', { idempotencyKey: 'x', jobs: [{ key: 'a', payload: 1, delaySeconds: 3600 }] });
      const replay = await client.submitWorkflow('alpha', { idempotencyKey: 'x', jobs: [{ key: 'a', payload: 1, delaySeconds: 3600 }] });
      expect(replay).toEqual({ ...again, created: false });
    } finally {
      await worker.stop();
    }
  }, 60_000);

  it('answers 404 WorkflowNotFound for a forged id, 403 for another tenant’s path, 400 naming the field and storing nothing', async () => {
    await expect(client.getWorkflow('alpha', 'wf1.alpha.0.forged')).rejects.toBeInstanceOf(WorkflowNotFoundError);
    const { workflowId } = await client.submitWorkflow('alpha', { jobs: [{ key: 'a', payload: 1, delaySeconds: 3600 }] });
    const beta = local.tenants.beta!;
    const other = await signedFetch(local.endpoint, beta, 'GET', `/v1/tenants/beta/workflows/${workflowId}`, undefined, {
      region: local.region,
    });
    expect(other.status).toBe(404);
    expect(other.json.error.code).toBe('WorkflowNotFound');
    const cycle = await signedFetch(
      local.endpoint,
      local.tenants.alpha!,
      'POST',
      '/v1/tenants/alpha/workflows',
      JSON.stringify({
        jobs: [
          { key: 'a', payload: 1, after: ['b'] },
          { key: 'b', payload: 1, after: ['a'] },
        ],
      }),
      { region: local.region },
    );
    expect(cycle.status).toBe(400);
    expect(cycle.json.error.code).toBe('ValidationError');
    expect(cycle.json.error.message).toMatch(/cycle/);
    // The SDK refuses a field the API takes none of before it sends anything (it would drop it).
    // As a caller without types would send them (JSON read from elsewhere).
    const typo = JSON.parse('{"key": "b", "payload": 1, "afterr": ["a"]}') as WorkflowJobRequest;
    await expect(client.submitWorkflow('alpha', { jobs: [{ key: 'a', payload: 1, delaySeconds: 1 }, typo] })).rejects.toThrow(
      /jobs\[1\] has an unknown field "afterr"/,
    );
    await expect(client.submitWorkflow('alpha', JSON.parse('{"jobs": [], "idempotencyKye": "x"}') as WorkflowRequest)).rejects.toThrow(
      /the workflow has an unknown field "idempotencyKye"/,
    );
  }, 30_000);

  it('a fan-in of 40 parents reported while compute is SIGKILLed: its child once, after the last report', async () => {
    const parents = Array.from({ length: 40 }, (_, i) => ({ key: `p${i}`, payload: { i }, delaySeconds: 2 + (i % 8) * 0.25 }));
    const { jobs: ids } = await client.submitWorkflow<unknown>('alpha', {
      jobs: [...parents, { key: 'sink', payload: { sink: true }, after: parents.map((p) => p.key) }],
    });
    const worker = startWorker();
    try {
      for (const wait of [2_600]) {
        await new Promise((r) => setTimeout(r, wait));
        const victim = stack.localJson()!.pids.compute;
        process.kill(victim, 'SIGKILL');
        await stack.waitForLocalJson((l) => l.pids.compute !== victim, 30_000);
      }
      await waitFor('the sink job', () => worker.seen.some((s) => s.job.jobId === ids.sink), 90_000);
      await new Promise((r) => setTimeout(r, 2_000));
      const sink = worker.seen.filter((s) => s.job.jobId === ids.sink);
      expect(sink).toHaveLength(1);
      const lastParent = Math.max(...parents.map((p) => worker.seen.find((s) => s.job.jobId === ids[p.key])!.at));
      expect(sink[0]!.at).toBeGreaterThan(lastParent);
      expect(sink[0]!.job.parents?.map((p) => p.outcome)).toEqual(parents.map(() => 'SUCCEEDED'));
    } finally {
      await worker.stop();
    }
  }, 150_000);
});
