import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  DyneinClient,
  JobCancelledError,
  UnrecoverableError,
  ValidationError,
  Worker,
  type DeliveredJob,
  type WorkerEvent,
  type WorkerOptions,
} from '../../client/index.js';
import { dyneinLambdaHandler } from '../../client/lambda.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { sqsRecordFor } from '../support/lambdaEvents.js';
import { STUB_CREDENTIALS, STUB_REGION, startSignedStub, type StubRequest } from '../support/signedStub.js';
import { bashOffers, runMain, stubDataDir, waitUntil } from './support.js';

/**
 * Concurrency by key (issue #26), the client's side: the SDK sends `concurrencyKey` and
 * `concurrencyLimit` and reads them back; the Worker and `dyneinLambdaHandler` report a keyed job's
 * outcome with its key (the `concurrencyKey` message attribute) whatever the tenant's history
 * setting, and name keyed jobs' keys in their heartbeats (`concurrencyKeys`) so their slot leases
 * are renewed; `dynein schedule --key --limit`. The API is a signed stub that records every
 * request body and answers outcomes as the route does for a tenant without history (an entry
 * without a key is refused `HistoryOff`), so a report that lost its key shows as an error; the
 * Worker runs against fauxqs with the real SQS client. The server's side: test/integration/key-slots.test.ts.
 */

/** Tenants of the stub: `demo` keeps no history, `hist` does. */
const HISTORY = new Set(['hist']);

interface Entry {
  readonly jobId: string;
  readonly outcome: string;
  readonly concurrencyKey?: string;
  readonly error?: string;
  readonly result?: unknown;
}

let api: Awaited<ReturnType<typeof startSignedStub>>;
/** Job ids whose stop the heartbeat route answers as requested. */
const stopRequested = new Set<string>();
let em: Emulators;

beforeAll(async () => {
  api = await startSignedStub(({ method, path, raw, reply, error }) => {
    const m = /^\/v1\/tenants\/([^/]+)\/jobs(?:\/([^/]+))?$/.exec(path);
    if (!m) return reply(404, { message: 'Not Found' });
    const tenant = m[1]!;
    const rest = m[2];
    const body = raw ? JSON.parse(raw) : undefined;
    const scheduled = (job: { runAt: string }, i = 0) => ({
      jobId: `job-${api.requests.length}-${i}`,
      tenant,
      runAt: job.runAt,
      state: 'SCHEDULED',
    });
    if (method === 'POST' && rest === undefined) return reply(201, scheduled(body));
    if (method === 'POST' && rest === 'batch') return reply(200, { results: (body.jobs as { runAt: string }[]).map(scheduled) });
    if (method === 'POST' && rest === 'outcomes') {
      const entries = body.outcomes as Entry[];
      const keyed = (e: Entry) => typeof e.concurrencyKey === 'string';
      if (!HISTORY.has(tenant) && !entries.some(keyed)) return error(409, 'HistoryOff', `tenant ${tenant} keeps no history`);
      return reply(200, {
        results: entries.map((e) =>
          HISTORY.has(tenant) || keyed(e)
            ? { jobId: e.jobId, state: e.outcome }
            : { jobId: e.jobId, error: { code: 'HistoryOff', message: 'no history, no key' } },
        ),
      });
    }
    if (method === 'POST' && rest === 'heartbeats') {
      const ids = body.jobIds as string[];
      const keys = (body.concurrencyKeys ?? {}) as Record<string, string>;
      if (Object.keys(keys).some((id) => !ids.includes(id)))
        return error(400, 'ValidationError', 'concurrencyKeys names a job not in jobIds');
      return reply(200, { cancelRequested: ids.filter((id) => stopRequested.has(id)) });
    }
    if (method === 'GET' && rest !== undefined)
      return reply(200, {
        jobId: rest,
        tenant,
        runAt: '2030-01-01T00:00:00.000Z',
        state: 'SCHEDULED',
        concurrencyKey: 'customer-42',
        concurrencyLimit: 3,
      });
    return reply(404, { message: 'Not Found' });
  });
  em = await startEmulators();
});
afterAll(async () => {
  await api?.close();
  await em?.stop();
});

