/**
 * Recurring schedules on the local stack: the local EventBridge Scheduler stand-in is the clock, ingest
 * materialises the occurrences, the tick delivers them. An every-minute schedule delivers each
 * occurrence once, at its time, never early, keeps going across a restart of the stack, and
 * stops after pause. (Cron expressions' times are the evaluator's tests: test/unit/schedule-*.)
 *
 * The two tests run at once, each on its own stack: the second waits a minute on the clock, and
 * the first needs none of it.
 */
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { describe, it, type TestContext } from 'vitest';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';

type Stack = Awaited<ReturnType<typeof startLocalStack>>;

interface Received {
  readonly body: string;
  readonly json: { jobId: string; runAt: string; schedule?: string; payload: unknown };
  readonly attributes: Record<string, string | undefined>;
  readonly receivedAt: number;
}

/** Receives every message of a queue (raw bodies and attributes) until stopped. */
function receiveAll(local: LocalJson, queueUrl: string): { got: Received[]; stop(): Promise<void> } {
  const sqs = localSqs(local);
  const got: Received[] = [];
  const abort = new AbortController();
  const loop = (async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }),
          { abortSignal: abort.signal },
        );
        const receivedAt = Date.now();
        for (const m of res.Messages ?? []) {
          got.push({
            body: m.Body ?? '',
            json: JSON.parse(m.Body ?? '{}'),
            attributes: Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue])),
            receivedAt,
          });
        }
        if (res.Messages?.length)
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: res.Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
            }),
          );
      } catch {
        if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
  return {
    got,
    async stop() {
      abort.abort();
      await loop;
      sqs.destroy();
    },
  };
}

async function until(pred: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

/** A stack of the test's own, stopped when the test ends (stop() is idempotent). */
async function start(test: TestContext, dataDir?: string): Promise<{ stack: Stack; local: LocalJson }> {
  const stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha' }, dataDir ? { dataDir } : {});
  test.onTestFinished(() => stack.stop());
  return { stack, local: await stack.waitForLocalJson() };
}

describe.concurrent('recurring schedules on the local stack', () => {
  it('delivers an occurrence with its schedule name, the payload byte for byte, at its runAt and never before', async (test) => {
    const { expect } = test;
    const { local } = await start(test);
    const keys = local.tenants.alpha!;
    const rx = receiveAll(local, keys.queueUrl);
    const startAt = new Date(Math.ceil((Date.now() + 6_000) / 1000) * 1000 + 250).toISOString();
    const put = await signedFetch(
      local.endpoint,
      keys,
      'PUT',
      '/v1/tenants/alpha/schedules/report',
      `{"expression": "rate(1 hour)", "startAt": "${startAt}", "payload": {"n": 1.0, "id": 9007199254740993}}`,
    );
    expect(put.status).toBe(201);
    expect(put.json.nextRuns[0]).toBe(startAt);
    await until(() => rx.got.length >= 1, 20_000);
    await rx.stop();
    expect(rx.got).toHaveLength(1);
    const [m] = rx.got as [Received];
    expect(m.json.runAt).toBe(startAt);
    expect(m.json.schedule).toBe('report');
    expect(m.body.endsWith(`"schedule":"report","payload":{"n": 1.0, "id": 9007199254740993}}`)).toBe(true);
    expect(m.attributes).toEqual({
      runAt: startAt,
      schedule: 'report',
      traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
    });
    expect(m.receivedAt).toBeGreaterThanOrEqual(Date.parse(startAt));
    // The delivered marker follows the send (written in batches, within a second or so).
    let state = '';
    for (const until = Date.now() + 10_000; state !== 'QUEUED' && Date.now() < until; await new Promise((r) => setTimeout(r, 200)))
      state = (await signedFetch(local.endpoint, keys, 'GET', `/v1/tenants/alpha/jobs/${m.json.jobId}`)).json.state;
    expect(state).toBe('QUEUED');
    expect((await signedFetch(local.endpoint, keys, 'DELETE', '/v1/tenants/alpha/schedules/report')).status).toBe(200);
    expect((await signedFetch(local.endpoint, keys, 'GET', '/v1/tenants/alpha/schedules/report')).status).toBe(404);
  });

  it('an every-minute schedule: each occurrence once, at its time, never early, across a restart; nothing after pause', async (test) => {
    const { expect } = test;
    let { stack, local } = await start(test);
    let rx = receiveAll(local, local.tenants.alpha!.queueUrl);
    // The first occurrence a few seconds ahead, on a whole second; the next one a minute later.
    const b1 = Math.ceil((Date.now() + 6_000) / 1000) * 1000;
    expect(
      (
        await signedFetch(
          local.endpoint,
          local.tenants.alpha!,
          'PUT',
          '/v1/tenants/alpha/schedules/tick',
          JSON.stringify({ expression: 'rate(1 minute)', startAt: new Date(b1).toISOString(), payload: 'tick' }),
        )
      ).status,
    ).toBe(201);
    await until(() => rx.got.length >= 1, b1 - Date.now() + 10_000);
    // The stack restarts (state in the data directory): the schedule goes on.
    await rx.stop();
    const dataDir = stack.dataDir;
    await stack.stop();
    ({ stack, local } = await start(test, dataDir));
    const first = rx.got;
    rx = receiveAll(local, local.tenants.alpha!.queueUrl);
    const b2 = b1 + 60_000;
    await until(() => rx.got.length >= 1, b2 - Date.now() + 10_000);
    const paused = await signedFetch(local.endpoint, local.tenants.alpha!, 'POST', '/v1/tenants/alpha/schedules/tick/pause');
    expect(paused.status).toBe(200);
    expect(paused.json.state).toBe('DISABLED');
    // Nothing of it is left to deliver: the occurrences after the cut-off are cancelled (the listing
    // shows them so), none is scheduled; and nothing more arrives meanwhile.
    const keys = local.tenants.alpha!;
    const scheduled = await signedFetch(local.endpoint, keys, 'GET', '/v1/tenants/alpha/jobs?schedule=tick&state=SCHEDULED');
    expect(scheduled.json.jobs).toEqual([]);
    const cancelled = await signedFetch(local.endpoint, keys, 'GET', '/v1/tenants/alpha/jobs?schedule=tick&state=CANCELLED');
    expect(cancelled.json.jobs.map((j: { runAt: string }) => j.runAt)).toContain(new Date(b2 + 60_000).toISOString());
    await until(() => false, 3_000);
    await rx.stop();
    const all = [...first, ...rx.got];
    expect(all.map((m) => m.json.runAt)).toEqual([new Date(b1).toISOString(), new Date(b2).toISOString()]);
    for (const m of all) {
      expect(m.json.schedule).toBe('tick');
      expect(m.receivedAt).toBeGreaterThanOrEqual(Date.parse(m.json.runAt));
    }
    expect(new Set(all.map((m) => m.json.jobId)).size).toBe(2);
  }, 200_000);
});
