import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { signedFetch, startLocalStack, localSqs } from '../support/localStack.js';
import { consume } from '../support/system.js';

/**
 * The inbound queue keeps what it accepted through a SIGKILL of every process of the stack, as
 * SQS would: jobs accepted (201 SCHEDULED) but not yet ingested into the table are ingested and
 * delivered after the next start on the same data directory.
 */
type Stack = Awaited<ReturnType<typeof startLocalStack>>;
const stacks: Stack[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
});

/** Gone: no such process, or a zombie waiting to be reaped. */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
}

function groupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('the inbound queue across a SIGKILL of the whole stack', () => {
  it('delivers every job that waited in the inbound queue, none early', async () => {
    // Ingest off (an event source mapping disabled): accepted jobs stay in the inbound queue.
    const first = await startLocalStack({ DYNEIN_TENANTS: 'alpha', DYNEIN_INGEST_ENABLED: 'false' });
    stacks.push(first);
    const local = await first.waitForLocalJson();
    // Due 14 s out: well past the second stack's start and its ingest of them (the journal restored
    // 3-6 s after this, on a loaded machine), so they go through the table and are sent at their time.
    const runAt = new Date(Date.now() + 14_000).toISOString();
    const jobs = Array.from({ length: 60 }, (_, i) => ({ payload: { i }, runAt }));
    const ids: string[] = [];
    for (let i = 0; i < jobs.length; i += 20) {
      const res = await signedFetch(
        local.endpoint,
        local.tenants.alpha!,
        'POST',
        '/v1/tenants/alpha/jobs/batch',
        JSON.stringify({ jobs: jobs.slice(i, i + 20) }),
      );
      expect(res.status).toBe(200);
      for (const r of res.json.results) {
        expect(r.state).toBe('SCHEDULED');
        ids.push(r.jobId);
      }
    }
    const sqs = localSqs(local);
    const inboundUrl = (await sqs.send(new GetQueueUrlCommand({ QueueName: 'dynein-inbound' }))).QueueUrl!;
    const waiting = (
      await sqs.send(new GetQueueAttributesCommand({ QueueUrl: inboundUrl, AttributeNames: ['ApproximateNumberOfMessages'] }))
    ).Attributes?.ApproximateNumberOfMessages;
    expect(Number(waiting)).toBeGreaterThanOrEqual(3); // one or more inbound messages per batch request
    sqs.destroy();
    const journal = join(first.dataDir, 'inbound-queue.journal');
    expect(existsSync(journal) && statSync(journal).size > 0).toBe(true);

    // A crash: every process of the stack, SIGKILLed at once.
    const members = groupMembers(first.proc.pid!);
    process.kill(-first.proc.pid!, 'SIGKILL');
    await first.exited;
    await vi.waitFor(() => expect(members.filter((p) => !gone(p))).toEqual([]), { timeout: 10_000, interval: 50 });

    const second = await startLocalStack({ DYNEIN_TENANTS: 'alpha', DYNEIN_LOOKAHEAD_MS: '1000' }, { dataDir: first.dataDir });
    stacks.push(second);
    const after = await second.waitForLocalJson((l) => l.pids.services !== local.pids.services, 60_000);
    await vi.waitFor(() => expect(second.output()).toMatch(/restored \d+ inbound message\(s\) from the journal/), {
      timeout: 10_000,
      interval: 50,
    });
    const sqs2 = new SQSClient({
      endpoint: after.sqsEndpoint,
      region: after.region,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const consumer = consume(sqs2, after.tenants.alpha!.queueUrl);
    try {
      await consumer.waitFor((d) => ids.every((id) => d.some((x) => x.jobId === id)), 60_000);
    } finally {
      await consumer.stop();
      sqs2.destroy();
    }
    const received = new Set(consumer.deliveries.map((d) => d.jobId));
    expect(ids.filter((id) => !received.has(id))).toEqual([]);
    expect(consumer.deliveries.filter((d) => d.firstReceiveAt < Date.parse(d.runAt))).toEqual([]);
  }, 120_000);
});
