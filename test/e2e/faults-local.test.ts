import { afterAll, describe, expect, it } from 'vitest';
import { QUEUE_SETTINGS } from '../../core/model/index.js';
import { startLocalStack, localSqs } from '../support/localStack.js';
import { signedRetrying, submitKeyed, type KeyedJob } from '../support/retrying.js';
import { consume } from '../support/system.js';

/** When an inbound message ingest gave up on comes back to it. */
const REDELIVERY_MS = QUEUE_SETTINGS.inbound.visibilityTimeoutSeconds * 1000;

/**
 * The local stack with DYNEIN_FAULTS: 10 % of every DynamoDB and SQS call of the stack fails as AWS's
 * do (throttles, 500s, timeouts and resets, some after the request was applied). A client that
 * retries with idempotency keys gets every job accepted; every accepted job is delivered at least
 * once, none early, and none whose cancel answered CANCELLED. Seeded: which attempts of each
 * service fail is the same on every run (seed 1 fails compute's second SQS and DynamoDB attempts,
 * test/unit/faults.test.ts), so the check that faults struck both services cannot miss by chance.
 */
type Stack = Awaited<ReturnType<typeof startLocalStack>>;
const running: Stack[] = [];
afterAll(async () => {
  for (const s of running) await s.stop();
});

describe('the local stack under AWS faults', () => {
  it(
    'loses nothing, delivers nothing early, and never delivers a cancelled job',
    async () => {
      const stack = await startLocalStack({
        DYNEIN_TENANTS: 'alpha',
        DYNEIN_LOOKAHEAD_MS: '1000',
        DYNEIN_LEASE_MS: '3000',
        DYNEIN_FAULTS: 'dynamodb=0.1,sqs=0.1,timeoutMs=300,seed=1',
      });
      running.push(stack);
      const local = await stack.waitForLocalJson(undefined, 60_000);
      const sqs = localSqs(local);
      const consumer = consume(sqs, local.tenants.alpha!.queueUrl);
      try {
        const accepted = new Map<string, number>();
        let batches = 0;
        const submit = async (n: number, dueIn: (i: number) => number) => {
          const at = Date.now();
          const batch = batches++; // batches sent at once may share a millisecond
          const jobs: KeyedJob[] = Array.from({ length: n }, (_, i) => ({
            key: `faults-${at}-${batch}-${i}`,
            payload: { i },
            runAtMs: at + dueIn(i),
          }));
          const out = await submitKeyed(local, 'alpha', jobs);
          expect(out.refused).toEqual([]);
          for (const a of out.accepted) accepted.set(a.jobId, jobs[a.index]!.runAtMs);
          return out.accepted.map((a) => a.jobId);
        };
        // 30 jobs due in 16 s, cancelled at once (all together, while the rest are submitted): those
        // answering CANCELLED must never arrive. Submitted first, so that their cancels have most of
        // the 16 s before the lookahead takes them, however slow the submits after them are.
        const started = Date.now();
        const toCancel = await submit(30, () => 16_000);
        const cancelling = Promise.all(
          toCancel.map(async (jobId) => {
            const r = await signedRetrying(local.endpoint, local.tenants.alpha!, 'DELETE', `/v1/tenants/alpha/jobs/${jobId}`);
            return { jobId, answer: [r.status, r.json.state], at: Date.now() - started };
          }),
        );
        cancelling.catch(() => {}); // judged below, once the submits are done
        // 300 jobs in batches of 50, each made as it is sent: one in ten due within the lookahead
        // (sent straight to the queue), the rest through the table, due 4–9 s after the batch is sent.
        // (An inbound message of 50 jobs fails its ingest half as often as one of 100: two failures
        // in a row, which wait the inbound queue's 181 s visibility timeout, are rarer.)
        await Promise.all(Array.from({ length: 6 }, () => submit(50, (i) => (i % 10 === 0 ? 300 : 4_000 + (i % 50) * 100))));
        const submitted = Date.now() - started;
        expect(accepted.size).toBe(330);
        const cancelled = new Set<string>();
        const answers = await cancelling;
        for (const { jobId, answer } of answers) {
          expect(answer).toEqual([200, 'CANCELLED']);
          cancelled.add(jobId);
        }

        const due = [...accepted.keys()].filter((id) => !cancelled.has(id));
        // An inbound message whose ingest failed on every retry comes back 5 s later; one that
        // fails twice in a row after the inbound queue's visibility timeout (181 s, as on AWS). A CI
        // run (three test files at once, 2026-11-28) had three messages still waiting 211 s in: two
        // such waits are allowed (the wait ends as soon as every job is in).
        await consumer.waitFor((d) => due.every((id) => d.some((x) => x.jobId === id)), 2 * REDELIVERY_MS + 30_000);
        // Past the last runAt by more than a dispatch round, for a cancelled job that would arrive late.
        await new Promise((r) => setTimeout(r, Math.max(0, Math.max(...accepted.values()) + 5_000 - Date.now())));
        const metrics = (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as { faults?: Record<string, number> };
        await consumer.stop();

        const received = consumer.deliveries.filter((d) => accepted.has(d.jobId));
        expect(due.filter((id) => !received.some((d) => d.jobId === id))).toEqual([]);
        expect(received.filter((d) => d.firstReceiveAt < accepted.get(d.jobId)!).map((d) => d.jobId)).toEqual([]);
        expect(received.filter((d) => cancelled.has(d.jobId)).map((d) => d.jobId)).toEqual([]);
        // The faults were there: in the compute process, on both services.
        const injected = Object.entries(metrics.faults ?? {});
        expect(injected.filter(([k]) => k.startsWith('dynamodb.')).length).toBeGreaterThan(0);
        expect(injected.filter(([k]) => k.startsWith('sqs.')).length).toBeGreaterThan(0);
        console.log(
          `under faults: ${accepted.size} accepted in ${submitted} ms (cancels answered in ${Math.max(...answers.map((a) => a.at))} ms), ${cancelled.size} cancelled, ${new Set(received.map((d) => d.jobId)).size} delivered, ${received.length - new Set(received.map((d) => d.jobId)).size} duplicates; injected ${JSON.stringify(metrics.faults)}`,
        );
      } finally {
        await consumer.stop();
        sqs.destroy();
      }
    },
    2 * REDELIVERY_MS + 120_000,
  );

  it('refuses to start with a DYNEIN_FAULTS it cannot use, in one line', async () => {
    const stack = await startLocalStack({ DYNEIN_FAULTS: 'dynamodb=0.05,sqs=high' });
    running.push(stack);
    const code = await stack.exited;
    expect(code).not.toBe(0);
    const lines = stack
      .output()
      .split('\n')
      .filter((l) => l.includes('DYNEIN_FAULTS'));
    expect(lines).toEqual([
      "dynein: invalid local stack settings: DYNEIN_FAULTS: sqs must be a share from 0 to 1 (0.05 is 5 %), got 'high'",
    ]);
  }, 60_000);
});