const sdk = () => new DyneinClient({ endpoint: api.endpoint, region: STUB_REGION, credentials: STUB_CREDENTIALS });

/** The bodies of the stub's requests to `route` (`outcomes`, `heartbeats`, or `jobs` for a submit), of one tenant. */
function bodies(route: 'outcomes' | 'heartbeats' | 'jobs', tenant: string, from = 0): Record<string, any>[] {
  const suffix = route === 'jobs' ? '/jobs' : `/jobs/${route}`;
  return api.requests
    .slice(from)
    .filter((r: StubRequest) => r.method === 'POST' && r.url === `/v1/tenants/${tenant}${suffix}`)
    .map((r) => JSON.parse(r.body));
}

/** Every outcome entry reported for these jobs, in the order sent. */
const entriesOf = (tenant: string, jobIds: readonly string[]): Entry[] =>
  bodies('outcomes', tenant)
    .flatMap((b) => b.outcomes as Entry[])
    .filter((e) => jobIds.includes(e.jobId));

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

/** Sends a delivery as the dispatcher does: the body, the `runAt` attribute, and the given attributes (`concurrencyKey`, `dynein-history`). */
async function sendJob(queueUrl: string, tenant: string, jobId: string, attributes: Record<string, string> = {}): Promise<void> {
  const runAt = new Date().toISOString();
  const all = { runAt, ...attributes };
  await em.sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: JSON.stringify({ jobId, tenant, runAt, payload: { n: 1 } }),
      MessageAttributes: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, { DataType: 'String', StringValue: v }])),
    }),
  );
}

function workerFor(queueUrl: string, opts: Partial<WorkerOptions> & Pick<WorkerOptions, 'handler'>) {
  const events: WorkerEvent[] = [];
  const worker = new Worker({
    queueUrl,
    sqs: em.newClients().sqs,
    handleSignals: false,
    waitTimeSeconds: 1,
    onEvent: (e) => void events.push(e),
    ...opts,
  });
  return { worker, events, running: worker.run() };
}

const errorsOf = (events: readonly WorkerEvent[]) => events.flatMap((e) => (e.type === 'error' ? [e] : []));

describe('SDK', () => {
  it('schedule and scheduleBatch send concurrencyKey and concurrencyLimit; get reads them back', async () => {
    const from = api.requests.length;
    const client = sdk();
    await client.schedule('demo', { payload: 1, delaySeconds: 60, concurrencyKey: 'customer-42', concurrencyLimit: 3 });
    await client.schedule('demo', { payload: 2, delaySeconds: 60, concurrencyKey: 'customer-7' });
    await client.schedule('demo', { payload: 3, delaySeconds: 60 });
    const sent = bodies('jobs', 'demo', from);
    expect(sent.map((b) => [b.concurrencyKey, b.concurrencyLimit])).toEqual([
      ['customer-42', 3],
      ['customer-7', undefined],
      [undefined, undefined],
    ]);
    expect('concurrencyLimit' in sent[1]!).toBe(false);

    const batchFrom = api.requests.length;
    await client.scheduleBatch('demo', [
      { payload: 1, delaySeconds: 60, concurrencyKey: 'k-1', concurrencyLimit: 2 },
      { payload: 2, delaySeconds: 60 },
    ]);
    const [batch] = api.requests.slice(batchFrom).map((r) => JSON.parse(r.body) as { jobs: Record<string, unknown>[] });
    expect(batch!.jobs.map((j) => [j.concurrencyKey, j.concurrencyLimit])).toEqual([
      ['k-1', 2],
      [undefined, undefined],
    ]);

    const status = await client.get('demo', 'job-1');
    expect([status.concurrencyKey, status.concurrencyLimit]).toEqual(['customer-42', 3]);
  });

  it('heartbeats sends concurrencyKeys with jobIds, leaves them out when empty, and refuses a key of no listed job before sending', async () => {
    const from = api.requests.length;
    const client = sdk();
    await client.heartbeats('demo', ['a', 'b'], { concurrencyKeys: { a: 'customer-42' } });
    await client.heartbeats('demo', ['c'], { concurrencyKeys: {} });
    expect(bodies('heartbeats', 'demo', from)).toEqual([{ jobIds: ['a', 'b'], concurrencyKeys: { a: 'customer-42' } }, { jobIds: ['c'] }]);

    const sentBefore = api.requests.length;
    await expect(client.heartbeats('demo', ['a'], { concurrencyKeys: { z: 'k' } })).rejects.toThrow(ValidationError);
    await expect(client.heartbeats('demo', ['a'], { concurrencyKeys: { a: '' } })).rejects.toThrow(/1 to 128 characters/);
    await expect(client.heartbeats('demo', ['a'], { concurrencyKeys: { a: 'k'.repeat(129) } })).rejects.toThrow(ValidationError);
    expect(api.requests.length).toBe(sentBefore);
  });
});

