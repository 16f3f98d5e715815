import { afterAll, describe, expect, it, vi } from 'vitest';
import { signedFetch, startLocalStack, localSqs } from '../support/localStack.js';
import { consume } from '../support/system.js';

/**
 * The compute process (API, event source, tick: the Lambdas) is SIGKILLed twice while a burst is
 * being dispatched; the local stack restarts it, as Lambda starts a new instance, and every job
 * still arrives, none early.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
afterAll(async () => stack?.stop());

describe('compute killed mid-dispatch', () => {
  it('loses nothing when compute is SIGKILLed twice during a burst', async () => {
    stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha', DYNEIN_LOOKAHEAD_MS: '1000', DYNEIN_LEASE_MS: '3000' });
    const local = await stack.waitForLocalJson();
    const sqs = localSqs(local);
    const consumer = consume(sqs, local.tenants.alpha!.queueUrl);

    // A burst of 300 jobs due over 4 s, starting 3 s from now, through the table.
    const start = Date.now();
    const jobs = Array.from({ length: 300 }, (_, i) => ({
      payload: { i },
      runAt: new Date(start + 3_000 + Math.floor((i / 300) * 4_000)).toISOString(),
    }));
    const ids: string[] = [];
    for (let i = 0; i < jobs.length; i += 100) {
      const res = await signedFetch(
        local.endpoint,
        local.tenants.alpha!,
        'POST',
        '/v1/tenants/alpha/jobs/batch',
        JSON.stringify({ jobs: jobs.slice(i, i + 100) }),
      );
      expect(res.status).toBe(200);
      for (const r of res.json.results) {
        expect(r.state).toBe('SCHEDULED');
        ids.push(r.jobId);
      }
    }

    // Dispatch, not ingest, is what the kills interrupt: an inbound message a killed compute had
    // received stays hidden for the inbound visibility timeout (181 s, as on AWS), late, not lost.
    await vi.waitFor(
      async () => {
        for (const id of ids) {
          const res = await signedFetch(local.endpoint, local.tenants.alpha!, 'GET', `/v1/tenants/alpha/jobs/${id}`);
          expect(res.json.state, id).not.toBe('UNKNOWN');
        }
      },
      { timeout: 30_000, interval: 200 },
    );

    const pids: number[] = [local.pids.compute];
    for (const at of [start + 3_800, start + 5_800]) {
      await new Promise((r) => setTimeout(r, at - Date.now()));
      const victim = stack.localJson()!.pids.compute;
      process.kill(victim, 'SIGKILL');
      const next = await stack.waitForLocalJson((l) => l.pids.compute !== victim, 30_000);
      pids.push(next.pids.compute);
      // Started with DYNEIN_PORT=0, the restarted compute serves on the port the first one took.
      expect(next.endpoint).toBe(local.endpoint);
      expect((await signedFetch(next.endpoint, local.tenants.alpha!, 'GET', `/v1/tenants/alpha/jobs/${ids[0]}`)).status).toBe(200);
    }
    expect(new Set(pids).size).toBe(3);
    await vi.waitFor(() => expect(stack!.output()).toMatch(/compute died \(SIGKILL\); starting a new one/), {
      timeout: 5_000,
      interval: 50,
    });

    await consumer.waitFor((d) => ids.every((id) => d.some((x) => x.jobId === id)), 60_000);
    await new Promise((r) => setTimeout(r, 1_000));
    await consumer.stop();
    sqs.destroy();

    const received = new Set(consumer.deliveries.map((d) => d.jobId));
    expect(ids.filter((id) => !received.has(id))).toEqual([]);
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
    console.log(`compute killed twice: ${received.size} jobs delivered, ${consumer.deliveries.length - received.size} duplicates`);
  }, 120_000);
});
