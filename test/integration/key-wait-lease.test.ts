import { ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelHandler, statusHandler } from '../../lambdas/runtime/handlers.js';
import type { Emulators } from '../support/emulators.js';
import { httpEvent, startRunningSystem, submitJobs, type RunningSystem, type TestSystem } from '../support/system.js';

/**
 * Keyed jobs that wait for their key's slot longer than the row lease (docs/flow-control.md,
 * Waiting): their leases are not renewed while they wait, yet each is delivered once when a slot
 * frees, and one cancelled while it waits (its lease run out) is never delivered.
 */
let em: Emulators;
let sys: TestSystem;
let running: RunningSystem;
beforeAll(async () => {
  // A 2 s row lease (the lookahead 1 s): the jobs below wait through several.
  running = await startRunningSystem({ tenants: ['gamma'], settings: { leaseMs: 2_000, lookaheadMs: 1_000 } });
  ({ em, sys } = running);
});
afterAll(async () => running?.stop());

const get = async (jobId: string) =>
  JSON.parse(
    (await statusHandler(sys.w)(httpEvent('GET', `/v1/tenants/gamma/jobs/${jobId}`, { pathParameters: { tenant: 'gamma', jobId } }))).body,
  ) as { state: string; runAt: string };

describe('keyed jobs waiting past their row lease', () => {
  it('are each delivered once when the slot frees, and a cancel while they wait still holds', async () => {
    const slots = sys.w.dispatch.keySlots!;
    const now = Date.now();
    await slots.setLimit('gamma', 'customer-1', 1, now);
    expect(await slots.take('gamma', 'customer-1', 'running', now + 3_600_000, 1, now)).toBe(true);
    const jobs = await submitJobs(
      sys,
      'gamma',
      ['first', 'cancelled', 'second'].map((payload, i) => ({ payload, delaySeconds: 1 + i, concurrencyKey: 'customer-1' })),
    );
    const [first, cancelled, second] = jobs.map((j) => j.jobId) as [string, string, string];
    // All three due and held while they wait, through more than two row leases.
    for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 200))) {
      const states = await Promise.all(jobs.map((j) => get(j.jobId)));
      if (states.every((s) => s.state === 'ACQUIRED' && Date.now() > Date.parse(s.runAt) + 500)) break;
    }
    await new Promise((r) => setTimeout(r, 5_000));
    expect((await get(cancelled)).state).toBe('ACQUIRED');
    const del = await cancelHandler(sys.w)(
      httpEvent('DELETE', `/v1/tenants/gamma/jobs/${cancelled}`, { pathParameters: { tenant: 'gamma', jobId: cancelled } }),
    );
    expect([del.statusCode, JSON.parse(del.body).state]).toEqual([200, 'CANCELLED']);

    const received: Message[] = [];
    const receive = async (ms: number) => {
      for (const until = Date.now() + ms; Date.now() < until;) {
        const res = await em.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: sys.tenants.gamma!.url, WaitTimeSeconds: 1, MaxNumberOfMessages: 10 }),
        );
        received.push(...(res.Messages ?? []));
      }
    };
    await slots.release('gamma', 'customer-1', 'running');
    for (const until = Date.now() + 15_000; Date.now() < until && received.length === 0;) await receive(1_000);
    expect(received.map((m) => JSON.parse(m.Body!).jobId)).toEqual([first]);
    await slots.release('gamma', 'customer-1', first);
    for (const until = Date.now() + 15_000; Date.now() < until && received.length < 2;) await receive(1_000);
    await receive(3_000); // nothing more: not the cancelled job, no duplicate
    expect(received.map((m) => JSON.parse(m.Body!).jobId)).toEqual([first, second]);
    expect((await get(cancelled)).state).toBe('CANCELLED');
  });
});