describe.concurrent('Worker with keyed jobs', () => {
  it('reports a keyed job’s outcomes with its key in a tenant without history: SUCCEEDED, FAILED then SUCCEEDED, DEAD; an unkeyed job not at all', async () => {
    const q = await em.createQueue('ck-outcomes', { dlq: true });
    const [ok, flaky, doomed, plain] = ['ok', 'flaky', 'doomed', 'plain'].map(unique) as [string, string, string, string];
    let flakyRuns = 0;
    const seen: DeliveredJob[] = [];
    const { worker, running, events } = workerFor(q.url, {
      client: sdk(),
      deadLetterQueueUrl: q.dlqUrl!,
      backoff: { baseMs: 1, capMs: 1 },
      handler: (job) => {
        seen.push(job);
        if (job.jobId === flaky && flakyRuns++ === 0) throw new Error('try again');
        if (job.jobId === doomed) throw new UnrecoverableError('no such customer');
        return { done: job.jobId };
      },
    });
    await sendJob(q.url, 'demo', ok, { concurrencyKey: 'customer-42' });
    await sendJob(q.url, 'demo', flaky, { concurrencyKey: 'customer-7' });
    await sendJob(q.url, 'demo', doomed, { concurrencyKey: 'customer-9' });
    await sendJob(q.url, 'demo', plain);
    await waitUntil(() => entriesOf('demo', [ok, flaky, doomed]).length >= 4, 15_000, 'four reports');
    await waitUntil(() => events.some((e) => e.type === 'completed' && e.job.jobId === plain), 10_000, 'the plain job done');
    await worker.stop();
    await running;

    const reported = entriesOf('demo', [ok, flaky, doomed, plain]).map((e) => [e.jobId, e.outcome, e.concurrencyKey]);
    expect(reported.filter(([id]) => id === ok)).toEqual([[ok, 'SUCCEEDED', 'customer-42']]);
    expect(reported.filter(([id]) => id === flaky)).toEqual([
      [flaky, 'FAILED', 'customer-7'],
      [flaky, 'SUCCEEDED', 'customer-7'],
    ]);
    expect(reported.filter(([id]) => id === doomed)).toEqual([[doomed, 'DEAD', 'customer-9']]);
    expect(reported.filter(([id]) => id === plain)).toEqual([]);
    // The handler sees the key (the message attribute; the body has none), and an unkeyed job has none.
    expect(seen.find((j) => j.jobId === ok)?.concurrencyKey).toBe('customer-42');
    expect(seen.find((j) => j.jobId === plain)).not.toHaveProperty('concurrencyKey');
    // Every report was taken (an entry without its key would be refused HistoryOff: an error event).
    expect(errorsOf(events)).toEqual([]);
    expect(events.filter((e) => e.type === 'dead').map((e) => e.job?.jobId)).toEqual([doomed]);
  });

  it('names keyed jobs’ keys in its heartbeats while they run; a stop requested at one ends the keyed job CANCELLED with its key', async () => {
    const q = await em.createQueue('ck-heartbeats');
    const [keyed, historyJob] = [unique('keyed'), unique('history')] as [string, string];
    const aborts = new Map<string, unknown>();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const { worker, running, events } = workerFor(q.url, {
      client: sdk(),
      heartbeatMs: 200,
      handler: async (job, { signal }) => {
        if (job.jobId === keyed) await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        else await released;
        aborts.set(job.jobId, signal.reason);
      },
    });
    await sendJob(q.url, 'hist', keyed, { concurrencyKey: 'customer-42', 'dynein-history': '1' });
    await sendJob(q.url, 'hist', historyJob, { 'dynein-history': '1' });
    const beatsOfBoth = () => bodies('heartbeats', 'hist').filter((b) => b.jobIds.includes(keyed) && b.jobIds.includes(historyJob));
    await waitUntil(() => beatsOfBoth().length >= 2, 10_000, 'two heartbeats naming both jobs');
    for (const beat of beatsOfBoth()) {
      expect([...beat.jobIds].sort()).toEqual([keyed, historyJob].sort());
      expect(beat.concurrencyKeys).toEqual({ [keyed]: 'customer-42' });
    }

    stopRequested.add(keyed);
    await waitUntil(() => events.some((e) => e.type === 'cancelled'), 10_000, 'the keyed job cancelled');
    release();
    await waitUntil(() => entriesOf('hist', [keyed, historyJob]).length >= 2, 10_000, 'both reports');
    await worker.stop();
    await running;
    expect(aborts.get(keyed)).toBeInstanceOf(JobCancelledError);
    const reported = entriesOf('hist', [keyed, historyJob]).map((e) => [e.jobId, e.outcome, e.concurrencyKey]);
    expect(reported).toContainEqual([keyed, 'CANCELLED', 'customer-42']);
    expect(reported).toContainEqual([historyJob, 'SUCCEEDED', undefined]);
    expect(errorsOf(events)).toEqual([]);
  });

  it('without a client, runs keyed jobs and deletes them, warning once (console and an error event) that their slots wait for the key lease', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const q = await em.createQueue('ck-noclient');
      const ids = [unique('nc'), unique('nc')];
      const ran: string[] = [];
      const { worker, running, events } = workerFor(q.url, { handler: (job) => void ran.push(job.jobId) });
      for (const id of ids) await sendJob(q.url, 'demo', id, { concurrencyKey: 'customer-42' });
      await waitUntil(() => events.filter((e) => e.type === 'completed').length >= 2, 10_000, 'both jobs completed');
      await worker.stop();
      await running;
      expect([...ran].sort()).toEqual([...ids].sort());
      const warnings = warn.mock.calls.map((c) => String(c[0])).filter((w) => w.includes('concurrency key'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/slot until the key lease runs out/);
      const errors = errorsOf(events);
      expect(errors.map((e) => e.operation)).toEqual(['report outcome (keyed job, no client)']);
      expect(entriesOf('demo', ids)).toEqual([]);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('dyneinLambdaHandler with keyed records', () => {
  const keyedRecord = (jobId: string, key: string | undefined, tenant = 'demo') =>
    sqsRecordFor({
      messageId: `m-${jobId}`,
      body: JSON.stringify({ jobId, tenant, runAt: new Date().toISOString(), payload: null }),
      messageAttributes: key === undefined ? {} : { concurrencyKey: { stringValue: key, dataType: 'String' } },
    });

  it('heartbeats the batch’s keyed records with their keys, skips one asked to stop, and reports each with its key', async () => {
    const [ok, failing, stopped, plain] = ['l-ok', 'l-fail', 'l-stop', 'l-plain'].map(unique) as [string, string, string, string];
    stopRequested.add(stopped);
    const from = api.requests.length;
    const ran: string[] = [];
    const handler = dyneinLambdaHandler(
      (job) => {
        ran.push(job.jobId);
        if (job.jobId === failing) throw new Error('boom');
      },
      { client: sdk() },
    );
    const reply = await handler({
      Records: [
        keyedRecord(ok, 'customer-1'),
        keyedRecord(failing, 'customer-2'),
        keyedRecord(stopped, 'customer-3'),
        keyedRecord(plain, undefined),
      ],
    });
    expect(reply.batchItemFailures).toEqual([{ itemIdentifier: `m-${failing}` }]);
    expect([...ran].sort()).toEqual([ok, failing, plain].sort());
    expect(bodies('heartbeats', 'demo', from)).toEqual([
      { jobIds: [ok, failing, stopped], concurrencyKeys: { [ok]: 'customer-1', [failing]: 'customer-2', [stopped]: 'customer-3' } },
    ]);
    const reported = entriesOf('demo', [ok, failing, stopped, plain]).map((e) => [e.jobId, e.outcome, e.concurrencyKey]);
    expect([...reported].sort()).toEqual(
      [
        [ok, 'SUCCEEDED', 'customer-1'],
        [failing, 'FAILED', 'customer-2'],
        [stopped, 'CANCELLED', 'customer-3'],
      ].sort(),
    );
  });

  it('without a client, runs keyed records and warns once', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const ran: string[] = [];
      const handler = dyneinLambdaHandler((job) => void ran.push(job.jobId));
      const reply = await handler({ Records: [keyedRecord('nc-1', 'customer-1'), keyedRecord('nc-2', 'customer-1')] });
      expect(reply.batchItemFailures).toEqual([]);
      expect(ran).toEqual(['nc-1', 'nc-2']);
      expect(warn.mock.calls.filter((c) => String(c[0]).includes('concurrency key'))).toHaveLength(1);
    } finally {
      warn.mockRestore();
    }
  });
});

describe('dynein schedule --key --limit', () => {
  let dataDir = '';
  beforeAll(() => {
    dataDir = stubDataDir('dynein-ck-cli-', api.endpoint, 'demo');
  });

  /** `dynein <args>` in process, with local.json pointing at the stub (but for `completion`, which takes no options). */
  const run = (...args: string[]) => runMain(args[0] === 'completion' ? args : [...args, '--data-dir', dataDir]);
  const schedule = (...flags: string[]) => run('schedule', '--tenant', 'demo', '--in', '1h', ...flags);

  it('sends the key, and the limit with it', async () => {
    const from = api.requests.length;
    expect((await schedule('--key', 'customer-42', '--limit', '3')).code).toBe(0);
    expect((await schedule('--key', 'customer-7')).code).toBe(0);
    const sent = bodies('jobs', 'demo', from);
    expect(sent.map((b) => [b.concurrencyKey, b.concurrencyLimit])).toEqual([
      ['customer-42', 3],
      ['customer-7', undefined],
    ]);
  });

  it('refuses --limit without --key, or not a whole number from 1 to 1000: one line, exit 2, nothing sent', async () => {
    const from = api.requests.length;
    const alone = await schedule('--limit', '3');
    expect(alone).toMatchObject({ code: 2, out: [] });
    expect(alone.err).toHaveLength(1);
    expect(alone.err[0]).toMatch(/--limit needs --key/);
    for (const bad of ['0', '1001', '1.5', 'two', '']) {
      const r = await schedule('--key', 'k', '--limit', bad);
      expect(r.code, `--limit '${bad}'`).toBe(2);
      expect(r.err).toHaveLength(1);
      expect(r.err[0]).toMatch(/--limit must be a whole number from 1 to 1000/);
    }
    expect(api.requests.length).toBe(from);
  });

  it('lists --key and --limit in its help and its completion; show prints a job’s key and limit', async () => {
    const help = await run('schedule', '--help');
    expect(help.out.join('\n')).toMatch(/^\s+--key <concurrencyKey>\s+\S/m);
    expect(help.out.join('\n')).toMatch(/^\s+--limit <n>\s+with --key/m);

    const completion = await run('completion', 'bash');
    expect(completion.code).toBe(0);
    const offered = bashOffers(completion.out.join('\n'), dataDir);
    expect(offered('schedule', '--ke')).toEqual(['--key']);
    expect(offered('schedule', '--lim')).toEqual(['--limit']);

    const shown = await run('show', '--tenant', 'demo', 'job-1');
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('  concurrencyKey  customer-42  (limit 3)');
  });
});
