import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, Worker } from '../../client/index.js';
import { startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { waitUntil, runCli } from './support.js';

/**
 * History end to end on the local stack (DYNEIN_HISTORY): a Worker with a client reports outcomes
 * through the local API, `GET` shows the timeline and `dynein show` prints it; a tenant without
 * history gets no timeline and its worker reports nothing. `dynein show --trace` prints the
 * spans the local stack kept of a job, its worker's reported receive and outcome among them.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;

beforeAll(async () => {
  stack = await startLocalStack({
    DYNEIN_TENANTS: 'alpha,beta',
    DYNEIN_HISTORY: 'alpha',
    DYNEIN_HISTORY_DAYS: '3',
    DYNEIN_LOOKAHEAD_MS: '2000',
  });
  local = await stack.waitForLocalJson();
}, 60_000);
afterAll(async () => stack?.stop());

const dynein = (args: string[]) => runCli(args, { DYNEIN_DATA_DIR: stack.dataDir });

const clientOf = (tenant: string) =>
  new DyneinClient({
    endpoint: local.endpoint,
    region: local.region,
    credentials: { accessKeyId: local.tenants[tenant]!.accessKeyId, secretAccessKey: local.tenants[tenant]!.secretAccessKey },
  });

async function runWorker(tenant: string, client: DyneinClient, handler: (jobId: string) => unknown, until: () => boolean): Promise<number> {
  let requests = 0;
  const counting = {
    reportOutcomes: (t: string, o: Parameters<DyneinClient['reportOutcomes']>[1]) => {
      requests++;
      return client.reportOutcomes(t, o);
    },
  };
  const sqs = localSqs(local);
  const worker = new Worker({
    queueUrl: local.tenants[tenant]!.queueUrl,
    sqs,
    handleSignals: false,
    waitTimeSeconds: 1,
    client: counting,
    handler: (job) => handler(job.jobId),
  });
  const running = worker.run();
  try {
    await waitUntil(until, 20_000, 'the jobs handled');
  } finally {
    await worker.stop();
    await running;
    sqs.destroy();
  }
  return requests;
}

describe('job history on the local stack', () => {
  it('keeps outcomes for a history tenant: GET shows the timeline, dynein show prints it', async () => {
    const alpha = clientOf('alpha');
    const direct = await alpha.schedule('alpha', { payload: { n: 1 }, delaySeconds: 0 });
    const viaTable = await alpha.schedule('alpha', { payload: { n: 2 }, delaySeconds: 3 });
    const done = new Set<string>();
    const requests = await runWorker(
      'alpha',
      alpha,
      (jobId) => {
        done.add(jobId);
        return { ok: jobId === direct.jobId };
      },
      () => done.size === 2,
    );
    expect(requests).toBeGreaterThanOrEqual(1);
    expect(requests).toBeLessThanOrEqual(2);
    const status = await alpha.get('alpha', viaTable.jobId);
    expect(status.state).toBe('SUCCEEDED');
    expect(status.timeline?.map((e) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'SUCCEEDED']);
    expect(status.timeline?.[2]).toMatchObject({ attempt: 1, result: { ok: false } });

    const shown = await dynein(['show', '--tenant', 'alpha', direct.jobId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('state  SUCCEEDED');
    expect(shown.stdout).toMatch(/SCHEDULED/);
    expect(shown.stdout).toMatch(/SUCCEEDED\s+attempt 1\s+\d+ ms\s+result: \{"ok":true\}/);
    const json = JSON.parse((await dynein(['show', '--tenant', 'alpha', direct.jobId, '--json'])).stdout);
    expect(json.timeline.at(-1).event).toBe('SUCCEEDED');

    // Listed by outcome.
    const listed = await dynein(['jobs', '--tenant', 'alpha', '--state', 'SUCCEEDED']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(direct.jobId);
    expect(listed.stdout).toContain(viaTable.jobId);
    expect(listed.stdout).toContain('SUCCEEDED');
  }, 60_000);

  it('dynein show --trace prints the waterfall of the spans the local stack kept of the job, the receive and outcome its worker reported too (docs/tracing.md)', async () => {
    const alpha = clientOf('alpha');
    const job = await alpha.schedule('alpha', { payload: { n: 'traced' }, delaySeconds: 3 });
    const done = new Set<string>();
    await runWorker(
      'alpha',
      alpha,
      (jobId) => done.add(jobId),
      () => done.has(job.jobId),
    );
    const { traceId } = await alpha.get('alpha', job.jobId);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);

    const names = ['dynein.submit', 'dynein.ingest', 'dynein.dispatch', 'dynein.receive', 'dynein.outcome'];
    const shown = await dynein(['show', '--tenant', 'alpha', '--trace', job.jobId]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`traceId  ${traceId}`);
    const lines = shown.stdout.split('\n').filter((l) => l.includes('|'));
    expect(lines.map((l) => /dynein\.\w+/.exec(l)?.[0])).toEqual(names);
    expect(lines[2]).toMatch(/lateness \d+ ms {2}to \S*t-alpha$/);
    // The worker's handling (its receive, late by the queue's hand-over) and the report's arrival.
    expect(lines[3]).toMatch(/dynein\.receive .* lateness \d+ ms {2}SUCCEEDED$/);
    expect(lines[4]).toMatch(/dynein\.outcome .* SUCCEEDED$/);

    const json = JSON.parse((await dynein(['show', '--tenant', 'alpha', '--trace', '--json', job.jobId])).stdout);
    expect(json.traceId).toBe(traceId);
    type Span = { name: string; traceId: string; spanId: string; parentSpanId?: string; attributes: Record<string, unknown> };
    const spans = json.spans as Span[];
    expect(spans.map((s) => s.name)).toEqual(names);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([traceId]));
    // The receive hangs under the dispatch span (the delivered message's parent), the outcome under the receive.
    const [, , dispatch, receive, outcome] = spans as [Span, Span, Span, Span, Span];
    expect(receive).toMatchObject({ parentSpanId: dispatch.spanId, attributes: { 'dynein.attempt': 1, 'dynein.job_id': job.jobId } });
    expect(outcome).toMatchObject({ parentSpanId: receive.spanId, attributes: { 'dynein.outcome': 'SUCCEEDED' } });
    // The same, unsigned, from the local stack: and nothing for a trace it never saw.
    const raw = (await (await fetch(`${local.endpoint}/local/traces/${traceId}`)).json()) as { spans: unknown[] };
    expect(raw.spans).toHaveLength(5);
    expect(await (await fetch(`${local.endpoint}/local/traces/${'1'.repeat(32)}`)).json()).toEqual({ spans: [] });
  }, 60_000);

  it('a tenant without history: no attribute, no report, no timeline; reporting answers 409', async () => {
    const beta = clientOf('beta');
    const job = await beta.schedule('beta', { payload: null, delaySeconds: 0 });
    let handled = false;
    const requests = await runWorker(
      'beta',
      beta,
      () => {
        handled = true;
      },
      () => handled,
    );
    expect(requests).toBe(0);
    const status = await beta.get('beta', job.jobId);
    expect(status.state).toBe('QUEUED');
    expect(status.timeline).toBeUndefined();
    const shown = await dynein(['show', '--tenant', 'beta', job.jobId]);
    expect(shown.stdout).toContain('no timeline');
    const listed = await dynein(['jobs', '--tenant', 'beta', '--state', 'SUCCEEDED']);
    expect(listed.code).not.toBe(0);
    expect(listed.stderr).toMatch(/state SUCCEEDED: the tenant does not keep job history/);
    await expect(
      beta.reportOutcomes('beta', [
        { jobId: job.jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: new Date().toISOString(), durationMs: 1 },
      ]),
    ).rejects.toMatchObject({ code: 'HistoryOff' });
    // One tenant's key cannot report for another (the route is per tenant, as the IAM grants).
    await expect(
      beta.reportOutcomes('alpha', [
        { jobId: job.jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: new Date().toISOString(), durationMs: 1 },
      ]),
    ).rejects.toMatchObject({ status: 403 });
  }, 60_000);
});
