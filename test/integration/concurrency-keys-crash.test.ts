import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchDeps } from '../../core/dispatch/deps.js';
import type { KeySlots } from '../../core/model/ports.js';
import { outcomesHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { createSystem, httpEvent, runAllGroups, submitJobs, type TestSystem } from '../support/system.js';

/**
 * Concurrency by key across a dispatcher's death (docs/flow-control.md, "Crashes"): a dispatcher
 * killed right after it took a key's slot, before the send. The job keeps its slot (held by its
 * id); a fresh dispatcher re-acquires the row once its lease ends and sends it in that slot. Every
 * job arrives, none early, and never more of a key's jobs hold slots than its limit.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 8, groupCount: 2 };
const LIMIT = 2;
const KEYS = ['a', 'b'];

async function report(sys: TestSystem, jobId: string, key: string) {
  const res = await outcomesHandler(sys.w)(
    httpEvent('POST', '/v1/tenants/demo/jobs/outcomes', {
      pathParameters: { tenant: 'demo' },
      body: JSON.stringify({
        outcomes: [{ jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: new Date().toISOString(), durationMs: 1, concurrencyKey: key }],
      }),
    }),
  );
  expect(JSON.parse(res.body).results[0].state).toBe('SUCCEEDED');
}

describe('concurrency by key and crashes', () => {
  it('a dispatcher killed between taking a slot and the send loses nothing and never exceeds the limit', async () => {
    const sys = await createSystem(em, { settings });
    const ingest = sys.startIngest();
    const runAt = new Date(Date.now() + 2_500).toISOString();
    const jobs = Array.from({ length: 12 }, (_, i) => ({ payload: { i }, runAt, concurrencyKey: KEYS[i % 2], concurrencyLimit: LIMIT }));
    const replies = await submitJobs(sys, 'demo', jobs);

    // Watch the keys' items: never more holders than the limit, whoever writes them.
    const slots = sys.w.dispatch.keySlots!;
    let most = 0;
    const watched: KeySlots = new Proxy(slots, {
      get(obj, prop, receiver) {
        const value = Reflect.get(obj, prop, receiver);
        if (prop !== 'take') return typeof value === 'function' ? value.bind(obj) : value;
        return async (...args: Parameters<KeySlots['take']>) => {
          const got = await slots.take(...args);
          if (got !== true) most = Math.max(most, got.holders.size);
          return got;
        };
      },
    });

    const proc = new SimProcess();
    const crashed: DispatchDeps = {
      ...sys.w.dispatch,
      keySlots: inProcess(watched, proc, {
        take: async (orig, ...args) => {
          const got = await orig(...args);
          if (got === true) proc.kill(); // dies holding the slot, before any send
          return got;
        },
      }),
    };
    void runAllGroups(crashed, { owner: 'crashing', signal: proc.signal });
    for (const until = Date.now() + 15_000; !proc.dead && Date.now() < until;) await sleepMs(20);
    expect(proc.dead).toBe(true);

    // A fresh instance recovers the rows once their lease ends; a worker runs each for 100 ms and reports.
    const fresh = await sys.another();
    const recovery = runAllGroups({ ...fresh.dispatch, keySlots: watched }, { owner: 'fresh' });
    const got = new Map<string, number>();
    const running = new Map<string, number>();
    let overLimit = 0;
    const url = sys.tenants.demo!.url;
    const work: Promise<void>[] = [];
    // Up to a minute: six jobs a key go out two at a time, each slot freed by a report. (CI runs
    // had one key's six jobs still waiting at 60 s: its re-acquired holder row waited behind the
    // key's other rows for its own slot, until the 900 s key lease. Fixed in KeyGate, 2026-11-28:
    // test/unit/key-gate.test.ts has the case deterministically.)
    for (const until = Date.now() + 60_000; got.size < replies.length && Date.now() < until;) {
      const res = await em.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }),
      );
      for (const m of res.Messages ?? []) {
        const { jobId, runAt: due } = JSON.parse(m.Body!) as { jobId: string; runAt: string };
        const key = m.MessageAttributes!.concurrencyKey!.StringValue!;
        expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(due));
        got.set(jobId, (got.get(jobId) ?? 0) + 1);
        running.set(key, (running.get(key) ?? 0) + 1);
        if (running.get(key)! > LIMIT) overLimit++;
        work.push(
          (async () => {
            await sleepMs(100);
            running.set(key, running.get(key)! - 1);
            await em.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
            await report(sys, jobId, key);
          })(),
        );
      }
    }
    await Promise.all(work);
    await recovery.stop();
    await ingest.stop();
    expect(replies.filter((r) => !got.has(r.jobId)).map((r) => r.jobId)).toEqual([]);
    expect(overLimit).toBe(0);
    expect(most).toBeLessThanOrEqual(LIMIT);
    // The killed dispatcher sent nothing: each job went out once.
    expect([...got.values()].filter((n) => n > 1)).toEqual([]);
  });
});
